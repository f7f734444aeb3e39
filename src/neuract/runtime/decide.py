"""The estimator's decisions, torch-free: the calibrated thresholds and filters resolved from
a model's stored values, their checks, the log-odds shift that maps a threshold to 0.5, and
the causal average one sample at a time. :mod:`neuract.estimate.filters` applies the same
decisions to whole episodes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neuract.errors import ConfigError

DEFAULT_CONDITION_TAU_S = 5.0
"""condition smoothing time constant [s] of a model without a selected one"""


def resolve_decisions(calibrated: Mapping[str, Any], n_joints: int,
                      condition_tau_s: float | None = None,
                      condition_threshold: float | Sequence[float] | None = None,
                      gate_threshold: float | None = None, gate_tau_s: float | None = None,
                      gate_release: float | None = None) -> tuple:
    """(condition_tau_s, condition_threshold, gate_threshold, gate_tau_s, gate_release):
    each argument left None takes the value in ``calibrated`` (a model's calibrated
    decisions, as a checkpoint's or an export's ``extra`` stores them), the gate's filter
    only together with the model's own gate threshold; without one, the defaults (0.5, no
    smoothing, :data:`DEFAULT_CONDITION_TAU_S`)."""
    if condition_threshold is None:
        condition_threshold = calibrated.get("condition_threshold", 0.5)
    condition_threshold = check_condition_threshold(condition_threshold, n_joints)
    if condition_tau_s is None:
        condition_tau_s = float(calibrated.get("condition_tau_s", DEFAULT_CONDITION_TAU_S))
    if not (isinstance(condition_tau_s, (int, float)) and np.isfinite(condition_tau_s)
            and condition_tau_s > 0):
        raise ConfigError(f"condition_tau_s={condition_tau_s!r} (--condition-tau-s); expected "
                          "a finite smoothing time constant > 0 s (a tiny one, e.g. 1e-9, "
                          "smooths nothing)")
    # the model's gate filter goes with the model's threshold: a caller that sets the
    # threshold gets a plain threshold unless it sets the filter too
    own = gate_threshold is None
    if own:
        gate_threshold = float(calibrated.get("gate_threshold", 0.5))
    if gate_tau_s is None:
        gate_tau_s = float(calibrated.get("gate_tau_s", 0.0)) if own else 0.0
    if gate_release is None:
        gate_release = (float(calibrated.get("gate_release", gate_threshold)) if own
                        else gate_threshold)
    return condition_tau_s, condition_threshold, gate_threshold, gate_tau_s, gate_release


def check_gate_filter(tau_s: float, threshold: float, release: float) -> None:
    """Refuse a gate filter (see :func:`~neuract.estimate.filters.gate_filter`) with a
    negative time constant, thresholds outside [0, 1] or a release above the detection
    threshold."""
    if not (np.isfinite(tau_s) and tau_s >= 0):
        raise ConfigError(f"gate_tau_s={tau_s!r}; expected a time constant >= 0 s")
    for name, v in (("gate_threshold", threshold), ("gate_release", release)):
        if not 0 <= v <= 1:
            raise ConfigError(f"{name}={v!r}; expected a probability in [0, 1]")
    if release > threshold:
        raise ConfigError(f"gate_release={release!r} > gate_threshold={threshold!r}; a contact "
                          "must end at or below the probability that starts it")


def check_condition_threshold(th: Any, n: int) -> float | np.ndarray:
    """A condition threshold: one value, or one per motor (n,)."""
    a = np.asarray(th, dtype=np.float64)
    if a.shape not in ((), (n,)) or not ((a > 0) & (a < 1)).all():
        raise ConfigError(f"condition_threshold={th!r}; expected one value or {n} per-motor "
                          "values in (0, 1)")
    return float(a) if a.ndim == 0 else a


def log_odds(th: float | np.ndarray) -> float | np.ndarray:
    """The log-odds of a threshold (clipped to [1e-6, 1 - 1e-6]): the shift
    :func:`~neuract.estimate.filters.shift_threshold` applies."""
    th = np.clip(th, 1e-6, 1 - 1e-6)
    return np.log(th / (1 - th))


def shift_probability(p: float, shift: float | None) -> float:
    """:func:`~neuract.estimate.filters.shift_threshold` of one probability (shift:
    :func:`log_odds` of the threshold; None for 0.5: p as it is)."""
    if shift is None:
        return p
    q = min(max(p, 1e-9), 1 - 1e-9)
    return 1.0 / (1.0 + math.exp(-(math.log(q) - math.log1p(-q) - shift)))


class CausalMean:
    """:func:`~neuract.estimate.filters.smooth_causal` one sample at a time. That
    function gives its first sample the weight of the interval to the second; the first
    output is the first sample itself whatever that weight, so the average starts one sample
    late, when the interval is known."""

    def __init__(self, tau_s: float):
        self.tau_s = tau_s
        self.first: tuple[float, np.ndarray] | None = None
        self.acc: np.ndarray | None = None
        self.wsum = 0.0
        self.t_prev = 0.0

    def update(self, t: float, p: np.ndarray | float) -> np.ndarray | float:
        """The average after the sample p (an array, or one probability as a float) at
        time t [s]."""
        if self.first is None:
            self.first = (t, p)
            return p * 1.0  # (a copy, in float64)
        if self.acc is None:  # the first sample's weight: the first interval
            t0, p0 = self.first
            a0 = 1.0 - math.exp(-max(t - t0, 0.0) / self.tau_s)
            self.acc, self.wsum, self.t_prev = a0 * p0, a0, t0
        a = 1.0 - math.exp(-max(t - self.t_prev, 0.0) / self.tau_s)
        self.acc = self.acc + a * (p - self.acc)
        self.wsum = self.wsum + a * (1.0 - self.wsum)
        self.t_prev = t
        return self.acc / max(self.wsum, 1e-300)


__all__ = ["CausalMean", "DEFAULT_CONDITION_TAU_S", "check_condition_threshold",
           "check_gate_filter", "log_odds", "resolve_decisions", "shift_probability"]
