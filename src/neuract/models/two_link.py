"""Closed-form two-link planar arm in a vertical plane (textbook formulas, Spong et al.).

Ground truth for tests and the Sensors 2025 benchmark, and a cross-check of the rigid-body
core on the bundled ``planar2`` (same conventions: q = 0 is the arm stretched horizontally,
positive angles turn the links upwards, gravity along -z).

With ``c2 = cos q2``, ``s2 = sin q2`` the dynamics are linear in five base parameters
``theta = (t1, t2, t3, t4, t5)``::

    t1 = m1 lc1^2 + I1 + m2 l1^2      t2 = m2 l1 lc2      t3 = m2 lc2^2 + I2
    t4 = (m1 lc1 + m2 l1) g           t5 = m2 lc2 g
    M = [[t1 + t3 + 2 t2 c2, t3 + t2 c2], [t3 + t2 c2, t3]]
    c = t2 s2 [-(2 qd1 qd2 + qd2^2), qd1^2]
    g = [t4 cos q1 + t5 cos(q1 + q2), t5 cos(q1 + q2)]

plus optional joint friction ``f = fv * qd + fc * tanh(qd / v_eps)`` [N m].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from neuract.models.base import MODELS, DynamicsModel


@dataclass(frozen=True)
class TwoLinkParams:
    """Physical parameters; defaults are Table 1 of the Sensors 2025 study (= planar2)."""

    m1: float = 1.0  # link masses [kg]
    m2: float = 1.0
    l1: float = 1.0  # length of link 1 [m]
    lc1: float = 0.5  # joint-to-COM distances [m]
    lc2: float = 0.5
    I1: float = 0.1  # COM inertias about the joint axis [kg m^2]
    I2: float = 0.1
    gravity: float = 9.81  # [m/s^2]
    fv: tuple[float, float] = (0.0, 0.0)  # viscous friction [N m s/rad]
    fc: tuple[float, float] = (0.0, 0.0)  # Coulomb friction [N m]
    v_eps: float = 0.01  # velocity scale of the smoothed Coulomb term [rad/s]

    def base_parameters(self) -> list[float]:
        """The five base parameters ``(t1, ..., t5)`` of the module docstring."""
        t1 = self.m1 * self.lc1**2 + self.I1 + self.m2 * self.l1**2
        t2 = self.m2 * self.l1 * self.lc2
        t3 = self.m2 * self.lc2**2 + self.I2
        t4 = (self.m1 * self.lc1 + self.m2 * self.l1) * self.gravity
        t5 = self.m2 * self.lc2 * self.gravity
        return [t1, t2, t3, t4, t5]


def two_link_regressor(q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
    """Base-parameter regressor ``Y``: (..., 2, 5) with ``tau = Y @ theta`` (no friction)."""
    c2, s2 = torch.cos(q[..., 1]), torch.sin(q[..., 1])
    c1, c12 = torch.cos(q[..., 0]), torch.cos(q[..., 0] + q[..., 1])
    qd1, qd2 = qd[..., 0], qd[..., 1]
    a1, a2 = qdd[..., 0], qdd[..., 1]
    z = torch.zeros_like(c2)
    row1 = torch.stack(
        [a1, c2 * (2 * a1 + a2) - s2 * (2 * qd1 * qd2 + qd2**2), a1 + a2, c1, c12], dim=-1
    )
    row2 = torch.stack([z, c2 * a1 + s2 * qd1**2, a1 + a2, z, c12], dim=-1)
    return torch.stack([row1, row2], dim=-2)


@MODELS.register("two_link")
class TwoLinkArm(DynamicsModel):
    """Analytic two-link arm: ``inverse``, ``mass_matrix``, ``coriolis``, ``gravity``, friction."""

    n_dof = 2

    def __init__(self, params: TwoLinkParams | None = None) -> None:
        super().__init__()
        self.params = params or TwoLinkParams()
        theta = torch.tensor(self.params.base_parameters(), dtype=torch.float64)
        self.register_buffer("theta", theta)
        self.register_buffer("fv", torch.tensor(self.params.fv, dtype=torch.float64))
        self.register_buffer("fc", torch.tensor(self.params.fc, dtype=torch.float64))

    def _t(self, q: torch.Tensor) -> torch.Tensor:
        return self.theta.to(q)

    def mass_matrix(self, q: torch.Tensor, qd: torch.Tensor | None = None) -> torch.Tensor:
        """M(q): (..., 2, 2) [kg m^2]."""
        t1, t2, t3 = self._t(q)[:3]
        c2 = torch.cos(q[..., 1])
        m11 = t1 + t3 + 2 * t2 * c2
        m12 = t3 + t2 * c2
        m22 = t3 + 0 * c2
        return torch.stack([torch.stack([m11, m12], -1), torch.stack([m12, m22], -1)], -2)

    def coriolis(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """Coriolis and centrifugal torque C(q, qd) qd: (..., 2) [N m]."""
        t2 = self._t(q)[1]
        h = t2 * torch.sin(q[..., 1])
        qd1, qd2 = qd[..., 0], qd[..., 1]
        return torch.stack([-h * (2 * qd1 * qd2 + qd2**2), h * qd1**2], dim=-1)

    def coriolis_matrix(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """Christoffel-symbol C(q, qd): (..., 2, 2), with Mdot - 2C skew-symmetric."""
        h = self._t(q)[1] * torch.sin(q[..., 1])
        qd1, qd2 = qd[..., 0], qd[..., 1]
        r1 = torch.stack([-h * qd2, -h * (qd1 + qd2)], -1)
        r2 = torch.stack([h * qd1, 0 * h], -1)
        return torch.stack([r1, r2], -2)

    def gravity(self, q: torch.Tensor) -> torch.Tensor:
        """Gravity torque g(q): (..., 2) [N m]."""
        t4, t5 = self._t(q)[3], self._t(q)[4]
        c12 = torch.cos(q[..., 0] + q[..., 1])
        return torch.stack([t4 * torch.cos(q[..., 0]) + t5 * c12, t5 * c12], dim=-1)

    def friction(self, qd: torch.Tensor) -> torch.Tensor:
        """Joint friction torque (..., 2) [N m]: viscous + tanh-smoothed Coulomb."""
        return self.fv.to(qd) * qd + self.fc.to(qd) * torch.tanh(qd / self.params.v_eps)

    def bias(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        return self.coriolis(q, qd) + self.gravity(q) + self.friction(qd)

    def inverse(self, q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
        m = self.mass_matrix(q)
        return (m @ qdd.unsqueeze(-1)).squeeze(-1) + self.bias(q, qd)

    def forward(self, q: torch.Tensor, qd: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        rhs = (tau - self.bias(q, qd)).unsqueeze(-1)
        return torch.linalg.solve(self.mass_matrix(q), rhs).squeeze(-1)


__all__ = ["TwoLinkArm", "TwoLinkParams", "two_link_regressor"]
