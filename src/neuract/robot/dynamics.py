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
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from neuract.robot.kinematics import _attached_poses, _extend, link_poses, motion_subspace
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
    "dynamics_system",
    "solve_symmetric",
    "passive_torques",
    "external_torques",
    "kinetic_energy",
    "potential_energy",
]


def _cross_motion(a: Tensor, b: Tensor) -> Tensor:
    """Spatial motion cross product a x b."""
    wa, va, wb, vb = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return torch.cat([cross(wa, wb), cross(wa, vb) + cross(va, wb)], -1)


def world_inertials(robot, R: Tensor, p: Tensor) -> Tensor:
    """Inertial parameters of every link in world frame / about the world origin (..., n, 10)."""
    return transform_pi(robot.pi_link, R, p)


def _world_params(robot, R: Tensor, p: Tensor) -> Tensor:
    """Link inertial parameters in world axes about the world origin, packed (..., n, 13):
    [m, h (3), I_O (9, row-major)] from the link parameters (m, h_l, I_l) and the link pose:
    h = m p + R h_l; I_O = R I_l R^T + (m|p|^2 + 2 p.R h_l) 1 - p h^T - (R h_l) p^T."""
    pi = robot.pi_link
    m, h_l, I_l = pi[:, 0], pi[:, 1:4], inertia_from_vec(pi[:, 4:])
    eye = robot.eye3
    hr = (R @ h_l[:, :, None])[..., 0]
    h = torch.addcmul(hr, m[:, None], p)
    scal = (p * (h + hr)).sum(-1)
    I_O = (R @ I_l @ R.transpose(-1, -2) + scal[..., None, None] * eye
           - p[..., :, None] * h[..., None, :] - hr[..., :, None] * p[..., None, :])
    return torch.cat([m[:, None].expand(h[..., :1].shape), h, I_O.flatten(-2)], -1)


def _rnea_vec(robot, W, S, qd, qdd, ext=None):
    """RNEA over packed world parameters W (..., n, 13) with 3-vector algebra.

    Spatial motion vectors [w, v] and forces [n, f] are 6-vectors at the world origin; the
    products below are I v = [I_O w + h x v, m v - h x w] and f = I a + v x* (I v).
    (split/unbind instead of slicing: their backward is one cat/stack, not zero-fills.)
    """
    m, h, I = W.split([1, 3, 9], -1)
    I = I.unflatten(-1, (3, 3))
    Sqd = S * qd[..., None]
    vel = _sum_ancestors(robot, Sqd)
    w, v = vel.split(3, -1)
    sw, sv = Sqd.split(3, -1)
    c0, c1, c2 = cross(torch.stack([w, w, v], -2), torch.stack([sw, sv, sw], -2)).unbind(-2)
    rel = torch.cat([c0, c1 + c2], -1)  # vel x (S qd): the velocity-product acceleration
    if qdd is not None:
        rel = rel + S * qdd[..., None]
    acc = _sum_ancestors(robot, rel) + robot.base_acc
    dw, dv = acc.split(3, -1)
    Iw, Idw = (I @ torch.stack([w, dw], -1)).unbind(-1)
    hv, hw, hdv, hdw = cross(h[..., None, :], torch.stack([v, w, dv, dw], -2)).unbind(-2)
    mom_n = Iw + hv
    mom_f = m * v - hw
    a0, a1, a2 = cross(torch.stack([w, v, w], -2), torch.stack([mom_n, mom_f, mom_f], -2)
                       ).unbind(-2)
    f = torch.cat([Idw + hdv + a0 + a1, m * dv - hdw + a2], -1)
    if ext is not None:
        f = f - ext
    return (S * _sum_descendants(robot, f)).sum(-1)


def _crba_vec(robot, W, S):
    m, h, I = _sum_descendants(robot, W).split([1, 3, 9], -1)
    sw, sv = S.split(3, -1)
    hv, hw = cross(h[..., None, :], torch.stack([sv, sw], -2)).unbind(-2)
    F = torch.cat([(I.unflatten(-1, (3, 3)) @ sw[..., None])[..., 0] + hv, m * sv - hw], -1)
    P = F @ S.transpose(-1, -2)  # P[i, j] = F_i . S_j
    lower = P * robot.anc
    M = lower + (lower * robot.anc_strict).transpose(-1, -2)
    return M + torch.diag_embed(robot.armature)


def _sum_ancestors(robot, x: Tensor) -> Tensor:
    """y_i = sum over j in ancestors-or-self(i) of x_j, x: (..., n, k)."""
    if robot.is_chain:
        return x.cumsum(-2)
    return robot.anc @ x


def _sum_descendants(robot, x: Tensor) -> Tensor:
    """y_i = sum over k in descendants-or-self(i) of x_k, x: (..., n, k)."""
    if robot.is_chain:  # suffix sums (exact; total - prefix would cancel in float32)
        return x.flip(-2).cumsum(-2).flip(-2)
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

    Re, pe = _extend(robot, R, p)
    pos, _ = _attached_poses(Re, pe, robot.body_link, robot.body_R, robot.body_p)
    return _link_wrenches(robot, pos, f_ext)


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
    return rnea(robot, q, qd, torch.zeros_like(qd))


def gravity_torques(robot, q: Tensor) -> Tensor:
    """Torques (..., n_dof) holding the arm still against gravity: b(q, 0)."""
    return bias_forces(robot, q, torch.zeros_like(q))


def mass_matrix(robot, q: Tensor) -> Tensor:
    """Joint-space inertia matrix M(q) (..., n_dof, n_dof) including armature (CRBA)."""
    R, p = link_poses(robot, q)
    return _crba_vec(robot, _world_params(robot, R, p), motion_subspace(robot, R, p))


class _ScrewKinematics(torch.autograd.Function):
    """(S, W) = joint motion subspaces and packed world inertial parameters of every link
    (..., n, 6) and (..., n, 13) from q, with a closed-form backward.

    Every world-frame quantity of link i moves under joint j (an ancestor-or-self of i) as the
    body does under the unit screw ``S_j = (w, v)``: material points get ``dx = w x x + v``, so
    dS_i = S_j x S_i (motion cross product), dh_i = w x h_i + m_i v and
    dI_i = [w]x I_i - I_i [w]x + 2 (h_i . v) 1 - v h_i^T - h_i v^T (I about the world origin).
    Contracting with the upstream gradients (G_S, G_h, G_I) gives a spatial force per link,
    and ``grad q_j = S_j . sum_{i in subtree(j)} wrench_i`` (one descendant sum) replaces
    differentiating the 4x4 transform chain and the inertia rotations. The backward uses
    differentiable ops on the saved outputs (so it can itself be differentiated).
    """

    @staticmethod
    def forward(ctx, q, robot):
        with torch.no_grad():
            R, p = link_poses(robot, q)
            S = motion_subspace(robot, R, p)
            W = _world_params(robot, R, p)
        ctx.robot = robot
        ctx.q_shape = q.shape
        ctx.save_for_backward(S, W)
        return S, W

    @staticmethod
    def backward(ctx, gS, gW):
        S, W = ctx.saved_tensors
        if gS is None:
            gS = torch.zeros_like(S)
        if gW is None:
            gW = torch.zeros_like(W)
        sw, sv = S.split(3, -1)
        m, h, I = W.split([1, 3, 9], -1)
        gw, gv = gS.split(3, -1)
        gh, gI = gW[..., 1:4], gW[..., 4:].unflatten(-1, (3, 3))
        # only the symmetric part of G_I acts on the symmetric dI: with G2 = G_I + G_I^T and
        # B2 = G2 I, tr([w]x (I G_I - G_I I)) = w . (B2_21 - B2_12, B2_02 - B2_20, B2_10 - B2_01)
        # and the linear term needs G2 h: one product G2 [I | h] (3 x 4), then one gather
        C = ((gI + gI.transpose(-1, -2)) @ torch.cat([I.unflatten(-1, (3, 3)), h[..., None]], -1))
        g = C.flatten(-2)[..., _SCREW_GATHER]
        kap, g2h = g[..., :3] - g[..., 3:6], g[..., 6:]
        tr = gW[..., _TRACE_IDX].sum(-1, keepdim=True)
        c0, c1, c2, c3 = cross(torch.stack([sw, sv, sw, h], -2),
                               torch.stack([gw, gv, gv, gh], -2)).unbind(-2)
        ang = c0 + c1 + c3 + kap
        lin = torch.addcmul(c2 - g2h, m, gh) + 2.0 * tr * h
        wrench = torch.cat([ang, lin], -1)
        gq = (S * _sum_descendants(ctx.robot, wrench)).sum(-1)
        return gq.sum_to_size(ctx.q_shape), None


# flat (3 x 4) indices of B2_21, B2_02, B2_10 | B2_12, B2_20, B2_01 | (G2 h)_0..2; trace of G_I in W
_SCREW_GATHER = [9, 2, 4, 6, 8, 1, 3, 7, 11]
_TRACE_IDX = [4, 8, 12]
_KINEMATIC_FIELDS = ("q_ref", "T_cos", "T_sin", "T_const", "T_slide", "pi_link")


def _subspaces_and_params(robot, q: Tensor) -> tuple[Tensor, Tensor]:
    """(S, W) for the dynamics; the closed-form backward of :class:`_ScrewKinematics` when q
    needs a gradient and no kinematic constant or link inertia of ``robot`` does."""
    if (torch.is_grad_enabled() and q.requires_grad
            and not any(getattr(robot, n).requires_grad for n in _KINEMATIC_FIELDS)):
        return _ScrewKinematics.apply(q, robot)
    R, p = link_poses(robot, q)
    return motion_subspace(robot, R, p), _world_params(robot, R, p)


class _CrbaSolve(torch.autograd.Function):
    """x = M(S, W)^{-1} force with M from :func:`_crba_vec` (armature included, plus a constant
    diagonal ``diag`` when given), built
    without a graph; the backward differentiates ``M`` matrix-free.

    For u = M^{-1} g: grad force = u and grad M = -u x^T, and u^T M x = sum_l <V^u_l, I_l V^x_l>
    (+ the constant diagonal) with V^y_l = sum_{j ancestor-or-self of l} S_j y_j. So
    grad S_j = -(u_j Fx_j + x_j Fu_j) with Fy_j = sum_{l in subtree(j)} I_l V^y_l, and for
    link l: grad m = -v_u . v_x, grad h = -(v_x x w_u + v_u x w_x), grad I_O = -w_u w_x^T.
    """

    @staticmethod
    def forward(ctx, force, S, W, robot, diag):
        with torch.no_grad():
            M = _crba_vec(robot, W, S)
            if diag is not None:
                M = M + torch.diag_embed(diag)
            shape = torch.broadcast_shapes(M.shape[:-2], force.shape[:-1])
            LU, piv = torch.linalg.lu_factor(M.expand(*shape, *M.shape[-2:]))
            x = torch.linalg.lu_solve(LU, piv, force.expand(*shape, M.shape[-1])[..., None])
            x = x[..., 0]
        ctx.robot = robot
        ctx.shapes = (force.shape, S.shape, W.shape)
        ctx.save_for_backward(LU, piv, x, S, W)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        LU, piv, x, S, W = ctx.saved_tensors
        robot = ctx.robot
        u = torch.linalg.lu_solve(LU, piv, g[..., None])[..., 0]
        ux = torch.stack([u, x], -2)  # (..., 2, n)
        V = _sum_ancestors(robot, S.unsqueeze(-3) * ux[..., None])  # (..., 2, n, 6)
        w, v = V.split(3, -1)
        m, h, I = W.split([1, 3, 9], -1)
        m, h, I = m.unsqueeze(-3), h.unsqueeze(-3), I.unflatten(-1, (3, 3)).unsqueeze(-4)
        Iw = (I @ w[..., None])[..., 0]
        hv, hw = cross(h.unsqueeze(-2), torch.stack([v, w], -2)).unbind(-2)
        F = _sum_descendants(robot, torch.cat([Iw + hv, m * v - hw], -1))  # (..., 2, n, 6)
        Fu, Fx = F.unbind(-3)
        gS = -(u[..., None] * Fx + x[..., None] * Fu)
        wu, wx = w.unbind(-3)
        vu, vx = v.unbind(-3)
        gm = -(vu * vx).sum(-1, keepdim=True)
        gh = -(cross(vx, wu) + cross(vu, wx))
        gI = -(wu[..., :, None] * wx[..., None, :]).flatten(-2)
        gW = torch.cat([gm, gh, gI], -1)
        fs, ss, ws = ctx.shapes
        return u.sum_to_size(fs), gS.sum_to_size(ss), gW.sum_to_size(ws), None, None


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


class _SymSolve(torch.autograd.Function):
    """x = A^{-1} b for symmetric A (..., n, n), b (..., n); backward without transposes:
    grad_b = A^{-1} g, grad_A = -grad_b x^T (A = A^T).

    Under ``create_graph`` (second derivatives) the backward is written with differentiable
    torch ops, grad_b = A^{-T} g through ``torch.linalg.solve``, so that its own derivative is
    exact for any perturbation of A (not only symmetric ones)."""

    @staticmethod
    def forward(ctx, A, b):
        LU, piv = torch.linalg.lu_factor(A)
        x = torch.linalg.lu_solve(LU, piv, b[..., None])[..., 0]
        ctx.save_for_backward(A, LU, piv, x)
        ctx.shapes = (A.shape, b.shape)
        return x

    @staticmethod
    def backward(ctx, g):
        A, LU, piv, x = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: differentiable ops
            gb = torch.linalg.solve(A.mT, g[..., None])[..., 0]
        else:
            gb = torch.linalg.lu_solve(LU, piv, g[..., None])[..., 0]
        gA = -gb[..., :, None] * x[..., None, :] if ctx.needs_input_grad[0] else None
        if gA is not None:
            gA = gA.sum_to_size(ctx.shapes[0])
        return gA, gb.sum_to_size(ctx.shapes[1]) if ctx.needs_input_grad[1] else None


def solve_symmetric(A: Tensor, b: Tensor) -> Tensor:
    """Solve A x = b for symmetric positive definite A (..., n, n), b (..., n) -> x (..., n).

    Batched LU (faster than a Cholesky solve for batches of small matrices in torch on CPU)
    with a backward pass that exploits the symmetry; twice differentiable (second derivatives
    through differentiable ops).
    """
    shape = torch.broadcast_shapes(A.shape[:-2], b.shape[:-1])
    A = A.expand(*shape, *A.shape[-2:])
    b = b.expand(*shape, b.shape[-1])
    if not torch.is_grad_enabled() or not (A.requires_grad or b.requires_grad):
        return torch.linalg.solve(A, b[..., None])[..., 0]
    return _SymSolve.apply(A, b)


def forward_dynamics(robot, q: Tensor, qd: Tensor, tau: Tensor,
                     f_ext: Tensor | None = None) -> Tensor:
    """Joint accelerations qdd (..., n_dof) [rad/s^2] from applied torques tau (..., n_dof).

    Solves M qdd = tau - b + J^T f_ext with :func:`solve_symmetric`; passive torques are not
    added (pass ``tau + passive_torques(robot, qd)`` for those).
    """
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
