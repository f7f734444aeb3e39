"""Actuator interface, the explicit history buffer, and the state an actuator may see.

An actuator maps a command (a goal position for a position servo) and the *simulated* joint
state to the torque it applies at the joint. It never sees measured positions during a
rollout: the simulator hands it an :class:`ActuatorState` built from its own state.

Timing: the simulator pushes one history frame per control step with :meth:`Actuator.observe`
and may call :meth:`Actuator.torque` several times per control step (physics substeps), which
is how a servo's fast firmware loop sees the current simulated state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from neuract.errors import ConfigError, SchemaError

# Channels of one history frame, per joint.
FRAME_CHANNELS = ("command", "q", "qd")


@dataclass
class ActuatorState:
    """What an actuator may see at one instant (all simulated, never measured after t=0).

    q: (..., n) joint position [rad]; qd: (..., n) joint velocity [rad/s].
    tau_ext: (..., n) generalized force acting on the joint from everything but the actuator
        (gravity, Coriolis) [N m]; needed by friction budgets that clip the stopping torque.
    inertia: (..., n) effective inertia seen by each joint [kg m^2] (diagonal of M + armature).
    dt: integration step [s] used by the stopping torque.
    inputs: known per-run or per-sample inputs, e.g. ``voltage`` (..., 1) supply [V] or
        ``kp`` (..., 1) firmware gain [-]; each (..., 1) or (..., n).
    """

    q: Tensor
    qd: Tensor
    tau_ext: Tensor | None = None
    inertia: Tensor | None = None
    dt: float | None = None
    inputs: dict[str, Tensor] = field(default_factory=dict)

    def get(self, key: str, default: Tensor | float | None = None) -> Tensor | float | None:
        return self.inputs.get(key, default)


class History:
    """A ring of the last ``length`` frames, (..., length, n, channels), oldest first.

    Rows whose history was reset are refilled with the first frame pushed after the reset, so
    a fresh episode starts from a steady history instead of zeros. Every operation returns a
    new object (no in-place writes), so gradients flow through the buffer.
    """

    def __init__(self, buf: Tensor, filled: Tensor) -> None:
        self.buf = buf
        self.filled = filled

    @classmethod
    def empty(cls, frame: Tensor, length: int) -> History:
        """A history whose every row is unfilled, shaped like ``frame`` (..., n, channels)."""
        if length < 1:
            raise ConfigError(f"history length must be >= 1, got {length}")
        buf = frame.unsqueeze(-3).expand(*frame.shape[:-2], length, *frame.shape[-2:])
        filled = torch.zeros(frame.shape[:-2], dtype=torch.bool, device=frame.device)
        return cls(buf, filled)

    @property
    def length(self) -> int:
        return self.buf.shape[-3]

    def push(self, frame: Tensor) -> History:
        """Append ``frame`` (..., n, channels); unfilled rows are filled with it entirely."""
        shifted = torch.cat([self.buf[..., 1:, :, :], frame.unsqueeze(-3)], dim=-3)
        full = frame.unsqueeze(-3).expand_as(shifted)
        mask = self.filled[..., None, None, None]
        buf = torch.where(mask, shifted, full)
        return History(buf, torch.ones_like(self.filled))

    def reset(self, ids: Tensor | list[int] | None = None) -> History:
        """Mark rows ``ids`` (indices into the leading batch dim; all if None) as unfilled."""
        if ids is None:
            return History(self.buf, torch.zeros_like(self.filled))
        filled = self.filled.clone()
        filled[torch.as_tensor(ids, dtype=torch.long, device=filled.device)] = False
        return History(self.buf, filled)

    def channel(self, name: str) -> Tensor:
        """(..., length, n) one channel of every frame, oldest first."""
        return self.buf[..., FRAME_CHANNELS.index(name)]

    def latest(self, name: str) -> Tensor:
        """(..., n) the newest value of one channel."""
        return self.buf[..., -1, :, FRAME_CHANNELS.index(name)]


def make_frame(command: Tensor, state: ActuatorState) -> Tensor:
    """(..., n, 3) one history frame from a command and the simulated state."""
    if command.shape != state.q.shape or state.qd.shape != state.q.shape:
        raise SchemaError(f"command {tuple(command.shape)}, q {tuple(state.q.shape)} and qd "
                          f"{tuple(state.qd.shape)} must have one shape (..., n_joints): the "
                          "actuator's joints are the plant's")
    return torch.stack([command, state.q, state.qd], dim=-1)


def check_finite(name: str, x: Tensor) -> Tensor:
    """Raise :class:`SchemaError` naming ``name`` if ``x`` has NaN or inf."""
    if not torch.isfinite(x).all():
        bad = (~torch.isfinite(x)).sum().item()
        raise SchemaError(f"{name}: {bad} non-finite value(s); expected finite numbers")
    return x


class Actuator(nn.Module):
    """Base class: one actuator per joint, batched over leading dims.

    Subclasses implement :meth:`torque` and set ``history_len`` (frames they need). Limits are
    part of every family: :meth:`torque` results are already clipped to what the actuator can
    physically produce.
    """

    history_len: int = 1

    def __init__(self) -> None:
        super().__init__()
        self.history: History | None = None

    # -- history -------------------------------------------------------------------------
    def reset(self, ids: Tensor | list[int] | None = None) -> None:
        """Forget the history (and any internal state) of rows ``ids``; all rows if None."""
        if self.history is None or ids is None:
            self.history = None
        else:
            self.history = self.history.reset(ids)
        self._reset_state(ids)

    def _reset_state(self, ids: Tensor | list[int] | None) -> None:
        """Hook for internal state beyond the history (e.g. recurrent hidden state)."""

    def observe(self, command: Tensor, state: ActuatorState) -> None:
        """Push one control-rate frame (command, simulated q, qd) into the history."""
        frame = make_frame(command, state)
        if self.history is None or self.history.buf.shape[:-3] != frame.shape[:-2]:
            self.history = History.empty(frame, self.history_len)
        self.history = self.history.push(frame)
        self._observe_state(frame, state)

    def _observe_state(self, frame: Tensor, state: ActuatorState) -> None:
        """Hook called after each push (recurrent models update their state here)."""

    # -- torque --------------------------------------------------------------------------
    def torque(
        self, command: Tensor, state: ActuatorState, history: History | None = None
    ) -> Tensor:
        """tau: (..., n) joint torque [N m] for command (..., n) in the given state."""
        raise NotImplementedError

    def torque_limits(self, state: ActuatorState) -> tuple[Tensor, Tensor]:
        """(lo, hi): (..., n) the torque the actuator can produce in this state [N m]."""
        big = torch.full_like(state.qd, float("inf"))
        return -big, big

    def _history(self, history: History | None) -> History:
        h = history if history is not None else self.history
        if h is None:
            raise ConfigError(
                f"{type(self).__name__}.torque needs a history: call observe() first"
            )
        return h

    def physical_parameters(self) -> dict[str, float]:
        """Named scalar parameters in SI units, for reports (empty for neural models)."""
        return {}
