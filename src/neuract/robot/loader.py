"""Build a :class:`~neuract.robot.model.Robot` from MJCF/URDF through MuJoCo's parser.

The MuJoCo body tree is turned into one *link* per degree of freedom (hinge or slide joint):

- link ``i`` has a joint frame whose z axis is the joint axis and whose origin is the joint
  anchor; ``Rt[i], pt[i]`` place that frame (at q = qpos0) in the frame of the parent link
  (or the world);
- bodies without joints are welded: their inertia is folded into the link they hang from
  (bodies welded to the world do not move and carry no dynamics);
- a body with several joints becomes a chain of links, the intermediate ones massless.

Each MuJoCo body and site remembers the link it rides on and its fixed pose in that link, so
forward kinematics and Jacobians are reported for every body/site of the original model.

Taken from the model: the tree, joint axes/anchors/reference positions, body frames, masses,
COMs, full inertias (``body_iquat`` + ``body_inertia``), armature, damping, frictionloss,
joint ranges, gravity and sites. Not modelled: joint springs (a warning is raised), tendons,
equality constraints (e.g. a coupled gripper), contacts, joint-limit forces and actuators
(actuator models live in :mod:`neuract.actuators`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import torch

from neuract.errors import RobotModelError
from neuract.robot.bundled import bundled_path
from neuract.robot.model import Robot
from neuract.robot.spatial import pi_from_com, pi_transform_matrix, transform_pi

__all__ = ["load_mj_model", "load_robot", "robot_from_mj_model"]

_SUPPORTED = {int(mujoco.mjtJoint.mjJNT_HINGE): "hinge", int(mujoco.mjtJoint.mjJNT_SLIDE): "slide"}


def _quat2mat(quat: np.ndarray) -> np.ndarray:
    out = np.zeros(9)
    mujoco.mju_quat2Mat(out, np.asarray(quat, dtype=np.float64))
    return out.reshape(3, 3)


def _z_to(axis: np.ndarray) -> np.ndarray:
    """A rotation matrix whose third column is the unit vector ``axis``."""
    a = axis / np.linalg.norm(axis)
    z = np.array([0.0, 0.0, 1.0])
    c = float(a @ z)
    if c > 1.0 - 1e-12:
        return np.eye(3)
    if c < -1.0 + 1e-12:
        return np.diag([1.0, -1.0, -1.0])
    k = np.cross(z, a)
    s = np.linalg.norm(k)
    k = k / s
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + s * K + (1.0 - c) * K @ K


def _compose(Ta: tuple, Tb: tuple) -> tuple:
    (Ra, pa), (Rb, pb) = Ta, Tb
    return Ra @ Rb, pa + Ra @ pb


def _strip_meshes(spec: mujoco.MjSpec, source: str) -> None:
    mesh_geoms = [g for g in spec.geoms if g.type == mujoco.mjtGeom.mjGEOM_MESH]
    inferred = sorted(
        {g.parent.name or "<unnamed>" for g in mesh_geoms if not g.parent.explicitinertial}
    )
    for g in mesh_geoms:
        spec.delete(g)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    msg = f"{source}: mesh files missing; {len(mesh_geoms)} mesh geoms dropped"
    if inferred:
        msg += (f"; bodies {inferred} have no explicit <inertial>, their mass/inertia now come "
                "from the remaining geoms only")
    warnings.warn(msg, stacklevel=3)


def load_mj_model(name_or_path: str | Path | mujoco.MjModel) -> mujoco.MjModel:
    """Compile an MJCF/URDF file (or a bundled robot name) into an ``mujoco.MjModel``.

    When mesh files referenced by the description are missing, mesh geoms are dropped with a
    warning (inertials declared in the file are kept, so dynamics are unaffected).
    """
    if isinstance(name_or_path, mujoco.MjModel):
        return name_or_path
    text = str(name_or_path)
    path = Path(text).expanduser()
    if not path.is_file():
        if path.suffix.lower() in (".xml", ".urdf", ".mjcf") or "/" in text:
            raise RobotModelError(f"robot description file {text!r} does not exist")
        path = bundled_path(text)  # raises with the list of known names
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except ValueError as exc:
        raise RobotModelError(f"cannot parse robot description {path}: {exc}") from None
    try:
        return spec.compile()
    except ValueError as exc:
        if "Error opening file" not in str(exc) or not spec.meshes:
            raise RobotModelError(f"cannot compile robot description {path}: {exc}") from None
    try:
        spec = mujoco.MjSpec.from_file(str(path))
        _strip_meshes(spec, str(path))
        return spec.compile()
    except ValueError as exc:
        raise RobotModelError(f"cannot compile robot description {path}: {exc}") from None


def _oname(mj: mujoco.MjModel, kind, i: int) -> str:
    return mujoco.mj_id2name(mj, kind, i) or f"{kind.name[4:].lower()}{i}"


def _check_joints(mj: mujoco.MjModel, name: str) -> int:
    """The number of joints, after refusing unsupported ones and warning about springs."""
    for j in range(mj.njnt):
        jt = int(mj.jnt_type[j])
        if jt not in _SUPPORTED:
            kind = mujoco.mjtJoint(jt).name[6:].lower()
            body = _oname(mj, mujoco.mjtObj.mjOBJ_BODY, int(mj.jnt_bodyid[j]))
            raise RobotModelError(
                f"joint {_oname(mj, mujoco.mjtObj.mjOBJ_JOINT, j)!r} (body {body!r}) is a {kind} "
                "joint; only hinge and slide joints are supported (fixed-base serial/tree arms)"
            )
    stiff = [_oname(mj, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(mj.njnt)
             if mj.jnt_stiffness[j]]
    if stiff:
        warnings.warn(f"joints {stiff} have spring stiffness, which neuract's dynamics do not "
                      "model (passive torques are damping and dry friction only)", stacklevel=4)
    n = mj.njnt
    if n == 0:
        raise RobotModelError(f"robot {name or mj}: no hinge/slide joints, nothing to simulate")
    assert mj.nv == n and mj.nq == n
    return n


@dataclass
class _Links:
    """The link tree built from the MuJoCo bodies (one link per joint, module doc)."""

    end_link: dict[int, int]  # body -> link its frame rides on (after its own joints)
    end_T: dict[int, tuple[np.ndarray, np.ndarray]]  # body -> its frame's pose in that link
    parent: list[int]  # per link: parent link (-1: world)
    Rt: list[np.ndarray]  # per link: joint frame rotation in the parent link (q = qpos0)
    pt: list[np.ndarray]  # ... and position
    is_hinge: list[bool]
    owner: list[int]  # per link: the body whose joint it is
    pi_link: np.ndarray  # (n, 10) inertial parameters of the bodies folded into each link


def _link_tree(mj: mujoco.MjModel, n: int) -> _Links:
    """Walk the bodies in order: one link per joint, welded bodies folded into their link."""
    ident = (np.eye(3), np.zeros(3))
    end_link = {0: -1}
    end_T = {0: ident}
    parent, Rt, pt, is_hinge, owner = [], [], [], [], []
    pi_link = np.zeros((n, 10))
    for b in range(1, mj.nbody):
        pb = int(mj.body_parentid[b])
        link = end_link[pb]
        frame = _compose(end_T[pb], (_quat2mat(mj.body_quat[b]), mj.body_pos[b].copy()))
        for j in range(mj.body_jntadr[b], mj.body_jntadr[b] + mj.body_jntnum[b]):
            Ra = _z_to(mj.jnt_axis[j])
            Tj = _compose(frame, (Ra, mj.jnt_pos[j].copy()))
            assert j == len(parent), "joints are not in topological order"
            parent.append(link)
            Rt.append(Tj[0])
            pt.append(Tj[1])
            is_hinge.append(_SUPPORTED[int(mj.jnt_type[j])] == "hinge")
            owner.append(b)
            link = j
            frame = (Ra.T, -Ra.T @ mj.jnt_pos[j])
        end_link[b], end_T[b] = link, frame
        if link >= 0 and mj.body_mass[b] > 0:
            Ri = _quat2mat(mj.body_iquat[b])
            pi_b = pi_from_com(
                torch.tensor(float(mj.body_mass[b]), dtype=torch.float64),
                torch.tensor(mj.body_ipos[b]),
                torch.tensor(Ri @ np.diag(mj.body_inertia[b]) @ Ri.T),
            )
            pi_link[link] += transform_pi(
                pi_b, torch.tensor(frame[0]), torch.tensor(frame[1])
            ).numpy()
    return _Links(end_link, end_T, parent, Rt, pt, is_hinge, owner, pi_link)


def _pi_ref_to_link(links: _Links, n: int) -> torch.Tensor:
    """Map from the frame in which each link's inertial parameters are reported (the owning
    body's frame for the last joint of a body, the joint frame itself for intermediate joints)
    to the link frame."""
    ref_R, ref_p = np.tile(np.eye(3), (n, 1, 1)), np.zeros((n, 3))
    for i in range(n):
        if links.end_link[links.owner[i]] == i:
            ref_R[i], ref_p[i] = links.end_T[links.owner[i]]
    return pi_transform_matrix(torch.tensor(ref_R), torch.tensor(ref_p))


def _attachments(mj: mujoco.MjModel, links: _Links) -> dict[str, np.ndarray]:
    """The link every body and site rides on (-1: world) and its fixed pose in that link."""
    end_link, end_T = links.end_link, links.end_T
    nb = mj.nbody - 1
    body_link = np.array([end_link[b] for b in range(1, mj.nbody)], dtype=np.int64)
    body_R = np.stack([end_T[b][0] for b in range(1, mj.nbody)]) if nb else np.zeros((0, 3, 3))
    body_p = np.stack([end_T[b][1] for b in range(1, mj.nbody)]) if nb else np.zeros((0, 3))
    site_link, site_R, site_p = [], [], []
    for s in range(mj.nsite):
        b = int(mj.site_bodyid[s])
        T = _compose(end_T[b], (_quat2mat(mj.site_quat[s]), mj.site_pos[s].copy()))
        site_link.append(end_link[b])
        site_R.append(T[0])
        site_p.append(T[1])
    return {
        "body_link": body_link, "body_R": body_R, "body_p": body_p,
        "site_link": np.array(site_link, dtype=np.int64),
        "site_R": np.stack(site_R) if site_R else np.zeros((0, 3, 3)),
        "site_p": np.stack(site_p) if site_p else np.zeros((0, 3)),
    }


def _ancestors(parent: list[int]) -> np.ndarray:
    """anc[i, k] = 1 when link k is i or an ancestor of i."""
    n = len(parent)
    anc = np.zeros((n, n))
    for i in range(n):
        k = i
        while k >= 0:
            anc[i, k] = 1.0
            k = parent[k]
    return anc


def _rotation_terms(Rt_a: np.ndarray, hinge: np.ndarray):
    """Constant terms of the local rotation of link i = Rt @ Rz(theta) = cos*Rc + sin*Rs + R0
    (Rc, Rs zero and R0 = Rt for slide joints)."""
    Rc = np.zeros_like(Rt_a)
    Rs = np.zeros_like(Rt_a)
    Rc[hinge, :, 0], Rc[hinge, :, 1] = Rt_a[hinge, :, 0], Rt_a[hinge, :, 1]
    Rs[hinge, :, 0], Rs[hinge, :, 1] = Rt_a[hinge, :, 1], -Rt_a[hinge, :, 0]
    R0 = Rt_a.copy()
    R0[hinge, :, :2] = 0.0
    return Rc, Rs, R0


def _T(x, dt=torch.float64):
    return torch.as_tensor(np.asarray(x), dtype=dt)


def robot_from_mj_model(mj: mujoco.MjModel, *, name: str = "", dtype=torch.float64,
                        device="cpu"):
    """Build the differentiable :class:`Robot` from a compiled MuJoCo model."""
    n = _check_joints(mj, name)
    links = _link_tree(mj, n)
    att = _attachments(mj, links)
    limited = mj.jnt_limited.astype(bool)
    q_lower = np.where(limited, mj.jnt_range[:, 0], -np.inf)
    q_upper = np.where(limited, mj.jnt_range[:, 1], np.inf)
    gravity = mj.opt.gravity.copy()
    if mj.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_GRAVITY):
        gravity[:] = 0.0
    hinge = np.array(links.is_hinge)
    Rt_a = np.stack(links.Rt)
    Rc, Rs, R0 = _rotation_terms(Rt_a, hinge)
    T = _T
    robot = Robot(
        name=name,
        mj_model=mj,
        joint_names=tuple(_oname(mj, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(n)),
        body_names=tuple(_oname(mj, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(1, mj.nbody)),
        site_names=tuple(_oname(mj, mujoco.mjtObj.mjOBJ_SITE, s) for s in range(mj.nsite)),
        link_names=tuple(_oname(mj, mujoco.mjtObj.mjOBJ_BODY, b) for b in links.owner),
        parent=tuple(links.parent),
        is_hinge=torch.as_tensor(hinge),
        q_ref=T(mj.qpos0),
        rot_cos=T(Rc),
        rot_sin=T(Rs),
        rot_const=T(R0),
        pos_const=T(np.stack(links.pt)),
        slide_axis=T(np.where(hinge[:, None], 0.0, Rt_a[:, :, 2])),
        anc=T(_ancestors(links.parent)),
        body_link=torch.as_tensor(np.where(att["body_link"] < 0, n, att["body_link"])),
        body_R=T(att["body_R"]),
        body_p=T(att["body_p"]),
        site_link=torch.as_tensor(np.where(att["site_link"] < 0, n, att["site_link"])),
        site_R=T(att["site_R"]),
        site_p=T(att["site_p"]),
        pi_ref_to_link=_pi_ref_to_link(links, n),
        pi_link=T(links.pi_link),
        armature=T(mj.dof_armature),
        damping=T(mj.dof_damping),
        frictionloss=T(mj.dof_frictionloss),
        gravity=T(gravity),
        q_lower=T(q_lower),
        q_upper=T(q_upper),
    )
    return robot.to(dtype=dtype, device=device)


def load_robot(name_or_path: str | Path | mujoco.MjModel, dtype=torch.float64, device="cpu"):
    """Load a robot by bundled name (``planar2``, ``so101``, ``omx``, ``omx_arm``, ``panda``),
    by MJCF/URDF path, or from an ``mujoco.MjModel``; returns a differentiable :class:`Robot`.

    Raises :class:`~neuract.errors.RobotModelError` for unknown names (listing the known ones),
    malformed files (with MuJoCo's message) and unsupported joints (naming the joint).
    """
    mj = load_mj_model(name_or_path)
    name = "" if isinstance(name_or_path, mujoco.MjModel) else Path(str(name_or_path)).stem
    return robot_from_mj_model(mj, name=name, dtype=dtype, device=device)
