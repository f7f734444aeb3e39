"""Numerical joint velocity and acceleration with a Savitzky-Golay filter.

``add_derivatives`` fits, in a sliding window of ``window_s`` seconds (an odd number of
samples, at least ``polyorder + 2``), a polynomial of degree ``polyorder`` (default 3) to each
joint position by least squares and differentiates it analytically
(``scipy.signal.savgol_filter`` with ``deriv=1, 2`` and ``delta = dt``; ``mode="interp"``
fits the edge windows instead of padding). A polynomial of degree <= ``polyorder`` is
differentiated exactly. The filter needs a uniform time step: resample jittery logs first
(:func:`neuract.data.resample.resample`).

Servo-reported velocities are kept in ``qd`` unless ``replace_qd=True``; ``qdd`` is always
(re)computed.
"""

from __future__ import annotations

import numpy as np

from neuract.data.resample import is_uniform
from neuract.data.trajectory import Trajectory
from neuract.errors import ConfigError, SchemaError


def savgol_window(rate_hz: float, window_s: float, polyorder: int) -> int:
    """Odd window length [samples] closest to ``window_s``, at least ``polyorder + 2``."""
    if window_s <= 0 or rate_hz <= 0:
        raise ConfigError(f"window_s {window_s} and rate {rate_hz} must be positive")
    n = int(round(window_s * rate_hz))
    n = max(n, polyorder + 2)
    return n if n % 2 == 1 else n + 1


def savgol_derivative(
    x: np.ndarray, dt: float, deriv: int, window: int, polyorder: int = 3
) -> np.ndarray:
    """``deriv``-th time derivative of ``x`` (T, ...) sampled every ``dt`` [s], along axis 0."""
    from scipy.signal import savgol_filter

    return savgol_filter(x, window, polyorder, deriv=deriv, delta=dt, axis=0, mode="interp")


def add_derivatives(
    traj: Trajectory, window_s: float = 0.05, polyorder: int = 3, replace_qd: bool = False
) -> Trajectory:
    """``traj`` with ``qdd`` (and ``qd`` if absent or ``replace_qd``) from ``q`` [rad]."""
    src = traj.meta.source or traj.meta.name
    t = traj["t"]
    if not is_uniform(t):
        raise SchemaError(
            f"{src}: time steps are not uniform (jitter > 0.1 % of the median "
            "step); resample first (neuract.data.resample.resample or ingest "
            "--resample-hz)"
        )
    if len(t) < 2:
        raise SchemaError(f"{src}: {len(t)} sample(s); derivatives need at least 2")
    dt = float(np.median(np.diff(t)))
    window = savgol_window(1.0 / dt, window_s, polyorder)
    if window > len(t):
        raise SchemaError(
            f"{src}: {len(t)} samples, fewer than the {window}-sample "
            f"Savitzky-Golay window ({window_s} s); use a shorter window_s"
        )
    new = {"qdd": savgol_derivative(traj["q"], dt, 2, window, polyorder)}
    if replace_qd or "qd" not in traj:
        new["qd"] = savgol_derivative(traj["q"], dt, 1, window, polyorder)
    labels = dict(traj.meta.labels)
    labels["derivatives"] = {
        "filter": "savgol",
        "window_samples": window,
        "polyorder": polyorder,
        "qd": "qd" in new,
    }
    return traj.replace(new, labels=labels)


__all__ = ["add_derivatives", "savgol_derivative", "savgol_window"]
