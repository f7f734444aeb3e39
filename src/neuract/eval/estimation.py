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
from dataclasses import dataclass, field
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


def _valid(out: Mapping[str, Any], tr: Any, name: str) -> np.ndarray:
    """The estimator's ``valid`` (T,) bool (all True when it returns none)."""
    n = len(tr)
    ok = np.ones(n, bool) if "valid" not in out else np.asarray(out["valid"], bool)
    if ok.shape != (n,):
        raise SchemaError(f"estimator {name!r} returned valid of shape {ok.shape} for "
                          f"trajectory {tr.meta.name!r}; expected ({n},)")
    return ok


@dataclass
class _Pooled:
    """What :func:`evaluate_estimator` pools over the trajectories: outputs, labels and masks
    per quantity, the gate's counts (all, per task) and its hits on force-labelled contacts."""

    tau: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    force: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=list)
    cond_p: list[np.ndarray] = field(default_factory=list)
    cond_t: list[np.ndarray] = field(default_factory=list)
    end_p: list[np.ndarray] = field(default_factory=list)  # condition at each trajectory's
    end_t: list[Any] = field(default_factory=list)  # last scored sample
    gate: metrics.GateCounts | None = None
    gate_task: dict[str, metrics.GateCounts] = field(default_factory=dict)
    hit_force: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """(|f| of contact samples, fired)"""

    def add(self, tr: Any, out: Mapping[str, Any], ok: np.ndarray, threshold: float) -> None:
        """Pool one trajectory's outputs wherever it carries the matching labels."""
        n = len(tr)
        if "tau" in out and "tau" in tr:
            self.tau.append((_as_np(out["tau"]), np.asarray(tr["tau"], dtype=np.float64), ok))
        if "ee_force" in out and "ee_force" in tr:
            self.force.append((
                _as_np(out["ee_force"]), np.asarray(tr["ee_force"], dtype=np.float64),
                np.asarray(tr.get("contact", np.zeros(n, bool)), bool),
                np.asarray(tr.get("ee_force_mask", np.ones(n, bool)), bool) & ok))
        if "contact_prob" in out and "contact" in tr:
            self._add_gate(tr, out, ok, threshold)
        if "condition_prob" in out and "condition" in tr:
            self.cond_p.append(_as_np(out["condition_prob"])[ok])
            self.cond_t.append(np.asarray(tr["condition"], dtype=np.int64)[ok])
            if len(self.cond_p[-1]):
                self.end_p.append(self.cond_p[-1][-1])
                self.end_t.append(self.cond_t[-1][-1])

    def _add_gate(self, tr: Any, out: Mapping[str, Any], ok: np.ndarray,
                  threshold: float) -> None:
        n = len(tr)
        p = _as_np(out["contact_prob"])
        g = metrics.gate_counts(p, tr["contact"], tr["t"], threshold, valid=ok,
                                decided_t=out.get("contact_decided_t"))
        self.gate = g if self.gate is None else self.gate + g
        task = tr.meta.labels.get("task") if tr.meta.labels else None
        if task is not None:
            self.gate_task[str(task)] = self.gate_task.get(str(task), metrics.GateCounts()) + g
        if "ee_force" in tr:  # contact samples with a real force label only
            c = (np.asarray(tr["contact"], bool) & ok
                 & np.asarray(tr.get("ee_force_mask", np.ones(n, bool)), bool))
            fired = p[c] >= threshold
            self.hit_force.append((np.linalg.norm(np.asarray(tr["ee_force"], np.float64)[c],
                                                  axis=1), fired))


def _recall_by_force(hit_force: list[tuple[np.ndarray, np.ndarray]]) -> list[dict[str, Any]]:
    """The gate's recall per band of :data:`GATE_FORCE_BINS_N` of the true force."""
    fm = np.concatenate([a for a, _ in hit_force])
    fired = np.concatenate([b for _, b in hit_force])
    bands = []
    for lo, hi in zip(GATE_FORCE_BINS_N[:-1], GATE_FORCE_BINS_N[1:]):
        sel = (fm >= lo) & (fm < hi)
        bands.append({"force_n": [lo, hi if np.isfinite(hi) else None],
                      "n_contact": int(sel.sum()),
                      "recall": float(fired[sel].mean()) if sel.any() else None})
    return bands


def _condition(pool: _Pooled) -> dict[str, Any] | None:
    """Condition metrics over every scored sample, with ``episode_end`` where any
    trajectory ends with a scored sample."""
    if not pool.cond_p:
        return None
    cond = metrics.condition_metrics(np.concatenate(pool.cond_p), np.concatenate(pool.cond_t))
    if pool.end_p:
        # the decision a recording ends with (one per trajectory): a health check of a
        # recorded session, beside the per-sample accuracy that counts every moment of it
        ep = metrics.condition_metrics(np.stack(pool.end_p),
                                       np.asarray(pool.end_t, dtype=np.int64))
        cond["episode_end"] = {k: ep[k] for k in ("accuracy", "balanced_accuracy",
                                                  "confusion", "n")}
    return cond


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
    pool = _Pooled()
    joint_names = None
    for tr in trajs:
        out = estimator(tr)
        joint_names = tuple(tr.meta.joint_names)
        pool.add(tr, out, _valid(out, tr, name), gate_threshold)
    rec: dict[str, Any] = {"mode": "estimator", "model": name, "protocol": "estimation"}
    if pool.tau:
        rmse = metrics.torque_rmse(*(np.concatenate(x) for x in zip(*pool.tau)))
        rec["torque_rmse"] = dict(zip(joint_names, rmse.tolist()))
        rec["torque_rmse_mean"] = float(rmse.mean())
    else:
        rec["torque_rmse"] = rec["torque_rmse_mean"] = None
    rec["force"] = (metrics.force_mae(*(np.concatenate(x) for x in zip(*pool.force)))
                    if pool.force else None)
    rec["gate"] = pool.gate.metrics() if pool.gate is not None else None
    if pool.gate_task:
        rec["gate_by_task"] = {k: pool.gate_task[k].metrics() for k in sorted(pool.gate_task)}
    if pool.hit_force:
        rec["gate_recall_by_force"] = _recall_by_force(pool.hit_force)
    rec["condition"] = _condition(pool)
    return rec
