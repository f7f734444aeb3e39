"""Hybrid model: a rigid-body (or any) base model plus a learned torque residual.

``tau = base.inverse(q, qd, qdd) + r(q, qd[, qdd])``. With ``use_qdd=False`` the residual
does not depend on ``qdd`` and the model stays affine in ``qdd`` (exact ``forward``).
"""

from __future__ import annotations

import torch

from neuract.models.base import MODELS, DynamicsModel
from neuract.models.mlp import Standardizer, mlp


@MODELS.register("hybrid")
class HybridModel(DynamicsModel):
    """base: a fitted ``DynamicsModel`` (kept frozen); the residual MLP is trained."""

    def __init__(
        self, base: DynamicsModel, hidden: int = 64, layers: int = 2, use_qdd: bool = True
    ) -> None:
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.n_dof = base.n_dof
        self.use_qdd = use_qdd
        self.newton_steps = 3 if use_qdd else 1
        n_in = (3 if use_qdd else 2) * self.n_dof
        self.x_norm = Standardizer(n_in)
        self.y_norm = Standardizer(self.n_dof)
        self.net = mlp(n_in, self.n_dof, hidden, layers, "tanh").double()
        torch.nn.init.zeros_(self.net[-1].weight)
        torch.nn.init.zeros_(self.net[-1].bias)

    def _x(self, q, qd, qdd) -> torch.Tensor:
        return torch.cat([q, qd, qdd] if self.use_qdd else [q, qd], -1)

    def set_normalization(self, q, qd, qdd, tau) -> None:
        """Scale inputs by the data and the output by the base model's residual spread."""
        with torch.no_grad():
            res = tau - self.base.inverse(q, qd, qdd)
        self.x_norm.fit(self._x(q, qd, qdd))
        self.y_norm.std.copy_(res.reshape(-1, self.n_dof).std(0).clamp_min(1e-6))

    def residual(self, q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
        """Learned torque correction (..., n_dof) [N m]."""
        return self.y_norm.inverse(self.net(self.x_norm(self._x(q, qd, qdd)))).to(q)

    def inverse(self, q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
        return self.base.inverse(q, qd, qdd) + self.residual(q, qd, qdd)


__all__ = ["HybridModel"]
