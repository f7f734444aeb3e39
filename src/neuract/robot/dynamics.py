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

import functools

import torch
from torch import Tensor

from neuract.robot.kinematics import link_poses, motion_subspace
from neuract.robot.spatial import cross, inertia_from_vec, transform_pi

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


def _cross_motion(a: Tensor, b: Tensor) -> Tensor:
    """Spatial motion cross product a x b."""
    wa, va, wb, vb = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return torch.cat([cross(wa, wb), cross(wa, vb) + cross(va, wb)], -1)


@functools.lru_cache(maxsize=16)
def _maps(dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """Constant linear maps: SK (3, 9) with skew(v).flatten() = v @ SK; CRM (6, 36) with
    crm(v).flatten() = v @ CRM (spatial motion cross-product matrix); G (10, 36) with
    I6.flatten() = pi @ G (6x6 spatial inertia from the 10 inertial parameters)."""
    eps = torch.zeros(3, 3, 3, dtype=torch.float64)
    for i, j, k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
        eps[i, j, k], eps[i, k, j] = 1.0, -1.0
    SK = -eps.permute(2, 0, 1).reshape(3, 9)  # skew(v)[i, j] = -eps[i, j, k] v[k]
    sk = SK.reshape(3, 3, 3)
    CRM = torch.zeros(6, 6, 6, dtype=torch.float64)
    CRM[:3, :3, :3] = sk  # omega x (angular)
    CRM[:3, 3:, 3:] = sk  # omega x (linear)
    CRM[3:, 3:, :3] = sk  # v x (angular -> linear)
    G = torch.zeros(10, 6, 6, dtype=torch.float64)
    G[0, 3:, 3:] = torch.eye(3, dtype=torch.float64)
    G[1:4, :3, 3:] = sk
    G[1:4, 3:, :3] = -sk
    for col, (a, b) in enumerate(((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))):
        G[4 + col, a, b] = G[4 + col, b, a] = 1.0
    return tuple(x.reshape(x.shape[0], -1).to(dtype=dtype, device=device) for x in (SK, CRM, G))


def world_inertials(robot, R: Tensor, p: Tensor) -> Tensor:
    """Inertial parameters of every link in world frame / about the world origin (..., n, 10)."""
    return transform_pi(robot.pi_link, R, p)


def _spatial_inertias(robot, R: Tensor, p: Tensor) -> Tensor:
    """6x6 spatial inertias (..., n, 6, 6) of every link, world axes, about the world origin.

    ``[[I_O, [h]x], [-[h]x, m 1]]`` from the link parameters (m, h_l, I_l) and the link pose:
    h = m p + R h_l; I_O = R I_l R^T + (m|p|^2 + 2 p.R h_l) 1 - p h^T - (R h_l) p^T.
    """
    SK, _, _ = _maps(R.dtype, R.device)
    pi = robot.pi_link
    m, h_l, I_l = pi[:, 0], pi[:, 1:4], inertia_from_vec(pi[:, 4:])
    eye = torch.eye(3, dtype=R.dtype, device=R.device)
    hr = (R @ h_l[:, :, None])[..., 0]
    h = torch.addcmul(hr, m[:, None], p)
    scal = (p * (h + hr)).sum(-1)
    I_O = (R @ I_l @ R.transpose(-1, -2) + scal[..., None, None] * eye
           - p[..., :, None] * h[..., None, :] - hr[..., :, None] * p[..., None, :])
    hx = (h @ SK).unflatten(-1, (3, 3))
    mI = (m[:, None, None] * eye).expand(hx.shape)
    return torch.cat([torch.cat([I_O, hx], -1), torch.cat([-hx, mI], -1)], -2)


def _sum_ancestors(robot, x: Tensor) -> Tensor:
    """y_i = sum over j in ancestors-or-self(i) of x_j, x: (..., n, k)."""
    if robot.is_chain:
        return x.cumsum(-2)
    return robot.anc @ x


def _sum_descendants(robot, x: Tensor) -> Tensor:
    """y_i = sum over k in descendants-or-self(i) of x_k, x: (..., n, k)."""
    if robot.is_chain:
        return x.sum(-2, keepdim=True) - x.cumsum(-2) + x
    return robot.anc.transpose(0, 1) @ x


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


def _rnea_core(robot, Iw, S, qd, qdd, ext=None):
    _, CRM, _ = _maps(S.dtype, S.device)
    Sqd = S * qd[..., None]
    vel = _sum_ancestors(robot, Sqd)
    crm_v = (vel @ CRM).unflatten(-1, (6, 6))
    rel = (crm_v @ Sqd[..., None])[..., 0]
    if qdd is not None:
        rel = rel + S * qdd[..., None]
    acc = _sum_ancestors(robot, rel) + robot.base_acc
    Iv = Iw @ vel[..., None]
    # f = I a + v x* (I v), with v x* = -crm(v)^T
    f = (Iw @ acc[..., None] - crm_v.transpose(-1, -2) @ Iv)[..., 0]
    if ext is not None:
        f = f - ext
    return (S * _sum_descendants(robot, f)).sum(-1)


def rnea(robot, q: Tensor, qd: Tensor, qdd: Tensor, f_ext: Tensor | None = None) -> Tensor:
    """Recursive Newton-Euler inverse dynamics (rigid bodies + gravity, no armature).

    q, qd, qdd: (..., n_dof); f_ext: optional (..., n_bodies, 6) body wrenches (see
    :func:`external_torques`). Returns tau: (..., n_dof) [N m or N].
    """
    R, p = link_poses(robot, q)
    S = motion_subspace(robot, R, p)
    ext = None if f_ext is None else _ext_forces(robot, q, R, p, f_ext)
    return _rnea_core(robot, _spatial_inertias(robot, R, p), S, qd, qdd, ext)


def bias_forces(robot, q: Tensor, qd: Tensor) -> Tensor:
    """Coriolis, centrifugal and gravity torques b(q, qd) (..., n_dof) (MuJoCo qfrc_bias)."""
    return rnea(robot, q, qd, torch.zeros_like(qd))


def gravity_torques(robot, q: Tensor) -> Tensor:
    """Torques (..., n_dof) holding the arm still against gravity: b(q, 0)."""
    return bias_forces(robot, q, torch.zeros_like(q))


def _crba_core(robot, Iw, S):
    Ic = _sum_descendants(robot, Iw.flatten(-2)).unflatten(-1, (6, 6))
    F = (Ic @ S[..., None])[..., 0]
    P = F @ S.transpose(-1, -2)  # P[i, j] = F_i . S_j
    lower = P * robot.anc
    M = lower + (lower * robot.anc_strict).transpose(-1, -2)
    return M + torch.diag_embed(robot.armature)


def mass_matrix(robot, q: Tensor) -> Tensor:
    """Joint-space inertia matrix M(q) (..., n_dof, n_dof) including armature (CRBA)."""
    R, p = link_poses(robot, q)
    return _crba_core(robot, _spatial_inertias(robot, R, p), motion_subspace(robot, R, p))


def mass_matrix_and_bias(robot, q: Tensor, qd: Tensor, f_ext: Tensor | None = None):
    """M(q) (..., n, n) and b(q, qd) - J^T f_ext (..., n), sharing one kinematics pass."""
    R, p = link_poses(robot, q)
    S = motion_subspace(robot, R, p)
    ext = None if f_ext is None else _ext_forces(robot, q, R, p, f_ext)
    Iw = _spatial_inertias(robot, R, p)
    return _crba_core(robot, Iw, S), _rnea_core(robot, Iw, S, qd, None, ext)


def inverse_dynamics(robot, q: Tensor, qd: Tensor, qdd: Tensor,
                     f_ext: Tensor | None = None) -> Tensor:
    """tau = M(q) qdd + b(q, qd) - J^T f_ext (..., n_dof), armature included, no passive terms."""
    return rnea(robot, q, qd, qdd, f_ext) + robot.armature * qdd


def forward_dynamics(robot, q: Tensor, qd: Tensor, tau: Tensor,
                     f_ext: Tensor | None = None) -> Tensor:
    """Joint accelerations qdd (..., n_dof) [rad/s^2] from applied torques tau (..., n_dof).

    Solves M qdd = tau - b + J^T f_ext (``torch.linalg.solve``: for batches of small matrices it
    is faster on CPU than a Cholesky solve, forward and backward); passive torques are not
    added (pass ``tau + passive_torques(robot, qd)`` for those).
    """
    M, b = mass_matrix_and_bias(robot, q, qd, f_ext)
    return torch.linalg.solve(M, (tau - b)[..., None])[..., 0]


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
    """Gravitational potential energy -g . sum_i m_i c_i (...,) [J] (zero at the world origin)."""
    R, p = link_poses(robot, q)
    h = world_inertials(robot, R, p)[..., 1:4].sum(-2)
    return -(h * robot.gravity).sum(-1)
