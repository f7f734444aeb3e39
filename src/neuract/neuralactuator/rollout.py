"""Differentiable rollouts of an arm driven by a NeuralActuator (:func:`neuract.sim.step`).

* :func:`rollout_estimator`: torques computed from measured telemetry (estimator mode), held
  over each sample, integrate the arm from a measured initial state.
* :func:`rollout_simulator`: simulator mode; only the commands and the model's *own simulated*
  state enter the model (nothing measured after ``t0``); the PD servo prior is re-evaluated at
  every physics substep, the learned residual is held over the sample.
* :func:`simulator`: the adapter to :func:`neuract.eval.protocol.evaluate_rollouts`.

Known external forces act at an end-effector site through ``J_lin(q)^T f``.
"""

from __future__ import annotations

import numpy as np
import torch

from neuract.errors import ConfigError
from neuract.neuralactuator.features import assemble
from neuract.neuralactuator.model import NeuralActuator
from neuract.sim import step


def _ee_torque(robot, q: torch.Tensor, f: torch.Tensor, site: str) -> torch.Tensor:
    """Joint torques (B, n) of a world force f (B, 3) [N] at a site: J_lin(q)^T f."""
    J = robot.site_jacobian(q, site)[..., :3, :]
    return (J.transpose(-1, -2) @ f.unsqueeze(-1)).squeeze(-1)


def rollout_estimator(model: NeuralActuator, robot, tau: torch.Tensor, q0: torch.Tensor,
                      qd0: torch.Tensor, dt: torch.Tensor, substeps: int = 4,
                      f_ext: torch.Tensor | None = None, site: str = "",
                      integrator: str = "euler", passive: bool = True) -> torch.Tensor:
    """Integrate held torques tau: (B, K, n) [N m] from (q0, qd0) (B, n); dt: (B, K) [s];
    f_ext: optional (B, K, 3) end-effector force [N] (its joint torque J^T f is held over a
    sample like the actuator torque). Returns q: (B, K, n) at t0+1 .. t0+K."""
    q, qd, out = q0, qd0, []
    for k in range(tau.shape[1]):
        h = (dt[:, k] / substeps).unsqueeze(-1)
        u = tau[:, k]
        if f_ext is not None:  # held over the sample like the torque
            u = u + _ee_torque(robot, q, f_ext[:, k], site)
        for _ in range(substeps):
            q, qd = step(robot, q, qd, u, h, integrator=integrator, passive=passive)
        out.append(q)
    return torch.stack(out, 1)


def rollout_simulator(model: NeuralActuator, robot, q_hist: torch.Tensor, qd_hist: torch.Tensor,
                      goal_hist: torch.Tensor, q_goal: torch.Tensor, dt: torch.Tensor,
                      substeps: int = 4, f_ext: torch.Tensor | None = None, site: str = "",
                      integrator: str = "euler", extra_hist: dict | None = None,
                      passive: bool = True) -> torch.Tensor:
    """Simulator-mode open-loop rollout: only commands and the simulated state enter the model.

    q_hist, qd_hist, goal_hist: (B, h, n) measured history up to t0 (the last row is the
    initial state); q_goal: (B, K, n) commands at t0 .. t0+K-1 [rad]; dt: (B, K) [s];
    extra_hist: other simulator-mode channels (B, h + K, n) (e.g. a simulated temperature).
    Returns q: (B, K, n) simulated positions at t0+1 .. t0+K [rad]. Differentiable.
    """
    cfg = model.cfg
    h = cfg.history
    qs, qds, goals = list(q_hist.unbind(1)), list(qd_hist.unbind(1)), list(goal_hist.unbind(1))
    goals[-1] = q_goal[:, 0]
    q, qd, out = qs[-1], qds[-1], []
    for k in range(q_goal.shape[1]):
        parts = {"q": torch.stack(qs[-h:], 1), "qd": torch.stack(qds[-h:], 1),
                 "q_goal": torch.stack(goals[-h:], 1)}
        for name, v in (extra_hist or {}).items():
            parts[name] = v[:, k:k + h]
        res = model.heads(assemble(parts, cfg.channels))[0]
        g = q_goal[:, k]
        step_dt = (dt[:, k] / substeps).unsqueeze(-1)
        ext = 0.0 if f_ext is None else _ee_torque(robot, q, f_ext[:, k], site)
        for _ in range(substeps):
            u = model.saturate(model.pd_torque(g - q, qd) + res) + ext
            q, qd = step(robot, q, qd, u, step_dt, integrator=integrator, passive=passive)
        out.append(q)
        qs.append(q)
        qds.append(qd)
        if k + 1 < q_goal.shape[1]:
            goals.append(q_goal[:, k + 1])
    return torch.stack(out, 1)


def simulator(model: NeuralActuator, robot, substeps: int = 4, integrator: str = "euler",
              passive: bool = True):
    """Adapter to :func:`neuract.eval.protocol.evaluate_rollouts` (simulator mode; call it with
    ``history=model.cfg.history``): ``sim(batch) -> (B, H, n)`` simulated positions [rad]."""
    if model.cfg.mode != "simulator" or model.cfg.sim_temperature:
        raise ConfigError("only a simulator-mode model without temperature can be scored by "
                          "the rollout protocol (its inputs: commands + simulated state)")
    dtype = next(model.parameters()).dtype

    @torch.no_grad()
    def sim(batch) -> np.ndarray:
        h = model.cfg.history
        if batch.past.get("q") is None or batch.past["q"].shape[1] < h:
            raise ConfigError(f"NeuralActuator needs history={h} in evaluate_rollouts")
        t = torch.tensor(np.asarray(batch.t), dtype=dtype)

        def past(k):
            return torch.tensor(np.asarray(batch.past[k])[:, -h:], dtype=dtype)

        q = rollout_simulator(model, robot, past("q"), past("qd"), past("q_goal"),
                              torch.tensor(np.asarray(batch.q_goal), dtype=dtype),
                              t[:, 1:] - t[:, :-1], substeps, integrator=integrator,
                              passive=passive)
        return q.double().numpy()

    return sim


__all__ = ["rollout_estimator", "rollout_simulator", "simulator"]
