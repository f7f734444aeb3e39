"""Post-processing of the estimator's per-sample outputs: the contact gate's filter (causal
smoothing, threshold, hysteresis) and the condition smoothing, with their checks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neuract.errors import ConfigError
from neuract.neuralactuator.model import NeuralActuator
from neuract.runtime.decide import (  # noqa: F401 (the decisions' checks live here too)
    DEFAULT_CONDITION_TAU_S,
    check_gate_filter,
    log_odds,
    resolve_decisions,
)

CALIBRATED = ("condition_threshold", "gate_threshold", "condition_tau_s", "gate_tau_s",
              "gate_release")
"""the model attributes that hold its calibrated decisions"""


def resolve_filters(model: NeuralActuator, condition_tau_s: float | None = None,
                    condition_threshold: float | Sequence[float] | None = None,
                    gate_threshold: float | None = None, gate_tau_s: float | None = None,
                    gate_release: float | None = None) -> tuple:
    """(condition_tau_s, condition_threshold, gate_threshold, gate_tau_s, gate_release) of
    :func:`estimate`: each argument left None takes the model's calibrated value (see
    there), the gate's filter only together with the model's own gate threshold
    (:func:`~neuract.runtime.decide.resolve_decisions` on the model's attributes)."""
    calibrated = {k: v for k in CALIBRATED if (v := getattr(model, k, None)) is not None}
    return resolve_decisions(calibrated, model.cfg.n_joints, condition_tau_s,
                             condition_threshold, gate_threshold, gate_tau_s, gate_release)


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
    (:class:`neuract.runtime.decide.CausalMean`)."""
    out = np.empty_like(p, dtype=np.float64)
    acc, wsum = np.zeros(p.shape[1:]), 0.0
    dts = np.diff(t, prepend=t[0] - (t[1] - t[0] if len(t) > 1 else 0.01))
    for i in range(len(p)):
        a = 1.0 - np.exp(-max(float(dts[i]), 0.0) / tau_s)
        acc = acc + a * (p[i] - acc)
        wsum = wsum + a * (1.0 - wsum)
        out[i] = acc / max(wsum, 1e-300)
    return out
