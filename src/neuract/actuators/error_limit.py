"""Firmware clamp of the position error before the P law (a kp-dependent duty ceiling).

A servo firmware may bound the position error it feeds to its P law, ``e_eff = clip(e,
-limit, limit)``, so the largest duty the loop can ask for is ``kp * error_gain * limit``:
below ``kp = max_duty / (error_gain * limit)`` the servo never reaches full duty, however far
it is from its goal, while at high kp the duty clip is reached first and the clamp has no
effect. On the K-Scale STS3215 bench logs (training runs) the duty implied by the measured
motion follows ``kp * 0.1649 * e`` (e against the delayed command) up to about 0.6 rad of
error and then stays flat (about 0.45 at kp 4, 0.75 at kp 8, 0.9 at kp 12, 1.0 at kp >= 24).
Most of that flattening turned out to be the firmware's goal speed limit
(:mod:`neuract.actuators.goal_slew`: the real error is smaller than the error against the
command); with that limit in the model the fitted clamp is 0.83 rad, binding at kp 4 only,
and it improves the held-out error only slightly (0.0123 -> 0.0121 rad).

The smooth variant ``limit * tanh(e / limit)`` has the same slope at zero and the same
asymptotes, and a non-zero gradient with respect to both ``e`` and ``limit`` everywhere.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from neuract.actuators.param import Param
from neuract.errors import ConfigError

MIN_LIMIT, MAX_LIMIT = 0.01, 4.0
"""range [rad] of the position-error clamp a servo models (exclusive)"""


def bounded(x: Tensor, lim: Tensor, smooth: bool) -> Tensor:
    """x clipped to +-lim, or its smooth form ``lim tanh(x / lim)`` (same slope at zero, same
    asymptotes, non-zero gradient with respect to x and lim everywhere)."""
    if smooth:
        return lim * torch.tanh(x / lim)
    return torch.minimum(torch.maximum(x, -lim), lim)


class ErrorLimit(nn.Module):
    """Clamp of the position error (..., n) [rad] to +-``limit`` [rad] (fitted)."""

    def __init__(self, limit: float = 0.6, smooth: bool = False, n_dof: int = 1,
                 min_limit: float = MIN_LIMIT, max_limit: float = MAX_LIMIT) -> None:
        super().__init__()
        if not min_limit < limit < max_limit:
            raise ConfigError(f"error_limit must be in ({min_limit}, {max_limit}) rad, "
                              f"got {limit}")
        self.limit = Param(limit, lo=min_limit, hi=max_limit, shape=(n_dof,))
        self.smooth = smooth

    def forward(self, error: Tensor) -> Tensor:
        return bounded(error, self.limit(), self.smooth)
