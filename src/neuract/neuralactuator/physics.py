"""Physics channels for estimator-mode NeuralActuator, from the rigid-body arm model.

At each measured pose ``q`` (T, n): ``tau_gravity`` (T, n), the joint torque that holds the
arm against gravity [N m] (``Robot.gravity_torques(q)``), and ``jac_x``, ``jac_y``, ``jac_z``
(T, n), the rows of the end-effector site's linear Jacobian [m/rad] (joint j's column is
``(jac_x[:, j], jac_y[:, j], jac_z[:, j])``). An external end-effector force f adds
``J^T f`` to the joint torques, so with these inputs the force head works with the same
quantities as a model-based observer.

:class:`PoseChannels` computes the same channels one pose at a time for a streaming
estimator, with MuJoCo's C functions (``mj_rne``, ``mj_jacSite``) on the arm's compiled MJCF:
at batch 1 they cost microseconds where the torch model costs a fraction of a millisecond. It
checks at construction that MuJoCo gives the torch model's numbers and falls back to the
torch model where it does not.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import torch

from neuract.errors import ConfigError
from neuract.robot import load_robot
from neuract.robot.loader import load_mj_model
from neuract.runtime.pose import MjPose, arm_binary


@functools.lru_cache(maxsize=4)
def arm_model(name: str):
    """The rigid-body arm ``name`` (bundled name or model path), float64, cached."""

    return load_robot(name, dtype=torch.float64)


def physics_channels(q: np.ndarray, robot: str, site: str, chunk: int = 4096
                     ) -> dict[str, np.ndarray]:
    """``tau_gravity``, ``jac_x``, ``jac_y``, ``jac_z``, each (T, n), for poses q: (T, n)
    [rad] of the arm ``robot`` (bundled name or model path) with end-effector ``site``."""
    model = arm_model(str(robot))
    q = np.asarray(q, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] != model.n_dof:
        raise ConfigError(f"physics robot {robot!r} has {model.n_dof} joints; q has shape "
                          f"{q.shape}")
    if site not in model.site_names:
        raise ConfigError(f"physics_site={site!r} is not a site of {robot!r}; sites: "
                          f"{list(model.site_names)}")
    g, jac = [], []
    with torch.no_grad():
        for s in range(0, len(q), chunk):
            qt = torch.tensor(q[s:s + chunk])
            g.append(model.gravity_torques(qt).numpy())
            jac.append(model.site_jacobian(qt, site)[..., :3, :].numpy())
    J = np.concatenate(jac) if jac else np.zeros((0, 3, model.n_dof))
    return {"tau_gravity": np.concatenate(g) if g else np.zeros((0, model.n_dof)),
            "jac_x": J[:, 0], "jac_y": J[:, 1], "jac_z": J[:, 2]}


MJ_CHECK_TOL = 1e-9
"""largest difference [N m, m/rad] between MuJoCo's and the torch model's physics channels
(per unit of the channel's magnitude above 1) for which :class:`PoseChannels` uses MuJoCo"""


@functools.lru_cache(maxsize=4)
def _mj_model(name: str):
    """The compiled MuJoCo model of the arm ``name`` (bundled name or model path), cached
    (its mesh warnings are the torch model's, already given by :func:`arm_model`)."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_mj_model(name)


class PoseChannels:
    """:func:`physics_channels` one pose at a time: ``pc(q)`` with q: (n,) [rad] returns
    ``(tau_gravity (n,), jac (3, n))``, arrays owned by ``pc`` (the next call overwrites
    them: copy what you keep).

    MuJoCo computes them (``mj_kinematics``, ``mj_comPos``, ``mj_rne`` at rest,
    ``mj_jacSite``) when the arm's MJCF maps one to one onto the torch model (as many position
    and velocity coordinates as the torch model's joints) and gives its numbers at
    ``check_poses`` random poses within the joint ranges to :data:`MJ_CHECK_TOL`; otherwise
    the torch model does, at batch 1 (:attr:`backend` says which: ``"mujoco"`` or
    ``"torch"``, and :attr:`fallback_reason` why not MuJoCo). ``use_mujoco=False`` asks for
    the torch model."""

    def __init__(self, robot: str, site: str, use_mujoco: bool = True, check_poses: int = 8,
                 seed: int = 0):
        self.robot, self.site = str(robot), str(site)
        model = arm_model(self.robot)
        if self.site not in model.site_names:
            raise ConfigError(f"physics_site={site!r} is not a site of {robot!r}; sites: "
                              f"{list(model.site_names)}")
        self.n = model.n_dof
        self.g = np.zeros(self.n)
        self.jac = np.zeros((3, self.n))
        self.backend, self.fallback_reason = "torch", "asked for the torch model"
        if use_mujoco:
            self.fallback_reason = self._use_mujoco(check_poses, seed)
            if self.fallback_reason is None:
                self.backend = "mujoco"

    def _use_mujoco(self, check_poses: int, seed: int) -> str | None:
        """Set up MuJoCo and check it against the torch model; None when it is used, else
        why not."""
        import mujoco

        try:
            mj = _mj_model(self.robot)
        except Exception as exc:  # noqa: BLE001 (any failure leaves the torch model in use)
            return f"the MuJoCo model does not load ({exc})"
        if not (mj.nq == mj.nv == self.n):
            return (f"the MuJoCo model has nq={mj.nq}, nv={mj.nv}; the torch model {self.n} "
                    "joints")
        if mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_SITE, self.site) < 0:
            return f"the MuJoCo model has no site {self.site!r}"
        self._mj = MjPose(mj, self.site)
        model = arm_model(self.robot)
        lo, hi = model.q_lower.numpy(), model.q_upper.numpy()
        lo = np.where(np.isfinite(lo), lo, -np.pi)
        hi = np.where(np.isfinite(hi), hi, np.pi)
        q = np.random.default_rng(seed).uniform(lo, hi, (check_poses, self.n))
        q = np.concatenate([np.zeros((1, self.n)), q])
        want = physics_channels(q, self.robot, self.site)
        for k in range(len(q)):
            g, jac = self._mj(q[k])
            for got, ref in ((g, want["tau_gravity"][k]),
                             (jac, np.stack([want[c][k] for c in ("jac_x", "jac_y",
                                                                  "jac_z")]))):
                err = np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)
                if not err.max() <= MJ_CHECK_TOL:
                    self._mj = None
                    return (f"MuJoCo differs from the torch model by {err.max():.2e} at pose "
                            f"{q[k].round(3).tolist()}")
        return None

    def __call__(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.backend == "mujoco":
            return self._mj(q)
        ph = physics_channels(np.asarray(q, dtype=np.float64)[None], self.robot, self.site)
        self.g[:] = ph["tau_gravity"][0]
        for i, c in enumerate(("jac_x", "jac_y", "jac_z")):
            self.jac[i] = ph[c][0]
        return self.g, self.jac


def arm_record(robot: str, site: str) -> dict:
    """What an export stores of the arm that computes the physics channels: its name, the
    end-effector site, and where MuJoCo gives the torch model's numbers (checked as
    :class:`PoseChannels` checks) the compiled MuJoCo model (``mjb``: base64 of MuJoCo's
    binary format, with the ``mujoco`` version that wrote it), else ``mjb`` None and
    ``reason``, why not."""
    import mujoco

    pc = PoseChannels(robot, site)
    rec = {"robot": str(robot), "site": str(site), "mujoco": mujoco.__version__,
           "mjb": None, "reason": pc.fallback_reason}
    if pc.backend == "mujoco":
        rec["mjb"] = arm_binary(pc._mj.model)
    return rec


__all__ = ["MJ_CHECK_TOL", "PoseChannels", "arm_record", "physics_channels"]
