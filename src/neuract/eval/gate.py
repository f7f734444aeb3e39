"""Contact-gate metrics: precision, recall, F1, detection latency and the errors near
contact-label changes (definitions and conventions: :mod:`neuract.eval.metrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuract.data.trajectory import check_time
from neuract.errors import SchemaError
from neuract.eval.checks import _finite_where, _float, _mask, _same_shape

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
        ``label_changes`` (the errors near contact onsets and ends, :mod:`neuract.eval.metrics`)."""
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
    """Gate statistics of one trajectory (definitions: :mod:`neuract.eval.metrics`).

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
