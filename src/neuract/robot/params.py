"""Learnable physical parameters that stay physically consistent.

:class:`LearnableRobot` is the only ``nn.Module`` of the robot package: it holds unconstrained
tensors and maps them to a valid :class:`~neuract.robot.model.Robot` on each call:

- inertial parameters of every link with positive mass through the log-Cholesky factor of its
  4x4 pseudo-inertia ``J = L L^T`` (``L`` lower triangular, diagonal ``exp(theta)``): every
  value of the 10 raw numbers gives a positive mass and an inertia that satisfies the triangle
  inequalities (Rucker & Wensing 2022). Massless links (joint chains inside one body) stay fixed.
- armature, damping and frictionloss through ``softplus`` (always >= 0); values that start at
  exactly 0 start at ``min_value`` instead.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from neuract.errors import ConfigError, NotPhysicallyConsistent
from neuract.robot.model import Robot
from neuract.robot.spatial import pi_from_pseudo_inertia, pseudo_inertia

__all__ = ["LearnableRobot", "inertial_to_log_cholesky", "log_cholesky_to_inertial"]

_LEARNABLE = ("inertia", "armature", "damping", "frictionloss")
_TRIL = torch.tril_indices(4, 4, -1)


def inertial_to_log_cholesky(pi: Tensor) -> Tensor:
    """pi (..., 10) -> theta (..., 10) = [log diag(L) (4), strictly-lower L (6)].

    Raises NotPhysicallyConsistent when the pseudo-inertia is not positive definite.
    """
    J = pseudo_inertia(pi)
    L, info = torch.linalg.cholesky_ex(J)
    if bool((info != 0).any()):
        bad = torch.nonzero(info.reshape(-1)).reshape(-1).tolist()
        raise NotPhysicallyConsistent(
            f"inertial parameters at index {bad} are not physically consistent (pseudo-inertia "
            "not positive definite: need m > 0 and inertia satisfying the triangle inequality)"
        )
    diag = torch.diagonal(L, dim1=-2, dim2=-1)
    return torch.cat([diag.log(), L[..., _TRIL[0], _TRIL[1]]], -1)


def log_cholesky_to_inertial(theta: Tensor) -> Tensor:
    """theta (..., 10) -> pi (..., 10); the inverse of :func:`inertial_to_log_cholesky`."""
    L = torch.diag_embed(theta[..., :4].exp())
    off = torch.zeros_like(L)
    off[..., _TRIL[0], _TRIL[1]] = theta[..., 4:]
    L = L + off
    return pi_from_pseudo_inertia(L @ L.transpose(-1, -2))


def _inv_softplus(x: Tensor) -> Tensor:
    return x + torch.log(-torch.expm1(-x))


class LearnableRobot(nn.Module):
    """Learnable, physically consistent parameters around a base :class:`Robot`.

    ``learnable()`` (or calling the module) returns a new Robot whose parameters are
    differentiable functions of this module's ``nn.Parameter``\\ s.
    """

    def __init__(self, robot: Robot, learn: Iterable[str] = _LEARNABLE,
                 min_value: float = 1e-6) -> None:
        super().__init__()
        learn = tuple(learn)
        unknown = sorted(set(learn) - set(_LEARNABLE))
        if unknown:
            raise ConfigError(f"unknown learnable parameter group(s) {unknown}; "
                              f"valid: {', '.join(_LEARNABLE)}")
        self.base = robot
        self.learn = learn
        pi = robot.inertial_parameters().reshape(robot.n_dof, 10).detach()
        self.register_buffer("pi_fixed", pi.clone())
        mask = pi[:, 0] > 0
        self.register_buffer("massive", mask)
        if "inertia" in learn:
            try:
                theta = inertial_to_log_cholesky(pi[mask])
            except NotPhysicallyConsistent as exc:
                names = [robot.link_names[i] for i in torch.nonzero(mask).reshape(-1).tolist()]
                raise NotPhysicallyConsistent(f"{exc}; links {names}") from None
            self.inertia_theta = nn.Parameter(theta)
        for key in ("armature", "damping", "frictionloss"):
            if key in learn:
                v = getattr(robot, key).detach().clamp_min(min_value)
                setattr(self, f"{key}_raw", nn.Parameter(_inv_softplus(v)))

    def inertial_parameters(self) -> Tensor:
        """Current pi (n_dof, 10) in the owning bodies' frames."""
        if "inertia" not in self.learn:
            return self.pi_fixed
        pi = self.pi_fixed.clone()
        pi[self.massive] = log_cholesky_to_inertial(self.inertia_theta)
        return pi

    def forward(self) -> Robot:
        robot = self.base
        changes = {}
        for key in ("armature", "damping", "frictionloss"):
            if key in self.learn:
                changes[key] = nn.functional.softplus(getattr(self, f"{key}_raw"))
        if changes:
            robot = robot.replace(**changes)
        if "inertia" in self.learn:
            robot = robot.with_inertial_parameters(self.inertial_parameters())
        return robot

    learnable = forward
