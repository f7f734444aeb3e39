"""The NeuralActuator evaluation protocol, estimator mode (``mode="estimator"``).

:func:`evaluate_estimator` streams whole trajectories (all telemetry) through an estimator and
scores torque RMSE, force MAE (contact / no contact), gate precision / recall / F1 / detection
latency and condition accuracy / AUC wherever the trajectory has the labels (definitions in
:mod:`neuract.eval.metrics`). The gate is also scored per task (``meta.labels["task"]``, where
the trajectories carry one) and its recall per band of the true force magnitude
(:data:`GATE_FORCE_BINS_N`, where they carry ``ee_force``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from neuract.errors import SchemaError
from neuract.eval import metrics

__all__ = ["GATE_FORCE_BINS_N", "Estimator", "evaluate_estimator"]

GATE_FORCE_BINS_N = (0.0, 0.5, 1.0, 2.0, 4.0, float("inf"))
"""edges [N] of the true end-effector force bands over which the gate's recall is reported"""

Estimator = Callable[[Any], Mapping[str, Any]]
"""``out = estimator(traj)`` with any of ``tau`` (T, n) [N m], ``ee_force`` (T, 3) [N],
``contact_prob`` (T,), ``condition_prob`` (T,) or (T, K)."""


def _as_np(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def evaluate_estimator(estimator: Estimator, trajs: Iterable, name: str,
                       gate_threshold: float = 0.5) -> dict[str, Any]:
    """Estimator-mode metrics over trajectories, wherever both output and label exist.

    The estimator may also return ``valid`` (T,) bool: samples where it has an output (e.g.
    False during a history warm-up); the other samples are left out of every metric (and
    may hold NaN); and ``contact_decided_t`` (T,) [s], when each contact decision was
    available (a fixed-lag gate's come after their samples): the gate's detection latency
    counts to it.

    Returns ``{"mode": "estimator", "model", "protocol": "estimation", "torque_rmse" (per
    joint [N m] or None), "force" (see :func:`metrics.force_mae`), "gate" (see
    :class:`metrics.GateCounts`), "condition" (see :func:`metrics.condition_metrics`; with
    ``episode_end``: the same for the decision each trajectory ends with, one per
    trajectory)}``, and where the labels allow ``"gate_by_task"`` (the gate metrics per
    ``meta.labels["task"]``) and ``"gate_recall_by_force"`` (per band of
    :data:`GATE_FORCE_BINS_N` of the true force: contact samples with a force label, and
    the gate's recall on them; the last band's upper edge is None, unbounded).
    """
    tau_p, tau_t, tau_m, f_p, f_t, f_c, f_m, cond_p, cond_t = ([] for _ in range(9))
    end_p, end_t = [], []  # condition at each trajectory's last scored sample
    gate = None
    gate_task: dict[str, metrics.GateCounts] = {}
    hit_force: list[tuple[np.ndarray, np.ndarray]] = []  # (|f| of contact samples, fired)
    joint_names = None
    for tr in trajs:
        out = estimator(tr)
        n = len(tr)
        joint_names = tuple(tr.meta.joint_names)
        ok = np.ones(n, bool) if "valid" not in out else np.asarray(out["valid"], bool)
        if ok.shape != (n,):
            raise SchemaError(f"estimator {name!r} returned valid of shape {ok.shape} for "
                              f"trajectory {tr.meta.name!r}; expected ({n},)")
        if "tau" in out and "tau" in tr:
            tau_p.append(_as_np(out["tau"]))
            tau_t.append(np.asarray(tr["tau"], dtype=np.float64))
            tau_m.append(ok)
        if "ee_force" in out and "ee_force" in tr:
            f_p.append(_as_np(out["ee_force"]))
            f_t.append(np.asarray(tr["ee_force"], dtype=np.float64))
            f_m.append(np.asarray(tr.get("ee_force_mask", np.ones(n, bool)), bool) & ok)
            f_c.append(np.asarray(tr.get("contact", np.zeros(n, bool)), bool))
        if "contact_prob" in out and "contact" in tr:
            p = _as_np(out["contact_prob"])
            g = metrics.gate_counts(p, tr["contact"], tr["t"], gate_threshold, valid=ok,
                                    decided_t=out.get("contact_decided_t"))
            gate = g if gate is None else gate + g
            task = tr.meta.labels.get("task") if tr.meta.labels else None
            if task is not None:
                gate_task[str(task)] = gate_task.get(str(task), metrics.GateCounts()) + g
            if "ee_force" in tr:  # contact samples with a real force label only
                c = (np.asarray(tr["contact"], bool) & ok
                     & np.asarray(tr.get("ee_force_mask", np.ones(n, bool)), bool))
                fired = p[c] >= gate_threshold
                hit_force.append((np.linalg.norm(np.asarray(tr["ee_force"], np.float64)[c],
                                                 axis=1), fired))
        if "condition_prob" in out and "condition" in tr:
            cond_p.append(_as_np(out["condition_prob"])[ok])
            cond_t.append(np.asarray(tr["condition"], dtype=np.int64)[ok])
            if len(cond_p[-1]):
                end_p.append(cond_p[-1][-1])
                end_t.append(cond_t[-1][-1])
    rec: dict[str, Any] = {"mode": "estimator", "model": name, "protocol": "estimation"}
    if tau_p:
        rmse = metrics.torque_rmse(np.concatenate(tau_p), np.concatenate(tau_t),
                                   np.concatenate(tau_m))
        rec["torque_rmse"] = dict(zip(joint_names, rmse.tolist()))
        rec["torque_rmse_mean"] = float(rmse.mean())
    else:
        rec["torque_rmse"] = rec["torque_rmse_mean"] = None
    rec["force"] = (metrics.force_mae(np.concatenate(f_p), np.concatenate(f_t),
                                      np.concatenate(f_c), np.concatenate(f_m))
                    if f_p else None)
    rec["gate"] = gate.metrics() if gate is not None else None
    if gate_task:
        rec["gate_by_task"] = {k: gate_task[k].metrics() for k in sorted(gate_task)}
    if hit_force:
        fm = np.concatenate([a for a, _ in hit_force])
        fired = np.concatenate([b for _, b in hit_force])
        bands = []
        for lo, hi in zip(GATE_FORCE_BINS_N[:-1], GATE_FORCE_BINS_N[1:]):
            sel = (fm >= lo) & (fm < hi)
            bands.append({"force_n": [lo, hi if np.isfinite(hi) else None],
                          "n_contact": int(sel.sum()),
                          "recall": float(fired[sel].mean()) if sel.any() else None})
        rec["gate_recall_by_force"] = bands
    rec["condition"] = (metrics.condition_metrics(np.concatenate(cond_p),
                                                  np.concatenate(cond_t))
                        if cond_p else None)
    if rec["condition"] is not None and end_p:
        # the decision a recording ends with (one per trajectory): a health check of a
        # recorded session, beside the per-sample accuracy that counts every moment of it
        ep = metrics.condition_metrics(np.stack(end_p), np.asarray(end_t, dtype=np.int64))
        rec["condition"]["episode_end"] = {k: ep[k] for k in ("accuracy", "balanced_accuracy",
                                                              "confusion", "n")}
    return rec
