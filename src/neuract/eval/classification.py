"""Condition (classification) metrics: accuracy, balanced accuracy, ROC AUC, confusion
matrix (definitions and conventions: :mod:`neuract.eval.metrics`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import rankdata

from neuract.errors import SchemaError
from neuract.eval.checks import _finite_where, _float


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
