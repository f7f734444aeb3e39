"""The common interface of whole-arm dynamics models.

Every model answers two questions about the same equation of motion
``tau = M(q) qdd + c(q, qd) + g(q) + f(qd)``:

- ``inverse(q, qd, qdd) -> tau``: which joint torque produces this motion;
- ``forward(q, qd, tau) -> qdd``: which acceleration this torque produces.

Shapes: q, qd, qdd, tau are ``(..., n_dof)`` in rad, rad/s, rad/s^2 and N m; batch
dimensions first. Models are ``torch.nn.Module`` so learned ones hold their parameters; all
computations are differentiable.
"""

from __future__ import annotations

import torch
from torch import nn

from neuract.errors import SchemaError
from neuract.registry import Registry

MODELS: Registry[type] = Registry("dynamics model")


def check_finite(name: str, x: torch.Tensor) -> torch.Tensor:
    """Raise ``SchemaError`` naming ``name`` when ``x`` holds NaN or inf."""
    if not torch.isfinite(x).all():
        bad = int((~torch.isfinite(x)).sum())
        raise SchemaError(f"{name} holds {bad} non-finite values (NaN/inf); finite values only")
    return x


class DynamicsModel(nn.Module):
    """Base class: subclasses implement ``inverse``; ``forward`` has a generic default.

    The default ``forward`` assumes the torque is affine in ``qdd`` (true of every rigid-body
    and Lagrangian model): it builds ``M = d tau / d qdd`` column by column from
    ``n_dof + 1`` calls of ``inverse`` and solves ``M qdd = tau - inverse(q, qd, 0)``.
    Models that are not affine in ``qdd`` (black-box MLPs) get ``newton_steps`` Newton
    iterations instead of one.
    """

    n_dof: int
    newton_steps: int = 1

    def inverse(self, q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
        """Joint torque (..., n_dof) [N m] that realises ``qdd`` at state ``(q, qd)``."""
        raise NotImplementedError

    def _columns(self, q, qd, qdd) -> tuple[torch.Tensor, torch.Tensor]:
        """``inverse`` at ``qdd`` and its differences along each unit acceleration, in ONE
        batched call: returns (tau (..., n), jac (..., n, n)) with jac[..., :, i] = d tau."""
        n = self.n_dof
        eye = torch.eye(n, dtype=q.dtype, device=q.device)
        shift = torch.cat([torch.zeros(1, n, dtype=q.dtype, device=q.device), eye])
        shift = shift.reshape(n + 1, *([1] * (q.dim() - 1)), n)
        rep = (n + 1, *q.shape)
        out = self.inverse(q.expand(rep), qd.expand(rep), qdd.expand(rep) + shift)
        return out[0], (out[1:] - out[0]).movedim(0, -1)

    def mass_matrix(self, q: torch.Tensor, qd: torch.Tensor | None = None) -> torch.Tensor:
        """Inertia matrix (..., n_dof, n_dof) [kg m^2], from ``inverse`` by columns."""
        qd = torch.zeros_like(q) if qd is None else qd
        return self._columns(q, qd, torch.zeros_like(q))[1]

    def bias(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """Everything but the inertial term: c + g + f, (..., n_dof) [N m]."""
        return self.inverse(q, qd, torch.zeros_like(q))

    def gravity(self, q: torch.Tensor) -> torch.Tensor:
        """Gravity torque (..., n_dof) [N m] (bias at zero velocity; includes friction at 0)."""
        return self.bias(q, torch.zeros_like(q))

    def forward(self, q: torch.Tensor, qd: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """Joint acceleration (..., n_dof) [rad/s^2] produced by ``tau`` at ``(q, qd)``."""
        qdd = torch.zeros_like(q)
        for _ in range(max(1, self.newton_steps)):
            base, jac = self._columns(q, qd, qdd)
            qdd = qdd + torch.linalg.solve(jac, (tau - base).unsqueeze(-1)).squeeze(-1)
        return qdd


__all__ = ["DynamicsModel", "MODELS", "check_finite"]
