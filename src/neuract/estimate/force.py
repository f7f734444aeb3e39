"""Force baselines as estimators over trajectories (for :func:`neuract.eval.evaluate_estimator`).

``force_estimator(robot, site, method)`` returns ``est(traj) -> {"ee_force", "tau_ext",
"contact_prob"}`` using the momentum observer or the model-based residual. The motor torque
comes from ``torque(traj)`` (e.g. ``lambda tr: kt * tr["current"]``, the linear tau = Kt I
baseline, or an identified actuator model) or, by default, from a measured ``tau`` channel
(twin ground truth, torque sensors). The contact gate of these baselines fires where the
estimated force magnitude exceeds ``contact_threshold`` [N].

``passive`` defaults to False here: the torque is taken as the net torque the actuator applies
at the joint, after its own friction (the twin's ground truth ``tau``, and actuator models
that include friction). Set it True when ``torque`` is a motor-side torque (e.g. Kt I) and the
robot description's joint damping/friction should be accounted for as well. On twin data
(SO-101, push/lift/free, true ``tau``) passive=True would subtract the description's
damping a second time and adds ~2 N of error without contact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from neuract.errors import ConfigError, SchemaError
from neuract.estimate.momentum_observer import momentum_observer, torque_to_force
from neuract.estimate.residual_force import differentiate, residual_torques

__all__ = ["FORCE_METHODS", "force_estimator"]

FORCE_METHODS = ("observer", "residual")


def force_estimator(robot, site: str | int, method: str = "observer",
                    torque: Callable[[Any], Any] | None = None, gain: float = 50.0,
                    passive: bool = False, joints: Sequence[str] | None = None,
                    damping: float = 1e-3, contact_threshold: float = 1.0
                    ) -> Callable[[Any], dict[str, np.ndarray]]:
    """Build an estimator ``est(traj)`` (estimator mode) for a force baseline.

    robot: :class:`~neuract.robot.Robot` whose joints match the trajectories'; site: end-effector
    site; method: ``"observer"`` (generalized momentum observer, bandwidth ``gain`` [1/s]) or
    ``"residual"`` (inverse dynamics with qdd differentiated from qd); joints: joints used in
    the J^T mapping (default all); contact_threshold: gate threshold on |f| [N].
    """
    if method not in FORCE_METHODS:
        raise ConfigError(f"unknown force method {method!r}; accepted: {list(FORCE_METHODS)}")

    def est(traj) -> dict[str, np.ndarray]:
        if tuple(traj.meta.joint_names) != tuple(robot.joint_names):
            raise SchemaError(f"trajectory {traj.meta.name!r} has joints "
                              f"{list(traj.meta.joint_names)}; robot {robot.name!r} has "
                              f"{list(robot.joint_names)}")
        if torque is not None:
            tau = np.asarray(torque(traj), dtype=np.float64)
        elif "tau" in traj:
            tau = np.asarray(traj["tau"], dtype=np.float64)
        else:
            raise SchemaError(f"trajectory {traj.meta.name!r} has no measured 'tau'; pass "
                              "torque=callable(traj) -> (T, n) motor torque [N m] (e.g. "
                              "Kt * current)")
        t, q = traj["t"], traj["q"]
        qd = traj["qd"] if "qd" in traj else differentiate(q, t)
        if method == "observer":
            tau_ext = momentum_observer(robot, q, qd, tau, t=t, gain=gain, passive=passive)
        else:
            tau_ext = residual_torques(robot, q, qd, tau, t=t, passive=passive)
        f = torque_to_force(robot, q, tau_ext, site, joints, damping)
        f = f.detach().cpu().numpy()
        return {"ee_force": f, "tau_ext": tau_ext.detach().cpu().numpy(),
                "contact_prob": (np.linalg.norm(f, axis=-1) > contact_threshold).astype(float)}

    return est
