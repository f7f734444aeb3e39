"""The run report tells the truth at a glance: a metric without the samples to score it is
"not scored", never met (tables, targets, results.json); the introduction names the tasks the
data holds; the headline comes first, empty tables are left out; the figures are full width
with readable text, legends outside the axes and y-ranges the diverging baselines do not
set."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest

from neuract.eval import Report, Table
from neuract.pipeline import report as rp
from neuract.pipeline.scoring import (
    NO_CONTACT,
    NO_DEGRADED,
    condition_unscored,
    force_unscored,
    gate_unscored,
    mark_unscored,
)

pytest.importorskip("matplotlib")

from _report_res import PARAMETRIC, synthetic_results  # noqa: E402


# ----------------------------------------------------------------------- not scored
def test_metrics_without_their_samples_are_null_with_the_reason():
    rec = {"model": "m", "force": {"all": 0.02, "contact": None, "no_contact": 0.02,
                                   "n_all": 300, "n_contact": 0, "n_no_contact": 300},
           "gate": {"precision": 0.0, "recall": None, "f1": None, "n_samples": 300},
           "condition": {"accuracy": 1.0, "balanced_accuracy": 1.0, "auc": None,
                         "confusion": [[300, 0], [0, 0]], "n": 300,
                         "episode_end": {"accuracy": 1.0, "balanced_accuracy": 1.0,
                                         "confusion": [[1, 0], [0, 0]], "n": 1}},
           "gate_by_task": {"free": {"precision": 0.0, "recall": None, "f1": None,
                                     "n_samples": 300}}}
    mark_unscored(rec)
    assert rec["force"]["contact"] is None and rec["force"]["no_contact"] == 0.02
    assert rec["force"]["not_scored"] == {"contact": NO_CONTACT}
    assert rec["gate"]["not_scored"] == {"recall": NO_CONTACT, "f1": NO_CONTACT}
    assert rec["gate_by_task"]["free"]["not_scored"]["f1"] == NO_CONTACT
    # balanced accuracy 1.0 over normal samples only is not a score
    c = rec["condition"]
    assert c["balanced_accuracy"] is None and c["accuracy"] == 1.0
    assert c["not_scored"]["balanced_accuracy"] == NO_DEGRADED
    assert c["episode_end"]["balanced_accuracy"] is None
    # with both classes and contacts nothing is touched
    assert condition_unscored({"confusion": [[5, 1], [2, 7]]}) == {}
    assert force_unscored({"all": 1.0, "contact": 1.0, "no_contact": 1.0, "n_all": 2,
                           "n_contact": 1, "n_no_contact": 1}) == {}
    assert gate_unscored({"recall": 0.5, "f1": 0.5, "n_samples": 10}) == {}
    # results written before the counts were stored: read from which MAE is missing
    assert force_unscored({"all": 0.1, "contact": None, "no_contact": 0.1}) == {
        "contact": NO_CONTACT}


def test_a_target_without_samples_is_not_scored_never_met():
    res = synthetic_results(contact=False, degraded=False)
    tg = {t["target"].split(" ")[0]: t for t in rp.targets(res)}
    # the force MAE is small (free motion) but there is no contact sample to score it
    assert tg["force"]["met"] is None and tg["force"]["status"] == "not scored"
    assert tg["force"]["reason"] == NO_CONTACT
    assert tg["force"]["value"].startswith("not scored (no contact samples)")
    assert tg["gate"]["met"] is None and tg["gate"]["reason"] == NO_CONTACT
    assert tg["condition"]["met"] is None and tg["condition"]["reason"] == NO_DEGRADED
    assert tg["torque"]["met"] in (True, False)  # scored: torque labels exist
    line = rp.targets_line(rp.targets(res))
    assert line.startswith("targets met: ") and " of 1 scored; not scored: force MAE" in line
    # the same data with contacts and a degraded motor: scored
    tg = {t["target"].split(" ")[0]: t for t in rp.targets(synthetic_results())}
    assert {t["status"] for t in tg.values()} <= {"met", "not met"}
    assert tg["force"]["met"] is True and tg["gate"]["met"] is True


def test_an_old_record_with_balanced_accuracy_over_one_class_is_not_scored():
    """results.json written before the reasons were stored: balanced accuracy 1.0 over normal
    samples only reads "not scored" in the tables and the targets."""
    res = synthetic_results(degraded=False)
    na = next(e for e in res["estimation"] if e["model"] == "NeuralActuator")
    na["condition"]["balanced_accuracy"] = 1.0
    na["condition"]["auc"] = 0.5
    del na["condition"]["not_scored"]
    assert rp.condition_balanced(na["condition"]) is None
    cols, rows = rp.estimation_rows(res)
    cell = rows[0][cols.index("condition bal. acc.")]
    assert isinstance(cell, rp.NotScored) and cell.reason == NO_DEGRADED
    cond = next(t for t in rp.targets(res) if t["target"].startswith("condition"))
    assert cond["met"] is None


def test_results_json_holds_null_and_the_reason(tmp_path):
    rp.write_results(tmp_path, synthetic_results(contact=False))
    saved = json.loads((tmp_path / "results.json").read_text())
    na = next(e for e in saved["estimation"] if e["model"] == "NeuralActuator")
    assert na["force"]["contact"] is None and na["force"]["not_scored"]["contact"] == NO_CONTACT
    assert na["gate"]["f1"] is None and na["gate"]["not_scored"]["f1"] == NO_CONTACT
    force = next(t for t in saved["targets"] if t["target"].startswith("force"))
    assert force["met"] is None and force["reason"] == NO_CONTACT


def test_tables_say_not_scored_and_why():
    res = synthetic_results(contact=False)
    cols, rows = rp.estimation_rows(res)
    na = rows[0]
    assert na[cols.index("force MAE contact [N]")] == "not scored"
    assert isinstance(na[cols.index("force MAE no contact [N]")], float)
    note = rp.not_scored_note(cols, rows)
    assert "force MAE contact [N] (no contact samples)" in note
    assert "gate F1 (no contact samples)" in note
    md = rp.summary_markdown(res, "t")
    assert "| not scored |" in md and "| yes |" not in md


# ---------------------------------------------------------------------------- layout
def test_headline_first_one_targets_heading_and_no_empty_tables():
    res = synthetic_results(contact=False)
    rep = rp.build_report(res, "T", "intro")
    heading, items = rep.sections[0]
    assert heading == "Headline" and isinstance(items[0], Table) and items[0].title == "Targets"
    assert items[1].title == "NeuralActuator against the best baseline"
    kinds = [type(it).__name__ for _, its in rep.sections for it in its]
    assert kinds.index("Figure") > 1  # the headline's tables come before any figure
    tables = [it for _, its in rep.sections for it in its if isinstance(it, Table)]
    assert all(t.rows for t in tables)
    titles = [t.title for t in tables]
    # without a contact sample: no recall-per-force table, no label-change breakdown
    assert "Gate recall per true external force" not in titles
    assert not any(t.startswith("Gate errors near contact label changes") for t in titles)
    html = rep.to_html()
    assert len(re.findall(r">Targets<", html)) == 1
    # Report drops a table without rows, and the section it would be alone in
    r = Report("x")
    r.add("Empty", Table("nothing", ["a"], []))
    assert r.sections == []


def test_headline_rows_best_ours_against_best_baseline():
    cols, rows = rp.headline_rows(synthetic_results())
    by = {r[0]: dict(zip(cols, r)) for r in rows}
    h10 = by["arm-mean joint MAE, horizon 10 [deg] (simulator)"]
    assert h10["best NeuralActuator model"] == "NeuralActuator"
    assert h10["best baseline"] == PARAMETRIC  # not the diverging MLP
    assert h10["better"].startswith("ours")
    force = by["force MAE in contact [N] (estimator)"]
    assert force["best baseline"] == "momentum observer (Kt I)"
    assert force["best NeuralActuator model"] == "NeuralActuator"
    _, rows = rp.headline_rows(synthetic_results(contact=False))
    force = next(r for r in rows if r[0].startswith("force MAE in contact"))
    assert force[2] == "not scored (no contact samples)"


def test_the_introduction_names_the_tasks_the_data_holds():
    def ep(task):
        return SimpleNamespace(meta=SimpleNamespace(labels={"task": task}))

    train, test = [ep("free"), ep("lift"), ep("free")], [ep("free")]
    txt = rp.data_tasks(train, test, ("free", "lift", "pick", "push"))
    assert txt == ("tasks free, lift in training, free in test (pick, push: asked for, but "
                   "no episode at this size)")
    assert rp.data_tasks([ep("a")], [ep("a")], ("a",)) == "tasks a (training and test)"
    assert rp.data_tasks([SimpleNamespace(meta=SimpleNamespace(labels={}))], [], ()) == ""


# --------------------------------------------------------------------------- figures
def test_y_range_is_set_by_the_series_that_matter():
    from neuract.eval.figures import clipped_series, series_that_matter, y_range

    t = np.linspace(0, 1, 50)
    ref = np.sin(6 * t)
    series = {"good": ref + 0.02, "fair": ref + 0.05, "diverging": ref + 100 * t}
    keep = series_that_matter(ref, series)
    assert keep == ["good", "fair"]
    lo, hi = y_range(ref, [series[k] for k in keep])
    assert -1.3 < lo < -0.9 and 0.9 < hi < 1.3  # not stretched to 100
    assert clipped_series(series, lo, hi) == ["diverging"]
    # a joint that hardly moves is not magnified
    lo, hi = y_range(np.full(10, 3.0), [np.full(10, 3.01)], min_span=5.0)
    assert hi - lo >= 5.0 and lo < 3.0 < hi
    # a non-finite series never matters
    assert series_that_matter(ref, {"nan": ref * np.nan, "ok": ref}) == ["ok"]


def _capture(monkeypatch):
    """The matplotlib figures drawn by neuract.eval.figures (list, filled as they are)."""
    from neuract.eval import figures

    seen, orig = [], figures._figure

    def grab(fig, *a, **k):
        seen.append(fig)
        return orig(fig, *a, **k)

    monkeypatch.setattr(figures, "_figure", grab)
    return seen


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_report_figures_full_width_readable_legends_outside(monkeypatch):
    from neuract.eval.figures import PAGE_WIDTH_PX, SMALL_FONT_PT

    seen = _capture(monkeypatch)
    rep = rp.build_report(synthetic_results(), "T")
    figs = rep.figures()
    assert [f.title.split(" ")[0] for f in figs] == ["Open-loop", "End-effector",
                                                     "NeuralActuator"]
    for f in figs:
        assert f.min_font_pt >= SMALL_FONT_PT, f.title
    for f in figs[:2]:  # the traces: the content's full width
        assert round(f.width_in * 96) == PAGE_WIDTH_PX
    rollout, force = figs[0], figs[1]
    # the MLP's divergence does not set the y-range: cut off and named in the caption
    assert "MLP actuator net" in rollout.caption and "cut off" in rollout.caption
    assert f"momentum observer ({PARAMETRIC})" in force.caption  # left out, named
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for fig in seen[:2]:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        r = canvas.get_renderer()
        axes = [a for a in fig.get_axes() if a.get_visible()]
        legends = fig.legends + [lg for sf in fig.subfigs for lg in sf.legends]
        assert legends
        for lg in legends:
            box = lg.get_window_extent(r)
            assert not any(_overlaps(box, a.get_window_extent(r)) for a in axes)
    ax = [a for a in seen[0].get_axes() if a.get_visible()]
    assert len(ax) == 4  # one panel per joint
    lo, hi = ax[0].get_ylim()
    assert hi - lo < 100  # degrees: the joints move +-23 deg, the MLP drifts 170
    # the force figure: one row of x/y/z panels per group, never six series in a panel
    fax = seen[1].get_axes()
    assert len(fax) == 6 and all(len(a.get_lines()) <= 3 for a in fax)


def test_html_images_carry_their_drawn_width():
    from neuract.eval.figures import PAGE_WIDTH_PX

    html = rp.build_report(synthetic_results(), "T").to_html()
    widths = [int(w) for w in re.findall(r"<img [^>]*width='(\d+)'", html)]
    assert widths and max(widths) == PAGE_WIDTH_PX
    assert f"max-width:{PAGE_WIDTH_PX}px" in html


def test_evaluate_closing_line_counts_only_scored_targets(capsys, tmp_path):
    from neuract.pipeline.evaluate_verb import EvaluateConfig, _done

    _done(EvaluateConfig(out=tmp_path), synthetic_results(contact=False, degraded=False))
    out = capsys.readouterr().out
    assert (" of 1 scored; not scored: force MAE <= 0.3 N (no contact samples), gate F1 >= "
            "0.95 (no contact samples), condition accuracy >= 95 % (no degraded samples)") in out
