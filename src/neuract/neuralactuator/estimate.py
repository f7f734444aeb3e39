"""Streaming estimates from an estimator-mode NeuralActuator: torque, force, gate, condition.

:func:`estimate` / :func:`estimator` (estimator mode): every step's torque, force, contact gate
and per-motor condition from the real telemetry history (the simulator-mode adapter is
:func:`neuract.neuralactuator.rollout.simulator`). The condition output
  is smoothed causally (exponential moving average of the per-motor probabilities, time
  constant ``condition_tau_s``, start-up bias removed: :func:`smooth_causal`) -- a motor's
  condition does not change within seconds; the
  episode-level ``condition_prob`` is the largest per-motor degraded probability. The
  decision threshold is calibrated on the training episodes (:func:`calibrate_condition`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from neuract.errors import ConfigError
from neuract.eval.metrics import decision_f1, true_runs
from neuract.neuralactuator.data import per_joint_condition
from neuract.neuralactuator.features import windows
from neuract.neuralactuator.model import (
    NeuralActuator,
    check_gate_decide,
    check_gate_trained,
    decision_delay,
    lagged_probability,
)

DEFAULT_CONDITION_TAU_S = 5.0
"""condition smoothing time constant [s] of a model without a selected one"""
_GRID = np.round(np.linspace(0.02, 0.98, 97), 4)
"""candidate decision thresholds of the calibrations"""


@dataclasses.dataclass(frozen=True)
class EstimateInputs:
    """The history windows :func:`estimate` feeds a model for one trajectory, computed once by
    :func:`estimate_inputs` to estimate with several models that read the same inputs (one
    estimator with different contact gates, say). With servo-reference channels the windows
    are most of :func:`estimate`'s time (the reference servo is simulated over the episode).

    x: (samples - history + 1, history, features); n_samples: the trajectory's length;
    signature: :func:`input_signature` of the model they were computed for."""

    x: torch.Tensor
    n_samples: int
    signature: tuple


def input_signature(model: NeuralActuator) -> tuple:
    """Everything of ``model`` that its history windows depend on: the channels, joints,
    history, physics and context channels, the identification memory and the reference
    channels' servo (its fitted values) and arm. Two models with equal signatures read the
    same :class:`EstimateInputs` of a trajectory."""
    cfg = model.cfg
    ref = model.reference
    if ref is not None:
        servo = tuple((k, tuple(v.detach().double().reshape(-1).tolist()))
                      for k, v in ref[0].state_dict().items())
        ref = (servo, ref[1], ref[2])
    return (tuple(cfg.channels), cfg.n_joints, cfg.history, cfg.physics, cfg.context_s,
            cfg.ident_memory, ref)


@torch.no_grad()
def estimate_inputs(model: NeuralActuator, traj: Any) -> EstimateInputs:
    """The history windows of ``traj`` that :func:`estimate` feeds ``model``: pass them as
    ``estimate(other, traj, inputs=...)`` to any model with the same :func:`input_signature`
    (e.g. the same estimator with another contact gate) to compute them once."""
    cfg = model.cfg
    x = windows(traj, cfg.channels, cfg.n_joints, cfg.history, physics=cfg.physics,
                context_s=cfg.context_s, reference=model.reference,
                ident_memory=cfg.ident_memory)
    return EstimateInputs(x, len(traj), input_signature(model))


def _inputs_for(model: NeuralActuator, traj: Any, inputs: EstimateInputs | None
                ) -> torch.Tensor:
    """``inputs.x`` checked against ``model`` and ``traj``, or the windows computed here."""
    if inputs is None:
        return estimate_inputs(model, traj).x
    if not isinstance(inputs, EstimateInputs):
        raise ConfigError(f"estimate(inputs=...) takes the EstimateInputs of "
                          f"estimate_inputs(); got {type(inputs).__name__}")
    if inputs.n_samples != len(traj):
        raise ConfigError(f"estimate(inputs=...) were computed for a trajectory of "
                          f"{inputs.n_samples} samples; this one has {len(traj)}")
    if inputs.signature != input_signature(model):
        raise ConfigError("estimate(inputs=...) were computed for a model that reads other "
                          "inputs (channels, history, physics, context, identification "
                          "memory or reference servo differ); compute them with "
                          "estimate_inputs(model, traj) for this model")
    return inputs.x


@torch.no_grad()
def estimate(model: NeuralActuator, traj: Any, chunk: int = 4096,
             condition_tau_s: float | None = None,
             condition_threshold: float | Sequence[float] | None = None,
             gate_threshold: float | None = None, gate_tau_s: float | None = None,
             gate_release: float | None = None,
             inputs: EstimateInputs | None = None) -> dict[str, np.ndarray]:
    """Estimator-mode outputs for every sample of ``traj`` (the first ``history - 1`` samples
    have no full history: ``valid`` False there and NaN outputs).

    condition_threshold: the smoothed per-motor degraded probability that counts as 0.5 (the
    probabilities are shifted in log-odds so that 0.5 is the decision point); default: the
    model's ``condition_threshold`` attribute (calibrated on training episodes by
    :func:`calibrate_condition`), else 0.5. gate_threshold: the same for the contact
    probability (model attribute ``gate_threshold``, :func:`calibrate_gate`), else 0.5.
    condition_tau_s: time constant of the condition smoothing [s]; default: the model's
    ``condition_tau_s`` attribute (chosen by :func:`select_condition_smoothing`), else 5 s.
    gate_tau_s, gate_release: the contact decision's causal filter (:func:`gate_filter`):
    smoothing time constant [s] (0: none) and the probability below which a detected contact
    ends (hysteresis; at most ``gate_threshold``); defaults: the model's attributes (chosen
    by :func:`select_gate_filter`) when ``gate_threshold`` is the model's too, else 0 s and
    ``gate_threshold`` (a plain threshold).

    A model with a recurrent gate (``cfg.gate_rnn``) takes its contact probability from it,
    run over the episode from its first valid sample; a fixed-lag gate (``cfg.gate_lag``)
    decides each sample from the samples up to ``cfg.gate_decision_lag`` after it
    (``gate_lag`` unless ``cfg.gate_decide`` sets a shorter wait;
    :func:`~neuract.neuralactuator.model.lagged_probability`).

    Returns tau (T, n) [N m], ee_force (T, 3) [N], contact_prob (T,), condition_prob_joint
    (T, n) (smoothed degraded probability per motor), condition_prob (T,), valid (T,), and
    contact_decided_t (T,) [s]: when each sample's contact decision is available (the
    sample's own time; with a fixed-lag gate, the time of the last sample it read).
    ``contact_prob`` is shifted so that ``>= 0.5`` is the gate's decision; with a release
    threshold the shift depends on the gate's state, so other cut-offs on it are not
    decisions of any threshold.

    inputs: the trajectory's windows from :func:`estimate_inputs` (of this model or one with
    the same :func:`input_signature`), to skip computing them again; refused, naming what
    differs, where they belong to another trajectory length or other inputs.
    """
    (condition_tau_s, condition_threshold, gate_threshold, gate_tau_s,
     gate_release) = resolve_filters(model, condition_tau_s, condition_threshold,
                                     gate_threshold, gate_tau_s, gate_release)
    if model.cfg.mode != "estimator":
        raise ConfigError(f"estimate() needs an estimator-mode model; got {model.cfg.mode!r}")
    check_gate_trained(model)
    cfg = model.cfg
    n, h, T = cfg.n_joints, cfg.history, len(traj)
    x = _inputs_for(model, traj, inputs)
    taus, forces, gates, conds = [], [], [], []
    for s in range(0, x.shape[0], chunk):
        tau, force, gate, cond = model(x[s:s + chunk])
        taus.append(tau)
        forces.append(force)
        gates.append(torch.sigmoid(gate))
        conds.append(torch.softmax(cond, -1)[..., 1:].sum(-1))
    if model.gate_rnn is not None:  # the recurrent gate, causal over the whole episode
        gates = [lagged_probability(model.recurrent_gate(x[:, -1])[0], cfg.gate_decision_lag)]
    pad = lambda a, shape: np.concatenate([np.full((h - 1, *shape), np.nan), a])  # noqa: E731
    tau = pad(torch.cat(taus).double().numpy(), (n,))
    force = pad(torch.cat(forces).double().numpy(), (3,))
    p = torch.cat(conds).double().numpy()
    t = np.asarray(traj["t"], dtype=np.float64)[h - 1:]
    sm = smooth_causal(p, t, condition_tau_s)
    sm = shift_threshold(sm, condition_threshold)
    gate = pad(gate_filter(torch.cat(gates).double().numpy(), t, gate_tau_s, gate_threshold,
                           gate_release), ())
    cj = pad(sm, (n,))
    valid = np.zeros(T, bool)
    valid[h - 1:] = True
    t_all = np.asarray(traj["t"], dtype=np.float64)
    decided = t_all.copy()
    decided[h - 1:] = t[np.arange(len(t)) + decision_delay(len(t), cfg.gate_decision_lag)]
    return {"tau": tau, "ee_force": force, "contact_prob": gate, "condition_prob_joint": cj,
            "condition_prob": np.nanmax(np.where(valid[:, None], cj, 0.0), axis=1),
            "valid": valid, "contact_decided_t": decided}


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


def shift_threshold(p: np.ndarray, threshold: float | np.ndarray) -> np.ndarray:
    """Probabilities shifted in log-odds so that ``threshold`` maps to 0.5 (NaN kept);
    threshold: one value, or one per entry of p's last axis."""
    if np.ndim(threshold) == 0 and threshold == 0.5:
        return p
    th = np.clip(threshold, 1e-6, 1 - 1e-6)
    q = np.clip(p, 1e-9, 1 - 1e-9)
    return 1.0 / (1.0 + np.exp(-(np.log(q) - np.log1p(-q) - np.log(th / (1 - th)))))


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


def _spread(trajs, max_episodes: int) -> list:
    """Up to ``max_episodes`` of ``trajs``, evenly spread."""
    trajs = list(trajs)
    if len(trajs) <= max_episodes:
        return trajs
    return [trajs[i] for i in np.unique(np.linspace(0, len(trajs) - 1, max_episodes)
                                        .round().astype(int))]


def _best_threshold(p: list, y: list, score) -> tuple[float, float]:
    """(the grid threshold g (0.02 .. 0.98) maximising ``score(p, y, g)`` over the pooled
    samples, its score); (0.5, NaN) when they hold a single class."""
    if not p:
        return 0.5, float("nan")
    p, y = np.concatenate(p), np.concatenate(y)
    if y.all() or not y.any():
        return 0.5, float("nan")
    scores = [score(p, y, g) for g in _GRID]
    k = int(np.argmax(scores))
    return float(_GRID[k]), float(scores[k])


def calibrate_gate(model: NeuralActuator, trajs, max_episodes: int = 24,
                   raw: list | None = None) -> float:
    """The contact-probability threshold that maximises the gate F1 over (held-out
    calibration) episodes' samples; 0.5 when they hold no contact or only contact.
    raw: those episodes' :func:`gate_samples`, if computed already."""
    return _plain_gate_threshold(_raw_gate(model, trajs, max_episodes) if raw is None else raw)


def _plain_gate_threshold(raw: list) -> float:
    """The grid threshold with the best pooled F1 over ``_raw_gate`` episodes (ties: the
    lowest); 0.5 for a single class."""
    return _best_threshold([q for _, q, _ in raw], [c for _, _, c in raw],
                           lambda p, y, g: decision_f1(p >= g, y))[0]


def gate_samples(model: NeuralActuator, trajs, max_episodes: int = 24) -> list:
    """What the gate calibrations read: (t, unfiltered contact probability, contact label)
    of each valid sample, for up to ``max_episodes`` episodes with a contact label, evenly
    spread. Compute it once to run several calibrations on the same episodes."""
    return _raw_gate(model, trajs, max_episodes)


def _raw_gate(model: NeuralActuator, trajs, max_episodes: int) -> list:
    """(t, unfiltered contact probability, contact label) of each valid sample, for up to
    ``max_episodes`` episodes with a contact label, evenly spread."""
    out = []
    for tr in _spread([tr for tr in trajs if "contact" in tr], max_episodes):
        o = estimate(model, tr, gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
        v = o["valid"]
        if v.any():
            out.append((np.asarray(tr["t"], dtype=np.float64)[v], o["contact_prob"][v],
                        np.asarray(tr["contact"], bool)[v]))
    return out


def select_gate_filter(model: NeuralActuator, trajs,
                       taus_s=(0.0, 0.05, 0.1, 0.2, 0.5), max_episodes: int = 24,
                       hysteresis_steps: int | None = None, raw: list | None = None
                       ) -> tuple[float, float, float, dict]:
    """Choose the contact gate's causal filter on (held-out calibration) episodes: smoothing
    time constant, detection threshold and release threshold (hysteresis) with the best
    pooled F1 among those that detect at least as many contact events (runs of contact
    samples with a detection) as the best plain threshold does (ties: the shorter time
    constant, then the narrower hysteresis). Release candidates: the detection threshold and
    the grid values below it (at most ``hysteresis_steps`` of them; None: all). A wide
    hysteresis keeps a detected contact through the steady part of a push, where the arm
    stands deflected and still; the event condition keeps it from buying that with a high
    detection threshold that misses short contacts.
    raw: those episodes' :func:`gate_samples`, if computed already.
    Returns (tau_s, threshold, release, {tau_s: F1}); (0, 0.5, 0.5, {}) when the episodes
    hold no contact or only contact."""
    taus = [float(x) for x in taus_s]
    if not taus or not all(np.isfinite(x) and x >= 0 for x in taus):
        raise ConfigError(f"gate smoothing candidates {list(taus_s)}; expected time "
                          "constants >= 0 s")
    if raw is None:
        raw = _raw_gate(model, trajs, max_episodes)
    if not raw:
        return 0.0, 0.5, 0.5, {}
    y = np.concatenate([c for _, _, c in raw])
    if y.all() or not y.any():
        return 0.0, 0.5, 0.5, {}
    starts = np.cumsum([0] + [len(c) for _, _, c in raw[:-1]])
    run = np.full(len(y), -1)  # contact event of each sample (-1: none), per episode
    n_runs = 0
    for s0, (_, _, c) in zip(starts, raw):
        for i0, i1 in true_runs(c):
            run[s0 + i0:s0 + i1] = n_runs
            n_runs += 1

    def events(fire):
        return int(np.count_nonzero(np.bincount(run[fire & y], minlength=n_runs)))

    g0 = _plain_gate_threshold(raw)
    need = events(np.concatenate([q for _, q, _ in raw]) >= g0)
    best, scores = None, {}
    for tau in sorted(taus):
        p = np.concatenate([smooth_causal(q, t, tau) if tau > 0 else q for t, q, _ in raw])
        top = None
        for k, on in enumerate(_GRID):
            lo = 0 if hysteresis_steps is None else max(0, k - hysteresis_steps)
            for off in _GRID[lo:k + 1][::-1]:
                fire = hysteresis(p, on, off, starts) if off < on else p >= on
                key = (decision_f1(fire, y), -tau, -(on - off))
                if (top is None or key > top[0]) and events(fire) >= need:
                    top = (key, float(on), float(off))
        if top is None:  # no candidate of this time constant detects enough events
            continue
        scores[tau] = top[0][0]
        if best is None or top[0] > best[0]:
            best = (top[0], tau, top[1], top[2])
    if best is None:  # no filter detects as many events: the best plain threshold
        return 0.0, float(g0), float(g0), scores
    return best[1], best[2], best[3], scores


def set_gate_decision_lag(model: NeuralActuator, lag: int, trajs,
                          taus_s=(0.0, 0.05, 0.1, 0.2, 0.5), max_episodes: int = 24
                          ) -> dict[str, Any]:
    """Make ``model``'s fixed-lag gate (``cfg.gate_lag`` = D) decide at lag ``lag`` (0 .. D:
    each sample after reading ``lag`` samples more; ``cfg.gate_decide``) and calibrate its
    filter again at that lag on (held-out calibration) episodes ``trajs``
    (:func:`select_gate_filter` with ``taus_s`` and ``max_episodes``): the threshold and
    filter chosen for one lag do not carry to another. The model is changed only when the
    calibration succeeds. Returns the new decision lag and filter (``gate_decision_lag``,
    ``gate_tau_s``, ``gate_threshold``, ``gate_release``) and the calibration episodes'
    count."""
    if model.cfg.mode != "estimator" or model.gate_rnn is None or not model.cfg.gate_lag:
        raise ConfigError("set_gate_decision_lag: the model has no fixed-lag recurrent gate "
                          f"(mode={model.cfg.mode!r}, gate_rnn={model.cfg.gate_rnn}, "
                          f"gate_lag={model.cfg.gate_lag}); the decision lag chooses among a "
                          "fixed-lag gate's logits")
    check_gate_decide(lag, model.cfg.gate_lag, "set_gate_decision_lag: lag")
    if lag == -1:
        lag = model.cfg.gate_lag
    check_gate_trained(model)
    use = [tr for tr in trajs if "contact" in tr]
    if not use:
        raise ConfigError("set_gate_decision_lag: no calibration episode has a contact label")
    old = model.cfg
    model.cfg = old.replace(gate_decide=int(lag))
    try:
        raw = _raw_gate(model, use, max_episodes)
        y = np.concatenate([c for _, _, c in raw]) if raw else np.zeros(0, bool)
        if y.all() or not y.any():
            raise ConfigError("set_gate_decision_lag: the calibration episodes hold "
                              f"{'only contact' if y.any() else 'no contact'} samples; the "
                              "filter's calibration needs both")
        tau, thr, rel, _ = select_gate_filter(model, use, taus_s, max_episodes, raw=raw)
    except BaseException:
        model.cfg = old
        raise
    model.gate_tau_s, model.gate_threshold, model.gate_release = tau, thr, rel
    return {"gate_decision_lag": int(lag), "gate_tau_s": tau, "gate_threshold": thr,
            "gate_release": rel, "calibration_episodes": len(raw)}


def smooth_causal(p: np.ndarray, t: np.ndarray, tau_s: float) -> np.ndarray:
    """Causal exponential moving average of p: (T, ...) over times t: (T,) [s] with time
    constant tau_s, its start-up bias removed: a running mean over the first seconds (every
    sample so far weighted alike), forgetting with tau_s afterwards. An average started at the
    first sample instead would keep that one sample's weight at exp(-t / tau_s). The
    streaming estimator computes the same average one sample at a time
    (:class:`neuract.neuralactuator.stream._CausalMean`)."""
    out = np.empty_like(p, dtype=np.float64)
    acc, wsum = np.zeros(p.shape[1:]), 0.0
    dts = np.diff(t, prepend=t[0] - (t[1] - t[0] if len(t) > 1 else 0.01))
    for i in range(len(p)):
        a = 1.0 - np.exp(-max(float(dts[i]), 0.0) / tau_s)
        acc = acc + a * (p[i] - acc)
        wsum = wsum + a * (1.0 - wsum)
        out[i] = acc / max(wsum, 1e-300)
    return out


def _condition_scores(level: str):
    if level not in ("episode", "motor"):
        raise ConfigError(f"calibrate_condition level={level!r}; accepted: ['episode', 'motor']")
    return lambda p, y, g: 0.5 * ((p[y] > g).mean() + (p[~y] <= g).mean())


def _raw_condition(model: NeuralActuator, trajs, max_episodes: int) -> list:
    """(t, unsmoothed per-motor degraded probability, per-motor label) of each valid sample,
    for up to ``max_episodes`` episodes evenly spread."""
    out = []
    for tr in _spread(trajs, max_episodes):
        o = estimate(model, tr, condition_threshold=0.5, condition_tau_s=1e-9)  # no smoothing
        v = o["valid"]
        out.append((np.asarray(tr["t"], dtype=np.float64)[v], o["condition_prob_joint"][v],
                    per_joint_condition(tr, model.cfg.n_joints)[v] > 0))
    return out


def _smoothed(raw: list, tau_s: float) -> list:
    """(smoothed per-motor probability, per-motor label) of each episode of ``raw``."""
    return [(smooth_causal(p, t, tau_s), y) for t, p, y in raw]


def _per_motor_thresholds(sm: list, g0: float, sweeps: int = 2) -> tuple[tuple, float]:
    """Per-motor thresholds for the episode-level decision (some motor above its own
    threshold) over smoothed episodes ``sm``: starting from the common threshold g0,
    coordinate ascent on the balanced accuracy over the motors that show both classes (the
    others keep g0)."""
    score = _condition_scores("episode")
    P = np.concatenate([p for p, _ in sm])  # (N, n)
    Y = np.concatenate([y for _, y in sm])
    y = Y.any(1)
    g = np.full(P.shape[1], g0)
    both = [j for j in range(P.shape[1]) if Y[:, j].any() and not Y[:, j].all()]

    def acc(gv):  # decision: some motor above its own threshold
        return float(score((P > gv).any(1).astype(float), y, 0.5))

    best = acc(g)
    for _ in range(sweeps):
        for j in both:
            for v in _GRID:
                trial = g.copy()
                trial[j] = v
                a = acc(trial)
                if a > best + 1e-12:
                    best, g = a, trial
    return tuple(float(v) for v in g), best


def _condition_threshold(sm: list, level: str, per_motor: bool = False
                         ) -> tuple[float | tuple, float]:
    """(best threshold, its balanced accuracy; NaN for a single class) over smoothed
    episodes ``sm`` (per_motor: one threshold per motor, episode level only)."""
    score = _condition_scores(level)
    ps, ys = [], []
    for pj, y in sm:
        if level == "episode":
            pj, y = pj.max(1), y.any(1)
        ps.append(pj.ravel())
        ys.append(y.ravel())
    g, best = _best_threshold(ps, ys, score)
    if per_motor and not np.isnan(best):
        return _per_motor_thresholds(sm, g)
    return g, best


def calibrate_condition(model: NeuralActuator, trajs, max_episodes: int = 24,
                        level: str = "episode", condition_tau_s: float | None = None) -> float:
    """The decision threshold on the smoothed degraded probability that maximises the
    balanced accuracy on (calibration) episodes; 0.5 when they hold a single class.

    level ``episode``: the decision "some motor is degraded" (the largest per-motor
    probability against the threshold: what the episode-level ``condition_prob`` reports);
    ``motor``: every motor's own decision. Up to ``max_episodes`` episodes, evenly spread.
    condition_tau_s: the smoothing the threshold is for (default: the model's, else 5 s).
    """
    _condition_scores(level)
    if condition_tau_s is None:
        condition_tau_s = float(getattr(model, "condition_tau_s", DEFAULT_CONDITION_TAU_S))
    raw = _raw_condition(model, trajs, max_episodes)
    return _condition_threshold(_smoothed(raw, condition_tau_s), level)[0]


def select_condition_smoothing(model: NeuralActuator, trajs, taus_s=(2.0, 5.0, 10.0, 20.0, 40.0),
                               max_episodes: int = 24, level: str = "episode",
                               per_motor: bool = False) -> tuple[float, Any, dict]:
    """Choose the condition smoothing time constant and its threshold together on
    (calibration) episodes: the pair with the best balanced accuracy (ties: the shorter time
    constant, which reacts sooner). Returns (tau_s, threshold, {tau_s: balanced accuracy}).
    per_motor (episode level): one threshold per motor, tuple (n,) -- motors differ in how
    confidently the model calls them degraded, and a common threshold on the largest
    per-motor probability lets the least certain motor decide every episode.
    With a single class in ``trajs`` nothing can be chosen: (5 s, 0.5, {})."""
    if per_motor and level != "episode":
        raise ConfigError("per-motor condition thresholds are calibrated for the episode "
                          f"level decision; got level={level!r}")
    _condition_scores(level)
    taus = [float(t) for t in taus_s]
    if not taus or not all(np.isfinite(t) and t > 0 for t in taus):
        raise ConfigError(f"condition smoothing candidates {list(taus_s)}; expected time "
                          "constants > 0 s")
    raw = _raw_condition(model, trajs, max_episodes)
    res = {tau: _condition_threshold(_smoothed(raw, tau), level, per_motor)
           for tau in sorted(taus)}
    scores = {tau: s for tau, (_, s) in res.items()}
    if all(np.isnan(s) for s in scores.values()):
        return DEFAULT_CONDITION_TAU_S, 0.5, {}
    best = max(sorted(res), key=lambda tau: (-np.inf if np.isnan(scores[tau]) else scores[tau],
                                             -tau))
    return best, res[best][0], scores


def estimator(model: NeuralActuator, condition_tau_s: float | None = None):
    """``est(traj) -> dict`` for :func:`neuract.eval.evaluate_estimator` (condition_tau_s:
    see :func:`estimate`)."""
    return lambda traj: estimate(model, traj, condition_tau_s=condition_tau_s)


__all__ = ["calibrate_condition", "calibrate_gate", "estimate", "estimator", "gate_filter",
           "gate_samples",
           "hysteresis", "select_condition_smoothing", "select_gate_filter",
           "set_gate_decision_lag", "shift_threshold", "smooth_causal"]
