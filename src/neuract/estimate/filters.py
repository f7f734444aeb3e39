"""Post-processing of the estimator's per-sample outputs: the contact gate's filter (causal
smoothing, threshold, hysteresis) and the condition smoothing, with their checks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neuract.errors import ConfigError
from neuract.neuralactuator.model import NeuralActuator

DEFAULT_CONDITION_TAU_S = 5.0
"""condition smoothing time constant [s] of a model without a selected one"""


def resolve_filters(model: NeuralActuator, condition_tau_s: float | None = None,
                    condition_threshold: float | Sequence[float] | None = None,
                    gate_threshold: float | None = None, gate_tau_s: float | None = None,
                    gate_release: float | None = None) -> tuple:
    """(condition_tau_s, condition_threshold, gate_threshold, gate_tau_s, gate_release) of
    :func:`estimate`: each argument left None takes the model's calibrated value (see
    there), the gate's filter only together with the model's own gate threshold."""
    if condition_threshold is None:
        condition_threshold = getattr(model, "condition_threshold", 0.5)
    condition_threshold = _threshold(condition_threshold, model.cfg.n_joints)
    if condition_tau_s is None:
        condition_tau_s = float(getattr(model, "condition_tau_s", DEFAULT_CONDITION_TAU_S))
    if not (isinstance(condition_tau_s, (int, float)) and np.isfinite(condition_tau_s)
            and condition_tau_s > 0):
        raise ConfigError(f"condition_tau_s={condition_tau_s!r} (--condition-tau-s); expected "
                          "a finite smoothing time constant > 0 s (a tiny one, e.g. 1e-9, "
                          "smooths nothing)")
    # the model's gate filter goes with the model's threshold: a caller that sets the
    # threshold gets a plain threshold unless it sets the filter too
    own = gate_threshold is None
    if own:
        gate_threshold = float(getattr(model, "gate_threshold", 0.5))
    if gate_tau_s is None:
        gate_tau_s = float(getattr(model, "gate_tau_s", 0.0)) if own else 0.0
    if gate_release is None:
        gate_release = (float(getattr(model, "gate_release", gate_threshold)) if own
                        else gate_threshold)
    return condition_tau_s, condition_threshold, gate_threshold, gate_tau_s, gate_release


def check_gate_filter(tau_s: float, threshold: float, release: float) -> None:
    """Refuse a gate filter (see :func:`gate_filter`) with a negative time constant,
    thresholds outside [0, 1] or a release above the detection threshold."""
    if not (np.isfinite(tau_s) and tau_s >= 0):
        raise ConfigError(f"gate_tau_s={tau_s!r}; expected a time constant >= 0 s")
    for name, v in (("gate_threshold", threshold), ("gate_release", release)):
        if not 0 <= v <= 1:
            raise ConfigError(f"{name}={v!r}; expected a probability in [0, 1]")
    if release > threshold:
        raise ConfigError(f"gate_release={release!r} > gate_threshold={threshold!r}; a contact "
                          "must end at or below the probability that starts it")


def _threshold(th, n: int) -> float | np.ndarray:
    """A condition threshold: one value, or one per motor (n,)."""
    a = np.asarray(th, dtype=np.float64)
    if a.shape not in ((), (n,)) or not ((a > 0) & (a < 1)).all():
        raise ConfigError(f"condition_threshold={th!r}; expected one value or {n} per-motor "
                          "values in (0, 1)")
    return float(a) if a.ndim == 0 else a


def log_odds(th: float | np.ndarray) -> float | np.ndarray:
    """The log-odds of a threshold (clipped to [1e-6, 1 - 1e-6]): the shift
    :func:`shift_threshold` applies."""
    th = np.clip(th, 1e-6, 1 - 1e-6)
    return np.log(th / (1 - th))


def shift_threshold(p: np.ndarray, threshold: float | np.ndarray) -> np.ndarray:
    """Probabilities shifted in log-odds so that ``threshold`` maps to 0.5 (NaN kept);
    threshold: one value, or one per entry of p's last axis."""
    if np.ndim(threshold) == 0 and threshold == 0.5:
        return p
    q = np.clip(p, 1e-9, 1 - 1e-9)
    return 1.0 / (1.0 + np.exp(-(np.log(q) - np.log1p(-q) - log_odds(threshold))))


def hysteresis(p: np.ndarray, on: float, off: float,
               starts: np.ndarray | None = None) -> np.ndarray:
    """Causal two-threshold decision over p (N,): on from the first sample with p >= on until
    the first with p < off (off <= on; NaN counts as below). starts: indices where a new
    sequence begins (the state resets to off there unless p >= on); default [0]."""
    if not off <= on:
        raise ConfigError(f"hysteresis off={off} > on={on}; the release threshold must not "
                          "exceed the detection threshold")
    idx = np.arange(len(p))
    up = p >= on
    down = ~(p >= off)
    if starts is not None:
        s = np.asarray(starts, dtype=np.int64)
        down[s] |= ~up[s]
    last_up = np.maximum.accumulate(np.where(up, idx, -1))
    last_down = np.maximum.accumulate(np.where(down, idx, -1))
    return last_up > last_down


def gate_filter(p: np.ndarray, t: np.ndarray, tau_s: float, threshold: float,
                release: float | None = None) -> np.ndarray:
    """The contact probability p (T,) at times t (T,) [s] after the gate's causal filter:
    smoothed (:func:`smooth_causal`, time constant tau_s; 0: none), then a contact begins
    where the smoothed probability reaches ``threshold`` and lasts until it falls below
    ``release`` (default: ``threshold``, a plain threshold). Returned shifted in log-odds so
    that the decision is ``>= 0.5`` at every sample: by ``release`` while a contact lasts, by
    ``threshold`` otherwise."""
    release = threshold if release is None else release
    check_gate_filter(tau_s, threshold, release)
    p = np.asarray(p, dtype=np.float64)
    if tau_s > 0:
        p = smooth_causal(p, t, tau_s)
    if release >= threshold:
        return shift_threshold(p, threshold)
    on = hysteresis(p, threshold, release)
    return np.where(on, shift_threshold(p, release), shift_threshold(p, threshold))


def smooth_causal(p: np.ndarray, t: np.ndarray, tau_s: float) -> np.ndarray:
    """Causal exponential moving average of p: (T, ...) over times t: (T,) [s] with time
    constant tau_s, its start-up bias removed: a running mean over the first seconds (every
    sample so far weighted alike), forgetting with tau_s afterwards. An average started at the
    first sample instead would keep that one sample's weight at exp(-t / tau_s). The
    streaming estimator computes the same average one sample at a time
    (:class:`neuract.estimate.stream_parts.CausalMean`)."""
    out = np.empty_like(p, dtype=np.float64)
    acc, wsum = np.zeros(p.shape[1:]), 0.0
    dts = np.diff(t, prepend=t[0] - (t[1] - t[0] if len(t) > 1 else 0.01))
    for i in range(len(p)):
        a = 1.0 - np.exp(-max(float(dts[i]), 0.0) / tau_s)
        acc = acc + a * (p[i] - acc)
        wsum = wsum + a * (1.0 - wsum)
        out[i] = acc / max(wsum, 1e-300)
    return out
