"""Input checks shared by the evaluation metrics (conventions: :mod:`neuract.eval.metrics`):
real-number arrays, matching shapes, boolean masks, finite values where a mask counts."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuract.errors import SchemaError


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
