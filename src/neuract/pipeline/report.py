"""Experiment results -> JSON, summary tables and the Markdown/HTML run report.

Every number states its mode: rollout metrics are simulator mode (after the initial state
and its measured past only the commands enter); torque, force, gate and condition numbers are
estimator mode (the real telemetry enters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neuract.atomic import write_json, write_text
from neuract.eval import Report, Table, confusion_matrix, records_table, rollout_table
from neuract.eval.classification import balanced_accuracy
from neuract.eval.report import confusion_figure, force_figure, rollout_figure

ROLLOUT_NOTE = ("Simulator mode: each window starts from the measured state (and the measured "
                "8-step past, the same for every model); afterwards only the commands (and "
                "the supply voltage) enter. Joint MAE [deg] pooled over every predicted "
                "sample.")
EST_NOTE = ("Estimator mode: the real telemetry (positions, velocities, current/load, "
            "voltage, temperature) enters; the first 7 samples of an episode (no full "
            "history) are not scored for NeuralActuator. Force MAE [N] over labelled samples, "
            "split by the contact label.")


def public(res: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-able part of a results dict (drops raw arrays kept for figures)."""
    return {k: v for k, v in res.items() if not k.startswith("_")}


def write_results(out_dir: str | Path, res: Mapping[str, Any], stem: str = "results") -> Path:
    p = Path(out_dir) / f"{stem}.json"
    write_json(p, _jsonable(public(res)))
    return p


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def _r(x: Any, nd: int = 3) -> Any:
    return None if x is None else round(float(x), nd)


def _txt(x: Any, nd: int = 3) -> str:
    """A figure inside running text: rounded, or a dash where undefined."""
    return "\u2014" if x is None else f"{float(x):.{nd}f}"


def rollout_rows(res: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Arm-mean joint MAE [deg] per model (rows) and horizon (columns)."""
    horizons: list[Any] = []
    models: list[str] = []
    val: dict[tuple[str, Any], Any] = {}
    for r in res["rollouts"]:
        if r["horizon"] not in horizons:
            horizons.append(r["horizon"])
        if r["model"] not in models:
            models.append(r["model"])
        val[(r["model"], r["horizon"])] = r["arm_mean_deg"]
    cols = ["model (simulator mode)"] + [f"h={h}" for h in horizons]
    rows = [[m] + [_r(val.get((m, h))) for h in horizons] for m in models]
    return cols, rows


def estimation_rows(res: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    cols = ["model (estimator mode)", "torque RMSE [N m]", "force MAE contact [N]",
            "force MAE no contact [N]", "gate F1", "condition acc.", "condition bal. acc."]
    rows = []
    for e in res["estimation"]:
        f, g, c = e.get("force") or {}, e.get("gate") or {}, e.get("condition") or {}
        row = [e["model"], _r(e.get("torque_rmse_mean")), _r(f.get("contact")),
               _r(f.get("no_contact")), _r(g.get("f1")), _r(c.get("accuracy")),
               _r(condition_balanced(c))]
        if any(v is not None for v in row[1:]):  # e.g. torque rows on data without torque
            rows.append(row)
    return cols, rows


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
    written before the metric was stored)."""
    if c.get("balanced_accuracy") is not None:
        return c["balanced_accuracy"]
    return balanced_accuracy(c["confusion"]) if c.get("confusion") else None


def size_rows(res: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    cols = ["model", "mode", "parameters", "FLOPs / forward"]
    rows = [[k, v.get("mode"), v.get("params"), v.get("flops")]
            for k, v in res["models"].items()]
    return cols, rows


def targets(res: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The issue's twin targets, each with our value and whether it is met."""
    est = {e["model"]: e for e in res["estimation"]}
    na = est.get("NeuralActuator") or {}
    out = []
    best = (res.get("best_parametric") or {}).get("name")
    if best and na.get("torque_rmse_mean") is not None and best in est:
        b = est[best]["torque_rmse_mean"]
        ratio = b / max(na["torque_rmse_mean"], 1e-12)
        out.append({"target": "torque RMSE >= 2x lower than the best parametric baseline "
                    f"({best})", "value": f"{na['torque_rmse_mean']:.3f} vs {b:.3f} N m "
                    f"({ratio:.2f}x)", "met": ratio >= 2.0, "mode": "estimator"})
    f = na.get("force") or {}
    if f.get("all") is not None or f.get("contact") is not None:
        v = f.get("all", f.get("contact"))
        out.append({"target": "force MAE <= 0.3 N", "value": f"{v:.3f} N (contact "
                    f"{_txt(f.get('contact'))}, no contact {_txt(f.get('no_contact'))})",
                    "met": v <= 0.3, "mode": "estimator"})
    g = na.get("gate") or {}
    if g.get("f1") is not None:
        gr = ((res.get("models") or {}).get("NeuralActuator[estimator]") or {}).get(
            "gate_rnn") or {}
        how = ""
        if gr.get("trained"):
            how = f" (recurrent gate, {gr['hidden']} GRU units" + (
                f"; also trained on {gr['extra_minutes']:g} min of other units' episodes)"
                if gr.get("extra_episodes") else ")")
        out.append({"target": "gate F1 >= 0.95", "value": f"{g['f1']:.3f}{how}",
                    "met": g["f1"] >= 0.95, "mode": "estimator"})
    elif g:  # scored, but the test data hold no contact: say so rather than drop the row
        out.append({"target": "gate F1 >= 0.95", "value": "not measurable (no contact sample "
                    "in the test episodes)", "met": False, "mode": "estimator"})
    c = na.get("condition") or {}
    if c.get("accuracy") is not None and c.get("auc") is not None:  # both classes present
        pm = res.get("condition_per_motor") or {}
        out.append({"target": "condition accuracy >= 95 %", "value":
                    f"{100 * c['accuracy']:.1f} % (episode: any motor degraded; balanced "
                    f"{100 * condition_balanced(c):.1f} %); per motor "
                    f"{100 * pm.get('accuracy', float('nan')):.1f} %" + _episode_end(c),
                    "met": c["accuracy"] >= 0.95, "mode": "estimator"})
    return out


GATE_BREAKDOWN_NOTE = ("NeuralActuator's gate decision on the test episodes, broken down. A label "
                       "change is an onset or end of contact (the midpoint between the two "
                       "samples whose labels differ); F1 away from the changes leaves out every "
                       "sample within the band of one.")


def gate_breakdown(res: Mapping[str, Any], model: str = "NeuralActuator") -> list[tuple]:
    """(title, columns, rows) tables of where ``model``'s gate is wrong: errors near contact
    label changes, per task, and recall per true force band (those its record has)."""
    rec = next((e for e in res.get("estimation", []) if e.get("model") == model), {})
    g = rec.get("gate") or {}
    out = []
    lc = g.get("label_changes")
    if lc:
        out.append((f"Gate errors near contact label changes (overall F1 {_txt(g.get('f1'))})",
                    ["within [s]", "share of false alarms", "share of misses",
                     "F1 away from the changes"],
                    [[f"{b:g}", _r(a), _r(m), _r(f)] for b, a, m, f in
                     zip(lc["bands_s"], lc["false_alarm_share_near"], lc["miss_share_near"],
                         lc["f1_away"])]))
    bt = rec.get("gate_by_task")
    if bt:
        out.append(("Gate per task", ["task", "precision", "recall", "F1", "false-alarm samples",
                                      "missed samples", "events detected"],
                    [[k, _r(v.get("precision")), _r(v.get("recall")), _r(v.get("f1")),
                      v.get("n_false_alarms"), v.get("n_missed_samples"),
                      f"{v['n_detected']}/{v['n_events']}"] for k, v in bt.items()]))
    rf = rec.get("gate_recall_by_force")
    if rf:
        out.append(("Gate recall per true external force",
                    ["force [N]", "contact samples", "recall"],
                    [[f"{b['force_n'][0]:g}-" + (f"{b['force_n'][1]:g}" if b["force_n"][1]
                                                 is not None else ""),
                      b["n_contact"], _r(b["recall"])] for b in rf if b["n_contact"]]))
    return out


TWIN_PRETRAINED_COLS = ["estimator", "force MAE [N]", "contact", "no contact",
                        "gate precision", "gate recall", "gate F1"]


def _est_cells(rec: Mapping[str, Any]) -> list:
    f, g = rec.get("force") or {}, rec.get("gate") or {}

    def n(v, d=3):
        return "—" if v is None else f"{v:.{d}f}"

    return [n(f.get("all")), n(f.get("contact")), n(f.get("no_contact")),
            n(g.get("precision")), n(g.get("recall")), n(g.get("f1"))]


def twin_pretrained_rows(res: Mapping[str, Any],
                         own_label: str = "trained on the train files only (above)"
                         ) -> list[list]:
    """Rows (:data:`TWIN_PRETRAINED_COLS`) of the sim-to-real section of an NAD run: the run's
    own estimator (``own_label``; no row when the run has none), the twin-pretrained one as it
    is, and after fine-tuning on the train files (``res["twin_pretrained"]``, from
    :func:`neuract.pipeline.nad_experiment.twin_pretrained`)."""
    tp = res["twin_pretrained"]
    own = next((r for r in res.get("estimation", []) if r["model"] == "NeuralActuator"), None)
    rows = [[own_label] + _est_cells(own)] if own is not None else []
    rows.append(["pretrained on the twin, as it is (zero-shot)"] + _est_cells(tp["zero_shot"]))
    if tp.get("fine_tuned"):
        rows.append([f"pretrained on the twin, fine-tuned on the train files "
                     f"({tp['config']['fine_tune_steps']} steps)"]
                    + _est_cells(tp["fine_tuned"]))
    return rows


def build_report(res: Mapping[str, Any], title: str, intro: str = "",
                 extra_tables: Sequence[Any] = ()):
    """A :class:`neuract.eval.Report` with tables, rollout plot, force traces, confusion."""
    rep = Report(title, intro)
    _add_tables(rep, res, extra_tables)
    _add_figures(rep, res)
    return rep


def _add_tables(rep: Report, res: Mapping[str, Any], extra_tables: Sequence[Any]) -> None:
    """The report's tables: targets, rollouts, estimation, sizes, wall times."""
    tg = targets(res)
    if tg:
        rep.add("Targets", Table("Targets", ["target", "mode", "ours", "met"],
                                 [[t["target"], t["mode"], t["value"], t["met"]] for t in tg]))
    for t in extra_tables:
        rep.add("Targets", t)
    cols, rows = rollout_rows(res)
    rep.add("Open-loop rollouts (simulator mode)",
            Table("Arm-mean joint MAE [deg] per horizon [samples]", cols, rows, ROLLOUT_NOTE),
            rollout_table(res["rollouts"], note="Per joint; 'arm worst' is the worst arm "
                          "joint, the gripper is reported apart."))
    cols, rows = estimation_rows(res)
    rep.add("Estimation (estimator mode)", Table("Torque, force, gate, condition", cols, rows,
                                                 EST_NOTE))
    for k, (name, cols, rows) in enumerate(gate_breakdown(res)):  # the note once, first
        rep.add("Estimation (estimator mode)",
                Table(name, cols, rows, GATE_BREAKDOWN_NOTE if k == 0 else ""))
    if res.get("twin_pretrained"):
        c = res["twin_pretrained"]["config"]
        rep.add("Estimation (estimator mode)", Table(
            "Sim-to-real: estimator pretrained on the twin", TWIN_PRETRAINED_COLS,
            twin_pretrained_rows(res, res.get("own_estimator_label",
                                              "trained on the train files only (above)")),
            f"Pretrained on {c['minutes']:g} min of this robot's twin ({c['units']} units, "
            f"contact = external force >= {c['contact_min_force_n']:g} N, {c['steps']} steps), "
            "its gate threshold calibrated on the twin and kept; scored on the same test "
            "files and labels as the table above."))
    if res.get("condition_per_motor"):
        rep.add("Estimation (estimator mode)", records_table(
            [res["condition_per_motor"]], ["accuracy", "n_samples", "n_motors",
                                           "degraded_share"],
            "NeuralActuator per-motor condition (estimator mode)"))
    cols, rows = size_rows(res)
    rep.add("Models", Table("Size of every model", cols, rows,
                            "FLOPs: analytic matrix-product FLOPs per forward pass (batch 1), "
                            "neuract.neuralactuator.count_flops."))
    if res.get("timings_s"):
        rep.add("Models", Table("Wall time [s]", ["step", "seconds"],
                                [[k, v] for k, v in res["timings_s"].items()]))


def _add_figures(rep: Report, res: Mapping[str, Any]) -> None:
    """The report's figures (from the run's raw arrays, ``res["_figures"]``): the first test
    episode's open-loop rollout, a contact episode's force traces, the condition confusion."""
    figs = res.get("_figures") or {}
    tr = figs.get("fig_traj")
    if tr is not None and figs.get("full_q"):
        sims = {k: v for k, v in figs["full_q"].items() if k in _keep(figs["full_q"])}
        rep.add("Figures", rollout_figure(tr["t"] - tr["t"][0], tr["q"], sims,
                                          list(tr.meta.joint_names),
                                          title=f"Open-loop rollout of {tr.meta.name} "
                                          "(simulator mode)"))
    est = figs.get("est") or {}
    test = figs.get("test") or []
    push = [t for t in test if "ee_force" in t and np.asarray(t.get("contact", [0])).any()]
    if push and est:
        t = max(push, key=lambda x: (np.asarray(x["contact"]).mean() < 0.9,
                                     float(np.abs(np.asarray(x["ee_force"])).max())))
        fe = {k: v[t.meta.name]["ee_force"] for k, v in est.items()
              if t.meta.name in v and "ee_force" in v[t.meta.name]}
        if fe:
            fe = {k: np.nan_to_num(v) for k, v in fe.items()}
            rep.add("Figures", force_figure(t["t"] - t["t"][0], t["ee_force"], fe,
                                            contact=t.get("contact"),
                                            mask=t.get("ee_force_mask"),
                                            title=f"End-effector force, {t.meta.name} "
                                            "(estimator mode)"))
    na = est.get("NeuralActuator") or {}
    if na and all("condition" in t for t in test):
        yt, yp = [], []
        for t in test:
            o = na.get(t.meta.name)
            if o is None:
                continue
            v = o["valid"]
            yt.append(np.asarray(t["condition"])[v].astype(int))
            yp.append((o["condition_prob"][v] > 0.5).astype(int))
        if yt:
            cm = confusion_matrix(np.concatenate(yt), np.concatenate(yp), 2)
            rep.add("Figures", confusion_figure(cm, title="NeuralActuator condition (episode "
                                                "has a degraded motor; estimator mode)"))


def _keep(d: Mapping[str, Any]) -> list[str]:
    """Models drawn in the rollout figure: all but diverging ones (keeps the plot readable)."""
    return [k for k in d if np.isfinite(d[k]).all()]


def markdown_table(cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    fmt = lambda v: "—" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))  # noqa
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def summary_markdown(res: Mapping[str, Any], title: str, preamble: str = "") -> str:
    parts = [f"# {title}", ""]
    if preamble:
        parts += [preamble, ""]
    tg = targets(res)
    if tg:
        parts += ["## Targets", "", markdown_table(["target", "mode", "ours", "met"],
                                                   [[t["target"], t["mode"], t["value"],
                                                     "yes" if t["met"] else "no"]
                                                    for t in tg]), ""]
    parts += ["## Open-loop rollouts (simulator mode)", "", ROLLOUT_NOTE, "",
              markdown_table(*rollout_rows(res)), ""]
    parts += ["## Estimation (estimator mode)", "", EST_NOTE, "",
              markdown_table(*estimation_rows(res)), ""]
    gb = gate_breakdown(res)
    if gb:
        parts += ["## Where the gate is wrong (estimator mode)", "", GATE_BREAKDOWN_NOTE, ""]
        for name, cols, rows in gb:
            parts += [f"{name}:", "", markdown_table(cols, rows), ""]
    parts += ["## Model sizes", "", markdown_table(*size_rows(res)), ""]
    return "\n".join(parts)


def write_summary(out_dir: str | Path, res: Mapping[str, Any], title: str, stem: str,
                  preamble: str = "") -> Path:
    p = Path(out_dir) / f"{stem}.md"
    write_text(p, summary_markdown(res, title, preamble))
    return p


__all__ = ["build_report", "estimation_rows", "gate_breakdown", "public", "rollout_rows",
           "size_rows", "summary_markdown", "targets", "write_results", "write_summary"]
