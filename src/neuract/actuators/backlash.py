"""Backlash (a dead zone in the position error) and command delay.

Backlash: a gear gap of total width ``width`` [rad] means the motor side must travel half the
gap before the output feels torque, which a position loop sees as a dead zone of the error:
``e_eff = e - clip(e, -width/2, width/2)``. The smooth variant
``e - (width/2) tanh(2 e / width)`` has the same asymptotes and a useful gradient.

Delay: the goal the firmware acts on lags the command by ``delay`` [s] (bus, firmware cycle,
read-back latency). A fractional delay is read from the history's command channel by linear
interpolation between control frames, so the delay itself can be fitted by gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from neuract.actuators.base import History
from neuract.actuators.param import Param
from neuract.errors import ConfigError

MAX_WIDTH = 0.2
"""widest backlash gap [rad] a servo models (the fitted width stays below it)"""


class Backlash(nn.Module):
    """Dead zone of total width ``width`` [rad] applied to the position error (..., n)."""

    def __init__(self, width: float = 0.01, smooth: bool = False, n_dof: int = 1,
                 max_width: float = MAX_WIDTH) -> None:
        super().__init__()
        if not 0 <= width < max_width:
            raise ConfigError(f"backlash width must be in [0, {max_width}) rad, got {width}")
        self.width = Param(width, lo=0.0, hi=max_width, shape=(n_dof,))
        self.smooth = smooth

    def forward(self, error: Tensor) -> Tensor:
        half = 0.5 * self.width()
        if self.smooth:
            h = half.clamp_min(1e-9)
            return error - h * torch.tanh(error / h)
        return error - torch.minimum(torch.maximum(error, -half), half)


class CommandDelay(nn.Module):
    """A fitted command latency of up to ``(max_frames - 1) * control_dt`` seconds.

    control_dt: spacing of history frames [s] (the control period of the rollout).
    """

    def __init__(self, delay: float = 0.02, control_dt: float = 0.01, max_frames: int = 8,
                 n_dof: int = 1) -> None:
        super().__init__()
        if control_dt <= 0:
            raise ConfigError(f"control_dt must be > 0, got {control_dt}")
        if max_frames < 2:
            raise ConfigError(f"command delay needs max_frames >= 2, got {max_frames}")
        max_delay = (max_frames - 1) * control_dt
        if not 0 <= delay < max_delay:
            raise ConfigError(
                f"delay {delay} s outside [0, {max_delay}) s allowed by max_frames={max_frames}"
            )
        self.control_dt = control_dt
        self.max_frames = max_frames
        self.delay = Param(max(delay, 1e-4), lo=0.0, hi=max_delay, shape=(n_dof,))

    def forward(self, history: History) -> Tensor:
        """(..., n) the command as it was ``delay`` seconds before the newest frame."""
        cmd = history.channel("command")  # (..., H, n), oldest first
        H = cmd.shape[-2]
        d = (self.delay() / self.control_dt).clamp(0.0, H - 1 - 1e-6)  # frames back, (n,)
        lo = torch.floor(d).detach()
        frac = d - lo
        idx_a = (H - 1 - lo).long()  # newer frame
        idx_b = (idx_a - 1).clamp_min(0)  # older frame
        shape = (*cmd.shape[:-2], 1, cmd.shape[-1])
        a = torch.gather(cmd, -2, idx_a.expand(shape)).squeeze(-2)
        b = torch.gather(cmd, -2, idx_b.expand(shape)).squeeze(-2)
        return a + frac * (b - a)
