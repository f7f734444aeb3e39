"""One integration step of the joint-space dynamics.

``euler`` is semi-implicit (symplectic) Euler, the scheme of MuJoCo's default integrator:
``qd' = qd + dt * qdd(q, qd)``, ``q' = q + dt * qd'``. With ``implicit_damping=True`` the joint
damping is treated implicitly like MuJoCo does (``(M + dt D) qdd = tau - b - D qd + ...``).
``rk4`` is the classical Runge-Kutta scheme with the torque held over the step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from neuract.errors import ConfigError
from neuract.robot.adjoint import forward_dynamics_adjoint
from neuract.robot.dynamics import accelerations_fast, dynamics_system
from neuract.robot.dynamics_backward import solve_symmetric
from neuract.robot.native import accelerations as native_accelerations

__all__ = ["INTEGRATORS", "accelerations", "step"]

INTEGRATORS = ("euler", "rk4")


def _needs_plain_autograd(robot) -> bool:
    fixed = ("gravity", "q_ref", "T_cos", "T_sin", "T_const", "T_slide", "body_R", "body_p")
    return any(getattr(robot, n).requires_grad for n in fixed)


def accelerations(robot, q: Tensor, qd: Tensor, tau: Tensor, *, f_ext: Tensor | None = None,
                  passive: bool = True, friction_eps: float = 1e-2,
                  implicit_dt: float = 0.0, adjoint: bool = False) -> Tensor:
    """qdd (..., n_dof) from applied torques tau (..., n_dof) [N m], plus passive torques.

    ``implicit_dt > 0`` adds ``implicit_dt * diag(damping)`` to M (MuJoCo's implicit damping).
    Without ``f_ext``, on the CPU and when no parameter of the robot requires a gradient, the
    compiled kernel of :mod:`neuract.robot.native` computes qdd and its backward (an
    implicit-function VJP; gradients to q, qd, tau), whatever ``adjoint`` says; otherwise:
    ``adjoint=True`` differentiates with the implicit-function backward of
    :mod:`neuract.robot.adjoint`: it stores only (q, qd, qdd, LU) per step instead of the whole
    graph (much less memory for long rollouts) but recomputes the RNEA in the backward pass, so
    it is not faster in eager mode (see benchmarks/results/dynamics.md); first-order only.
    ``False`` (default): when q needs a gradient, no ``f_ext`` is given and the robot's inertias,
    armature, damping and kinematic constants do not require grad, the closed-form backward
    passes of :func:`neuract.robot.dynamics.accelerations_fast` (same values, first-order only;
    about 1.3x the plain-autograd rollout throughput); otherwise plain autograd.
    """
    if f_ext is None:
        qdd = native_accelerations(robot, q, qd, tau, passive, friction_eps, implicit_dt)
        if qdd is not None:
            return qdd
    if adjoint and torch.is_grad_enabled() and not _needs_plain_autograd(robot):
        return forward_dynamics_adjoint(robot, q, qd, tau, f_ext=f_ext, passive=passive,
                                        friction_eps=friction_eps, implicit_dt=implicit_dt)
    if f_ext is None:
        qdd = accelerations_fast(robot, q, qd, tau, passive, friction_eps, implicit_dt)
        if qdd is not None:
            return qdd
    M, force = dynamics_system(robot, q, qd, tau, f_ext, passive, friction_eps, implicit_dt)
    return solve_symmetric(M, force)


def step(robot, q: Tensor, qd: Tensor, tau: Tensor, dt: float, *, integrator: str = "euler",
         f_ext: Tensor | None = None, passive: bool = True, friction_eps: float = 1e-2,
         implicit_damping: bool = False, adjoint: bool = False) -> tuple[Tensor, Tensor]:
    """Advance (q, qd) (..., n_dof) by dt [s] under torque tau (..., n_dof) [N m].

    Returns the new (q, qd). ``passive`` adds damping and smooth dry friction
    (:func:`~neuract.robot.dynamics.passive_torques`); f_ext: (..., n_bodies, 6) body wrenches;
    ``adjoint`` selects the analytic backward pass (see :func:`accelerations`).
    """
    kw = dict(f_ext=f_ext, passive=passive, friction_eps=friction_eps, adjoint=adjoint)
    if integrator == "euler":
        qdd = accelerations(robot, q, qd, tau, implicit_dt=dt if implicit_damping else 0.0, **kw)
        qd1 = qd + dt * qdd
        return q + dt * qd1, qd1
    if integrator == "rk4":
        if implicit_damping:
            raise ConfigError("implicit_damping is only available with integrator='euler'")
        k1q, k1v = qd, accelerations(robot, q, qd, tau, **kw)
        k2q = qd + 0.5 * dt * k1v
        k2v = accelerations(robot, q + 0.5 * dt * k1q, k2q, tau, **kw)
        k3q = qd + 0.5 * dt * k2v
        k3v = accelerations(robot, q + 0.5 * dt * k2q, k3q, tau, **kw)
        k4q = qd + dt * k3v
        k4v = accelerations(robot, q + dt * k3q, k4q, tau, **kw)
        q1 = q + dt / 6.0 * (k1q + 2 * k2q + 2 * k3q + k4q)
        qd1 = qd + dt / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
        return q1, qd1
    raise ConfigError(f"unknown integrator {integrator!r}; valid: {', '.join(INTEGRATORS)}")
