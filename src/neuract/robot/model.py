"""The immutable, differentiable robot model.

:class:`Robot` is a frozen dataclass of tensors (topology constants + physical parameters);
its methods are thin wrappers over the pure functions in :mod:`~neuract.robot.kinematics`,
:mod:`~neuract.robot.dynamics` and :mod:`~neuract.robot.regressor`. To change parameters
(e.g. from a learnable module) build a new one with :meth:`Robot.replace` or
:meth:`Robot.with_inertial_parameters`; gradients flow through the new tensors.

Shapes: ``q, qd, qdd, tau``: (..., n_dof) in [rad, rad/s, rad/s^2, N m] for hinges and
[m, m/s, m/s^2, N] for slides; any number of leading batch dimensions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from neuract.robot import dynamics, kinematics
from neuract.robot import regressor as _regressor

__all__ = ["Robot"]

_INDEX_FIELDS = ("is_hinge", "body_link", "site_link")


@dataclass(frozen=True, eq=False)
class Robot:
    """A fixed-base rigid-body tree of hinge/slide joints (one link per joint)."""

    name: str
    mj_model: Any = field(repr=False)
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    site_names: tuple[str, ...]
    link_names: tuple[str, ...]  # MuJoCo body that owns each joint
    parent: tuple[int, ...]  # parent link of each link, -1 = world
    # --- topology constants (tensors, see loader.py) ---
    is_hinge: Tensor = field(repr=False)
    q_ref: Tensor = field(repr=False)  # qpos0: joint value of the reference configuration
    rot_cos: Tensor = field(repr=False)
    rot_sin: Tensor = field(repr=False)
    rot_const: Tensor = field(repr=False)
    pos_const: Tensor = field(repr=False)
    slide_axis: Tensor = field(repr=False)
    anc: Tensor = field(repr=False)  # (n, n): anc[i, j] = 1 if j is i or an ancestor of i
    body_link: Tensor = field(repr=False)  # (n_bodies,) link of each body, n = world
    body_R: Tensor = field(repr=False)
    body_p: Tensor = field(repr=False)
    site_link: Tensor = field(repr=False)
    site_R: Tensor = field(repr=False)
    site_p: Tensor = field(repr=False)
    pi_ref_to_link: Tensor = field(repr=False)  # (n, 10, 10)
    # --- physical parameters ---
    pi_link: Tensor = field(repr=False)  # (n, 10) inertial parameters in joint frames
    armature: Tensor = field(repr=False)  # (n,) reflected rotor inertia [kg m^2]
    damping: Tensor = field(repr=False)  # (n,) viscous damping [N m s/rad]
    frictionloss: Tensor = field(repr=False)  # (n,) dry friction [N m]
    gravity: Tensor = field(repr=False)  # (3,) [m/s^2]
    q_lower: Tensor = field(repr=False)  # (n,) -inf if unlimited
    q_upper: Tensor = field(repr=False)
    # --- derived (filled in __post_init__) ---
    has_slide: bool = field(init=False, repr=False)
    is_chain: bool = field(init=False, repr=False)  # parent[i] == i - 1 for every link
    anc_strict: Tensor = field(init=False, repr=False)
    base_acc: Tensor = field(init=False, repr=False)
    body_to_link: Tensor = field(init=False, repr=False)
    T_cos: Tensor = field(init=False, repr=False)  # local transform = T_const + cos T_cos + ...
    T_sin: Tensor = field(init=False, repr=False)
    T_const: Tensor = field(init=False, repr=False)
    T_slide: Tensor = field(init=False, repr=False)
    eye3: Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.parent)
        object.__setattr__(self, "has_slide", bool((~self.is_hinge).any()))
        object.__setattr__(self, "is_chain", self.parent == tuple(range(-1, n - 1)))
        eye = torch.eye(n, dtype=self.anc.dtype, device=self.anc.device)
        object.__setattr__(self, "anc_strict", self.anc - eye)
        object.__setattr__(self, "base_acc", torch.cat([torch.zeros_like(self.gravity),
                                                        -self.gravity]))
        b2l = torch.zeros(n + 1, len(self.body_names), dtype=self.anc.dtype,
                          device=self.anc.device)
        b2l[self.body_link, torch.arange(len(self.body_names))] = 1.0
        object.__setattr__(self, "body_to_link", b2l[:n])
        zeros = self.rot_cos.new_zeros(n, 4, 4)
        T_cos, T_sin, T_const, T_slide = zeros.clone(), zeros.clone(), zeros.clone(), zeros
        T_cos[:, :3, :3] = self.rot_cos
        T_sin[:, :3, :3] = self.rot_sin
        T_const[:, :3, :3] = self.rot_const
        T_const[:, :3, 3] = self.pos_const
        T_const[:, 3, 3] = 1.0
        T_slide = T_slide.clone()
        T_slide[:, :3, 3] = self.slide_axis
        eye3 = torch.eye(3, dtype=self.anc.dtype, device=self.anc.device)
        for k, v in (("T_cos", T_cos), ("T_sin", T_sin), ("T_const", T_const),
                     ("T_slide", T_slide), ("eye3", eye3)):
            object.__setattr__(self, k, v)

    # ------------------------------------------------------------------ basics
    @property
    def n_dof(self) -> int:
        return len(self.parent)

    @property
    def dtype(self) -> torch.dtype:
        return self.pi_link.dtype

    @property
    def device(self) -> torch.device:
        return self.pi_link.device

    def replace(self, **changes) -> Robot:
        """A copy with some fields replaced (e.g. ``damping=...``); tensors are not copied."""
        return dataclasses.replace(self, **changes)

    def to(self, dtype: torch.dtype | None = None, device=None) -> Robot:
        """Cast every floating tensor to ``dtype`` and move all tensors to ``device``."""
        changes = {}
        for f in dataclasses.fields(self):
            if not f.init:
                continue
            v = getattr(self, f.name)
            if isinstance(v, Tensor):
                dt = None if f.name in _INDEX_FIELDS else dtype
                changes[f.name] = v.to(dtype=dt, device=device)
        return self.replace(**changes)

    def inertial_parameters(self) -> Tensor:
        """pi (n_dof * 10,): per link [m, m c (3), I_origin (xx, yy, zz, xy, xz, yz)] in the
        frame of the owning body (see :mod:`neuract.robot.regressor`)."""
        pi_ref = torch.linalg.solve(self.pi_ref_to_link, self.pi_link[..., None])[..., 0]
        return pi_ref.reshape(*pi_ref.shape[:-2], -1)

    def with_inertial_parameters(self, pi: Tensor) -> Robot:
        """A copy using ``pi`` (n_dof * 10,) or (n_dof, 10) in the convention above."""
        pi = pi.reshape(self.n_dof, 10)
        return self.replace(pi_link=(self.pi_ref_to_link @ pi[..., None])[..., 0])

    def joint_index(self, joint: str | int) -> int:
        return kinematics._index(self.joint_names, joint, "joint")

    # -------------------------------------------------------------- kinematics
    def forward_kinematics(self, q: Tensor) -> tuple[Tensor, Tensor]:
        """World pose of every body: pos (..., n_bodies, 3) [m], rot (..., n_bodies, 3, 3)."""
        return kinematics.body_poses(self, q)

    def site_poses(self, q: Tensor) -> tuple[Tensor, Tensor]:
        """World pose of every site: pos (..., n_sites, 3) [m], rot (..., n_sites, 3, 3)."""
        return kinematics.site_poses(self, q)

    def body_jacobian(self, q: Tensor, body: str | int) -> Tensor:
        """(..., 6, n_dof): rows 0-2 linear velocity of the body origin, rows 3-5 angular."""
        return kinematics.body_jacobian(self, q, body)

    def site_jacobian(self, q: Tensor, site: str | int) -> Tensor:
        """(..., 6, n_dof): rows 0-2 linear velocity of the site, rows 3-5 angular (world)."""
        return kinematics.site_jacobian(self, q, site)

    # ---------------------------------------------------------------- dynamics
    def mass_matrix(self, q: Tensor) -> Tensor:
        """M(q) (..., n_dof, n_dof) [kg m^2], armature included."""
        return dynamics.mass_matrix(self, q)

    def mass_matrix_and_bias(self, q: Tensor, qd: Tensor,
                             f_ext: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """M(q) (..., n_dof, n_dof) and b(q, qd) - J^T f_ext (..., n_dof) in one pass."""
        return dynamics.mass_matrix_and_bias(self, q, qd, f_ext)

    def bias_forces(self, q: Tensor, qd: Tensor) -> Tensor:
        """Coriolis + centrifugal + gravity torques (..., n_dof) (MuJoCo qfrc_bias)."""
        return dynamics.bias_forces(self, q, qd)

    def gravity_torques(self, q: Tensor) -> Tensor:
        """Gravity compensation torques (..., n_dof) = bias_forces(q, 0)."""
        return dynamics.gravity_torques(self, q)

    def inverse_dynamics(self, q: Tensor, qd: Tensor, qdd: Tensor,
                         f_ext: Tensor | None = None) -> Tensor:
        """tau = M qdd + b - J^T f_ext (..., n_dof); no damping/friction (see dynamics.py)."""
        return dynamics.inverse_dynamics(self, q, qd, qdd, f_ext)

    def forward_dynamics(self, q: Tensor, qd: Tensor, tau: Tensor,
                         f_ext: Tensor | None = None) -> Tensor:
        """qdd (..., n_dof) solving M qdd = tau - b + J^T f_ext (no passive terms)."""
        return dynamics.forward_dynamics(self, q, qd, tau, f_ext)

    def passive_torques(self, qd: Tensor, friction_eps: float = 1e-2) -> Tensor:
        """-damping qd - frictionloss tanh(qd / eps) (..., n_dof)."""
        return dynamics.passive_torques(self, qd, friction_eps)

    def external_torques(self, q: Tensor, f_ext: Tensor) -> Tensor:
        """sum_b J_b^T w_b (..., n_dof) for body wrenches f_ext (..., n_bodies, 6) =
        [force, torque] in world axes applied at each body origin."""
        return dynamics.external_torques(self, q, f_ext)

    def regressor(self, q: Tensor, qd: Tensor, qdd: Tensor) -> Tensor:
        """Y (..., n_dof, 10 n_dof) with ``Y @ inertial_parameters()`` = rigid-body torques."""
        return _regressor.regressor(self, q, qd, qdd)

    def __repr__(self) -> str:
        return (f"Robot({self.name!r}, n_dof={self.n_dof}, joints={list(self.joint_names)}, "
                f"dtype={self.dtype})")
