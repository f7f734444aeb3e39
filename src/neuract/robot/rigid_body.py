"""The vectorised recursions under :mod:`neuract.robot.dynamics`: packed world-frame link
inertial parameters, RNEA and CRBA over the tree as sums over ancestors / descendants, and
external body wrenches as spatial forces per link (conventions: :mod:`neuract.robot.dynamics`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from neuract.robot.kinematics import _attached_poses, _extend
from neuract.robot.spatial import cross, inertia_from_vec


def _cross_motion(a: Tensor, b: Tensor) -> Tensor:
    """Spatial motion cross product a x b."""
    wa, va, wb, vb = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return torch.cat([cross(wa, wb), cross(wa, vb) + cross(va, wb)], -1)


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
