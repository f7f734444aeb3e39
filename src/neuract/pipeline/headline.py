"""The report's headline: which metrics the test samples can score (a metric without them is
"not scored", never met), the issue's targets, and per quantity the best NeuralActuator model
against the best baseline. Used by :mod:`.report` (and the benchmarks' summaries)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neuract.eval.classification import balanced_accuracy
from neuract.pipeline.scoring import condition_unscored, force_unscored, gate_unscored


def _r(x: Any, nd: int = 3) -> Any:
    return None if x is None else round(float(x), nd)


def _txt(x: Any, nd: int = 3) -> str:
    """A figure inside running text: rounded, or a dash where undefined."""
    return "\u2014" if x is None else f"{float(x):.{nd}f}"


class NotScored(str):
    """A table cell of a metric that the test samples cannot score: reads "not scored";
    ``reason`` says why (e.g. "no contact samples")."""

    reason: str

    def __new__(cls, reason: str) -> NotScored:
        s = super().__new__(cls, "not scored")
        s.reason = reason
        return s


def _why(sub: Mapping[str, Any] | None, key: str, unscored) -> str | None:
    """Why metric ``key`` of a force / gate / condition record is not scored (None: it is),
    from the reason stored beside it or from its sample counts (older results)."""
    if not sub:
        return None
    return (sub.get("not_scored") or {}).get(key) or unscored(sub).get(key)


def _score(sub: Mapping[str, Any] | None, key: str, unscored, nd: int = 3) -> Any:
    """A metric's table cell: rounded, :class:`NotScored` without the samples to score it,
    None where the record has no such output."""
    why = _why(sub, key, unscored)
    if why:
        return NotScored(why)
    return None if not sub else _r(sub.get(key), nd)


def not_scored_note(cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """'Not scored: <column> (<reason>), ...' for a table's :class:`NotScored` cells ('' if
    none)."""
    seen: dict[tuple[str, str], None] = {}
    for r in rows:
        for c, v in zip(cols, r):
            if isinstance(v, NotScored):
                seen[(c, v.reason)] = None
    if not seen:
        return ""
    return ("Not scored (the test episodes hold none of the samples it needs): "
            + ", ".join(f"{c} ({why})" for c, why in seen) + ".")


def episode_end_count(c: Mapping[str, Any]) -> str | None:
    """'k/n': episodes of a condition record whose last decision is right (None without)."""
    e = c.get("episode_end")
    if not e or e.get("accuracy") is None:
        return None
    return f"{round(e['accuracy'] * e['n'])}/{e['n']}"


def _episode_end(c: Mapping[str, Any]) -> str:
    """'; at the end of each episode k/n right' for a condition record that has it."""
    k = episode_end_count(c)
    return f"; at the end of each episode {k} right" if k else ""


def condition_balanced(c: Mapping[str, Any]) -> float | None:
    """A condition record's balanced accuracy (derived from its confusion matrix in results
    written before the metric was stored); None where its samples hold one class only (not
    scored: over one class it is that class's recall)."""
    if _why(c, "balanced_accuracy", condition_unscored):
        return None
    if c.get("balanced_accuracy") is not None:
        return c["balanced_accuracy"]
    return balanced_accuracy(c["confusion"]) if c.get("confusion") else None


def _target(target: str, value: str, met: bool | None, why: str | None = None,
            mode: str = "estimator") -> dict[str, Any]:
    """One target's record: ``met`` True / False, or None with ``reason`` where the test
    samples cannot score it (``status``: "met", "not met" or "not scored")."""
    if why:
        return {"target": target, "mode": mode,
                "value": f"not scored ({why})" + (f"; {value}" if value else ""),
                "met": None, "status": "not scored", "reason": why}
    return {"target": target, "mode": mode, "value": value, "met": bool(met),
            "status": "met" if met else "not met"}


def targets(res: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The issue's twin targets, each with our value and whether it is met: ``met`` True or
    False, or None (``status`` "not scored", ``reason``) where the test samples cannot score
    it: no contact sample for the force and the gate, no degraded (or no normal) sample for
    the condition. A target is never met without the samples to score it."""
    est = {e["model"]: e for e in res["estimation"]}
    na = est.get("NeuralActuator") or {}
    out = []
    best = (res.get("best_parametric") or {}).get("name")
    if best and na.get("torque_rmse_mean") is not None and best in est:
        b = est[best]["torque_rmse_mean"]
        ratio = b / max(na["torque_rmse_mean"], 1e-12)
        out.append(_target("torque RMSE >= 2x lower than the best parametric baseline "
                           f"({best})", f"{na['torque_rmse_mean']:.3f} vs {b:.3f} N m "
                           f"({ratio:.2f}x)", ratio >= 2.0))
    f = na.get("force")
    if f:
        why = _why(f, "all", force_unscored) or _why(f, "contact", force_unscored)
        v = f.get("all") if f.get("all") is not None else f.get("contact")
        if why:  # the target is about contact forces: free motion alone does not score it
            out.append(_target("force MAE <= 0.3 N", "" if f.get("no_contact") is None else
                               f"MAE without contact {f['no_contact']:.3f} N", None, why))
        elif v is not None:
            out.append(_target("force MAE <= 0.3 N", f"{v:.3f} N (contact "
                               f"{_txt(f.get('contact'))}, no contact "
                               f"{_txt(f.get('no_contact'))})", v <= 0.3))
    g = na.get("gate")
    if g:
        why = _why(g, "f1", gate_unscored)
        if why:
            out.append(_target("gate F1 >= 0.95", "", None, why))
        elif g.get("f1") is not None:
            gr = ((res.get("models") or {}).get("NeuralActuator[estimator]") or {}).get(
                "gate_rnn") or {}
            how = ""
            if gr.get("trained"):
                how = f" (recurrent gate, {gr['hidden']} GRU units" + (
                    f"; also trained on {gr['extra_minutes']:g} min of other units' episodes)"
                    if gr.get("extra_episodes") else ")")
            out.append(_target("gate F1 >= 0.95", f"{g['f1']:.3f}{how}", g["f1"] >= 0.95))
    c = na.get("condition")
    if c:
        why = _why(c, "balanced_accuracy", condition_unscored)
        if why:
            out.append(_target("condition accuracy >= 95 %", "", None, why))
        elif c.get("accuracy") is not None:
            pm = res.get("condition_per_motor") or {}
            per_motor = (f"; per motor {100 * pm['accuracy']:.1f} %"
                         if pm.get("accuracy") is not None else "")
            out.append(_target("condition accuracy >= 95 %",
                               f"{100 * c['accuracy']:.1f} % (episode: any motor degraded; "
                               f"balanced {100 * condition_balanced(c):.1f} %)" + per_motor
                               + _episode_end(c), c["accuracy"] >= 0.95))
    return out


def targets_line(tg: Sequence[Mapping[str, Any]]) -> str:
    """'targets met: k of n scored' (+ '; not scored: <target> (<why>), ...') for a run's
    closing line; '' without targets."""
    if not tg:
        return ""
    scored = [t for t in tg if t.get("met") is not None]
    line = f"targets met: {sum(bool(t['met']) for t in scored)} of {len(scored)} scored"
    rest = [t for t in tg if t.get("met") is None]
    if rest:
        line += "; not scored: " + ", ".join(f"{t['target']} ({t.get('reason', 'no samples')})"
                                             for t in rest)
    return line


def _met_cell(t: Mapping[str, Any]) -> str:
    return t.get("status") or {True: "met", False: "not met"}.get(t.get("met"), "not scored")


HEADLINE_COLS = ["quantity (mode)", "best NeuralActuator model", "value", "best baseline",
                 "baseline value", "better"]


HEADLINE_NOTE = ("Per quantity, the best of the models built on NeuralActuator against the "
                 "best of the baselines, on the same test episodes; the tables below have "
                 "every model.")


TARGETS_NOTE = ("A target the test episodes hold no samples for (e.g. the force and the gate "
                "without a contact sample) is not scored, never met.")


def _is_ours(model: str) -> bool:
    """Whether a scored model is built on NeuralActuator (its own row or a baseline's method
    on its torque); every other one is a baseline."""
    return "NeuralActuator" in model


def _best(cands: Mapping[str, Any], lower: bool) -> tuple[str | None, Any]:
    """(model, value) of the best numeric value in ``cands`` (model -> cell); (None,
    NotScored) where none is numeric but one is not scored; (None, None) where none has it."""
    num = {m: float(v) for m, v in cands.items()
           if isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v)}
    if num:
        m = (min if lower else max)(num, key=num.__getitem__)
        return m, num[m]
    ns = next((v for v in cands.values() if isinstance(v, NotScored)), None)
    return None, ns


def _better(ours: Any, base: Any, lower: bool) -> str:
    if not (isinstance(ours, float) and isinstance(base, float)):
        return "\u2014"
    if round(ours, 3) == round(base, 3):
        return "tie"
    if lower:
        win, lose = (ours, base) if ours < base else (base, ours)
        r = lose / win if win > 0 else float("inf")
        x = (f" ({r:.1f}x lower)" if r >= 1.5 else f" ({100 * (r - 1):.1f} % lower)"
             if np.isfinite(r) else "")
    else:
        x = f" (+{abs(ours - base):.3f})"
    return ("ours" if (ours < base) == lower else "baseline") + x


def _value_cell(v: Any) -> Any:
    return f"not scored ({v.reason})" if isinstance(v, NotScored) else v


def headline_rows(res: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """The report's headline: per quantity (open-loop joint MAE at the shortest and longest
    horizon; torque, force, gate and condition), the best model built on NeuralActuator
    against the best baseline, which is better and by how much. A quantity nobody scores is
    left out; one the test samples cannot score reads "not scored (<why>)"."""
    quantities: list[tuple[str, bool, dict[str, Any]]] = []
    hs = list(dict.fromkeys(r["horizon"] for r in res.get("rollouts") or ()))
    for h in dict.fromkeys(hs[:1] + hs[-1:]):
        span = "full episode" if h == "full" else f"horizon {h}"
        quantities.append((f"arm-mean joint MAE, {span} [deg] (simulator)", True,
                           {r["model"]: _r(r.get("arm_mean_deg")) for r in res["rollouts"]
                            if r["horizon"] == h}))
    est = res.get("estimation") or ()
    for label, lower, cell in (
            ("torque RMSE [N m]", True, lambda e: _r(e.get("torque_rmse_mean"))),
            ("force MAE in contact [N]", True,
             lambda e: _score(e.get("force"), "contact", force_unscored)),
            ("force MAE without contact [N]", True,
             lambda e: _score(e.get("force"), "no_contact", force_unscored)),
            ("gate F1", False, lambda e: _score(e.get("gate"), "f1", gate_unscored)),
            ("condition balanced accuracy", False, _balanced_cell)):
        quantities.append((f"{label} (estimator)", lower, {e["model"]: cell(e) for e in est}))
    rows = []
    for label, lower, cands in quantities:
        om, ov = _best({m: v for m, v in cands.items() if _is_ours(m)}, lower)
        bm, bv = _best({m: v for m, v in cands.items() if not _is_ours(m)}, lower)
        if ov is None and bv is None:
            continue
        rows.append([label, om, _value_cell(ov), bm, _value_cell(bv), _better(ov, bv, lower)])
    return HEADLINE_COLS, rows


def _balanced_cell(e: Mapping[str, Any]) -> Any:
    c = e.get("condition")
    if not c:
        return None
    v = _score(c, "balanced_accuracy", condition_unscored)
    return v if isinstance(v, NotScored) else _r(condition_balanced(c))


__all__ = ["HEADLINE_COLS", "HEADLINE_NOTE", "TARGETS_NOTE", "NotScored", "condition_balanced",
           "episode_end_count", "headline_rows", "not_scored_note", "targets", "targets_line"]
