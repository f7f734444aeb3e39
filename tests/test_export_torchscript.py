"""TorchScript actuator nets in the Isaac Lab / mjlab convention (neuract.pipeline.
export_torchscript): the exported file, driven the way those simulators drive it, gives
neuract's own torques."""

from __future__ import annotations

import json

import pytest
import torch

from neuract.actuators import ActuatorConfig, ActuatorState, NeuralConfig, build_actuator
from neuract.errors import ConfigError
from neuract.pipeline.export_torchscript import export_torchscript, sidecar_path

N_ENVS, N_JOINTS, STEPS = 5, 3, 40


class IsaacMLPConsumer:
    """How Isaac Lab's ActuatorNetMLP feeds its network (written from its documentation):
    per call, roll the (envs, lags, joints) histories of position error and velocity by one
    and write lag 0; rows = env-major joints; inputs = errors at input_idx * pos_scale, then
    velocities * vel_scale (pos_vel); torques = output * torque_scale. Zeroed on reset."""

    def __init__(self, network, cfg: dict) -> None:
        self.net, self.cfg = network, cfg
        L = max(cfg["input_idx"]) + 1
        self.err = torch.zeros(N_ENVS, L, N_JOINTS)
        self.vel = torch.zeros(N_ENVS, L, N_JOINTS)

    def compute(self, target: torch.Tensor, pos: torch.Tensor, vel: torch.Tensor):
        c = self.cfg
        self.err = self.err.roll(1, 1)
        self.err[:, 0] = target - pos
        self.vel = self.vel.roll(1, 1)
        self.vel[:, 0] = vel
        p = torch.stack([self.err[:, i] for i in c["input_idx"]], dim=2).reshape(
            N_ENVS * N_JOINTS, -1)
        v = torch.stack([self.vel[:, i] for i in c["input_idx"]], dim=2).reshape(
            N_ENVS * N_JOINTS, -1)
        parts = [p * c["pos_scale"], v * c["vel_scale"]]
        x = torch.cat(parts if c["input_order"] == "pos_vel" else parts[::-1], dim=1)
        with torch.inference_mode():
            return self.net(x).view(N_ENVS, N_JOINTS) * c["torque_scale"]


class IsaacLSTMConsumer:
    """How Isaac Lab's ActuatorNetLSTM feeds its network: (rows, 1, 2) of (position error,
    velocity), (hidden, cell) of (num_layers, rows, hidden_dim) read off ``network.lstm``'s
    weights, zero at the start; the states returned are kept for the next call."""

    def __init__(self, network) -> None:
        self.net = network
        sd = network.lstm.state_dict()
        layers, hidden = len(sd) // 4, sd["weight_hh_l0"].shape[1]
        self.h = torch.zeros(layers, N_ENVS * N_JOINTS, hidden)
        self.c = torch.zeros(layers, N_ENVS * N_JOINTS, hidden)

    def compute(self, target, pos, vel):
        x = torch.zeros(N_ENVS * N_JOINTS, 1, 2)
        x[:, 0, 0] = (target - pos).flatten()
        x[:, 0, 1] = vel.flatten()
        with torch.inference_mode():
            tau, (self.h[:], self.c[:]) = self.net(x, (self.h, self.c))
        return tau.reshape(N_ENVS, N_JOINTS)


def _net(arch: str, seed: int = 0, **kw):
    torch.manual_seed(seed)
    act = build_actuator(ActuatorConfig(type=arch, neural=NeuralConfig(history=4, hidden=16,
                                                                       **kw)), N_JOINTS)
    with torch.no_grad():  # weights of a trained size: outputs well inside tau_max
        for p in act.parameters():
            p.mul_(1.5)
    return act.float()


def _streams(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(STEPS, dtype=torch.float32)[:, None, None] * 0.01
    target = 0.6 * torch.sin(2 * torch.pi * 1.3 * t + torch.rand(N_ENVS, N_JOINTS, generator=g))
    pos = target + 0.2 * torch.randn(STEPS, N_ENVS, N_JOINTS, generator=g)
    vel = 2.0 * torch.randn(STEPS, N_ENVS, N_JOINTS, generator=g)
    return target, pos, vel


def _neuract_torques(act, target, pos, vel):
    act.reset()
    out = []
    with torch.no_grad():
        for k in range(STEPS):
            s = ActuatorState(q=pos[k], qd=vel[k], tau_ext=torch.zeros_like(pos[k]))
            act.observe(target[k], s)
            out.append(act.torque(target[k], s))
    return torch.stack(out)


@pytest.mark.parametrize("arch", ["mlp", "gru"])
def test_consumer_contract_gives_neuract_torques(tmp_path, arch):
    act = _net(arch)
    notes = export_torchscript(act, tmp_path / "net.pt", control_dt=0.01, substeps=1)
    assert json.loads(sidecar_path(tmp_path / "net.pt").read_text()) == notes
    extra = {"neuract.json": ""}
    network = torch.jit.load(str(tmp_path / "net.pt"), _extra_files=extra)
    assert json.loads(extra["neuract.json"]) == notes
    cfg = notes["consumer"]
    consumer = (IsaacMLPConsumer(network, cfg) if arch == "mlp"
                else IsaacLSTMConsumer(network))
    target, pos, vel = _streams()
    ours = _neuract_torques(act, target, pos, vel)
    theirs = torch.stack([consumer.compute(target[k], pos[k], vel[k]) for k in range(STEPS)])
    assert ours.abs().max() > 0.1  # the torques are not trivially small
    # Isaac Lab zero-fills the MLP history after a reset where neuract repeats the first
    # frame: from lag H-1 on the windows are the same
    first = act.cfg.history - 1 if arch == "mlp" else 0
    torch.testing.assert_close(theirs[first:], ours[first:], rtol=0, atol=2e-6)
    if arch == "mlp":
        assert cfg["input_idx"] == [0, 1, 2, 3] and cfg["pos_scale"] == 1.0
        assert not torch.allclose(theirs[0], ours[0], atol=1e-4)  # the documented difference
    else:
        assert cfg["num_layers"] == 1 and cfg["hidden_dim"] == 16


def test_export_leaves_the_model_as_it_was(tmp_path):
    act = _net("mlp").double()
    export_torchscript(act, tmp_path / "net.pt")
    assert all(p.dtype == torch.float64 for p in act.parameters())


def test_a_different_net_gives_different_torques(tmp_path):
    """The comparison above can fail: another net's file does not match this net."""
    export_torchscript(_net("mlp", seed=3), tmp_path / "other.pt")
    network = torch.jit.load(str(tmp_path / "other.pt"))
    consumer = IsaacMLPConsumer(network, json.loads((tmp_path / "other.json").read_text())
                                ["consumer"])
    target, pos, vel = _streams()
    ours = _neuract_torques(_net("mlp"), target, pos, vel)
    theirs = torch.stack([consumer.compute(target[k], pos[k], vel[k]) for k in range(STEPS)])
    assert (theirs[5:] - ours[5:]).abs().max() > 1e-3


@pytest.mark.parametrize("cfg, words", [
    (ActuatorConfig(type="transformer"), ["'transformer'", "--format onnx"]),
    (ActuatorConfig(type="sts3215", friction="m1"), ["physical ServoActuator", "--format bam"]),
    (ActuatorConfig(type="sts3215", friction="m1", residual="mlp"), ["actuator.residual 'mlp'"]),
    (ActuatorConfig(type="gru", neural=NeuralConfig(context=("kp",))),
     ["actuator.neural.context ['kp']"]),
])
def test_refusals(tmp_path, cfg, words):
    with pytest.raises(ConfigError) as e:
        export_torchscript(build_actuator(cfg), tmp_path / "net.pt")
    for w in words:
        assert w in str(e.value)
    assert not (tmp_path / "net.pt").exists() and not (tmp_path / "net.json").exists()
