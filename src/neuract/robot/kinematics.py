"""Forward kinematics and Jacobians: pure functions of (robot, q).

All quantities are in the world frame. Spatial motion vectors ``[omega, v]`` are referred to
the world origin (``v`` is the velocity of the body-fixed point that currently coincides with
the world origin), which makes the tree recursions plain sums over ancestors/descendants.
"""

from __future__ import annotations

import torch
from torch import Tensor

from neuract.errors import RobotModelError
from neuract.robot.spatial import cross

__all__ = [
    "link_transforms",
    "link_poses",
    "motion_subspace",
    "body_poses",
    "site_poses",
    "forward_kinematics",
    "point_jacobian",
    "body_jacobian",
    "site_jacobian",
]


def link_transforms(robot, q: Tensor) -> Tensor:
    """World pose of every joint/link frame as homogeneous transforms (..., n_dof, 4, 4).

    q: (..., n_dof) joint positions [rad or m]. The frame origin is the joint anchor and its
    z axis the joint axis.
    """
    theta = (q - robot.q_ref)[..., None, None]
    T_loc = torch.addcmul(robot.T_const, torch.cos(theta), robot.T_cos)
    T_loc = torch.addcmul(T_loc, torch.sin(theta), robot.T_sin)
    if robot.has_slide:
        T_loc = torch.addcmul(T_loc, theta, robot.T_slide)
    Ts: list[Tensor] = []
    for Ti, par in zip(T_loc.unbind(-3), robot.parent):  # unbind: one stack in backward
        Ts.append(Ti if par < 0 else Ts[par] @ Ti)
    return torch.stack(Ts, -3)


def link_poses(robot, q: Tensor) -> tuple[Tensor, Tensor]:
    """World pose of every link frame: R (..., n_dof, 3, 3) and p (..., n_dof, 3) [m]."""
    R, p = link_transforms(robot, q)[..., :3, :].split([3, 1], -1)
    return R, p[..., 0]


def motion_subspace(robot, R: Tensor, p: Tensor) -> Tensor:
    """World-frame joint motion subspaces ``S`` (..., n_dof, 6), ``[omega, v_O]`` per unit qd."""
    z = R[..., :, 2]
    S_hinge = torch.cat([z, cross(p, z)], -1)
    if not robot.has_slide:
        return S_hinge
    S_slide = torch.cat([torch.zeros_like(z), z], -1)
    return torch.where(robot.is_hinge[:, None], S_hinge, S_slide)


def _extend(robot, R: Tensor, p: Tensor) -> tuple[Tensor, Tensor]:
    """Append the world as a fixed extra link (index n_dof) for welded bodies/sites."""
    eye = torch.eye(3, dtype=R.dtype, device=R.device).expand(*R.shape[:-3], 1, 3, 3)
    zero = torch.zeros((*p.shape[:-2], 1, 3), dtype=p.dtype, device=p.device)
    return torch.cat([R, eye], -3), torch.cat([p, zero], -2)


def _attached_poses(R, p, link_idx, R_off, p_off):
    Rl = R[..., link_idx, :, :]
    return p[..., link_idx, :] + (Rl @ p_off[..., None])[..., 0], Rl @ R_off


def body_poses(robot, q: Tensor) -> tuple[Tensor, Tensor]:
    """World pose of every body (MuJoCo ``xpos``/``xmat``, world body excluded).

    Returns pos: (..., n_bodies, 3) [m] and rot: (..., n_bodies, 3, 3).
    """
    R, p = _extend(robot, *link_poses(robot, q))
    return _attached_poses(R, p, robot.body_link, robot.body_R, robot.body_p)


forward_kinematics = body_poses


def site_poses(robot, q: Tensor) -> tuple[Tensor, Tensor]:
    """World pose of every site: pos (..., n_sites, 3) [m], rot (..., n_sites, 3, 3)."""
    R, p = _extend(robot, *link_poses(robot, q))
    return _attached_poses(R, p, robot.site_link, robot.site_R, robot.site_p)


def point_jacobian(robot, S: Tensor, link: int, point: Tensor) -> Tensor:
    """Jacobian (..., 6, n_dof) of a point fixed to ``link`` (``n_dof`` = the world).

    Rows 0-2: linear velocity of ``point`` (world, (..., 3)); rows 3-5: angular velocity.
    """
    if link < robot.n_dof:
        mask = robot.anc[link]
    else:
        mask = torch.zeros_like(robot.anc[0])
    w = S[..., :3]
    jp = S[..., 3:] + cross(w, point[..., None, :])
    J = torch.cat([jp, w], -1) * mask[:, None]
    return J.transpose(-1, -2)


def _index(names: tuple[str, ...], key: str | int, kind: str) -> int:
    if isinstance(key, int):
        if not 0 <= key < len(names):
            raise IndexError(f"{kind} index {key} out of range (0..{len(names) - 1})")
        return key
    try:
        return names.index(key)
    except ValueError:

        raise RobotModelError(f"unknown {kind} {key!r}; known: {', '.join(names)}") from None


def body_jacobian(robot, q: Tensor, body: str | int) -> Tensor:
    """Jacobian (..., 6, n_dof) of body ``body``'s origin, as ``mj_jacBody``: rows 0-2 = jacp
    (linear velocity of the body origin, world), rows 3-5 = jacr (angular velocity, world)."""
    b = _index(robot.body_names, body, "body")
    return _attached_jacobian(robot, q, int(robot.body_link[b]), robot.body_R[b], robot.body_p[b])


def site_jacobian(robot, q: Tensor, site: str | int) -> Tensor:
    """Jacobian (..., 6, n_dof) of a site, as ``mj_jacSite`` (rows: jacp then jacr)."""
    s = _index(robot.site_names, site, "site")
    return _attached_jacobian(robot, q, int(robot.site_link[s]), robot.site_R[s], robot.site_p[s])


def _attached_jacobian(robot, q: Tensor, link: int, R_off: Tensor, p_off: Tensor) -> Tensor:
    """Jacobian (..., 6, n_dof) of a frame fixed at (R_off, p_off) to link ``link``."""
    R, p = link_poses(robot, q)
    S = motion_subspace(robot, R, p)
    Re, pe = _extend(robot, R, p)
    pos, _ = _attached_poses(Re, pe, link, R_off, p_off)
    return point_jacobian(robot, S, link, pos)
