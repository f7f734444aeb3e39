"""Differentiable arm rollouts driven by a NeuralActuator, and the rollout-protocol adapter.

* :func:`sim_rollout` (simulator mode): for each telemetry step the model reads the
  *simulated* history (commands, simulated q and qd); its torque drives the arm
  (``M qdd + b = tau``, semi-implicit Euler, ``substeps`` physics steps per telemetry step).
  The servo prior ``kp (goal - q) - kd qd`` is refreshed every substep, the learned residual is
  held over the step. Only the commands enter after the initial state.
* :func:`est_rollout` (estimator mode training): given joint torques at the samples (linear
  in between) plus known external joint torques, integrate the arm.
* :func:`simulator`: a simulator-mode model as a :data:`neuract.eval.protocol.Simulator`.

The torque of a model is always ``model.saturate(model.pd_torque(e, qd) + residual)`` with
``e``, ``qd`` of the instant the torque is applied at (see :class:`NeuralActuator`). With
``prior='servo'`` (simulator mode) the identified servo model drives the arm exactly as the
identification rollout does (:func:`neuract.sim.simulate.step`: firmware loop, DC motor,
friction budget, joint parameters) and the saturated residual acts as an extra joint torque
that the friction budget sees like any other load; with a zero residual the rollout is the
servo model's own.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from neuract.actuators.base import ActuatorState
from neuract.actuators.param import cached_params
from neuract.errors import ConfigError
from neuract.neuralactuator.features import assemble
from neuract.neuralactuator.model import NeuralActuator
from neuract.sim.simulate import step


class _Loaded:
    """A plant with an extra applied joint torque ``tau`` (B, n): ``bias_forces - tau``."""

    def __init__(self, robot, tau: torch.Tensor):
        self.robot, self.tau, self.n_dof = robot, tau, robot.n_dof

    def mass_matrix(self, q):
        return self.robot.mass_matrix(q)

    def bias_forces(self, q, qd):
        return self.robot.bias_forces(q, qd) - self.tau


def sim_rollout(model: NeuralActuator, robot, past: dict[str, torch.Tensor], q0, qd0,
                q_goal: torch.Tensor, dt: torch.Tensor, substeps: int = 2,
                voltage: torch.Tensor | None = None,
                progress: Callable[[int, int], None] | None = None) -> torch.Tensor:
    """Simulator-mode open-loop rollout.

    past: measured ``q_goal``, ``q``, ``qd`` at the ``history`` samples up to t0, each
    (B, h, n); q0, qd0: (B, n) state at t0; q_goal: (B, H, n) commands at t0 .. t0+H-1;
    dt: (B, H) sample spacings [s]; voltage: (B, H) supply voltage [V] at t0 .. t0+H-1 (a
    known input, used by a ``servo`` prior; None: the servo's configured voltage). Returns
    q: (B, H, n) simulated at t0+1 .. t0+H. Only the commands enter after t0.
    progress: ``progress(k, H)`` after each telemetry step k (1-based).
    """

    chans = model.cfg.channels
    servo = model.servo_model if model.cfg.prior == "servo" else None
    hist = {k: past[k] for k in ("q_goal", "q", "qd")}
    q, qd = q0, qd0
    out = []
    H = q_goal.shape[1]
    if servo is not None:
        servo.actuator.reset()
    with cached_params():
        for k in range(H):
            res = model.heads(assemble(hist, chans))[0]
            goal = q_goal[:, k]
            h = (dt[:, k] / substeps).unsqueeze(-1)
            if servo is not None:
                inputs = {} if voltage is None else {"voltage": voltage[:, k].unsqueeze(-1)}
                plant = _Loaded(robot, model.saturate(res))
                servo.actuator.observe(goal, ActuatorState(q=q, qd=qd, dt=h, inputs=inputs))
                for _ in range(substeps):
                    q, qd = step(plant, servo.actuator, servo.joints, goal, q, qd, h, inputs)
            else:
                for _ in range(substeps):
                    tau = model.saturate(model.pd_torque(goal - q, qd) + res)
                    qd = qd + h * robot.forward_dynamics(q, qd, tau)
                    q = q + h * qd
            out.append(q)
            if progress is not None:
                progress(k + 1, H)
            if k + 1 < H:
                nxt = {"q_goal": q_goal[:, k + 1], "q": q, "qd": qd}
                hist = {c: torch.cat([hist[c][:, 1:], nxt[c].unsqueeze(1)], 1) for c in hist}
    if servo is not None:  # drop the actuator's history (it holds this rollout's graph)
        servo.actuator.reset()
    return torch.stack(out, 1)


def est_rollout(robot, q0, qd0, tau: torch.Tensor, tau_ext: torch.Tensor, dt: torch.Tensor,
                substeps: int = 2) -> torch.Tensor:
    """Drive the arm with given joint torques tau: (B, H+1, n) at the samples (linear in
    between) plus external joint torques tau_ext (B, H+1, n); returns q (B, H, n)."""
    q, qd = q0, qd0
    out = []
    for k in range(tau.shape[1] - 1):
        h = (dt[:, k] / substeps).unsqueeze(-1)
        for s in range(substeps):
            a = (s + 0.5) / substeps
            u = (1 - a) * (tau[:, k] + tau_ext[:, k]) + a * (tau[:, k + 1] + tau_ext[:, k + 1])
            qd = qd + h * robot.forward_dynamics(q, qd, u)
            q = q + h * qd
        out.append(q)
    return torch.stack(out, 1)


def simulator(model: NeuralActuator, robot, substeps: int = 2,
              progress: Callable[[int, int], None] | None = None):
    """Simulator-mode NeuralActuator for :func:`neuract.eval.evaluate_rollouts` (call it with
    ``history=model.cfg.history``): the protocol's measured initial state and its measured
    ``history``-step past start the rollout; afterwards only the commands enter.
    progress: ``progress(k, H)`` after each step k of each call's H-step rollout."""
    if model.cfg.mode != "simulator":
        raise ConfigError(f"simulator() needs a simulator-mode model; got {model.cfg.mode!r} "
                          "(an estimator reads measured telemetry and cannot simulate)")
    if robot.n_dof != model.cfg.n_joints:
        raise ConfigError(f"robot has {robot.n_dof} joints; the model has "
                          f"n_joints={model.cfg.n_joints}")
    h = model.cfg.history

    def sim(batch) -> np.ndarray:
        if batch.past.get("q") is None or batch.past["q"].shape[1] != h:
            raise ConfigError(f"NeuralActuator needs history={h} in evaluate_rollouts")
        f = lambda x: torch.tensor(np.asarray(x), dtype=torch.float32)  # noqa: E731
        past = {k: f(batch.past[k]) for k in ("q_goal", "q", "qd")}
        dt = f(np.diff(batch.t, axis=1))
        volt = None
        if model.cfg.prior == "servo" and "voltage" in batch.inputs:  # a known input
            volt = f(np.asarray(batch.inputs["voltage"]).reshape(*dt.shape, -1).mean(-1))
        with torch.no_grad():
            q = sim_rollout(model, robot, past, f(batch.q0), f(batch.qd0), f(batch.q_goal), dt,
                            substeps, volt, progress)
        return q.double().numpy()

    return sim


__all__ = ["est_rollout", "sim_rollout", "simulator"]
