"""The physics channels at one pose from MuJoCo's C functions, torch-free: the joint torque
that holds the arm against gravity and the end-effector site's linear Jacobian
(:mod:`neuract.neuralactuator.physics` checks them against the torch arm model). An export
stores the arm's compiled MuJoCo model (:func:`arm_binary`), which :func:`arm_from_binary`
reads back where no torch or robot description is installed."""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path

import mujoco
import numpy as np

from neuract.errors import ConfigError


class MjPose:
    """``pose(q)`` with q: (n,) [rad] returns ``(tau_gravity (n,), jac (3, n))`` of the
    MuJoCo model ``mj`` with end-effector site ``site`` (``mj_kinematics``, ``mj_comPos``,
    ``mj_rne`` at rest, ``mj_jacSite``): arrays owned by ``pose`` (the next call overwrites
    them: copy what you keep)."""

    backend = "mujoco"

    def __init__(self, mj: mujoco.MjModel, site: str):
        sid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_SITE, str(site))
        if sid < 0:
            raise ConfigError(f"physics_site={site!r} is not a site of the MuJoCo arm model")
        self.n = mj.nv
        self.g = np.zeros(self.n)
        self.jac = np.zeros((3, self.n))
        self.model = mj
        """the MuJoCo model"""
        self._mj, self._data, self._sid = mj, mujoco.MjData(mj), sid
        self._fns = (mujoco.mj_kinematics, mujoco.mj_comPos, mujoco.mj_rne, mujoco.mj_jacSite)

    def __call__(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        kin, com, rne, jac_site = self._fns
        d = self._data
        d.qpos[:] = q
        kin(self._mj, d)
        com(self._mj, d)
        rne(self._mj, d, 0, self.g)  # qvel is zero: the bias is gravity alone
        jac_site(self._mj, d, self.jac, None, self._sid)
        return self.g, self.jac


def arm_binary(mj: mujoco.MjModel) -> str:
    """The compiled model as MuJoCo's binary format (``mj_saveModel``), base64 text."""
    buf = np.zeros(mujoco.mj_sizeModel(mj), np.uint8)
    mujoco.mj_saveModel(mj, None, buf)
    return base64.b64encode(buf.tobytes()).decode("ascii")


def arm_from_binary(text: str) -> mujoco.MjModel:
    """The model :func:`arm_binary` wrote (MuJoCo reads its binary format from a file)."""
    with tempfile.TemporaryDirectory() as td:
        path = Path(td) / "arm.mjb"
        path.write_bytes(base64.b64decode(text.encode("ascii")))
        return mujoco.MjModel.from_binary_path(str(path))


__all__ = ["MjPose", "arm_binary", "arm_from_binary"]
