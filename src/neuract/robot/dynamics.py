"""Rigid-body dynamics: RNEA, CRBA, forward dynamics, passive and external torques.

Pure functions of ``(robot, q, qd, ...)``, batched over leading dimensions and differentiable.
Everything is computed in world coordinates with spatial vectors referred to the world origin
(see :mod:`neuract.robot.kinematics`), so the recursions over the tree become sums over
ancestors/descendants: cumulative sums for serial chains, products with the constant ancestor
mask ``robot.anc`` (``anc[i, j] = 1`` when j is i or an ancestor) for trees. Link inertias are
carried as world-frame parameters (m, h = m c, I about the origin) and every spatial product
is written with 3-vector cross products (fewer flops than 6x6 spatial matrices).

What each function includes:

- ``inverse_dynamics`` = ``M(q) qdd + b(q, qd) - J^T f_ext``: rigid bodies, armature, gravity,
  external wrenches; NOT damping or friction (add :func:`passive_torques` yourself). This is
  MuJoCo's ``mj_inverse`` with the passive and constraint forces switched off.
- ``bias_forces`` = ``b(q, qd)`` = Coriolis/centrifugal + gravity (MuJoCo's ``qfrc_bias``).
- ``forward_dynamics`` solves ``M qdd = tau - b + J^T f_ext`` (no passive terms) with
  :func:`solve_symmetric`.

``forward_dynamics``, ``mass_matrix``, ``bias_forces`` and ``mass_matrix_and_bias`` run the
compiled kernel of :mod:`neuract.robot.native` where it applies (CPU, no ``f_ext``, no tensor
of the robot requiring a gradient); the torch code here is the reference and the fallback.
"""

from __future__ import annotations

import torch
from torch import Tensor

from neuract.robot.dynamics_backward import (
    _KINEMATIC_FIELDS,
    _CrbaSolve,
    _ScrewKinematics,
    solve_symmetric,
)
from neuract.robot.kinematics import link_poses, motion_subspace
from neuract.robot.native import accelerations as native_accelerations
from neuract.robot.native import mass_matrix_and_bias as native_mass_bias
from neuract.robot.rigid_body import (
    _crba_vec,
    _ext_forces,
    _rnea_vec,
    _sum_descendants,
    _world_params,
)
from neuract.robot.spatial import transform_pi

__all__ = [
    "world_inertials",
    "rnea",
    "bias_forces",
    "gravity_torques",
    "mass_matrix",
    "mass_matrix_and_bias",
    "inverse_dynamics",
    "forward_dynamics",
    "dynamics_system",
    "solve_symmetric",
    "passive_torques",
    "external_torques",
    "kinetic_energy",
    "potential_energy",
]


def world_inertials(robot, R: Tensor, p: Tensor) -> Tensor:
    """Inertial parameters of every link in world frame / about the world origin (..., n, 10)."""
    return transform_pi(robot.pi_link, R, p)


def rnea(robot, q: Tensor, qd: Tensor, qdd: Tensor, f_ext: Tensor | None = None) -> Tensor:
    """Recursive Newton-Euler inverse dynamics (rigid bodies + gravity, no armature).

    q, qd, qdd: (..., n_dof); f_ext: optional (..., n_bodies, 6) body wrenches (see
    :func:`external_torques`). Returns tau: (..., n_dof) [N m or N].
    """
    R, p = link_poses(robot, q)
    S = motion_subspace(robot, R, p)
    ext = None if f_ext is None else _ext_forces(robot, q, R, p, f_ext)
    return _rnea_vec(robot, _world_params(robot, R, p), S, qd, qdd, ext)


def bias_forces(robot, q: Tensor, qd: Tensor) -> Tensor:
    """Coriolis, centrifugal and gravity torques b(q, qd) (..., n_dof) (MuJoCo qfrc_bias)."""
    Mb = native_mass_bias(robot, q, qd)
    if Mb is not None:
        return Mb[1]
    return rnea(robot, q, qd, torch.zeros_like(qd))


def gravity_torques(robot, q: Tensor) -> Tensor:
    """Torques (..., n_dof) holding the arm still against gravity: b(q, 0)."""
    return bias_forces(robot, q, torch.zeros_like(q))


def mass_matrix(robot, q: Tensor) -> Tensor:
    """Joint-space inertia matrix M(q) (..., n_dof, n_dof) including armature (CRBA)."""
    Mb = native_mass_bias(robot, q, torch.zeros((), dtype=q.dtype).expand(q.shape))
    if Mb is not None:
        return Mb[0]
    R, p = link_poses(robot, q)
    return _crba_vec(robot, _world_params(robot, R, p), motion_subspace(robot, R, p))


def _subspaces_and_params(robot, q: Tensor) -> tuple[Tensor, Tensor]:
    """(S, W) for the dynamics; the closed-form backward of :class:`_ScrewKinematics` when q
    needs a gradient and no kinematic constant or link inertia of ``robot`` does."""
    if (torch.is_grad_enabled() and q.requires_grad
            and not any(getattr(robot, n).requires_grad for n in _KINEMATIC_FIELDS)):
        return _ScrewKinematics.apply(q, robot)
    R, p = link_poses(robot, q)
    return motion_subspace(robot, R, p), _world_params(robot, R, p)


def accelerations_fast(robot, q: Tensor, qd: Tensor, tau: Tensor, passive: bool = True,
                       friction_eps: float = 1e-2, implicit_dt: float = 0.0) -> Tensor | None:
    """qdd of :func:`dynamics_system` + solve through the closed-form backward passes
    (:class:`_ScrewKinematics`, :class:`_CrbaSolve`), first-order only; ``None`` when they do
    not apply (no gradient needed, or a kinematic constant, link inertia, armature or damping
    of ``robot`` requires grad): then use the plain path."""
    if not (torch.is_grad_enabled() and q.requires_grad) or any(
            getattr(robot, n).requires_grad
            for n in (*_KINEMATIC_FIELDS, "armature", "damping", "gravity")):
        return None
    S, W = _ScrewKinematics.apply(q, robot)
    force = tau - _rnea_vec(robot, W, S, qd, None, None)
    if passive:
        force = force + passive_torques(robot, qd, friction_eps)
    diag = implicit_dt * robot.damping if implicit_dt > 0.0 else None  # armature: in the CRBA
    return _CrbaSolve.apply(force, S, W, robot, diag)


def mass_matrix_and_bias(robot, q: Tensor, qd: Tensor, f_ext: Tensor | None = None):
    """M(q) (..., n, n) and b(q, qd) - J^T f_ext (..., n), sharing one kinematics pass."""
    if f_ext is None:
        Mb = native_mass_bias(robot, q, qd)
        if Mb is not None:
            return Mb
        S, W = _subspaces_and_params(robot, q)
        return _crba_vec(robot, W, S), _rnea_vec(robot, W, S, qd, None, None)
    R, p = link_poses(robot, q)
    S = motion_subspace(robot, R, p)
    ext = _ext_forces(robot, q, R, p, f_ext)
    W = _world_params(robot, R, p)
    return _crba_vec(robot, W, S), _rnea_vec(robot, W, S, qd, None, ext)


def inverse_dynamics(robot, q: Tensor, qd: Tensor, qdd: Tensor,
                     f_ext: Tensor | None = None) -> Tensor:
    """tau = M(q) qdd + b(q, qd) - J^T f_ext (..., n_dof), armature included, no passive terms."""
    return rnea(robot, q, qd, qdd, f_ext) + robot.armature * qdd


def forward_dynamics(robot, q: Tensor, qd: Tensor, tau: Tensor,
                     f_ext: Tensor | None = None) -> Tensor:
    """Joint accelerations qdd (..., n_dof) [rad/s^2] from applied torques tau (..., n_dof).

    Solves M qdd = tau - b + J^T f_ext with :func:`solve_symmetric`; passive torques are not
    added (pass ``tau + passive_torques(robot, qd)`` for those). Without ``f_ext``, on the CPU
    and when no parameter of the robot requires a gradient, the compiled kernel of
    :mod:`neuract.robot.native` computes it (same values; the torch path is the reference).
    """
    if f_ext is None:
        qdd = native_accelerations(robot, q, qd, tau, passive=False)
        if qdd is not None:
            return qdd
    M, b = mass_matrix_and_bias(robot, q, qd, f_ext)
    return solve_symmetric(M, tau - b)


def dynamics_system(robot, q: Tensor, qd: Tensor, tau: Tensor, f_ext: Tensor | None = None,
                    passive: bool = True, friction_eps: float = 1e-2,
                    implicit_dt: float = 0.0) -> tuple[Tensor, Tensor]:
    """The linear system ``M qdd = force`` of one forward-dynamics solve.

    Returns M: (..., n_dof, n_dof) [kg m^2] (plus ``implicit_dt * diag(damping)`` when
    ``implicit_dt`` [s] > 0, MuJoCo's implicit damping) and force: (..., n_dof) [N m] =
    ``tau - b(q, qd) + J^T f_ext`` plus :func:`passive_torques` when ``passive``.
    """
    M, b = mass_matrix_and_bias(robot, q, qd, f_ext)
    force = tau - b
    if passive:
        force = force + passive_torques(robot, qd, friction_eps)
    if implicit_dt > 0.0:
        M = M + torch.diag_embed(implicit_dt * robot.damping)
    return M, force


def passive_torques(robot, qd: Tensor, friction_eps: float = 1e-2) -> Tensor:
    """Torques exerted by joint damping and dry friction (..., n_dof), MuJoCo sign convention.

    ``-damping * qd - frictionloss * tanh(qd / friction_eps)``: viscous damping plus a smooth,
    differentiable approximation of Coulomb friction (``friction_eps`` [rad/s] sets the width
    of the transition around zero velocity).
    """
    return -robot.damping * qd - robot.frictionloss * torch.tanh(qd / friction_eps)


def external_torques(robot, q: Tensor, f_ext: Tensor) -> Tensor:
    """Joint torques sum_b J_b(q)^T w_b (..., n_dof) produced by body wrenches.

    f_ext: (..., n_bodies, 6) = [force [N], torque [N m]] in the world frame, each applied at its
    body's origin (MuJoCo ``xpos``), bodies ordered as ``robot.body_names``.
    """
    R, p = link_poses(robot, q)
    S = motion_subspace(robot, R, p)
    fc = _sum_descendants(robot, _ext_forces(robot, q, R, p, f_ext))
    return (S * fc).sum(-1)


def kinetic_energy(robot, q: Tensor, qd: Tensor) -> Tensor:
    """0.5 qd^T M(q) qd (...,) [J], armature included."""
    M = mass_matrix(robot, q)
    return 0.5 * (qd[..., None, :] @ M @ qd[..., :, None])[..., 0, 0]


def potential_energy(robot, q: Tensor) -> Tensor:
    """Gravitational potential energy -g . sum_i m_i c_i (...,) [J] (zero at the world origin),
    over the robot's moving bodies: a body welded to the world adds a constant (MuJoCo's
    ``energy[0]`` counts it)."""
    R, p = link_poses(robot, q)
    h = world_inertials(robot, R, p)[..., 1:4].sum(-2)
    return -(h * robot.gravity).sum(-1)
