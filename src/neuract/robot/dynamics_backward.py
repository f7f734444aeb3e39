"""Closed-form backward passes of the dynamics (``torch.autograd.Function``): the kinematics
and world inertial parameters from q, the CRBA solve, and the symmetric linear solve; used by
:mod:`neuract.robot.dynamics` (same values as plain autograd, fewer operations)."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from neuract.robot.kinematics import link_poses, motion_subspace
from neuract.robot.rigid_body import _crba_vec, _sum_ancestors, _sum_descendants, _world_params
from neuract.robot.spatial import cross


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
