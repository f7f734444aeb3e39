"""Inertial-parameter regressor: ``rnea(q, qd, qdd) == regressor(q, qd, qdd) @ pi``.

``pi`` stacks 10 parameters per link (one link per joint, in ``robot.link_names`` order):
``[m, m*cx, m*cy, m*cz, Ixx, Iyy, Izz, Ixy, Ixz, Iyz]`` expressed in the frame of the MuJoCo
body that owns the joint (``xpos``/``xmat`` of that body), ``I`` about that frame's origin.
Bodies welded to a link are folded into it. Armature is not part of ``pi``: it adds
``armature * qdd`` separately (see :func:`neuract.robot.dynamics.inverse_dynamics`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from neuract.robot.kinematics import link_poses, motion_subspace
from neuract.robot.rigid_body import _cross_motion
from neuract.robot.spatial import cross, skew

__all__ = ["regressor", "link_regressor"]


def _L(w: Tensor) -> Tensor:
    """(..., 3) -> (..., 3, 6) with I @ w == _L(w) @ [Ixx, Iyy, Izz, Ixy, Ixz, Iyz]."""
    x, y, z = w.unbind(-1)
    o = torch.zeros_like(x)
    return torch.stack(
        [torch.stack([x, o, o, y, z, o], -1), torch.stack([o, y, o, x, o, z], -1),
         torch.stack([o, o, z, o, x, y], -1)],
        -2,
    )


def link_regressor(w: Tensor, v: Tensor, dw: Tensor, dv: Tensor) -> Tensor:
    """Spatial force [n, f] (..., 6, 10) = Y @ pi of one body, all in the body frame.

    w, v: spatial velocity (angular; linear velocity of the frame origin);
    dw, dv: spatial acceleration, all (..., 3).
    """
    la = dv + cross(w, v)
    Sw = skew(w)
    zeros31 = torch.zeros_like(la)[..., None]
    f = torch.cat([la[..., None], skew(dw) + Sw @ Sw, torch.zeros_like(_L(w))], -1)
    n = torch.cat([zeros31, -skew(la), _L(dw) + Sw @ _L(w)], -1)
    return torch.cat([n, f], -2)


def regressor(robot, q: Tensor, qd: Tensor, qdd: Tensor) -> Tensor:
    """Y(q, qd, qdd): (..., n_dof, 10 * n_dof) with ``rnea(q, qd, qdd) = Y @ pi``.

    ``pi = robot.inertial_parameters()`` (gravity included through the base acceleration).
    """
    R, p = link_poses(robot, q)
    S = motion_subspace(robot, R, p)
    anc = robot.anc
    Sqd = S * qd[..., None]
    vel = anc @ Sqd
    acc = anc @ (S * qdd[..., None] + _cross_motion(vel, Sqd)) + robot.base_acc
    Rt = R.transpose(-1, -2)

    def to_local(mv):
        w, v0 = mv[..., :3], mv[..., 3:]
        return (Rt @ w[..., None])[..., 0], (Rt @ (v0 + cross(w, p))[..., None])[..., 0]

    w, v = to_local(vel)
    dw, dv = to_local(acc)
    Yl = link_regressor(w, v, dw, dv)  # (..., n, 6, 10), link frame
    f_w = R @ Yl[..., 3:, :]
    n_w = R @ Yl[..., :3, :] + cross(p[..., None, :], f_w.transpose(-1, -2)).transpose(-1, -2)
    F_w = torch.cat([n_w, f_w], -2)  # (..., k, 6, 10) at the world origin
    Y = torch.einsum("...id,...kdc->...ikc", S, F_w) * anc.transpose(0, 1)[..., None]
    # columns w.r.t. pi in the owning bodies' frames
    Y = torch.einsum("...ikc,kcd->...ikd", Y, robot.pi_ref_to_link)
    return Y.reshape(*Y.shape[:-2], -1)
