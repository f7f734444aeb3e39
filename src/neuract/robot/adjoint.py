"""Forward dynamics with an implicit-function (adjoint) backward pass.

``qdd = FD(q, qd, tau, theta)`` is defined by the residual
``r(q, qd, qdd, theta) = M(q) qdd + b(q, qd) - J^T f_ext - passive(qd) + dt_i D qdd - tau = 0``
(``dt_i D`` is MuJoCo's implicit damping term, zero unless asked for). By the implicit function
theorem ``d qdd / d x = -M_hat^{-1} dr/dx`` and ``d qdd / d tau = M_hat^{-1}``, so for an
upstream gradient ``g`` the backward pass needs one solve ``u = M_hat^{-1} g`` (M_hat is
symmetric) and ONE vector-Jacobian product of the residual, i.e. of the recursive Newton-Euler
algorithm, at the already known qdd: ``grad_x = -(dr/dx)^T u``. Compared with differentiating
through the mass matrix, the bias forces and the linear solve, this skips the CRBA in the
backward pass and records no graph in the forward pass, so a rollout keeps only
(q, qd, qdd, LU) per step in memory. The RNEA is recomputed in the backward pass, which makes
it about as fast as plain autograd in eager mode (measured in benchmarks/bench_dynamics.py).

The forward pass runs without autograd; the backward pass is first-order only (use plain
autograd, ``adjoint=False`` in :mod:`neuract.sim`, for higher derivatives). It is checked
against autograd and finite differences with ``torch.autograd.gradcheck`` in the tests.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from neuract.robot.dynamics import dynamics_system, inverse_dynamics, passive_torques

__all__ = ["forward_dynamics_adjoint", "PARAM_FIELDS"]

PARAM_FIELDS = ("pi_link", "armature", "damping", "frictionloss")


def _with_params(robot, params):
    r = copy.copy(robot)  # shallow copy: derived fields depend on topology only
    for name, value in zip(PARAM_FIELDS, params):
        object.__setattr__(r, name, value)
    return r


class _ForwardDynamics(torch.autograd.Function):
    @staticmethod
    def forward(ctx, robot, opts, q, qd, tau, f_ext, *params):
        passive, friction_eps, implicit_dt = opts
        r = _with_params(robot, params)
        M, force = dynamics_system(r, q, qd, tau, f_ext, passive, friction_eps, implicit_dt)
        shape = torch.broadcast_shapes(M.shape[:-2], force.shape[:-1])
        LU, piv = torch.linalg.lu_factor(M.expand(*shape, *M.shape[-2:]))
        qdd = torch.linalg.lu_solve(LU, piv, force.expand(*shape, M.shape[-1])[..., None])[..., 0]
        ctx.robot, ctx.opts = robot, opts
        ctx.tau_shape = tau.shape
        ctx.save_for_backward(q, qd, qdd, LU, piv, f_ext, *params)
        return qdd

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        q, qd, qdd, LU, piv, f_ext, *params = ctx.saved_tensors
        passive, friction_eps, implicit_dt = ctx.opts
        need = ctx.needs_input_grad  # robot, opts, q, qd, tau, f_ext, *params
        u = torch.linalg.lu_solve(LU, piv, g[..., None])[..., 0]  # M_hat is symmetric
        names = ["q", "qd", "f_ext", *PARAM_FIELDS]
        flags = [need[2], need[3], need[5], *need[6:]]
        values = [q, qd, f_ext, *params]
        leaves = {n: v.detach().requires_grad_(True) if f and v is not None else v
                  for n, f, v in zip(names, flags, values)}
        wanted = [leaves[n] for n, f in zip(names, flags) if f]
        grads = {}
        if wanted:
            with torch.enable_grad():
                r = _with_params(ctx.robot, [leaves[n] for n in PARAM_FIELDS])
                res = inverse_dynamics(r, leaves["q"], leaves["qd"], qdd, leaves["f_ext"])
                if passive:
                    res = res - passive_torques(r, leaves["qd"], friction_eps)
                if implicit_dt > 0.0:
                    res = res + implicit_dt * r.damping * qdd
                out = torch.autograd.grad(res, wanted, grad_outputs=-u, allow_unused=True)
            grads = dict(zip([n for n, f in zip(names, flags) if f], out))
        g_tau = u.sum_to_size(ctx.tau_shape) if need[4] else None
        return (None, None, grads.get("q"), grads.get("qd"), g_tau, grads.get("f_ext"),
                *[grads.get(n) for n in PARAM_FIELDS])


def forward_dynamics_adjoint(robot, q: Tensor, qd: Tensor, tau: Tensor, *,
                             f_ext: Tensor | None = None, passive: bool = True,
                             friction_eps: float = 1e-2, implicit_dt: float = 0.0) -> Tensor:
    """qdd (..., n_dof) like :func:`neuract.sim.integrators.accelerations`, adjoint backward.

    Gradients flow to q, qd, tau, f_ext and the physical parameters ``pi_link``, ``armature``,
    ``damping``, ``frictionloss`` of ``robot``; NOT to gravity or the kinematic constants
    (use the plain autograd path for those).
    """
    params = [getattr(robot, n) for n in PARAM_FIELDS]
    opts = (bool(passive), float(friction_eps), float(implicit_dt))
    return _ForwardDynamics.apply(robot, opts, q, qd, tau, f_ext, *params)
