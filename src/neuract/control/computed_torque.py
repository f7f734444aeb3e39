"""Model-based joint controllers usable with any ``DynamicsModel``.

All controllers are called as ``ctrl(q, qd, q_d, qd_d, qdd_d, dt) -> tau`` with measured
state ``q, qd`` and reference ``q_d, qd_d, qdd_d`` (each (..., n_dof), rad, rad/s, rad/s^2)
and return joint torque (..., n_dof) [N m], clipped to ``tau_limit`` when one is set. The
integral state is an explicit, resettable buffer (``reset()``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from neuract.errors import ConfigError
from neuract.models.base import DynamicsModel


def _gain(k: float | Sequence[float] | torch.Tensor, name: str) -> torch.Tensor:
    t = torch.as_tensor(k, dtype=torch.float64)
    if (t < 0).any() or not torch.isfinite(t).all():
        raise ConfigError(f"gain {name}={k!r} must be finite and >= 0")
    return t


class _Integrating:
    def __init__(self, kp, kd, ki, tau_limit) -> None:
        self.kp, self.kd, self.ki = _gain(kp, "kp"), _gain(kd, "kd"), _gain(ki, "ki")
        self.tau_limit = None if tau_limit is None else _gain(tau_limit, "tau_limit")
        self.z: torch.Tensor | None = None

    def reset(self) -> None:
        """Clear the integral of the position error."""
        self.z = None

    def _errors(self, q, qd, q_d, qd_d, dt):
        e, ed = q_d - q, qd_d - qd
        self.z = e * dt if self.z is None else self.z + e * dt
        fb = self.kp.to(q) * e + self.kd.to(q) * ed + self.ki.to(q) * self.z
        return fb

    def _clip(self, tau: torch.Tensor) -> torch.Tensor:
        if self.tau_limit is None:
            return tau
        lim = self.tau_limit.to(tau)
        return torch.maximum(torch.minimum(tau, lim), -lim)


class PIDController(_Integrating):
    """``tau = ff(q, qd) + Kp e + Kd ed + Ki int(e)``; ``ff`` e.g. learned gravity."""

    def __init__(
        self, kp, kd, ki=0.0, feedforward: Callable[..., torch.Tensor] | None = None,
        tau_limit=None,
    ) -> None:
        super().__init__(kp, kd, ki, tau_limit)
        self.feedforward = feedforward

    def __call__(self, q, qd, q_d, qd_d, qdd_d, dt) -> torch.Tensor:
        tau = self._errors(q, qd, q_d, qd_d, dt)
        if self.feedforward is not None:
            tau = tau + self.feedforward(q, qd)
        return self._clip(tau)


def gravity_compensation(model: DynamicsModel, kp, kd, ki=0.0, tau_limit=None) -> PIDController:
    """PD(+I) plus the model's gravity torque ``g(q)`` as feedforward."""
    return PIDController(kp, kd, ki, lambda q, qd: model.gravity(q), tau_limit)


class ComputedTorque(_Integrating):
    """Computed-torque control with any dynamics model.

    ``gains_in_inertia=True`` (the textbook form): ``tau = inverse(q, qd, qdd_d + Kd ed +
    Kp e + Ki z)``, i.e. the feedback is shaped by ``M(q)`` and the error dynamics are
    decoupled. ``False`` (the Sensors 2025 form): ``tau = inverse(q, qd, qdd_d) + Kd ed +
    Kp e + Ki z``.
    """

    def __init__(
        self, model: DynamicsModel, kp, kd, ki=0.0, gains_in_inertia: bool = True,
        tau_limit=None,
    ) -> None:
        super().__init__(kp, kd, ki, tau_limit)
        self.model = model
        self.gains_in_inertia = gains_in_inertia

    def __call__(self, q, qd, q_d, qd_d, qdd_d, dt) -> torch.Tensor:
        fb = self._errors(q, qd, q_d, qd_d, dt)
        with torch.no_grad():
            if self.gains_in_inertia:
                tau = self.model.inverse(q, qd, qdd_d + fb)
            else:
                tau = self.model.inverse(q, qd, qdd_d) + fb
        return self._clip(tau)


__all__ = ["ComputedTorque", "PIDController", "gravity_compensation"]
