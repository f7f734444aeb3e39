"""``neuract export --format torchscript``: a learned ActuatorNet as the TorchScript file
Isaac Lab's ``ActuatorNetMLP`` / ``ActuatorNetLSTM`` (and mjlab's ``LearnedMlpActuator``)
load, with a JSON sidecar of the values their configs need.

The consumers' contract (read from their documentation and sources):

- MLP: per joint and call, the simulator keeps histories of the position error (target -
  position) and the velocity, lag 0 the current call; the network gets one row per joint,
  the errors at the lags ``input_idx`` times ``pos_scale`` then the velocities times
  ``vel_scale`` (``input_order`` ``pos_vel``; ``vel_pos`` the other way round), and returns
  one value per row, multiplied by ``torque_scale``.
- LSTM: per joint and call the network gets ``(pos_error, vel)`` as a ``(rows, 1, 2)`` batch
  and the ``(hidden, cell)`` states ``(num_layers, rows, hidden_dim)``, returns the torques
  and the new states; the simulator reads ``num_layers`` and ``hidden_dim`` off the weights
  of the module's ``lstm`` submodule, and zeroes the states of a reset environment.

neuract's nets (:mod:`neuract.actuators.neural`) read, besides the (error, velocity) history,
the current error and velocity, the external torque on the joint, the physical torque of a
residual's base, and optional known inputs (firmware kp, supply voltage). The exported module
wraps the net so that it takes the convention's inputs: the current error and velocity are
lag 0 of the history, the external and physical torques are 0, the input scales and the
output bound are applied inside (the consumer's scales are 1). It computes exactly what
neuract computes when the external torque is 0 (no gravity or coupling load on the joint) and
the simulator calls it once per ``control_dt`` of the net; see :func:`convention_notes` for
what else differs. Refused: a Transformer (use ``--format onnx``), a residual net on a
physical servo, a net with context inputs, and physical servos (``--format bam``).
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from neuract.actuators.neural import ActuatorNet
from neuract.atomic import atomic_path, write_json
from neuract.errors import ConfigError


class MLPConvention(nn.Module):
    """An MLP ActuatorNet behind the Isaac Lab / mjlab MLP contract: ``forward(x)`` with x
    ``(rows, 2 H)``, errors at lags 0..H-1 then velocities at lags 0..H-1 (unscaled), returns
    ``(rows, 1)`` torques [N m] (torque_scale 1)."""

    def __init__(self, net: ActuatorNet) -> None:
        super().__init__()
        c = net.cfg
        self.mlp = net.net.net  # the Sequential of neuract's _MLPNet
        self.history = int(c.history)
        self.error_scale = float(c.error_scale)
        self.velocity_scale = float(c.velocity_scale)
        self.tau_max = float(c.tau_max)

    def forward(self, x: Tensor) -> Tensor:
        H = self.history
        err = x[:, :H] / self.error_scale  # lag 0 first
        vel = x[:, H:2 * H] / self.velocity_scale
        # neuract's window: (error, velocity) per frame, oldest frame first
        window = torch.stack([err.flip(1), vel.flip(1)], dim=-1).flatten(1)
        zero = torch.zeros_like(err[:, :1])
        feats = torch.cat([window, err[:, :1], vel[:, :1], zero, zero], dim=1)
        out = self.mlp(feats)
        b = max(self.tau_max, 1e-9)  # neuract's softclip(tau_max * net, tau_max)
        return b * torch.tanh(self.tau_max * out / b)


class GRUConvention(nn.Module):
    """A GRU ActuatorNet behind the Isaac Lab LSTM contract: ``forward(x, (h, c))`` with x
    ``(rows, 1, 2)`` (position error, velocity; unscaled) and h, c ``(1, rows, hidden)``;
    returns ``((rows, 1) torques [N m], (h', c))``. The GRU's state travels in ``h``; ``c``
    is passed through unchanged. ``lstm`` is a one-layer ``nn.GRU`` holding the cell's weights
    under the names the consumer reads."""

    def __init__(self, net: ActuatorNet) -> None:
        super().__init__()
        c = net.cfg
        cell = net.net.cell
        self.lstm = nn.GRU(2, cell.hidden_size, num_layers=1, batch_first=True)
        with torch.no_grad():
            for src, dst in (("weight_ih", "weight_ih_l0"), ("weight_hh", "weight_hh_l0"),
                             ("bias_ih", "bias_ih_l0"), ("bias_hh", "bias_hh_l0")):
                getattr(self.lstm, dst).copy_(getattr(cell, src))
        self.lstm.to(cell.weight_ih.dtype)
        self.head = net.net.head
        self.error_scale = float(c.error_scale)
        self.velocity_scale = float(c.velocity_scale)
        self.tau_max = float(c.tau_max)

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor]
                ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        err = x[:, 0, 0] / self.error_scale
        vel = x[:, 0, 1] / self.velocity_scale
        feat = torch.stack([err, vel], dim=-1)
        h0, c0 = state
        g = self.lstm  # the same arithmetic as neuract's GRUCell
        h = torch.gru_cell(feat, h0[0], g.weight_ih_l0, g.weight_hh_l0, g.bias_ih_l0,
                           g.bias_hh_l0)
        zero = torch.zeros_like(err)
        out = self.head(torch.cat([h, torch.stack([err, vel, zero, zero], dim=-1)], dim=-1))
        b = max(self.tau_max, 1e-9)
        return b * torch.tanh(self.tau_max * out / b), (h.unsqueeze(0), c0)


def check_net(actuator: Any) -> ActuatorNet:
    """``actuator`` if it exports to the convention; else ConfigError saying why."""
    if not isinstance(actuator, ActuatorNet):
        raise ConfigError(
            f"--format torchscript exports a learned net (actuator.type mlp or gru); this "
            f"checkpoint holds a physical {type(actuator).__name__}: export its parameters "
            "with --format bam")
    c = actuator.cfg
    if c.arch == "transformer":
        raise ConfigError(
            "actuator.type 'transformer' has no TorchScript actuator-net convention (Isaac Lab "
            "and mjlab load an MLP over a lag history or a recurrent net); accepted: mlp, gru. "
            "Export a transformer with --format onnx")
    if actuator.base is not None:
        raise ConfigError(
            f"actuator.residual {c.arch!r}: a residual net adds to a physical servo the "
            "convention cannot carry; accepted: a standalone net (actuator.type mlp or gru, "
            "actuator.residual none)")
    if c.context:
        raise ConfigError(
            f"actuator.neural.context {list(c.context)!r}: the convention feeds only the "
            "position error and velocity; accepted: a net without context inputs "
            "(actuator.neural.context empty)")
    return actuator


def convention_notes(actuator: ActuatorNet, control_dt: float, substeps: int) -> dict:
    """The consumer's config values for the exported module, and what differs from neuract."""
    c = actuator.cfg
    differs = [
        "the external torque on the joint (gravity, coupling), an input of neuract's net, is "
        "0 in the export: torques equal neuract's only where it is 0",
        f"history spacing: one call per {control_dt:g} s (the net's control_dt); the "
        "simulator's actuator-update period must be that",
    ]
    if substeps != 1:
        differs.append(
            f"the net was fitted with {substeps} physics substeps per control step (the state "
            "moved between them while the history did not); the convention updates the "
            "history on every call, so the fitted behaviour is reproduced approximately")
    if c.arch == "mlp":
        differs.append(
            "after a reset neuract fills the history with the first frame (as mjlab's "
            "buffer does); Isaac Lab's ActuatorNetMLP zero-fills it, so the first "
            f"{c.history - 1} calls after a reset differ there")
        consumer = {"class": "ActuatorNetMLP (Isaac Lab) / LearnedMlpActuator (mjlab)",
                    "input_idx": list(range(c.history)), "history_length": c.history,
                    "input_order": "pos_vel", "pos_scale": 1.0, "vel_scale": 1.0,
                    "torque_scale": 1.0}
    else:
        differs.append("the recurrent state is a GRU's (carried in the hidden state; the "
                       "cell state is passed through unchanged)")
        consumer = {"class": "ActuatorNetLSTM (Isaac Lab)", "num_layers": 1,
                    "hidden_dim": c.hidden}
    return {"format": "neuract torchscript actuator net", "arch": c.arch,
            "consumer": consumer, "tau_max": c.tau_max, "control_dt": control_dt,
            "fit_substeps": substeps, "exact": "yes, given the conditions in 'differs'",
            "differs": differs}


def script_actuator_net(actuator: Any) -> torch.jit.ScriptModule:
    """The scripted, float32 convention module of an MLP or GRU ActuatorNet (refusals: see the
    module docstring)."""
    net = copy.deepcopy(check_net(actuator))  # the caller's model keeps its dtype
    wrap = MLPConvention(net) if net.cfg.arch == "mlp" else GRUConvention(net)
    with warnings.catch_warnings():  # TorchScript is deprecated; it is what consumers load
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(wrap.float().eval())


def export_torchscript(actuator: Any, dest: str | os.PathLike, control_dt: float = 0.01,
                       substeps: int = 1) -> dict:
    """Write ``dest`` (TorchScript, atomically) and its sidecar ``<dest stem>.json``; returns
    the sidecar's content (also stored in the file as the extra file ``neuract.json``)."""
    dest = Path(dest)
    module = script_actuator_net(actuator)
    notes = convention_notes(actuator, control_dt, substeps)
    write_json(sidecar_path(dest), notes)
    with atomic_path(dest) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(module, str(tmp), _extra_files={"neuract.json": json.dumps(notes)})
    return notes


def sidecar_path(dest: str | os.PathLike) -> Path:
    dest = Path(dest)
    return dest.with_name(dest.stem + ".json")


__all__ = ["GRUConvention", "MLPConvention", "check_net", "convention_notes", "export_torchscript",
           "script_actuator_net", "sidecar_path"]
