"""Generalized momentum observer: sensorless external joint torques from q, qd and tau.

With ``M(q) qdd + C(q, qd) qd + g(q) = tau + tau_ext`` and ``Mdot = C + C^T`` the generalized
momentum ``p = M(q) qd`` obeys ``pdot = tau + C^T qd - g + tau_ext``. The observer (De Luca
and Mattone, 2003)

    r(t) = K [ p(t) - p(0) - integral_0^t (tau + C^T qd - g + r) ds ]

gives ``rdot = K (tau_ext - r)``: each component of ``r`` is ``tau_ext`` through a first-order
low-pass filter of bandwidth ``K`` [1/s]. No joint acceleration is needed.

Implementation notes:
- ``C^T qd - g = Mdot qd - b(q, qd)`` with ``b = C qd + g`` (``robot.bias_forces``), and
  ``Mdot qd = (dM/dq . qd) qd`` evaluated as a central finite difference of ``M`` along ``qd``
  (step ``eps`` [s]): exact up to O(eps^2), no autograd needed.
- Known torques are the motor torques plus, by default, the model's passive torques
  (``robot.passive_torques(qd)``: damping and smoothed dry friction), so ``tau_ext`` is what
  neither the motors nor the joint model explain.
- Discretisation over samples ``k`` with steps ``dt_k``: trapezoidal rule for the known part of
  the integrand and an implicit (backward-Euler) step for the feedback term ``r``, so the
  observer is stable for any gain and sample rate:
  ``r_k = K (p_k - p_0 - I_{k-1} - dt_k (beta_{k-1} + beta_k) / 2) / (1 + K dt_k)``.
- ``tau_ext`` is the torque the environment applies ON the robot (same sign as ``J^T f`` for a
  force ``f`` pushing on the end effector); map it to a force with
  :func:`neuract.estimate.torque_to_force`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from neuract.data.trajectory import check_time
from neuract.errors import ConfigError, SchemaError

__all__ = ["MomentumObserver", "momentum_observer", "momentum_terms", "torque_to_force"]


def _tensor(x: Any, robot, name: str) -> Tensor:
    if isinstance(x, Tensor):
        t = x
    else:  # a copy: trajectory arrays are read-only
        t = torch.from_numpy(np.array(x, dtype=np.float64, copy=True))
    t = t.to(dtype=robot.dtype, device=robot.device)
    if not torch.isfinite(t).all():
        bad = int((~torch.isfinite(t)).sum())
        raise SchemaError(f"{name} holds {bad} non-finite value(s); expected finite numbers")
    return t


def _check_joint(x: Tensor, robot, name: str) -> None:
    if x.ndim < 1 or x.shape[-1] != robot.n_dof:
        raise SchemaError(f"{name} has shape {tuple(x.shape)}; expected (..., {robot.n_dof}) "
                          f"for robot {robot.name!r} ({list(robot.joint_names)})")


def momentum_terms(robot, q: Tensor, qd: Tensor, eps: float | None = None
                   ) -> tuple[Tensor, Tensor]:
    """Generalized momentum ``p = M qd`` and ``C^T qd - g = Mdot qd - b``, both (..., n_dof).

    q, qd: (..., n_dof) [rad, rad/s]. eps: finite-difference step along qd [s] (default
    1e-6 in float64, 1e-3 in float32).
    """
    if eps is None:
        eps = 1e-6 if q.dtype == torch.float64 else 1e-3
    M, b = robot.mass_matrix(q), robot.bias_forces(q, qd)
    Mp = robot.mass_matrix(q + eps * qd)
    Mm = robot.mass_matrix(q - eps * qd)
    mdot_qd = ((Mp - Mm) @ qd[..., None])[..., 0] / (2 * eps)
    p = (M @ qd[..., None])[..., 0]
    return p, mdot_qd - b


def _dt(t: Any, dt: float | None, shape: tuple[int, ...], robot) -> Tensor:
    """(..., T) step lengths [s] (dt[..., 0] unused)."""
    if (t is None) == (dt is None):
        raise ConfigError("give exactly one of t (sample times [s]) or dt (sample period [s])")
    if dt is not None:
        if not (np.isfinite(dt) and dt > 0):
            raise ConfigError(f"dt is {dt}; expected a positive sample period [s]")
        return torch.full(shape, float(dt), dtype=robot.dtype, device=robot.device)
    tt = _tensor(t, robot, "t")
    if tt.shape[-1] != shape[-1]:
        raise SchemaError(f"t has {tt.shape[-1]} samples but q has {shape[-1]}")
    check_time(tt.detach().cpu().numpy(), "momentum observer")
    d = torch.diff(tt, dim=-1)
    return torch.broadcast_to(torch.cat([d[..., :1], d], -1), shape)


def momentum_observer(robot, q: Any, qd: Any, tau: Any, t: Any = None, dt: float | None = None,
                      gain: float | Any = 50.0, passive: bool = True,
                      eps: float | None = None) -> Tensor:
    """Estimated external joint torques r (..., T, n_dof) [N m] over whole trajectories.

    q, qd, tau: (..., T, n_dof) measured positions [rad], velocities [rad/s] and motor torques
    [N m]; t: (T,) or (..., T) sample times [s], or dt: constant period [s]; gain: observer
    bandwidth K [1/s], scalar or (n_dof,); passive: add ``robot.passive_torques(qd)`` to the
    known torques. The estimate starts at r = 0 (the arm is assumed free at the first sample)
    and converges with time constant 1/K.
    """
    q, qd, tau = (_tensor(x, robot, n) for x, n in ((q, "q"), (qd, "qd"), (tau, "tau")))
    for x, n in ((q, "q"), (qd, "qd"), (tau, "tau")):
        _check_joint(x, robot, n)
        if x.ndim < 2 or x.shape != q.shape:
            raise SchemaError(f"{n} has shape {tuple(x.shape)}; expected (..., T, "
                              f"{robot.n_dof}) matching q {tuple(q.shape)}")
    K = _tensor(gain, robot, "gain")
    if (K <= 0).any():
        raise ConfigError(f"observer gain must be positive; got {K.tolist()}")
    steps = _dt(t, dt, q.shape[:-1], robot)[..., None]  # (..., T, 1)
    p, ctqd_g = momentum_terms(robot, q, qd, eps)
    known = tau + (robot.passive_torques(qd) if passive else 0.0)
    beta = known + ctqd_g
    r = torch.zeros_like(q)
    integ = torch.zeros_like(q[..., 0, :])
    p0 = p[..., 0, :]
    out = [r[..., 0, :]]
    for k in range(1, q.shape[-2]):
        h = steps[..., k, :]
        known_int = 0.5 * h * (beta[..., k - 1, :] + beta[..., k, :])
        rk = K * (p[..., k, :] - p0 - integ - known_int) / (1.0 + K * h)
        integ = integ + known_int + h * rk
        out.append(rk)
    return torch.stack(out, -2)


class MomentumObserver:
    """Streaming form of :func:`momentum_observer`, one sample at a time.

    >>> obs = MomentumObserver(robot, gain=50.0)
    >>> r = obs.update(q, qd, tau, dt)   # (..., n_dof) [N m]
    """

    def __init__(self, robot, gain: float | Any = 50.0, passive: bool = True,
                 eps: float | None = None) -> None:
        self.robot = robot
        self.gain = _tensor(gain, robot, "gain")
        if (self.gain <= 0).any():
            raise ConfigError(f"observer gain must be positive; got {self.gain.tolist()}")
        self.passive = passive
        self.eps = eps
        self.reset()

    def reset(self) -> None:
        """Forget the history; the next update re-initialises r = 0."""
        self._p0 = self._integ = self._beta = None

    def update(self, q: Any, qd: Any, tau: Any, dt: float) -> Tensor:
        """Feed one sample (..., n_dof) taken ``dt`` [s] after the previous one; returns r."""
        robot = self.robot
        q, qd, tau = (_tensor(x, robot, n) for x, n in ((q, "q"), (qd, "qd"), (tau, "tau")))
        for x, n in ((q, "q"), (qd, "qd"), (tau, "tau")):
            _check_joint(x, robot, n)
        p, ctqd_g = momentum_terms(robot, q, qd, self.eps)
        beta = tau + ctqd_g + (robot.passive_torques(qd) if self.passive else 0.0)
        if self._p0 is None:
            self._p0, self._integ, self._beta = p, torch.zeros_like(p), beta
            return torch.zeros_like(p)
        if not (np.isfinite(dt) and dt > 0):
            raise ConfigError(f"dt is {dt}; expected a positive step [s]")
        known_int = 0.5 * dt * (self._beta + beta)
        r = self.gain * (p - self._p0 - self._integ - known_int) / (1.0 + self.gain * dt)
        self._integ = self._integ + known_int + dt * r
        self._beta = beta
        return r


def torque_to_force(robot, q: Any, tau_ext: Any, site: str | int,
                    joints: Any = None, damping: float = 1e-3) -> Tensor:
    """End-effector force f (..., 3) [N] (world frame) explaining ``tau_ext = J^T f``.

    Damped least squares over the position rows J (3, n) of the site Jacobian:
    ``f = (J J^T + damping^2 I)^-1 J tau_ext`` (the pseudo-inverse of J^T for damping -> 0;
    the damping keeps directions the arm cannot feel, e.g. out of a planar arm's plane, at 0).
    q, tau_ext: (..., n_dof); joints: optional joint names/indices to use (e.g. leave out a
    gripper whose torque is not due to the end-effector force).
    """
    q = _tensor(q, robot, "q")
    tau_ext = _tensor(tau_ext, robot, "tau_ext")
    _check_joint(q, robot, "q")
    _check_joint(tau_ext, robot, "tau_ext")
    J = robot.site_jacobian(q, site)[..., :3, :]
    if joints is not None:
        idx = [robot.joint_index(j) for j in joints]
        J, tau_ext = J[..., idx], tau_ext[..., idx]
    A = J @ J.transpose(-1, -2) + damping**2 * torch.eye(3, dtype=J.dtype, device=J.device)
    return torch.linalg.solve(A, (J @ tau_ext[..., None]))[..., 0]
