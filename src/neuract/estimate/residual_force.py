"""Model-based residual: external torques from inverse dynamics, mapped through J^T.

``M(q) qdd + b(q, qd) = tau_motor + tau_passive(qd) + tau_ext`` gives

    tau_ext = inverse_dynamics(q, qd, qdd) - tau_motor - tau_passive(qd),

the torque the environment applies on the robot (so the motor torque in excess of the
rigid-body model, ``tau_motor - inverse_dynamics``, is ``-tau_ext`` up to passive terms). Unlike
the momentum observer this needs the joint acceleration; when it is not given it is
differentiated from ``qd`` with central differences (non-causal, noise-amplifying: filter
``qd`` first on real telemetry, e.g. with ``scipy.signal.savgol_filter``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import Tensor

from neuract.data.trajectory import check_time
from neuract.errors import SchemaError
from neuract.estimate.momentum_observer import _check_joint, _tensor, torque_to_force

__all__ = ["differentiate", "residual_force", "residual_torques"]


def differentiate(x: Any, t: Any) -> np.ndarray:
    """Central-difference time derivative of x (..., T, n) sampled at t (T,) [s] (one-sided
    at the ends); works with non-uniform sampling."""
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    if t.ndim != 1 or x.ndim < 2 or x.shape[-2] != t.shape[0] or t.shape[0] < 2:
        raise SchemaError(f"x has shape {x.shape} and t {t.shape}; expected (..., T, n) and "
                          "(T,) with T >= 2")
    check_time(t, "differentiate")
    return np.gradient(x, t, axis=-2)


def residual_torques(robot, q: Any, qd: Any, tau: Any, qdd: Any = None, t: Any = None,
                     passive: bool = True) -> Tensor:
    """tau_ext (..., T, n_dof) [N m] = inverse_dynamics(q, qd, qdd) - tau - passive(qd).

    q, qd, tau: (..., T, n_dof) [rad, rad/s, N m]; qdd: (..., T, n_dof) [rad/s^2], or None to
    differentiate qd over the sample times t (T,) [s].
    """
    if qdd is None:
        if t is None:
            raise SchemaError("residual_torques needs qdd or the sample times t to "
                              "differentiate qd")
        qd_np = qd.detach().cpu().numpy() if isinstance(qd, Tensor) else qd
        qdd = differentiate(qd_np, t)
    q, qd, qdd, tau = (_tensor(x, robot, n) for x, n in
                       ((q, "q"), (qd, "qd"), (qdd, "qdd"), (tau, "tau")))
    for x, n in ((q, "q"), (qd, "qd"), (qdd, "qdd"), (tau, "tau")):
        _check_joint(x, robot, n)
        if x.shape != q.shape:
            raise SchemaError(f"{n} has shape {tuple(x.shape)}; expected {tuple(q.shape)} "
                              "like q")
    res = robot.inverse_dynamics(q, qd, qdd) - tau
    if passive:
        res = res - robot.passive_torques(qd)
    return res


def residual_force(robot, q: Any, qd: Any, tau: Any, site: str | int, qdd: Any = None,
                   t: Any = None, passive: bool = True, joints: Any = None,
                   damping: float = 1e-3) -> tuple[Tensor, Tensor]:
    """End-effector force (..., T, 3) [N] and tau_ext (..., T, n_dof) [N m] from the residual.

    See :func:`residual_torques` and :func:`~neuract.estimate.torque_to_force`.
    """
    tau_ext = residual_torques(robot, q, qd, tau, qdd, t, passive)
    q_t = _tensor(q, robot, "q")
    return torque_to_force(robot, q_t, tau_ext, site, joints, damping), tau_ext
