"""Many arms in one MuJoCo model: every row of a batched environment is its own copy of the
arm (its own kinematic tree, joints, payload body and actuators, names prefixed ``r<e>/``),
so one call of MuJoCo's C pipeline computes all rows at once instead of a Python loop of
per-row calls. Contacts are off in the twin's models, so the copies never interact.

:class:`BatchModel` holds the index maps: ``qadr`` / ``dadr`` (E, n) each row's servo joints'
qpos / dof addresses, ``aadr`` (E, n) its actuators (the shipped servo's, when built with
``shipped``), ``ee`` (E,) its payload body; :meth:`BatchModel.mass_bias` gives each row's
joint-space mass matrix (E, n, n) and bias forces (E, n).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from neuract.errors import ConfigError
from neuract.twin.model import PAYLOAD_BODY, model_spec


@dataclass
class BatchModel:
    model: mujoco.MjModel
    data: mujoco.MjData
    joint_names: list[str]
    ranges: np.ndarray  # (n, 2)
    qadr: np.ndarray  # (E, n)
    dadr: np.ndarray  # (E, n)
    aadr: np.ndarray | None  # (E, n) actuators, or None
    ee: np.ndarray  # (E,) payload bodies
    m_idx: np.ndarray  # (E, K) entries of data.M holding each row's mass matrix
    m_rc: tuple[np.ndarray, np.ndarray]  # (K,) row and column of each entry in the block

    @property
    def E(self) -> int:
        return len(self.qadr)

    @property
    def n(self) -> int:
        return len(self.joint_names)

    def mass_bias(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's mass matrix (E, n, n) (armature included) and bias forces (E, n)
        (gravity + Coriolis) at positions ``q`` and velocities ``qd`` (E, n)."""
        m, d = self.model, self.data
        d.qpos[self.qadr] = q
        d.qvel[self.dadr] = qd
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_crb(m, d)
        mujoco.mj_comVel(m, d)
        bias = np.empty(m.nv)
        mujoco.mj_rne(m, d, 0, bias)
        vals = d.M[self.m_idx]  # (E, K)
        M = np.zeros((self.E, self.n, self.n))
        r, c = self.m_rc
        M[:, r, c] = vals
        M[:, c, r] = vals
        return M, bias[self.dadr]


def _ids(model, kind, names) -> np.ndarray:
    out = [mujoco.mj_name2id(model, kind, nm) for nm in names]
    if min(out) < 0:
        raise ConfigError(f"batched model: missing {[n for n, i in zip(names, out) if i < 0]}")
    return np.array(out)


def _block_entries(model: mujoco.MjModel, dadr: np.ndarray) -> tuple:
    """Which entries of ``data.M`` hold the mass-matrix block of dofs ``dadr`` (n,), found by
    probing MuJoCo's own sparse-to-dense conversion (layout-independent)."""
    d = mujoco.MjData(model)
    full = np.zeros((model.nv, model.nv))
    idx, rows, cols = [], [], []
    pos = {int(a): i for i, a in enumerate(dadr)}
    for k in range(model.nM):
        d.M[:] = 0.0
        d.M[k] = 1.0
        mujoco.mj_fullM(model, d, full)
        nz = np.argwhere(full != 0)
        for r, c in nz:
            if r >= c and int(r) in pos and int(c) in pos:
                idx.append(k)
                rows.append(pos[int(r)])
                cols.append(pos[int(c)])
    return np.array(idx), np.array(rows), np.array(cols)


def replicate(robot: str, physics_hz: float, n_rows: int, shipped: bool = False,
              timestep: float | None = None) -> BatchModel:
    """``n_rows`` copies of the twin model of ``robot`` (see :func:`model_spec`) in one
    compiled model; ``timestep`` [s] overrides the physics step."""
    if not (isinstance(n_rows, int) and n_rows >= 1):
        raise ConfigError(f"n_rows = {n_rows!r}; expected an integer >= 1")
    parent = mujoco.MjSpec()
    names: list[str] = []
    ranges = np.zeros((0, 2))
    for e in range(n_rows):
        child, names, ranges = model_spec(robot, physics_hz, shipped=shipped)
        if e == 0:
            parent.option.timestep = timestep or child.option.timestep
            parent.option.integrator = child.option.integrator
            parent.option.disableflags = child.option.disableflags
            parent.option.gravity = child.option.gravity
        frame = parent.worldbody.add_frame()
        frame.pos = [2.0 * e, 0.0, 0.0]
        parent.attach(child, prefix=f"r{e}/", frame=frame)
    model = parent.compile()
    J = mujoco.mjtObj.mjOBJ_JOINT
    jid = np.stack([_ids(model, J, [f"r{e}/{nm}" for nm in names]) for e in range(n_rows)])
    qadr, dadr = model.jnt_qposadr[jid], model.jnt_dofadr[jid]
    aadr = None
    if shipped:
        A = mujoco.mjtObj.mjOBJ_ACTUATOR
        aadr = np.stack([_ids(model, A, [f"r{e}/{nm}" for nm in names]) for e in range(n_rows)])
    ee = _ids(model, mujoco.mjtObj.mjOBJ_BODY, [f"r{e}/{PAYLOAD_BODY}" for e in range(n_rows)])
    one = model if n_rows == 1 else replicate(robot, physics_hz, 1, shipped).model
    idx0, rows, cols = _block_entries(one, one.jnt_dofadr[_ids(one, J, [f"r0/{nm}" for nm
                                                                       in names])])
    base = one.dof_Madr[one.jnt_dofadr[_ids(one, J, ["r0/" + names[0]])][0]]
    offs = model.dof_Madr[dadr[:, 0]] - base  # each tree's entries follow the first's layout
    m_idx = idx0[None, :] + offs[:, None]
    return BatchModel(model, mujoco.MjData(model), list(names), ranges, qadr, dadr, aadr, ee,
                      m_idx, (rows, cols))


__all__ = ["BatchModel", "replicate"]
