"""Resampling onto a fixed time step, with jitter and gap handling.

Servo logs are sampled by a host loop: steps jitter (NAD: 9-24 ms around 17 ms) and reads
are sometimes missed. :func:`resample` puts a trajectory on the uniform grid
``t0 + k * dt`` (k = 0, 1, ... while <= t_end):

- float channels are linearly interpolated in time between the two bracketing samples;
- ``valid`` and ``ee_force_mask`` are True only where both bracketing samples are True
  (a repaired or unlabelled sample taints the interval around it);
- other boolean and integer channels (``torque_enable``, ``contact``, ``condition``) take the
  value of the nearest sample in time;
- gaps: grid points inside an interval longer than ``max_gap_factor`` times the median
  original step are marked ``valid = False`` (the ``valid`` channel is added if absent) and
  counted in ``meta.counts["gap_samples"]``; values there are still interpolated, so arrays
  stay finite.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from neuract.data.trajectory import Trajectory
from neuract.errors import ConfigError, SchemaError

_AND_CHANNELS = ("valid", "ee_force_mask")


def uniform_grid(t: np.ndarray, dt: float) -> np.ndarray:
    """``t[0] + k dt`` for k = 0 .. floor((t[-1] - t[0]) / dt) (with a 1e-9 relative slack)."""
    n = int(np.floor((t[-1] - t[0]) / dt * (1 + 1e-9) + 1e-9)) + 1
    return t[0] + dt * np.arange(n)


def resample(
    traj: Trajectory,
    rate_hz: float | None = None,
    dt: float | None = None,
    max_gap_factor: float = 3.0,
) -> Trajectory:
    """``traj`` on a uniform grid of step ``dt`` [s] (or ``1 / rate_hz``); see module doc."""
    if (rate_hz is None) == (dt is None):
        raise ConfigError("resample: give exactly one of rate_hz [Hz] or dt [s]")
    dt = float(dt if dt is not None else 1.0 / rate_hz)
    if not np.isfinite(dt) or dt <= 0:
        raise ConfigError(f"resample: dt is {dt}; expected a positive step [s]")
    t = traj["t"]
    if len(t) < 2:
        raise SchemaError(
            f"{traj.meta.source or traj.meta.name}: {len(t)} sample(s); resampling needs at least 2"
        )
    tg = uniform_grid(t, dt)
    # bracketing original samples of every grid point: t[lo] <= tg <= t[hi], lo < hi
    hi = np.clip(np.searchsorted(t, tg, side="right"), 1, len(t) - 1)
    lo = hi - 1
    eps = 1e-12 * max(1.0, float(np.max(np.abs(t))))
    at_lo, at_hi = np.abs(tg - t[lo]) <= eps, np.abs(tg - t[hi]) <= eps  # on a sample
    nearest = np.where(tg - t[lo] <= t[hi] - tg, lo, hi)
    out: dict[str, np.ndarray] = {"t": tg}
    for ch in traj.channels:
        if ch == "t":
            continue
        x = traj[ch]
        if x.dtype == np.float64:
            flat = x.reshape(len(t), -1)
            y = np.stack([np.interp(tg, t, flat[:, i]) for i in range(flat.shape[1])], axis=1)
            out[ch] = y.reshape((len(tg),) + x.shape[1:])
        elif ch in _AND_CHANNELS:
            shape = (-1,) + (1,) * (x.ndim - 1)
            both = x[lo] & x[hi]
            out[ch] = np.where(
                at_lo.reshape(shape), x[lo], np.where(at_hi.reshape(shape), x[hi], both)
            )
        else:
            out[ch] = x[nearest]
    med = float(np.median(np.diff(t)))
    gap = ((t[hi] - t[lo]) > max_gap_factor * med) & ~at_lo & ~at_hi
    counts = dict(traj.meta.counts)
    if gap.any():
        valid = out.get("valid", np.ones((len(tg), traj.n_joints), dtype=bool)).copy()
        valid[gap] = False
        out["valid"] = valid
    counts["gap_samples"] = counts.get("gap_samples", 0) + int(gap.sum())
    labels = dict(traj.meta.labels)
    labels["resampled"] = {"rate_hz": 1.0 / dt, "source_rate_hz": traj.meta.rate_hz}
    meta = dataclasses.replace(traj.meta, rate_hz=1.0 / dt, labels=labels, counts=counts)
    return Trajectory(out, meta)


def is_uniform(t: np.ndarray, rel_tol: float = 1e-3) -> bool:
    """True when every step of ``t`` is within ``rel_tol`` of the median step."""
    if len(t) < 3:
        return True
    d = np.diff(t)
    med = np.median(d)
    return bool(np.max(np.abs(d - med)) <= rel_tol * med)


def jitter(t: np.ndarray) -> dict[str, float]:
    """Step statistics [s]: median, min, max and the std of the steps."""
    d = np.diff(np.asarray(t, dtype=np.float64))
    return {
        "median": float(np.median(d)),
        "min": float(d.min()),
        "max": float(d.max()),
        "std": float(d.std()),
    }


__all__ = ["is_uniform", "jitter", "resample", "uniform_grid"]
