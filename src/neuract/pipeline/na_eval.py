"""NeuralActuator in the evaluation protocol: a simulator-mode Simulator and an estimator.

* :func:`na_simulator` (simulator mode): the protocol's measured initial state and its
  measured 8-step past start the rollout; afterwards only the commands enter
  (:func:`neuract.pipeline.na_train.sim_rollout`).
* :func:`na_estimate` / :func:`na_estimator` (estimator mode): every step's torque, force,
  contact gate and per-motor condition from the real telemetry history. The condition output
  is smoothed causally (exponential moving average of the per-motor probabilities, time
  constant ``condition_tau_s``) -- a motor's condition does not change within seconds; the
  episode-level ``condition_prob`` is the largest per-motor degraded probability. The
  decision threshold is calibrated on the training episodes (:func:`calibrate_condition`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from neuract.errors import ConfigError
from neuract.eval.protocol import SimBatch, Simulator
from neuract.neuralactuator import NeuralActuator, windows
from neuract.pipeline.na_train import na_parts, sim_rollout


def na_simulator(model: NeuralActuator, robot, substeps: int = 2) -> Simulator:
    """Simulator-mode NeuralActuator for :func:`neuract.eval.evaluate_rollouts` (call it with
    ``history=model.cfg.history``)."""
    if model.cfg.mode != "simulator":
        raise ConfigError(f"na_simulator needs a simulator-mode model; got {model.cfg.mode!r} "
                          "(an estimator reads measured telemetry and cannot simulate)")
    h = model.cfg.history

    def sim(batch: SimBatch) -> np.ndarray:
        if batch.past.get("q") is None or batch.past["q"].shape[1] != h:
            raise ConfigError(f"NeuralActuator needs history={h} in evaluate_rollouts")
        f = lambda x: torch.tensor(np.asarray(x), dtype=torch.float32)  # noqa: E731
        past = {k: f(batch.past[k]) for k in ("q_goal", "q", "qd")}
        dt = f(np.diff(batch.t, axis=1))
        with torch.no_grad():
            q = sim_rollout(model, robot, past, f(batch.q0), f(batch.qd0), f(batch.q_goal), dt,
                            substeps)
        return q.double().numpy()

    return sim


@torch.no_grad()
def na_estimate(model: NeuralActuator, traj: Any, chunk: int = 4096,
                condition_tau_s: float = 5.0, condition_threshold: float | None = None
                ) -> dict[str, np.ndarray]:
    """Estimator-mode outputs for every sample of ``traj`` (the first ``history - 1`` samples
    have no full history: ``valid`` False there and NaN outputs).

    condition_threshold: the smoothed per-motor degraded probability that counts as 0.5 (the
    probabilities are shifted in log-odds so that 0.5 is the decision point); default: the
    model's ``condition_threshold`` attribute (calibrated on training episodes by
    :func:`calibrate_condition`), else 0.5.

    Returns tau (T, n) [N m], ee_force (T, 3) [N], contact_prob (T,), condition_prob_joint
    (T, n) (smoothed degraded probability per motor), condition_prob (T,), valid (T,).
    """
    if condition_threshold is None:
        condition_threshold = float(getattr(model, "condition_threshold", 0.5))
    if model.cfg.mode != "estimator":
        raise ConfigError(f"na_estimate needs an estimator-mode model; got {model.cfg.mode!r}")
    cfg = model.cfg
    n, h, T = cfg.n_joints, cfg.history, len(traj)
    x = windows(traj, cfg.channels, n, h)
    taus, forces, gates, conds = [], [], [], []
    ch = cfg.channels
    for s in range(0, x.shape[0], chunk):
        xb = x[s:s + chunk]
        kp, kd, res, force, gate, cond = na_parts(model, xb)
        last = xb[:, -1].reshape(xb.shape[0], n, -1)
        e, v = last[..., ch.index("pos_error")], last[..., ch.index("qd")]
        taus.append(model.tau_max * torch.tanh((kp * e - kd * v + res) / model.tau_max))
        forces.append(force)
        gates.append(torch.sigmoid(gate))
        conds.append(torch.softmax(cond, -1)[..., 1:].sum(-1))
    pad = lambda a, shape: np.concatenate([np.full((h - 1, *shape), np.nan), a])  # noqa: E731
    tau = pad(torch.cat(taus).double().numpy(), (n,))
    force = pad(torch.cat(forces).double().numpy(), (3,))
    gate = pad(torch.cat(gates).double().numpy(), ())
    p = torch.cat(conds).double().numpy()
    t = np.asarray(traj["t"], dtype=np.float64)[h - 1:]
    sm = np.empty_like(p)
    acc = p[0].copy()
    for i in range(len(p)):
        if i:
            a = 1.0 - np.exp(-(t[i] - t[i - 1]) / condition_tau_s)
            acc = acc + a * (p[i] - acc)
        sm[i] = acc
    if condition_threshold != 0.5:
        th = min(max(condition_threshold, 1e-6), 1 - 1e-6)
        z = np.log(np.clip(sm, 1e-9, 1 - 1e-9)) - np.log1p(-np.clip(sm, 1e-9, 1 - 1e-9))
        sm = 1.0 / (1.0 + np.exp(-(z - np.log(th / (1 - th)))))
    cj = pad(sm, (n,))
    valid = np.zeros(T, bool)
    valid[h - 1:] = True
    return {"tau": tau, "ee_force": force, "contact_prob": gate, "condition_prob_joint": cj,
            "condition_prob": np.nanmax(np.where(valid[:, None], cj, 0.0), axis=1),
            "valid": valid}


def calibrate_condition(model: NeuralActuator, trajs, max_episodes: int = 16) -> float:
    """The per-motor decision threshold on the smoothed degraded probability that maximises
    the balanced accuracy on (training) episodes; 0.5 when they hold a single class."""
    from neuract.pipeline.na_data import per_joint_condition

    ps, ys = [], []
    for tr in list(trajs)[:max_episodes]:
        o = na_estimate(model, tr, condition_threshold=0.5)
        v = o["valid"]
        ps.append(o["condition_prob_joint"][v].ravel())
        ys.append((per_joint_condition(tr, model.cfg.n_joints)[v] > 0).ravel())
    if not ps:
        return 0.5
    p, y = np.concatenate(ps), np.concatenate(ys)
    if y.all() or not y.any():
        return 0.5
    grid = np.linspace(0.02, 0.98, 97)
    bal = [0.5 * ((p[y] > g).mean() + (p[~y] <= g).mean()) for g in grid]
    return float(grid[int(np.argmax(bal))])


def na_estimator(model: NeuralActuator, condition_tau_s: float = 5.0):
    """``est(traj) -> dict`` for :func:`neuract.eval.evaluate_estimator`."""
    return lambda traj: na_estimate(model, traj, condition_tau_s=condition_tau_s)


__all__ = ["calibrate_condition", "na_estimate", "na_estimator", "na_simulator"]
