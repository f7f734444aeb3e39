"""Firmware speed limit of the goal: an internal goal moves towards the command at a bounded
speed.

A servo firmware may not hand a new goal position straight to its position loop: it moves an
internal goal towards it at no more than ``speed`` [rad/s] (a constant-speed profile; on
Feetech servos presumably the profile behind the goal-speed register, inferred from the
logs, not from documentation). The loop then acts on ``internal goal - q``. For slow
commands nothing changes; for steps the error grows at ``speed`` instead of jumping, so the
drive starts later, the more so the lower kp (duty ``kp error_gain speed t``); for fast
sines the internal goal falls behind and loses amplitude. On the K-Scale STS3215 logs a
limit near 4.9 rad/s (about 3200 encoder steps/s) removes most of the error at the fast end
of ``sin_time_square`` and at the brutal steps.

``step(target, prev, dt)`` is a pure function of the previous internal goal; the servo keeps
that state and advances it once per control frame. The smooth variant
``prev + s tanh((target - prev) / s)``, ``s = speed dt``, has a non-zero gradient with
respect to ``speed`` and both goals everywhere.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from neuract.actuators.error_limit import bounded
from neuract.actuators.param import Param
from neuract.errors import ConfigError

MIN_SPEED, MAX_SPEED = 0.1, 100.0
"""range [rad/s] of the goal speed limit a servo models (exclusive)"""


class GoalSlew(nn.Module):
    """Speed limit ``speed`` [rad/s] (fitted) of the firmware's internal goal, (..., n)."""

    def __init__(self, speed: float = 5.0, smooth: bool = False, n_dof: int = 1,
                 min_speed: float = MIN_SPEED, max_speed: float = MAX_SPEED) -> None:
        super().__init__()
        if not min_speed < speed < max_speed:
            raise ConfigError(f"goal_slew must be in ({min_speed}, {max_speed}) rad/s, "
                              f"got {speed}")
        self.speed = Param(speed, lo=min_speed, hi=max_speed, shape=(n_dof,))
        self.smooth = smooth

    def step(self, target: Tensor, prev: Tensor, dt: float) -> Tensor:
        """(..., n) the internal goal after ``dt`` [s], moving from ``prev`` to ``target``."""
        return prev + bounded(target - prev, self.speed() * dt, self.smooth)

    def forward(self, targets: Tensor, dt: float) -> Tensor:
        """(..., T, n) the internal goal for a whole goal sequence (..., T, n), starting at
        the first goal; for analysis and tests (the servo advances it frame by frame)."""
        g = targets[..., 0, :]
        out = [g]
        for t in range(1, targets.shape[-2]):
            g = self.step(targets[..., t, :], g, dt)
            out.append(g)
        return torch.stack(out, dim=-2)
