"""Batched, differentiable rollouts: gradients flow to the initial state, the torques/policy
and the robot's parameters."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from neuract.errors import ConfigError
from neuract.sim.integrators import step

__all__ = ["Rollout", "rollout", "TorqueFn"]

TorqueFn = Callable[[int, Tensor, Tensor], Tensor]
"""``tau = policy(t_index, q, qd)``: q, qd (..., n_dof) -> tau (..., n_dof) [N m]."""


class Rollout(NamedTuple):
    """States and torques of a rollout [rad, rad/s, N m]."""

    q: Tensor  # (..., n_steps + 1, n_dof) joint positions, q[..., 0, :] = q0
    qd: Tensor  # (..., n_steps + 1, n_dof) joint velocities
    tau: Tensor  # (..., n_steps, n_dof) applied torques (excluding passive torques)


def rollout(robot, q0: Tensor, qd0: Tensor, controls: Tensor | TorqueFn, dt: float,
            n_steps: int | None = None, **step_kwargs) -> Rollout:
    """Integrate from (q0, qd0) (..., n_dof) for n_steps steps of dt [s].

    controls: a torque sequence (..., n_steps, n_dof) [N m] (broadcast against the batch), or a
    callback ``policy(t_index, q, qd) -> tau``. ``step_kwargs`` go to
    :func:`neuract.sim.step` (integrator, f_ext, passive, friction_eps, implicit_damping).
    """
    if callable(controls):
        if n_steps is None:
            raise ConfigError("rollout with a torque callback needs n_steps")
        policy = controls
    else:
        if controls.shape[-1] != robot.n_dof:
            raise ConfigError(f"controls last dimension is {controls.shape[-1]}; "
                              f"expected n_dof = {robot.n_dof}")
        n_steps = controls.shape[-2] if n_steps is None else n_steps
        if controls.shape[-2] < n_steps:
            raise ConfigError(f"controls hold {controls.shape[-2]} steps; n_steps = {n_steps}")

        # one unbind up front: its backward is a single stack, whereas indexing every step
        # would zero-fill a gradient of the whole sequence per step (quadratic in n_steps)
        per_step = controls.unbind(-2)

        def policy(t, q, qd, _u=per_step):
            return _u[t]

    q, qd = q0, qd0
    qs, qds, taus = [q], [qd], []
    for t in range(n_steps):
        tau = policy(t, q, qd)
        if t == 0:  # batch shape of the whole rollout: q0, qd0 and the torques broadcast
            shape = torch.broadcast_shapes(q.shape, qd.shape, tau.shape)
            q, qd = q.expand(shape), qd.expand(shape)
            qs[0], qds[0] = q, qd
        q, qd = step(robot, q, qd, tau, dt, **step_kwargs)
        qs.append(q)
        qds.append(qd)
        taus.append(torch.broadcast_to(tau, q.shape))
    return Rollout(torch.stack(qs, -2), torch.stack(qds, -2), torch.stack(taus, -2))
