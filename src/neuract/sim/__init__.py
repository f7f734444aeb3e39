"""Differentiable simulation: integrators and batched rollouts over a :class:`Robot`.

Torque callbacks have the signature ``tau = policy(t_index, q, qd)`` with q, qd (..., n_dof)
and return (..., n_dof) joint torques [N m]; actuator models plug in there.
"""

from neuract.sim.integrators import INTEGRATORS, step
from neuract.sim.rollout import Rollout, rollout

__all__ = ["INTEGRATORS", "Rollout", "rollout", "step"]
