"""Lagrangian network (in the spirit of DeLaN, Lutter et al. 2019), written for neuract.

``L(q, qd) = 1/2 qd^T M(q) qd - V(q)`` with ``M = L L^T + eps I``, ``L`` lower triangular
with a softplus (positive) diagonal, so ``M`` is symmetric positive definite by
construction. The Euler-Lagrange equations give

    tau = M qdd + (dM/dt) qd - 1/2 d(qd^T M qd)/dq + dV/dq + f(qd)

with ``dM/dq`` and ``dV/dq`` from automatic differentiation (``torch.func``), and a
dissipative friction ``f = fv * qd + fc * tanh(qd / v_eps)`` with ``fv, fc >= 0``
(softplus), so ``qd . f >= 0``: friction never adds energy.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import jacfwd, jacrev, vmap

from neuract.models.base import MODELS, DynamicsModel
from neuract.models.mlp import Standardizer, mlp


@MODELS.register("lagrangian")
class LagrangianModel(DynamicsModel):
    """Energy-structured learned dynamics of ``n_dof`` joints.

    ``angle_features=True`` feeds ``(sin q, cos q)`` (revolute joints), else standardised q.
    """

    def __init__(
        self, n_dof: int, hidden: int = 64, layers: int = 2, eps: float = 1e-3,
        friction: bool = True, v_eps: float = 0.01, angle_features: bool = True,
    ) -> None:
        super().__init__()
        self.n_dof = n_dof
        self.eps = eps
        self.v_eps = v_eps
        self.friction_on = friction
        self.angle_features = angle_features
        n_in = 2 * n_dof if angle_features else n_dof
        n_off = n_dof * (n_dof - 1) // 2
        self.q_norm = Standardizer(n_dof)
        self.tau_scale = nn.Parameter(torch.ones(n_dof, dtype=torch.float64), requires_grad=False)
        self.m_scale = nn.Parameter(torch.ones(n_dof, dtype=torch.float64), requires_grad=False)
        self.m_net = mlp(n_in, n_dof + n_off, hidden, layers, "softplus").double()
        self.v_net = mlp(n_in, 1, hidden, layers, "softplus").double()
        self.fv_raw = nn.Parameter(torch.full((n_dof,), -4.0, dtype=torch.float64))
        self.fc_raw = nn.Parameter(torch.full((n_dof,), -4.0, dtype=torch.float64))
        self.register_buffer("tril", torch.tril_indices(n_dof, n_dof, -1))

    def set_normalization(self, q, qd, qdd, tau) -> None:
        """Scale inputs by the data; scale V by the torque spread and row/column j of M by
        ``sqrt(std(tau_j) / std(qdd_j))`` (a crude per-joint inertia magnitude)."""
        self.q_norm.fit(q)
        t_std = tau.reshape(-1, self.n_dof).double().std(0).clamp_min(1e-3)
        a_std = qdd.reshape(-1, self.n_dof).double().std(0).clamp_min(1e-3)
        self.tau_scale.data.copy_(t_std)
        self.m_scale.data.copy_((t_std / a_std).clamp_min(1e-4))

    def _features(self, q: torch.Tensor) -> torch.Tensor:
        # revolute joints: periodic features keep M(q) and V(q) 2 pi-periodic
        if self.angle_features:
            return torch.cat([torch.sin(q), torch.cos(q)], -1)
        return self.q_norm(q)

    def _mass_single(self, q: torch.Tensor) -> torch.Tensor:
        n = self.n_dof
        out = self.m_net(self._features(q))
        diag = torch.nn.functional.softplus(out[:n]) + 1e-4
        low = torch.zeros(n, n, dtype=out.dtype)
        low = low.index_put((self.tril[0], self.tril[1]), out[n:])
        low = (low + torch.diag(diag)) * self.m_scale.sqrt()[:, None]
        return low @ low.T + self.eps * torch.eye(n, dtype=out.dtype)

    def _potential_single(self, q: torch.Tensor) -> torch.Tensor:
        return self.v_net(self._features(q))[0] * self.tau_scale.mean()

    def mass_matrix(self, q: torch.Tensor, qd: torch.Tensor | None = None) -> torch.Tensor:
        flat = q.reshape(-1, self.n_dof).double()
        return vmap(self._mass_single)(flat).reshape(*q.shape, self.n_dof).to(q)

    def gravity(self, q: torch.Tensor) -> torch.Tensor:
        flat = q.reshape(-1, self.n_dof).double()
        return vmap(jacrev(self._potential_single))(flat).reshape(q.shape).to(q)

    def friction(self, qd: torch.Tensor) -> torch.Tensor:
        """Dissipative joint friction (..., n_dof) [N m]."""
        if not self.friction_on:
            return torch.zeros_like(qd)
        fv = torch.nn.functional.softplus(self.fv_raw).to(qd)
        fc = torch.nn.functional.softplus(self.fc_raw).to(qd)
        return fv * qd + fc * torch.tanh(qd / self.v_eps)

    def _terms(self, q: torch.Tensor, qd: torch.Tensor):
        n = self.n_dof
        fq, fqd = q.reshape(-1, n).double(), qd.reshape(-1, n).double()
        m = vmap(self._mass_single)(fq)
        dm = vmap(jacfwd(self._mass_single))(fq)  # (B, n, n, n): dM_ij / dq_k
        mdot = torch.einsum("bijk,bk->bij", dm, fqd)
        dtdq = 0.5 * torch.einsum("bi,bijk,bj->bk", fqd, dm, fqd)
        c = torch.einsum("bij,bj->bi", mdot, fqd) - dtdq
        g = vmap(jacrev(self._potential_single))(fq)
        return m, c, g

    def coriolis(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """Coriolis and centrifugal torque (..., n_dof) [N m]."""
        _, c, _ = self._terms(q, qd)
        return c.reshape(q.shape).to(q)

    def bias(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        _, c, g = self._terms(q, qd)
        return (c + g).reshape(q.shape).to(q) + self.friction(qd)

    def inverse(self, q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
        m, c, g = self._terms(q, qd)
        fqdd = qdd.reshape(-1, self.n_dof).double()
        tau = torch.einsum("bij,bj->bi", m, fqdd) + c + g
        return tau.reshape(q.shape).to(q) + self.friction(qd)

    def forward(self, q: torch.Tensor, qd: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        m, c, g = self._terms(q, qd)
        rhs = tau.reshape(-1, self.n_dof).double() - c - g - self.friction(qd).reshape(c.shape)
        return torch.linalg.solve(m, rhs.unsqueeze(-1)).squeeze(-1).reshape(q.shape).to(q)


__all__ = ["LagrangianModel"]
