"""History buffer, backlash dead zone, command delay, neural actuators and their limits."""

from __future__ import annotations

import pytest
import torch

from neuract.actuators import (
    ActuatorConfig,
    ActuatorNet,
    ActuatorState,
    Backlash,
    CommandDelay,
    History,
    NeuralConfig,
    build_actuator,
)
from neuract.actuators.base import make_frame
from neuract.errors import ConfigError

D = torch.float64


def _state(q, qd=None, **inputs):
    q = torch.as_tensor(q, dtype=D).reshape(-1, 1)
    qd = torch.zeros_like(q) if qd is None else torch.as_tensor(qd, dtype=D).reshape(-1, 1)
    return ActuatorState(q=q, qd=qd, tau_ext=torch.zeros_like(q), inertia=torch.ones_like(q),
                         dt=0.01, inputs={k: torch.full_like(q, v) for k, v in inputs.items()})


def test_history_fills_then_shifts_and_resets_rows():
    st = _state([0.0, 0.0])
    h = History.empty(make_frame(torch.zeros(2, 1, dtype=D), st), length=3)
    for k in range(1, 5):
        h = h.push(make_frame(torch.full((2, 1), float(k), dtype=D), st))
    assert h.channel("command")[0, :, 0].tolist() == [2.0, 3.0, 4.0]
    h = h.reset([1]).push(make_frame(torch.full((2, 1), 9.0, dtype=D), st))
    assert h.channel("command")[0, :, 0].tolist() == [3.0, 4.0, 9.0]
    assert h.channel("command")[1, :, 0].tolist() == [9.0, 9.0, 9.0]  # refilled, not zeros
    assert h.latest("command").ravel().tolist() == [9.0, 9.0]


@pytest.mark.parametrize("smooth", [False, True])
def test_backlash_dead_zone(smooth):
    b = Backlash(width=0.02, smooth=smooth).double()
    e = torch.tensor([-0.5, -0.011, 0.0, 0.005, 0.011, 0.5], dtype=D)
    with torch.no_grad():
        out = b(e)
    if not smooth:
        assert out.tolist() == pytest.approx([-0.49, -0.001, 0.0, 0.0, 0.001, 0.49], abs=1e-6)
    else:
        assert out[0].item() == pytest.approx(-0.49, abs=1e-6)
        assert out[-1].item() == pytest.approx(0.49, abs=1e-6)
        assert abs(out[3].item()) < 0.1 * 0.005  # inside the gap the loop barely acts
    assert (out[1:] >= out[:-1]).all()  # monotone


@pytest.mark.parametrize("delay", [0.0101, 0.02, 0.035, 0.06])
def test_command_delay_interpolates_a_ramp_exactly(delay):
    d = CommandDelay(delay=delay, control_dt=0.01, max_frames=8).double()
    st = _state([0.0])
    h = History.empty(make_frame(torch.zeros(1, 1, dtype=D), st), 8)
    for k in range(12):  # command = time [s] of the frame
        h = h.push(make_frame(torch.full((1, 1), k * 0.01, dtype=D), st))
    with torch.no_grad():
        assert d(h).item() == pytest.approx(11 * 0.01 - delay, abs=1e-6)


def test_delay_out_of_range_is_a_config_error():
    with pytest.raises(ConfigError, match="max_frames"):
        CommandDelay(delay=0.2, control_dt=0.01, max_frames=8)


def test_delayed_servo_acts_on_the_old_command():
    a = build_actuator(ActuatorConfig(type="sts3215", friction="none", delay=0.03)).double()
    plain = build_actuator(ActuatorConfig(type="sts3215", friction="none")).double()
    st = _state([0.0], kp=16)
    step = torch.full((1, 1), 0.1, dtype=D)
    with torch.no_grad():
        want = plain.torque(step, st).item()  # the torque the step asks for, undelayed
        assert abs(want) > 0.1
        for k in range(14):
            cmd = step if k >= 8 else torch.zeros(1, 1, dtype=D)  # step at frame 8
            a.observe(cmd, st)
            # a 30 ms delay at 10 ms frames sees the step from frame 11 on, not before
            assert a.torque(cmd, st).item() == pytest.approx(want if k >= 11 else 0.0,
                                                             abs=1e-6), k


@pytest.mark.parametrize("arch", ["mlp", "gru", "transformer"])
def test_neural_standalone_respects_tau_max(arch):
    torch.manual_seed(0)
    cfg = ActuatorConfig(type=arch, neural=NeuralConfig(tau_max=0.7, hidden=16,
                                                         context=("kp",), context_scale=(32,)))
    a = build_actuator(cfg).double()
    with torch.no_grad():
        for p in a.parameters():
            p.mul_(50)  # drive the net into saturation
        st = _state(torch.linspace(-3, 3, 7).tolist(), torch.linspace(-9, 9, 7).tolist(), kp=8)
        for _ in range(3):
            a.observe(torch.full((7, 1), 1.0, dtype=D), st)
        tau = a.torque(torch.full((7, 1), 1.0, dtype=D), st)
    assert tau.shape == (7, 1)
    assert (tau.abs() <= 0.7 + 1e-9).all()
    a.reset()
    assert a.history is None


@pytest.mark.parametrize("arch", ["mlp", "gru", "transformer"])
def test_residual_starts_at_the_physical_model_and_stays_in_the_envelope(arch):
    torch.manual_seed(0)
    phys = build_actuator(ActuatorConfig(type="sts3215", friction="none")).double()
    res = build_actuator(ActuatorConfig(type="sts3215", friction="none", residual=arch)).double()
    st = _state([0.0, 0.5, -0.5], [0.0, 2.0, -1.0], kp=16)
    cmd = torch.tensor([[0.3], [2.0], [-2.0]], dtype=D)
    for a in (phys, res):
        a.observe(cmd, st)
    with torch.no_grad():
        torch.testing.assert_close(res.torque(cmd, st), phys.torque(cmd, st))
        for p in res.net.parameters():
            p.add_(torch.randn_like(p) * 5)
        tau = res.torque(cmd, st)
        lo, hi = phys.torque_limits(st)
    assert ((tau >= lo - 1e-9) & (tau <= hi + 1e-9)).all()


def test_neural_missing_context_names_the_key():
    a = ActuatorNet(NeuralConfig(context=("voltage",))).double()
    st = _state([0.0])
    a.observe(torch.zeros(1, 1, dtype=D), st)
    with pytest.raises(ConfigError, match="voltage"):
        a.torque(torch.zeros(1, 1, dtype=D), st)
