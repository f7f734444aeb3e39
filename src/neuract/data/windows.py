"""History/horizon windows over a uniformly sampled trajectory, requested in seconds.

A window is anchored at sample ``i``: its history is samples ``i - h + 1 .. i`` (``h``
samples, the present included) and its horizon is ``i + 1 .. i + H`` (``H`` future
samples). Anchors run from ``h - 1`` to ``T - H - 1`` in steps of ``stride``.

Durations are converted with the trajectory's rate and must be whole numbers of samples
(within ``tol`` samples): asking for 0.1 s of history at 62.5 Hz (6.25 samples) is an error
that names the nearest valid durations, rather than a silent rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuract.data.resample import is_uniform
from neuract.data.trajectory import Trajectory
from neuract.errors import ConfigError, SchemaError


@dataclass(frozen=True)
class WindowSpec:
    """Window sizes in samples: ``history`` >= 1, ``horizon`` >= 0, ``stride`` >= 1."""

    history: int
    horizon: int
    stride: int = 1

    def __post_init__(self) -> None:
        if self.history < 1 or self.horizon < 0 or self.stride < 1:
            raise ConfigError(
                f"window sizes history={self.history} (>= 1), horizon="
                f"{self.horizon} (>= 0), stride={self.stride} (>= 1) invalid"
            )


def _samples(seconds: float, rate_hz: float, what: str, tol: float, minimum: int) -> int:
    x = seconds * rate_hz
    n = int(round(x))
    if not np.isfinite(x) or abs(x - n) > tol or n < minimum:
        lo = max(minimum, int(np.floor(x)))
        options = sorted({lo, lo + 1})
        valid = ", ".join(f"{k / rate_hz:.6g} s ({k} samples)" for k in options)
        raise ConfigError(
            f"{what} {seconds} s at {rate_hz:.6g} Hz is {x:.4g} samples; "
            f"expected a whole number >= {minimum}, e.g. {valid}"
        )
    return n


def window_spec(
    rate_hz: float,
    history_s: float,
    horizon_s: float = 0.0,
    stride_s: float | None = None,
    tol: float = 0.01,
) -> WindowSpec:
    """Convert durations [s] into a :class:`WindowSpec` at ``rate_hz`` (see module doc)."""
    if not rate_hz or rate_hz <= 0:
        raise ConfigError(f"rate_hz is {rate_hz}; expected a positive rate")
    h = _samples(history_s, rate_hz, "history", tol, 1)
    H = _samples(horizon_s, rate_hz, "horizon", tol, 0)
    s = 1 if stride_s is None else _samples(stride_s, rate_hz, "stride", tol, 1)
    return WindowSpec(h, H, s)


def window_anchors(n_samples: int, spec: WindowSpec, valid: np.ndarray | None = None) -> np.ndarray:
    """Anchor indices (N,) of every window that fits in ``n_samples`` samples.

    valid: optional (T,) or (T, n) bool; windows touching an invalid sample are skipped.
    """
    first, last = spec.history - 1, n_samples - spec.horizon - 1
    if last < first:
        return np.zeros(0, dtype=np.int64)
    anchors = np.arange(first, last + 1, spec.stride, dtype=np.int64)
    if valid is not None:
        ok = np.asarray(valid, dtype=bool)
        ok = ok.all(axis=1) if ok.ndim == 2 else ok
        bad = np.concatenate([[0], np.cumsum(~ok)])  # bad[k] = invalid samples before k
        lo, hi = anchors - spec.history + 1, anchors + spec.horizon + 1
        anchors = anchors[(bad[hi] - bad[lo]) == 0]
    return anchors


def window_indices(anchors: np.ndarray, spec: WindowSpec) -> tuple[np.ndarray, np.ndarray]:
    """Sample indices: history (N, history) and horizon (N, horizon), for ``x[idx]``."""
    a = np.asarray(anchors, dtype=np.int64)[:, None]
    hist = a + np.arange(-spec.history + 1, 1)[None, :]
    fut = a + np.arange(1, spec.horizon + 1)[None, :]
    return hist, fut


def make_windows(
    traj: Trajectory,
    history_s: float,
    horizon_s: float = 0.0,
    stride_s: float | None = None,
    skip_invalid: bool = True,
    tol: float = 0.01,
) -> tuple[WindowSpec, np.ndarray]:
    """Spec and anchors of the windows of ``traj`` (uniform sampling required)."""
    if not is_uniform(traj["t"]):
        raise SchemaError(
            f"{traj.meta.source or traj.meta.name}: time steps are not uniform; "
            "windows are counted in samples: resample first"
        )
    spec = window_spec(traj.meta.rate_hz, history_s, horizon_s, stride_s, tol)
    valid = traj.get("valid") if skip_invalid else None
    return spec, window_anchors(len(traj), spec, valid)


__all__ = ["WindowSpec", "make_windows", "window_anchors", "window_indices", "window_spec"]
