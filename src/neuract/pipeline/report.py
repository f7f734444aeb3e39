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
from neuract.eval.report import confusion_figure, force_figure, rollout_figure
from neuract.pipeline.headline import (
    HEADLINE_NOTE,
    TARGETS_NOTE,
    NotScored,
    _is_ours,
    _met_cell,
    _r,
    _score,
    _txt,
    _why,
    condition_balanced,
    episode_end_count,
    headline_rows,
    not_scored_note,
    targets,
    targets_line,
)
from neuract.pipeline.scoring import condition_unscored, force_unscored, gate_unscored

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
    """``<stem>.json``: the public results, with the run's targets (:func:`targets`: each
    met, not met, or not scored with its reason) where it scored estimators."""
    pub = public(res)
    if "estimation" in pub and "targets" not in pub:
        pub["targets"] = targets(pub)
    p = Path(out_dir) / f"{stem}.json"
    write_json(p, _jsonable(pub))
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
    """Torque, force, gate and condition of every estimator-mode model (rows): "not scored"
    (:class:`NotScored`) where the test samples cannot score a metric, None where the model
    has no such output."""
    cols = ["model (estimator mode)", "torque RMSE [N m]", "force MAE contact [N]",
            "force MAE no contact [N]", "gate F1", "condition acc.", "condition bal. acc."]
    rows = []
    for e in res["estimation"]:
        f, g, c = e.get("force"), e.get("gate"), e.get("condition")
        row = [e["model"], _r(e.get("torque_rmse_mean")),
               _score(f, "contact", force_unscored), _score(f, "no_contact", force_unscored),
               _score(g, "f1", gate_unscored), _score(c, "accuracy", condition_unscored),
               _score(c, "balanced_accuracy", condition_unscored)]
        if c and not isinstance(row[-1], NotScored):  # older results: from the matrix
            row[-1] = _r(condition_balanced(c))
        if any(v is not None for v in row[1:]):  # e.g. torque rows on data without torque
            rows.append(row)
    return cols, rows


def size_rows(res: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    cols = ["model", "mode", "parameters", "FLOPs / forward"]
    rows = [[k, v.get("mode"), v.get("params"), v.get("flops")]
            for k, v in res["models"].items()]
    return cols, rows


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
    if lc and not _why(g, "f1", gate_unscored):  # without contacts there is no label change
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
                    [[k, _r(v.get("precision")), _score(v, "recall", gate_unscored),
                      _score(v, "f1", gate_unscored),
                      v.get("n_false_alarms"), v.get("n_missed_samples"),
                      f"{v['n_detected']}/{v['n_events']}"] for k, v in bt.items()]))
    rf = [b for b in rec.get("gate_recall_by_force") or () if b["n_contact"]]
    if rf:
        out.append(("Gate recall per true external force",
                    ["force [N]", "contact samples", "recall"],
                    [[f"{b['force_n'][0]:g}-" + (f"{b['force_n'][1]:g}" if b["force_n"][1]
                                                 is not None else ""),
                      b["n_contact"], _r(b["recall"])] for b in rf]))
    return out


TWIN_PRETRAINED_COLS = ["estimator", "force MAE [N]", "contact", "no contact",
                        "gate precision", "gate recall", "gate F1"]


def _est_cells(rec: Mapping[str, Any]) -> list:
    f, g = rec.get("force"), rec.get("gate")

    def n(sub, key, unscored):
        v = _score(sub, key, unscored)
        return "\u2014" if v is None else v if isinstance(v, NotScored) else f"{v:.3f}"

    return [n(f, "all", force_unscored), n(f, "contact", force_unscored),
            n(f, "no_contact", force_unscored), n(g, "precision", gate_unscored),
            n(g, "recall", gate_unscored), n(g, "f1", gate_unscored)]


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


def data_tasks(train: Sequence[Any], test: Sequence[Any], asked: Sequence[str] = ()) -> str:
    """The tasks the episodes hold (``meta.labels["task"]``), as the report's introduction
    states them: 'tasks a, b (training and test)' or 'tasks a, b, c in training, a in test',
    naming any of ``asked`` that no episode has; '' where no episode names its task."""
    def tasks(trs):
        seen = dict.fromkeys(str(tr.meta.labels["task"]) for tr in trs
                             if (tr.meta.labels or {}).get("task") is not None)
        order = [t for t in asked if t in seen] + [t for t in seen if t not in asked]
        return order

    tr, te = tasks(train), tasks(test)
    if not tr and not te:
        return ""
    out = (f"tasks {', '.join(tr)} (training and test)" if tr == te else
           f"tasks {', '.join(tr) or 'none'} in training, {', '.join(te) or 'none'} in test")
    absent = [t for t in asked if t not in tr and t not in te]
    if absent:
        out += f" ({', '.join(absent)}: asked for, but no episode at this size)"
    return out


def build_report(res: Mapping[str, Any], title: str, intro: str = "",
                 extra_tables: Sequence[Any] = ()):
    """A :class:`neuract.eval.Report`: the headline first (the targets and the best
    NeuralActuator model against the best baseline per quantity), then the open-loop
    rollouts (table, plot, per-joint table), the estimation (table, force traces, condition
    confusion, where the gate is wrong), the models' sizes and wall times. Tables without
    rows are left out."""
    rep = Report(title, intro)
    _add_headline(rep, res, extra_tables)
    _add_rollouts(rep, res)
    _add_estimation(rep, res)
    _add_models(rep, res)
    return rep


HEADLINE = "Headline"
ROLLOUTS = "Open-loop rollouts (simulator mode)"
ESTIMATION = "Estimation (estimator mode)"


def _add_headline(rep: Report, res: Mapping[str, Any], extra_tables: Sequence[Any]) -> None:
    tg = targets(res)
    if tg:
        rep.add(HEADLINE, Table("Targets", ["target", "mode", "ours", "met"],
                                [[t["target"], t["mode"], t["value"], _met_cell(t)]
                                 for t in tg],
                                TARGETS_NOTE if any(t["met"] is None for t in tg) else ""))
    cols, rows = headline_rows(res)
    rep.add(HEADLINE, Table("NeuralActuator against the best baseline", cols, rows,
                            HEADLINE_NOTE), *extra_tables)


def _add_rollouts(rep: Report, res: Mapping[str, Any]) -> None:
    cols, rows = rollout_rows(res)
    rep.add(ROLLOUTS, Table("Arm-mean joint MAE [deg] per horizon [samples]", cols, rows,
                            ROLLOUT_NOTE))
    figs = res.get("_figures") or {}
    tr = figs.get("fig_traj")
    if tr is not None and figs.get("full_q"):
        keep = _keep(figs["full_q"])
        gone = [k for k in figs["full_q"] if k not in keep]
        rep.add(ROLLOUTS, rollout_figure(
            tr["t"] - tr["t"][0], tr["q"], {k: figs["full_q"][k] for k in keep},
            list(tr.meta.joint_names),
            title=f"Open-loop rollout of {tr.meta.name} (simulator mode)",
            caption=("Not drawn (diverged to non-finite values): " + ", ".join(gone) + "."
                     if gone else "")))
    rep.add(ROLLOUTS, rollout_table(res["rollouts"], note="Per joint; 'arm worst' is the worst "
                                    "arm joint, the gripper is reported apart."))


def _add_estimation(rep: Report, res: Mapping[str, Any]) -> None:
    cols, rows = estimation_rows(res)
    note = " ".join(s for s in (EST_NOTE, not_scored_note(cols, rows)) if s)
    rep.add(ESTIMATION, Table("Torque, force, gate, condition", cols, rows, note))
    _add_est_figures(rep, res)
    for k, (name, cols, rows) in enumerate(gate_breakdown(res)):  # the note once, first
        note = " ".join(s for s in (GATE_BREAKDOWN_NOTE if k == 0 else "",
                                    not_scored_note(cols, rows)) if s)
        rep.add(ESTIMATION, Table(name, cols, rows, note))
    if res.get("twin_pretrained"):
        c = res["twin_pretrained"]["config"]
        rep.add(ESTIMATION, Table(
            "Sim-to-real: estimator pretrained on the twin", TWIN_PRETRAINED_COLS,
            twin_pretrained_rows(res, res.get("own_estimator_label",
                                              "trained on the train files only (above)")),
            f"Pretrained on {c['minutes']:g} min of this robot's twin ({c['units']} units, "
            f"contact = external force >= {c['contact_min_force_n']:g} N, {c['steps']} steps), "
            "its gate threshold calibrated on the twin and kept; scored on the same test "
            "files and labels as the table above."))
    if res.get("condition_per_motor"):
        rep.add(ESTIMATION, records_table(
            [res["condition_per_motor"]], ["accuracy", "n_samples", "n_motors",
                                           "degraded_share"],
            "NeuralActuator per-motor condition (estimator mode)"))


def _add_models(rep: Report, res: Mapping[str, Any]) -> None:
    cols, rows = size_rows(res)
    rep.add("Models", Table("Size of every model", cols, rows,
                            "FLOPs: analytic matrix-product FLOPs per forward pass (batch 1), "
                            "neuract.neuralactuator.count_flops."))
    if res.get("timings_s"):
        rep.add("Models", Table("Wall time [s]", ["step", "seconds"],
                                [[k, v] for k, v in res["timings_s"].items()]))


def _force_mae(res: Mapping[str, Any], model: str) -> float:
    """A model's force MAE over all labelled samples (inf where it has none), to rank them."""
    e = next((e for e in res.get("estimation") or () if e["model"] == model), {})
    v = (e.get("force") or {}).get("all")
    return float("inf") if v is None else float(v)


def force_groups(res: Mapping[str, Any], models: Sequence[str], n_baselines: int = 2
                 ) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The force figure's rows: the models built on NeuralActuator, then the
    ``n_baselines`` baselines with the lowest force MAE; and the baselines left out."""
    ours = [m for m in models if _is_ours(m)]
    base = sorted((m for m in models if not _is_ours(m)), key=lambda m: _force_mae(res, m))
    groups = [(g, ms) for g, ms in (("NeuralActuator", ours),
                                    ("best baselines (lowest force MAE)",
                                     base[:n_baselines])) if ms]
    return groups, base[n_baselines:]


def _add_est_figures(rep: Report, res: Mapping[str, Any]) -> None:
    """The estimator-mode figures (from the run's raw arrays, ``res["_figures"]``): a contact
    episode's force traces, the condition confusion."""
    figs = res.get("_figures") or {}
    est = figs.get("est") or {}
    test = figs.get("test") or []
    push = [t for t in test if "ee_force" in t and np.asarray(t.get("contact", [0])).any()]
    if push and est:
        t = max(push, key=lambda x: (np.asarray(x["contact"]).mean() < 0.9,
                                     float(np.abs(np.asarray(x["ee_force"])).max())))
        fe = {k: np.nan_to_num(v[t.meta.name]["ee_force"]) for k, v in est.items()
              if t.meta.name in v and "ee_force" in v[t.meta.name]}
        if fe:
            groups, left = force_groups(res, list(fe))
            rep.add(ESTIMATION, force_figure(
                t["t"] - t["t"][0], t["ee_force"], {m: fe[m] for _, ms in groups for m in ms},
                contact=t.get("contact"), mask=t.get("ee_force_mask"), groups=groups,
                title=f"End-effector force, {t.meta.name} (estimator mode)",
                caption=("Contact shaded. Not drawn (larger force MAE; see the table above): "
                         + ", ".join(left) + "." if left else "Contact shaded.")))
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
            why = condition_unscored({"confusion": cm.tolist()}).get("balanced_accuracy")
            rep.add(ESTIMATION, confusion_figure(
                cm, title="NeuralActuator condition (episode has a degraded motor; estimator "
                "mode)", caption=f"The test episodes hold {why}: the balanced accuracy is not "
                "scored." if why else ""))


def _keep(d: Mapping[str, Any]) -> list[str]:
    """Models drawn in the rollout figure: all but those that diverged to non-finite values."""
    return [k for k in d if np.isfinite(d[k]).all()]


def markdown_table(cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    fmt = lambda v: "—" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))  # noqa
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def summary_markdown(res: Mapping[str, Any], title: str, preamble: str = "") -> str:
    """The benchmarks' Markdown summary of a run: the headline (targets, NeuralActuator
    against the best baseline) first, then rollouts, estimation, where the gate is wrong and
    the model sizes; tables without rows left out."""
    parts = [f"# {title}", ""]
    if preamble:
        parts += [preamble, ""]
    tg = targets(res)
    cols, rows = headline_rows(res)
    if tg or rows:
        parts += [f"## {HEADLINE}", ""]
    if tg:
        parts += ["**Targets**", "", markdown_table(["target", "mode", "ours", "met"],
                                                    [[t["target"], t["mode"], t["value"],
                                                      _met_cell(t)] for t in tg]), ""]
        if any(t["met"] is None for t in tg):
            parts += [TARGETS_NOTE, ""]
    if rows:
        parts += ["**NeuralActuator against the best baseline**", "", HEADLINE_NOTE, "",
                  markdown_table(cols, rows), ""]
    parts += [f"## {ROLLOUTS}", "", ROLLOUT_NOTE, "", markdown_table(*rollout_rows(res)), ""]
    cols, rows = estimation_rows(res)
    parts += [f"## {ESTIMATION}", "", " ".join(s for s in (EST_NOTE, not_scored_note(cols, rows))
                                               if s), "", markdown_table(cols, rows), ""]
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


__all__ = ["NotScored", "build_report", "condition_balanced", "data_tasks", "episode_end_count",
           "estimation_rows", "force_groups", "gate_breakdown", "headline_rows",
           "not_scored_note", "public", "rollout_rows", "size_rows", "summary_markdown",
           "targets", "targets_line", "write_results", "write_summary"]
