"""Calibration of the estimator's decisions on labelled episodes: the contact gate's threshold
and filter, its decision lag, and the condition thresholds and smoothing."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuract.errors import ConfigError
from neuract.estimate.filters import DEFAULT_CONDITION_TAU_S, hysteresis, smooth_causal
from neuract.estimate.neural import estimate
from neuract.eval.gate import decision_f1, true_runs
from neuract.neuralactuator.config import check_gate_decide
from neuract.neuralactuator.data import per_joint_condition
from neuract.neuralactuator.model import NeuralActuator, check_gate_trained

_GRID = np.round(np.linspace(0.02, 0.98, 97), 4)
"""candidate decision thresholds of the calibrations"""


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
