"""Evaluation metrics (numpy): joint error, force error, contact gate, condition, torque.

Conventions
-----------
- Shapes: batch/time dimensions first, the quantity last: ``q (..., n_joints)`` [rad],
  ``f (..., 3)`` [N], ``tau (..., n_joints)`` [N m]; per-sample masks have the leading shape
  ``(...)`` (or ``(..., n_joints)`` for per-joint masks).
- A mask is True where a sample counts. Values under a False mask may be NaN (e.g. missing
  force labels); a NaN or inf anywhere a mask is True raises :class:`SchemaError`. Without a
  mask every value must be finite.
- Shape mismatches raise :class:`SchemaError` naming both arrays and their shapes.
- Empty segments (e.g. no contact samples) give ``None`` in the result dictionaries together
  with their sample count 0, never a silent NaN.

Definitions
-----------
- Joint MAE [deg]: mean over samples of ``|q_pred - q_true|`` per joint, in degrees.
- Force MAE [N]: mean over labelled samples of the Euclidean norm ``||f_pred - f_true||_2``,
  reported over all labelled samples and separately on contact and no-contact samples; the
  per-axis mean absolute errors are reported beside it.
- Contact gate: the gate fires where ``p_contact >= threshold``. Precision, recall and F1 are
  per sample. A *contact event* is a maximal run of consecutive (valid) contact samples
  ``[i0, i1]``; its *detection latency* is ``t[k] - t[i0]`` where ``k`` is the first sample
  in ``[i0, i1]`` at which the gate fires (0 when the gate is already on at onset; for a gate
  that decides sample k only later, e.g. a fixed-lag gate, ``decided_t[k] - t[i0]``). An event
  during which the gate never fires is *missed* and has no latency; latency statistics are
  over detected events and the miss count is reported beside them.
- Gate errors at label changes: a *label change* is the midpoint in time between two
  consecutive valid samples whose contact labels differ. For each band ``b`` of
  :data:`GATE_CHANGE_BANDS_S` the gate result reports the share of false alarms and of misses
  that lie within ``b`` seconds of a label change, and the F1 over only the samples farther
  than ``b`` from every label change (the gate's errors away from onsets and releases).
- Condition: accuracy of the arg-max class; ROC AUC from the rank (Mann-Whitney) statistic
  with tied scores counted one half; multi-class AUC is the macro one-vs-rest mean.
- Torque RMSE [N m]: root mean square of ``tau_pred - tau_true`` per joint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import rankdata

from neuract.data.trajectory import check_time
from neuract.errors import SchemaError

__all__ = [
    "GateCounts",
    "condition_metrics",
    "confusion_matrix",
    "decision_f1",
    "force_mae",
    "gate_counts",
    "gate_metrics",
    "joint_mae_deg",
    "joint_mae_summary",
    "roc_auc",
    "torque_rmse",
    "true_runs",
]


# ------------------------------------------------------------------------------- checks
def _float(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise SchemaError(f"{name} has dtype {a.dtype}; expected real numbers")
    if np.iscomplexobj(a):
        raise SchemaError(f"{name} is complex; expected real numbers")
    return a.astype(np.float64)


def _same_shape(a: np.ndarray, b: np.ndarray, na: str, nb: str) -> None:
    if a.shape != b.shape:
        raise SchemaError(f"{na} has shape {a.shape} but {nb} has shape {b.shape}; "
                          "they must match")


def _mask(mask: Any, shape: tuple[int, ...], name: str, per_last: bool = True) -> np.ndarray:
    """Broadcast a boolean mask of shape ``shape[:-1]`` or ``shape`` to ``shape``."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        if not np.isin(m, (0, 1)).all():
            raise SchemaError(f"{name} must be boolean (0/1); got values outside 0/1")
        m = m.astype(bool)
    if m.shape == shape:
        return m
    if per_last and m.shape == shape[:-1]:
        return np.broadcast_to(m[..., None], shape)
    accepted = f"{shape[:-1]} or {shape}" if per_last else f"{shape}"
    raise SchemaError(f"{name} has shape {m.shape}; expected {accepted}")


def _finite_where(a: np.ndarray, m: np.ndarray, name: str) -> None:
    bad = m & ~np.isfinite(a)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise SchemaError(f"{name} is {a[idx]} at index {idx}, a sample that counts (mask "
                          f"True); {int(bad.sum())} such value(s). Mask them out or repair them")


def _mean_or_none(x: np.ndarray) -> float | None:
    return float(x.mean()) if x.size else None


def _per_joint_mean(pred: Any, true: Any, mask: Any, names: tuple[str, str], f) -> np.ndarray:
    """Per-joint mean of ``f(pred - true)`` over the samples under ``mask``, shape (n_joints,)."""
    p, t = _float(pred, names[0]), _float(true, names[1])
    _same_shape(p, t, *names)
    if p.ndim < 1:
        raise SchemaError(f"{names[0]} must have at least one dimension (..., n_joints)")
    m = _mask(mask, p.shape, "mask")
    _finite_where(p, m, names[0])
    _finite_where(t, m, names[1])
    err = np.where(m, f(p - t), 0.0).reshape(-1, p.shape[-1])
    cnt = m.reshape(-1, p.shape[-1]).sum(0)
    if (cnt == 0).any():
        raise SchemaError(f"no sample under the mask for joint index(es) "
                          f"{np.flatnonzero(cnt == 0).tolist()}")
    return err.sum(0) / cnt


# ---------------------------------------------------------------------------- joints
def joint_mae_deg(q_pred: Any, q_true: Any, mask: Any = None) -> np.ndarray:
    """Per-joint mean absolute error [deg], shape (n_joints,).

    q_pred, q_true: (..., n_joints) joint positions [rad]; mask: (...) or (..., n_joints).
    Raises :class:`SchemaError` if a joint has no sample under the mask.
    """
    return np.degrees(_per_joint_mean(q_pred, q_true, mask, ("q_pred", "q_true"), np.abs))


def joint_mae_summary(q_pred: Any, q_true: Any, joint_names: Sequence[str], mask: Any = None,
                      gripper: str | None = "gripper") -> dict[str, Any]:
    """Joint MAE [deg] per joint plus arm mean/worst and the gripper on its own.

    Returns ``{"per_joint": {name: deg}, "arm_mean": deg, "arm_max": deg, "gripper": deg or
    None}``; the arm joints are all joints except ``gripper`` (if present).
    """
    mae = joint_mae_deg(q_pred, q_true, mask)
    names = list(joint_names)
    if len(names) != mae.shape[0]:
        raise SchemaError(f"joint_names has {len(names)} names {names} but the arrays have "
                          f"{mae.shape[0]} joints")
    arm = [i for i, n in enumerate(names) if n != gripper]
    grip = [i for i, n in enumerate(names) if n == gripper]
    return {
        "per_joint": {n: float(v) for n, v in zip(names, mae)},
        "arm_mean": float(mae[arm].mean()) if arm else None,
        "arm_max": float(mae[arm].max()) if arm else None,
        "gripper": float(mae[grip[0]]) if grip else None,
    }


# ----------------------------------------------------------------------------- force
def force_mae(f_pred: Any, f_true: Any, contact: Any, mask: Any = None) -> dict[str, Any]:
    """Force MAE [N] on all labelled, contact and no-contact samples.

    f_pred, f_true: (..., 3) end-effector force [N]; contact: (...) bool; mask: (...) bool,
    True where ``f_true`` is a real label (``ee_force_mask``); unlabelled samples may be NaN.
    Returns ``{"all", "contact", "no_contact"}`` (norm MAE [N] or None when empty),
    ``"per_axis"`` (3 MAEs [N] over all labelled samples) and sample counts.
    """
    p, t = _float(f_pred, "f_pred"), _float(f_true, "f_true")
    _same_shape(p, t, "f_pred", "f_true")
    if p.ndim < 1 or p.shape[-1] != 3:
        raise SchemaError(f"f_pred has shape {p.shape}; expected (..., 3)")
    lead = p.shape[:-1]
    c = _mask(contact, lead, "contact", per_last=False)
    m = _mask(mask, lead, "mask", per_last=False)
    m3 = np.broadcast_to(m[..., None], p.shape)
    _finite_where(p, m3, "f_pred")
    _finite_where(t, m3, "f_true")
    diff = np.where(m3, p - t, 0.0)
    err = np.linalg.norm(diff, axis=-1)
    on, off = m & c, m & ~c
    return {
        "all": _mean_or_none(err[m]),
        "contact": _mean_or_none(err[on]),
        "no_contact": _mean_or_none(err[off]),
        "per_axis": np.abs(diff[m]).mean(0).tolist() if m.any() else None,
        "n_all": int(m.sum()),
        "n_contact": int(on.sum()),
        "n_no_contact": int(off.sum()),
    }


# ------------------------------------------------------------------------------ gate
GATE_CHANGE_BANDS_S = (0.1, 0.25, 0.5)
"""distances [s] from a contact-label change within which the gate's errors are counted apart"""


def _f1_of(tp: int, fp: int, fn: int) -> float | None:
    """F1 = 2 tp / (2 tp + fp + fn) over data with contacts: 0 where every contact was missed
    without an alarm; None without any contact sample (a contact-free stretch's false alarms
    are counted apart, ``n_false_alarms``)."""
    return 2 * tp / (2 * tp + fp + fn) if tp + fn else None


def decision_f1(fire: np.ndarray, y: np.ndarray) -> float:
    """F1 of boolean decisions ``fire`` against boolean labels ``y`` (same shape), pooled:
    2 tp / (fired + labelled); 0.0 where nothing fired and nothing is labelled."""
    return 2 * float((fire & y).sum()) / max(float(fire.sum() + y.sum()), 1.0)


@dataclass
class GateCounts:
    """Sufficient statistics of the contact-gate metrics; add them up over trajectories."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    latencies: list[float] = field(default_factory=list)  # [s], detected events only
    n_events: int = 0
    away: list[list[int]] = field(
        default_factory=lambda: [[0, 0, 0] for _ in GATE_CHANGE_BANDS_S])
    """per band of :data:`GATE_CHANGE_BANDS_S`: (tp, fp, fn) of the samples farther than it
    from every label change"""

    def __add__(self, other: GateCounts) -> GateCounts:
        return GateCounts(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn,
                          self.tn + other.tn, self.latencies + other.latencies,
                          self.n_events + other.n_events,
                          [[a + b for a, b in zip(x, y, strict=True)]
                           for x, y in zip(self.away, other.away, strict=True)])

    def metrics(self) -> dict[str, Any]:
        """precision, recall (None where undefined), F1 (None without any contact sample),
        accuracy, sample and event counts
        (``n_false_alarms``, ``n_missed_samples``), latency statistics [s] and
        ``label_changes`` (the errors near contact onsets and ends, module docstring)."""
        prec = self.tp / (self.tp + self.fp) if self.tp + self.fp else None
        rec = self.tp / (self.tp + self.fn) if self.tp + self.fn else None
        f1 = _f1_of(self.tp, self.fp, self.fn)
        n = self.tp + self.fp + self.fn + self.tn
        lat = np.asarray(self.latencies, dtype=np.float64)
        return {
            "precision": prec,
            "recall": rec,
            "f1": f1,
            "accuracy": (self.tp + self.tn) / n if n else None,
            "n_samples": n,
            "n_false_alarms": self.fp,
            "n_missed_samples": self.fn,
            "n_events": self.n_events,
            "n_detected": int(lat.size),
            "n_missed": self.n_events - int(lat.size),
            "latency_mean_s": float(lat.mean()) if lat.size else None,
            "latency_median_s": float(np.median(lat)) if lat.size else None,
            "latency_max_s": float(lat.max()) if lat.size else None,
            "label_changes": {
                "bands_s": list(GATE_CHANGE_BANDS_S),
                "false_alarm_share_near": [(self.fp - a[1]) / self.fp if self.fp else None
                                           for a in self.away],
                "miss_share_near": [(self.fn - a[2]) / self.fn if self.fn else None
                                    for a in self.away],
                "f1_away": [_f1_of(*a) for a in self.away],
            },
        }


def true_runs(x: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) half-open index ranges of maximal True runs of a 1-D bool array."""
    d = np.diff(np.concatenate([[0], x.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


def gate_counts(p_contact: Any, contact: Any, t: Any, threshold: float = 0.5,
                valid: Any = None, decided_t: Any = None) -> GateCounts:
    """Gate statistics of one trajectory (see the module docstring for the definitions).

    p_contact: (T,) gate probability in [0, 1] (or bool); contact: (T,) true contact flags;
    t: (T,) strictly increasing times [s]; valid: (T,) bool, samples that count (an invalid
    sample also ends a contact event); decided_t: (T,) [s] when each sample's decision was
    available, at or after its own time (a fixed-lag gate decides later; default: t): a
    detection's latency runs to it.
    """
    p = _float(p_contact, "p_contact")
    t = _float(t, "t")
    if p.ndim != 1:
        raise SchemaError(f"p_contact has shape {p.shape}; expected (T,)")
    _same_shape(p, t, "p_contact", "t")
    c = _mask(contact, p.shape, "contact", per_last=False)
    v = _mask(valid, p.shape, "valid", per_last=False)
    _finite_where(p, v, "p_contact")
    _finite_where(t, np.ones_like(v), "t")
    check_time(t, "gate_counts")
    if decided_t is None:
        decided_t = t
    else:
        decided_t = _float(decided_t, "decided_t")
        _same_shape(decided_t, t, "decided_t", "t")
        _finite_where(decided_t, v, "decided_t")
        if not (decided_t[v] >= t[v]).all():
            raise SchemaError("decided_t is before the sample's own time t at some valid "
                              "samples; a decision cannot come before its sample")
    fire = (np.where(v, p, -np.inf) >= threshold) & v
    c = c & v
    counts = GateCounts(tp=int((fire & c).sum()), fp=int((fire & ~c & v).sum()),
                        fn=int((~fire & c).sum()), tn=int((~fire & ~c & v).sum()))
    # distance of each valid sample to the nearest label change (between consecutive valid
    # samples whose labels differ)
    iv = np.flatnonzero(v)
    flip = np.flatnonzero(c[iv[1:]] != c[iv[:-1]])
    t_change = 0.5 * (t[iv[flip]] + t[iv[flip + 1]])
    dist = np.full(p.shape, np.inf)
    if t_change.size:
        k = np.clip(np.searchsorted(t_change, t), 1, t_change.size)
        dist = np.minimum(np.abs(t - t_change[k - 1]),
                          np.abs(t - t_change[np.minimum(k, t_change.size - 1)]))
    for b, band in enumerate(GATE_CHANGE_BANDS_S):
        far = v & (dist > band)
        counts.away[b] = [int((fire & c & far).sum()), int((fire & ~c & far).sum()),
                          int((~fire & c & far).sum())]
    for i0, i1 in true_runs(c):
        counts.n_events += 1
        hit = np.flatnonzero(fire[i0:i1])
        if hit.size:
            counts.latencies.append(float(decided_t[i0 + hit[0]] - t[i0]))
    return counts


def gate_metrics(p_contact: Any, contact: Any, t: Any, threshold: float = 0.5,
                 valid: Any = None) -> dict[str, Any]:
    """Precision, recall, F1 and detection latency of a contact gate on one trajectory.

    For several trajectories add :func:`gate_counts` results and call ``.metrics()``.
    """
    return gate_counts(p_contact, contact, t, threshold, valid).metrics()


# ------------------------------------------------------------------------- condition
def roc_auc(scores: Any, y_true: Any) -> float | None:
    """Binary ROC AUC of ``scores`` (higher = class 1) against ``y_true`` in {0, 1}.

    Rank statistic (Mann-Whitney U / (n_pos n_neg)) with average ranks for ties; None when
    only one class is present.
    """
    s = _float(scores, "scores").ravel()
    y = np.asarray(y_true).ravel()
    if s.shape != y.shape:
        raise SchemaError(f"scores has {s.size} values but y_true has {y.size}")
    if not np.isin(y, (0, 1)).all():
        raise SchemaError("y_true must be binary (0/1) for roc_auc")
    _finite_where(s, np.ones(s.shape, bool), "scores")
    y = y.astype(bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    r = rankdata(s)
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def confusion_matrix(y_true: Any, y_pred: Any, n_classes: int) -> np.ndarray:
    """(n_classes, n_classes) counts, rows = true class, columns = predicted class."""
    yt, yp = np.asarray(y_true).ravel(), np.asarray(y_pred).ravel()
    if yt.shape != yp.shape:
        raise SchemaError(f"y_true has {yt.size} values but y_pred has {yp.size}")
    for name, y in (("y_true", yt), ("y_pred", yp)):
        if y.size and (not np.issubdtype(y.dtype, np.integer) and y.dtype != np.bool_
                       or y.min() < 0 or y.max() >= n_classes):
            raise SchemaError(f"{name} must hold integer classes 0..{n_classes - 1}")
    cm = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(cm, (yt.astype(np.int64), yp.astype(np.int64)), 1)
    return cm


def balanced_accuracy(confusion: Any) -> float | None:
    """Mean per-class recall of a confusion matrix (rows: true class), over the classes that
    occur; None if none does. Unlike accuracy it does not reward predicting the majority
    class (a test set with few degraded motors)."""
    cm = np.asarray(confusion, dtype=np.float64)
    n = cm.sum(1)
    seen = n > 0
    return float((np.diag(cm)[seen] / n[seen]).mean()) if seen.any() else None


def condition_metrics(proba: Any, y_true: Any) -> dict[str, Any]:
    """Accuracy, balanced accuracy, ROC AUC and confusion matrix of condition predictions.

    proba: (N,) probability of class 1 (binary) or (N, K) class probabilities;
    y_true: (N,) integer classes 0..K-1 (0 normal, 1 degraded).
    """
    p = _float(proba, "proba")
    y = np.asarray(y_true)
    if p.ndim == 1:
        p = np.stack([1.0 - p, p], axis=-1)
    if p.ndim != 2 or p.shape[0] != y.shape[0] or y.ndim != 1:
        raise SchemaError(f"proba has shape {np.shape(proba)} and y_true {y.shape}; expected "
                          "(N,) or (N, K) and (N,)")
    _finite_where(p, np.ones(p.shape, bool), "proba")
    k = p.shape[1]
    pred = p.argmax(-1)
    cm = confusion_matrix(y, pred, k)
    aucs = [roc_auc(p[:, j], (y == j).astype(int)) for j in (range(k) if k > 2 else [1])]
    aucs = [a for a in aucs if a is not None]
    return {
        "accuracy": float((pred == y).mean()) if y.size else None,
        "balanced_accuracy": balanced_accuracy(cm),
        "auc": float(np.mean(aucs)) if aucs else None,
        "confusion": cm.tolist(),
        "n": int(y.size),
    }


# ---------------------------------------------------------------------------- torque
def torque_rmse(tau_pred: Any, tau_true: Any, mask: Any = None) -> np.ndarray:
    """Per-joint torque RMSE [N m], shape (n_joints,); tau: (..., n_joints), mask (...)."""
    return np.sqrt(_per_joint_mean(tau_pred, tau_true, mask, ("tau_pred", "tau_true"),
                                   np.square))
