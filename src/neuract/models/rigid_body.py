"""Rigid-body model with identified parameters: ``tau = Y(q, qd, qdd)[:, cols] @ beta + f(qd)``.

``Y`` is any inertial regressor (the core's ``robot.regressor``, or a closed form such as
``two_link_regressor``); ``cols`` selects the base-parameter columns found by
``neuract.fit.least_squares.base_parameters`` (None: all columns, ``beta`` = full parameters).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from neuract.models.base import MODELS, DynamicsModel

Regressor = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@MODELS.register("rigid_body")
class RigidBodyModel(DynamicsModel):
    """Linear-in-parameters rigid body plus joint friction.

    regressor: ``(q, qd, qdd) -> Y`` of shape (..., n_dof, P).
    beta: (len(columns),) or (P,) parameters (base or full).
    fv, fc: (n_dof,) viscous [N m s/rad] and Coulomb [N m] friction; Coulomb uses
    ``tanh(qd / v_eps)`` so that the model stays smooth.
    """

    def __init__(
        self,
        regressor: Regressor,
        beta: torch.Tensor,
        n_dof: int,
        columns: Sequence[int] | None = None,
        fv: torch.Tensor | None = None,
        fc: torch.Tensor | None = None,
        v_eps: float = 0.01,
    ) -> None:
        super().__init__()
        self.regressor = regressor
        self.n_dof = n_dof
        self.v_eps = v_eps
        self.columns = None if columns is None else list(columns)
        self.register_buffer("beta", torch.as_tensor(beta, dtype=torch.float64))
        zeros = torch.zeros(n_dof, dtype=torch.float64)
        self.register_buffer("fv", zeros if fv is None else torch.as_tensor(fv).double())
        self.register_buffer("fc", zeros if fc is None else torch.as_tensor(fc).double())

    def friction(self, qd: torch.Tensor) -> torch.Tensor:
        """Joint friction (..., n_dof) [N m]."""
        return self.fv.to(qd) * qd + self.fc.to(qd) * torch.tanh(qd / self.v_eps)

    def inverse(self, q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
        y = self.regressor(q, qd, qdd)
        if self.columns is not None:
            y = y[..., self.columns]
        return (y @ self.beta.to(y)) + self.friction(qd)


@MODELS.register("robot")
class RobotModel(DynamicsModel):
    """The core's rigid-body ``Robot`` behind the ``DynamicsModel`` interface.

    ``inverse = robot.inverse_dynamics - robot.passive_torques(qd)`` (the motor must also
    overcome joint damping and friction), ``forward`` the matching solve; extra viscous
    ``fv`` [N m s/rad] and Coulomb ``fc`` [N m] joint friction may be added on top.
    """

    def __init__(self, robot, fv=None, fc=None, v_eps: float = 0.01) -> None:
        super().__init__()
        self.robot = robot
        self.n_dof = robot.n_dof
        self.v_eps = v_eps
        zeros = torch.zeros(self.n_dof, dtype=torch.float64)
        self.register_buffer("fv", zeros if fv is None else torch.as_tensor(fv).double())
        self.register_buffer("fc", zeros if fc is None else torch.as_tensor(fc).double())

    def friction(self, qd: torch.Tensor) -> torch.Tensor:
        extra = self.fv.to(qd) * qd + self.fc.to(qd) * torch.tanh(qd / self.v_eps)
        return extra - self.robot.passive_torques(qd)

    def mass_matrix(self, q: torch.Tensor, qd: torch.Tensor | None = None) -> torch.Tensor:
        return self.robot.mass_matrix(q)  # armature included

    def inverse(self, q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
        return self.robot.inverse_dynamics(q, qd, qdd) + self.friction(qd)

    def forward(self, q: torch.Tensor, qd: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        return self.robot.forward_dynamics(q, qd, tau - self.friction(qd))


__all__ = ["RigidBodyModel", "Regressor", "RobotModel"]
