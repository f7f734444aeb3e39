"""Rigid-body dynamics: RNEA, CRBA, forward dynamics, passive and external torques.

Pure functions of ``(robot, q, qd, ...)``, batched over leading dimensions and differentiable.
Everything is computed in world coordinates with spatial vectors referred to the world origin
(see :mod:`neuract.robot.kinematics`), so the recursions over the tree become matrix products
with the constant ancestor mask ``robot.anc`` (``anc[i, j] = 1`` when j is i or an ancestor).

What each function includes:

- ``inverse_dynamics`` = ``M(q) qdd + b(q, qd) - J^T f_ext``: rigid bodies, armature, gravity,
  external wrenches; NOT damping or friction (add :func:`passive_torques` yourself). This is
  MuJoCo's ``mj_inverse`` with the passive and constraint forces switched off.
- ``bias_forces`` = ``b(q, qd)`` = Coriolis/centrifugal + gravity (MuJoCo's ``qfrc_bias``).
- ``forward_dynamics`` solves ``M qdd = tau - b + J^T f_ext`` by Cholesky (no passive terms).
"""

from __future__ import annotations

import torch
from torch import Tensor

from neuract.robot.kinematics import link_poses, motion_subspace
from neuract.robot.spatial import cross, pi_unpack, transform_pi

__all__ = [
    "world_inertials",
    "rnea",
    "bias_forces",
    "gravity_torques",
    "mass_matrix",
    "mass_matrix_and_bias",
    "inverse_dynamics",
    "forward_dynamics",
    "passive_torques",
    "external_torques",
    "kinetic_energy",
    "potential_energy",
]


def _inertia_mul(m, h, I, mv: Tensor) -> Tensor:
    """Spatial inertia (m, h, I_O) times motion vector [w, v] -> spatial force [n, f]."""
    w, v = mv[..., :3], mv[..., 3:]
    n = (I @ w[..., None])[..., 0] + cross(h, v)
    f = m[..., None] * v - cross(h, w)
    return torch.cat([n, f], -1)


def _cross_motion(a: Tensor, b: Tensor) -> Tensor:
    """Spatial motion cross product a x b."""
    wa, va, wb, vb = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return torch.cat([cross(wa, wb), cross(wa, vb) + cross(va, wb)], -1)


def _cross_force(a: Tensor, f: Tensor) -> Tensor:
    """Spatial force cross product a x* f."""
    wa, va, n, fl = a[..., :3], a[..., 3:], f[..., :3], f[..., 3:]
    return torch.cat([cross(wa, n) + cross(va, fl), cross(wa, fl)], -1)


def world_inertials(robot, R: Tensor, p: Tensor) -> Tensor:
    """Inertial parameters of every link in world frame / about the world origin (..., n, 10)."""
    return transform_pi(robot.pi_link, R, p)


def _link_wrenches(robot, q_pos_body: Tensor, f_ext: Tensor) -> Tensor:
    """Body wrenches -> spatial forces at the world origin summed per link (..., n, 6).

    f_ext: (..., n_bodies, 6) = [force (3) [N], torque (3) [N m]], world frame, applied at each
    body's origin (MuJoCo ``xpos``).
    """
    force, torque = f_ext[..., :3], f_ext[..., 3:]
    spatial = torch.cat([torque + cross(q_pos_body, force), force], -1)
    return robot.body_to_link @ spatial


def _ext_forces(robot, q, R, p, f_ext):
    from neuract.robot.kinematics import _attached_poses, _extend

    Re, pe = _extend(robot, R, p)
    pos, _ = _attached_poses(Re, pe, robot.body_link, robot.body_R, robot.body_p)
    return _link_wrenches(robot, pos, f_ext)


def _rnea_core(robot, R, p, S, qd, qdd, gravity: bool = True, ext=None):
    m, h, I = pi_unpack(world_inertials(robot, R, p))
    anc = robot.anc
    Sqd = S * qd[..., None]
    vel = anc @ Sqd
    acc = anc @ (S * qdd[..., None] + _cross_motion(vel, Sqd))
    if gravity:
        acc = acc + robot.base_acc
    f = _inertia_mul(m, h, I, acc) + _cross_force(vel, _inertia_mul(m, h, I, vel))
    if ext is not None:
        f = f - ext
    fc = anc.transpose(0, 1) @ f
    return (S * fc).sum(-1)


def rnea(robot, q: Tensor, qd: Tensor, qdd: Tensor, f_ext: Tensor | None = None) -> Tensor:
    """Recursive Newton-Euler inverse dynamics (rigid bodies + gravity, no armature).

    q, qd, qdd: (..., n_dof); f_ext: optional (..., n_bodies, 6) body wrenches (see
    :func:`external_torques`). Returns tau: (..., n_dof) [N m or N].
    """
    R, p = link_poses(robot, q)
    S = motion_subspace(robot, R, p)
    ext = None if f_ext is None else _ext_forces(robot, q, R, p, f_ext)
    return _rnea_core(robot, R, p, S, qd, qdd, True, ext)


def bias_forces(robot, q: Tensor, qd: Tensor) -> Tensor:
    """Coriolis, centrifugal and gravity torques b(q, qd) (..., n_dof) (MuJoCo qfrc_bias)."""
    return rnea(robot, q, qd, torch.zeros_like(qd))


def gravity_torques(robot, q: Tensor) -> Tensor:
    """Torques (..., n_dof) holding the arm still against gravity: b(q, 0)."""
    return bias_forces(robot, q, torch.zeros_like(q))


def _crba_core(robot, R, p, S):
    pi_c = robot.anc.transpose(0, 1) @ world_inertials(robot, R, p)
    m, h, I = pi_unpack(pi_c)
    F = _inertia_mul(m, h, I, S)
    P = F @ S.transpose(-1, -2)  # P[i, j] = F_i . S_j
    lower = P * robot.anc
    M = lower + (lower * robot.anc_strict).transpose(-1, -2)
    return M + torch.diag_embed(robot.armature).expand_as(M)


def mass_matrix(robot, q: Tensor) -> Tensor:
    """Joint-space inertia matrix M(q) (..., n_dof, n_dof) including armature (CRBA)."""
    R, p = link_poses(robot, q)
    return _crba_core(robot, R, p, motion_subspace(robot, R, p))


def mass_matrix_and_bias(robot, q: Tensor, qd: Tensor, f_ext: Tensor | None = None):
    """M(q) (..., n, n) and b(q, qd) - J^T f_ext (..., n), sharing one kinematics pass."""
    R, p = link_poses(robot, q)
    S = motion_subspace(robot, R, p)
    ext = None if f_ext is None else _ext_forces(robot, q, R, p, f_ext)
    M = _crba_core(robot, R, p, S)
    b = _rnea_core(robot, R, p, S, qd, torch.zeros_like(qd), True, ext)
    return M, b


def inverse_dynamics(robot, q: Tensor, qd: Tensor, qdd: Tensor,
                     f_ext: Tensor | None = None) -> Tensor:
    """tau = M(q) qdd + b(q, qd) - J^T f_ext (..., n_dof), armature included, no passive terms."""
    return rnea(robot, q, qd, qdd, f_ext) + robot.armature * qdd


def forward_dynamics(robot, q: Tensor, qd: Tensor, tau: Tensor,
                     f_ext: Tensor | None = None) -> Tensor:
    """Joint accelerations qdd (..., n_dof) [rad/s^2] from applied torques tau (..., n_dof).

    Solves M qdd = tau - b + J^T f_ext with a Cholesky factorisation; passive torques are not
    added (pass ``tau + passive_torques(robot, qd)`` for those).
    """
    M, b = mass_matrix_and_bias(robot, q, qd, f_ext)
    L = torch.linalg.cholesky(M)
    return torch.cholesky_solve((tau - b)[..., None], L)[..., 0]


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
    fc = robot.anc.transpose(0, 1) @ _ext_forces(robot, q, R, p, f_ext)
    return (S * fc).sum(-1)


def kinetic_energy(robot, q: Tensor, qd: Tensor) -> Tensor:
    """0.5 qd^T M(q) qd (...,) [J], armature included."""
    M = mass_matrix(robot, q)
    return 0.5 * (qd[..., None, :] @ M @ qd[..., :, None])[..., 0, 0]


def potential_energy(robot, q: Tensor) -> Tensor:
    """Gravitational potential energy -g . sum_i m_i c_i (...,) [J] (zero at the world origin)."""
    R, p = link_poses(robot, q)
    h = world_inertials(robot, R, p)[..., 1:4].sum(-2)
    return -(h * robot.gravity).sum(-1)
