"""The pure helpers of benchmark scripts (``benchmarks/``, ``benchmarks/studies/`` and their
shared ``benchmarks/common.py``): run order of ``make bench`` and the gate studies'
counting."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    """Import a benchmark script or study as a module (its OMP_NUM_THREADS default kept to the
    test)."""
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.syspath_prepend(str(BENCH / "studies"))
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    return importlib.import_module


def test_run_all_runs_checkpoint_readers_after_the_benchmarks_they_read(bench):
    run_all = bench("run_all")
    scripts = list(BENCH.glob("bench_*.py")) + list((BENCH / "studies").glob("bench_*.py"))
    ordered = run_all.scripts(studies=True)
    names = [p.stem for p in ordered]
    assert sorted(ordered) == sorted(scripts) and len(set(names)) == len(names)
    for reader in run_all.READS_RUNS:
        assert reader in names, reader
        assert names.index(reader) > names.index("bench_neuralactuator_twin")
    for reader in ("bench_gate_seed_mix", "bench_gate_ambiguity"):
        assert names.index(reader) > names.index("bench_neuralactuator_twin_gate_seeds")
    assert (names.index("bench_gate_lag") < names.index("bench_gate_decide")
            < names.index("bench_gate_fresh_test"))
    # the studies come after every user-facing benchmark, and only with studies=True
    study = [p.parent.name == "studies" for p in ordered]
    assert study == sorted(study) and any(study)
    assert run_all.scripts() == [p for p in ordered if p.parent == BENCH]


def test_edge_misses_counts_misses_near_an_events_start_then_its_end(bench):
    mix = bench("bench_gate_seed_mix")
    y = np.zeros(80, bool)
    y[10:60] = True  # one event of 50 samples
    fired = y.copy()
    fired[10:15] = False  # its first five samples
    fired[30] = False  # one in the middle (20 samples in)
    fired[57:60] = False  # its last three
    fired[70] = True  # a false alarm: not a miss
    assert mix.edge_misses(y, fired, 10) == (5, 3)
    assert mix.edge_misses(y, fired, 30) == (6, 3)  # the middle one is near the start first
    assert mix.edge_misses(y, ~y, 10) == (10, 10)  # all missed: 10 near each end, 30 neither


def test_same_mix_f1_on_the_rows_own_mix_is_its_pooled_f1(bench):
    mix = bench("bench_gate_seed_mix")
    tasks = {"lift": {"contact": 900, "no_contact": 300, "tp": 890, "fp": 12},
             "push": {"contact": 300, "no_contact": 900, "tp": 200, "fp": 20},
             "free": {"contact": 0, "no_contact": 500, "tp": 0, "fp": 5}}
    tp = sum(t["tp"] for t in tasks.values())
    fp = sum(t["fp"] for t in tasks.values())
    fn = sum(t["contact"] - t["tp"] for t in tasks.values())
    own = {k: {"contact": v["contact"], "no_contact": v["no_contact"]} for k, v in tasks.items()}
    assert mix.same_mix_f1({"tasks": tasks}, own) == pytest.approx(2 * tp / (2 * tp + fp + fn))
    # more push in the mix, same per-task rates: lower F1
    heavy = {**own, "push": {"contact": 900, "no_contact": 900}}
    assert mix.same_mix_f1({"tasks": tasks}, heavy) < mix.same_mix_f1({"tasks": tasks}, own)


def test_gate_ambiguity_figures(bench):
    amb = bench("bench_gate_ambiguity")
    # 10 contact samples: 6 push samples shown (lag < 6), 2 push samples with lag >= 6, 2 lift
    # samples (no lag); 4 no-contact samples, one false alarm
    y = np.array([1] * 10 + [0] * 4, bool)
    lag = np.array([0, 1, 2, 5, 5, 0, 6, 40, -1, -1, -1, -1, -1, -1])
    push = np.array([1] * 8 + [0] * 6, bool)
    fired = np.array([1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0, 0, 1], bool)
    r = amb.gate_figures(y, fired, lag, push)
    assert r["contact_samples"] == 10 and r["push_contact_samples"] == 8
    assert r["lag_share"] == {"1": 0.6, "3": 0.4, "6": 0.2, "15": 0.1, "30": 0.1}
    assert r["missed"] == 3 and r["missed_ambiguous"] == 1 and r["false_alarms"] == 1
    assert r["recall_ambiguous"] == 0.5 and r["recall_push_shown"] == pytest.approx(4 / 6)
    # found where shown: 9 of 10 found (the lag-40 sample still missed), 1 false alarm
    assert r["f1_if_found_where_shown"] == pytest.approx(2 * 9 / (2 * 9 + 1 + 1))
    assert r["f1"] == pytest.approx(2 * 7 / (2 * 7 + 3 + 1))
    assert r["evidence_only_f1"] == pytest.approx(2 * 0.8 / 1.8)


def test_gate_retrain_summary_pairs_each_seed_with_its_runs_gate(bench, tmp_path, monkeypatch):
    gr = bench("common")
    monkeypatch.setattr(gr, "RESULTS", tmp_path)
    v = gr.Variant("gate_x", {"gate_lag": 3}, "lag 3", "Title", "A change.")
    assert gr.retrain_summary(v) == 2  # nothing run yet
    for seed, (a, b) in ((7, (0.90, 0.93)), (0, (0.96, 0.95))):
        gate = {"precision": 0.9, "recall": 0.8, "n_detected": 9, "n_events": 10,
                "latency_median_s": 0.1}
        row = {"seed": seed, "hidden": 16, "gru": {**gate, "f1": a}, "new_gate": {**gate, "f1": b},
               "gate_train": {"calib_f1": 0.8, "seconds": 120.0}}
        (tmp_path / "gate_x").mkdir(exist_ok=True)
        (tmp_path / "gate_x" / f"seed_{seed}.json").write_text(__import__("json").dumps(row))
    assert gr.retrain_summary(v) == 0
    md = (tmp_path / "gate_x.md").read_text()
    lines = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert lines[1].startswith("| 0 | 0.960 | 0.950 | -0.010 |")  # seeds in number order
    assert lines[2].startswith("| 7 | 0.900 | 0.930 | +0.030 |")
    assert lines[3].startswith("| mean ± sd | 0.930 ± 0.042 | 0.940 ± 0.014 | +0.010 |")
    out = __import__("json").loads((tmp_path / "gate_x.json").read_text())
    assert out["seeds"] == [0, 7] and out["changes"] == {"gate_lag": 3}
    assert "lag 3 F1" in md and md.startswith("# Title")


def test_gate_decide_summary_and_row_name_all_three_gates(bench, tmp_path, monkeypatch):
    import json

    gr, dec, summ = bench("common"), bench("bench_gate_decide"), bench("summarize")
    monkeypatch.setattr(gr, "RESULTS", tmp_path)
    monkeypatch.setattr(dec, "RESULTS", tmp_path)
    assert dec.summarize() == 2  # nothing run yet
    gate = {"precision": 0.9, "recall": 0.8, "n_detected": 9, "n_events": 10}
    for seed, (a, b, c) in ((7, (0.92, 0.94, 0.93)), (0, (0.96, 0.95, 0.97))):
        row = {"seed": seed, "gate_lag": 10, "gate_decide": dec.DECIDE,
               "gru": {**gate, "f1": a, "latency_median_s": 0.1},
               "lag_gate": {**gate, "f1": b, "latency_median_s": 0.17},
               "new_gate": {**gate, "f1": c, "latency_median_s": 0.12}}
        (tmp_path / "gate_decide").mkdir(exist_ok=True)
        (tmp_path / "gate_decide" / f"seed_{seed}.json").write_text(json.dumps(row))
    assert dec.summarize() == 0
    lines = [ln for ln in (tmp_path / "gate_decide.md").read_text().splitlines()
             if ln.startswith("| ")]
    assert lines[1] == "| 0 | 0.960 | 0.950 | 0.970 | +0.010 | 0.900 / 0.800 | 9/10 | " \
                       "100 / 170 / 120 |"
    assert lines[2].startswith("| 7 | 0.920 | 0.940 | 0.930 | +0.010 |")
    assert lines[3].startswith("| mean | 0.940 | 0.945 | 0.950 | +0.010 |")
    out = json.loads((tmp_path / "gate_decide.json").read_text())
    (row,) = summ._decided_gate(out)
    assert row[2] == "0.940 / 0.945 / 0.950"
    assert f"lag {dec.DECIDE}" in row[0] and "seed 7: 0.920 / 0.940 / 0.930" in row[3]


def test_gate_kind_names_the_gates_front_and_lag(bench):
    seeds = bench("common")

    def res(**g):
        return {"models": {"NeuralActuator[estimator]": {"gate_rnn": g}},
                "data": {"gate_train_tasks": ["push"]}}

    assert seeds.gate_kind(res(trained=False)) == "head"
    assert seeds.gate_kind(res(trained=True, hidden=128)) == "recurrent 128 units"
    assert seeds.gate_kind(res(trained=True, hidden=64, conv=6, lag=10, extra_episodes=3)) == \
        "recurrent 64 units, 6 convolutions, fixed lag 10 + extra units (push)"
    assert seeds.gate_kind(res(trained=True, hidden=64, lag=10, decide=3)) == \
        "recurrent 64 units, fixed lag 10 decided at 3"


def test_checkpoint_gate_names_a_shorter_decision_lag(bench):
    from types import SimpleNamespace

    from neuract.neuralactuator import NeuralActuatorConfig

    twin = bench("common")

    def kind(**kw):
        return twin.checkpoint_gate(SimpleNamespace(gate_rnn=object(), cfg=NeuralActuatorConfig(
            gate_rnn=128, **kw)))

    assert kind(gate_lag=10) == "recurrent gate, 128 units, fixed lag 10 samples"
    assert kind(gate_lag=10, gate_decide=3) == \
        "recurrent gate, 128 units, fixed lag 10 samples, decided at lag 3"
    assert twin.checkpoint_gate(SimpleNamespace(gate_rnn=None)) == "gate head"


def test_current_noise_summary_names_the_level_nearest_the_real_files(bench):
    b = bench("bench_twin_current_noise")
    levels = (0.0, 0.5, 1.0)
    rows = [{"file": "a", "robot": "so101", "real": 0.6, "twin": {"0.0": 0.05, "0.5": 0.5,
                                                                  "1.0": 0.7}},
            {"file": "b", "robot": "so101", "real": 0.7, "twin": {"0.0": 0.05, "0.5": 0.52,
                                                                  "1.0": 0.72}},
            {"file": "c", "robot": "omx", "real": 0.6, "twin": {"0.0": 0.55, "0.5": 0.75,
                                                                "1.0": 0.85}}]
    s = b.summarize(rows, levels)
    assert s["so101"]["files"] == 2 and s["so101"]["real_mean"] == pytest.approx(0.65)
    assert s["so101"]["twin_mean"]["1.0"] == pytest.approx(0.71)
    assert s["so101"]["nearest_level_lsb"] == 1.0 and s["omx"]["nearest_level_lsb"] == 0.0
    text = b.markdown({"levels_lsb": list(levels), "files": rows, "summary": s, "wall_s": 1.0})
    assert "| a | so101 | 0.60 | 0.05 | 0.50 | 0.70 |" in text
    assert "| so101 | 2 | 0.65 | 0.05 | 0.51 | 0.71 | 1 LSB |" in text
    rows_md = {r[0]: r for r in bench("summarize")._twin_current_noise({"summary": s})}
    so = rows_md["twin current register (so101)"]
    assert so[2] == "0.71" and "real 0.65 (2 files)" in so[3] and "(0 LSB) 0.05" in so[3]


def test_demo_scale_note_states_the_twin_benchmarks_own_sizes(bench):
    """The demo's report names the scale at which the twin benchmark scores the targets; the
    figures it quotes are the benchmark script's."""
    from neuract.demo import BENCHMARK_SCALE, DemoConfig, scale_note

    cfg = bench("common").twin_config()
    assert f"{cfg.data.minutes:g} min of data" in BENCHMARK_SCALE
    assert f"{cfg.experiment.est_steps} estimator steps" in BENCHMARK_SCALE
    assert cfg.experiment.gate_rnn > 0 and "a recurrent contact gate" in BENCHMARK_SCALE
    assert f"{cfg.data.gate_train_minutes:g} min of other units' episodes" in BENCHMARK_SCALE
    note = scale_note(DemoConfig())
    d = DemoConfig()
    assert note.startswith(f"This run's scale: {d.data.minutes:g} min of twin data, "
                           f"{d.experiment.sim_steps} simulator and {d.experiment.est_steps} "
                           "estimator training steps, the gate head.")
    assert BENCHMARK_SCALE in note


def test_fresh_test_pooled_f1_and_resampling(bench):
    """bench_gate_fresh_test's per-episode counting pools to the F1 of all samples, and its
    resampling draws each task's episodes as asked."""
    from neuract.eval.metrics import decision_f1

    m = bench("bench_gate_fresh_test")
    rng = np.random.default_rng(0)
    ys = [rng.random(200) < p for p in (0.0, 0.3, 0.5, 0.7, 0.2, 0.4)]
    fired = [(y ^ (rng.random(200) < 0.1)) for y in ys]
    counts = np.array([m.episode_counts(y, f) for y, f in zip(ys, fired)])
    assert counts.shape == (6, 3)
    assert m.pooled_f1(counts) == pytest.approx(
        decision_f1(np.concatenate(fired), np.concatenate(ys)), abs=1e-12)
    tasks = np.array(["free", "push", "push", "lift", "lift", "lift"])
    # a split of the full size without replacement is the whole set, whatever the draw order
    whole = m.resample(counts, tasks, {"free": 1, "push": 2, "lift": 3}, rng, 5)
    assert np.allclose(whole, m.pooled_f1(counts))
    # one episode per task: every value is the F1 of one (free, push, lift) triple
    one = m.resample(counts, tasks, {"free": 1, "push": 1, "lift": 1}, rng, 200)
    triples = {round(float(m.pooled_f1(counts[[0, p, lf]])), 12)
               for p in (1, 2) for lf in (3, 4, 5)}
    assert {round(float(x), 12) for x in one} <= triples
    assert len({round(float(x), 12) for x in one}) > 1
    boot = m.resample(counts, tasks, None, rng, 200)
    assert boot.shape == (200,) and ((boot >= 0) & (boot <= 1)).all()
    with pytest.raises(ValueError, match="task 'push': 3 episodes asked, 2 there"):
        m.resample(counts, tasks, {"push": 3}, rng, 1)


def test_fresh_test_paired_resampling_and_variants_option(bench):
    """Several gates' counts on the same episodes resample together (each column is that
    gate's F1 on the same draw), and --variants takes only the gates it knows."""
    m = bench("bench_gate_fresh_test")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 50, size=(8, 3))
    b = a.copy()
    b[:, 0] += 5  # the second gate finds more contact samples in every episode
    b[:, 2] = np.maximum(b[:, 2] - 5, 0)
    tasks = np.array(["push"] * 4 + ["lift"] * 4)
    boots = m.resample(np.stack([a, b]), tasks, None, np.random.default_rng(2), 50)
    assert boots.shape == (50, 2)
    assert np.allclose(boots[:, 0], m.resample(a, tasks, None, np.random.default_rng(2), 50))
    assert np.allclose(boots[:, 1], m.resample(b, tasks, None, np.random.default_rng(2), 50))
    assert (boots[:, 1] >= boots[:, 0]).all()
    assert m.split_variants(["--seeds", "0", "7"]) == (["--seeds", "0", "7"], ())
    assert m.split_variants(["--variants", "gate_lag", "--seeds", "0"]) == (
        ["--seeds", "0"], ("gate_lag",))
    assert m.split_variants(["--seeds", "0", "--variants", "gate_lag", "gate_conv"]) == (
        ["--seeds", "0"], ("gate_lag", "gate_conv"))
    with pytest.raises(SystemExit, match="'gate_big' is not a gate it knows; accepted: "
                                         "gate_lag, gate_conv, gate_decide"):
        m.split_variants(["--variants", "gate_big"])
    with pytest.raises(SystemExit, match="--variants: one or more of"):
        m.split_variants(["--variants", "--seeds", "0"])


def test_fresh_test_recall_bins(bench):
    """Samples since a contact began restart at each contact interval, and the binned
    recall counts each contact sample once, in the bin its value falls in."""
    m = bench("bench_gate_fresh_test")
    y = np.array([0, 1, 1, 1, 0, 0, 1, 1, 0, 1], bool)
    assert m.samples_since_onset(y).tolist() == [-1, 0, 1, 2, -1, -1, 0, 1, -1, 0]
    assert m.samples_since_onset(np.ones(3, bool)).tolist() == [0, 1, 2]
    fired = np.array([0, 0, 1, 1, 1, 0, 0, 1, 0, 1], bool)
    force = np.array([0, 0.6, 1.2, 5.0, 0.2, 0, 0.7, 2.5, 0, 9.0])
    hits = m.binned_hits(y, fired, force, (0.5, 1.0, 3.0, float("inf")))
    # contact samples 0.6, 0.7 | 1.2, 2.5 | 5.0, 9.0; detected 1.2, 5.0, 2.5, 9.0
    assert hits.tolist() == [[2, 2, 2], [0, 2, 2]]
    onset = m.binned_hits(y, fired, m.samples_since_onset(y), (0, 1, 3))
    assert onset.tolist() == [[3, 3], [1, 3]]
    rows = m.recall_rows(np.array([[2, 0], [1, 0]]), (0.5, 1.0, float("inf")))
    assert rows == [{"lo": 0.5, "hi": 1.0, "n": 2, "recall": 0.5},
                    {"lo": 1.0, "hi": None, "n": 0, "recall": None}]


def test_fresh_test_scores_several_gates_as_each_alone(bench):
    """Scoring the run's gate and its variants together (each episode's windows computed
    once) gives each gate the figures it gets scored alone."""
    from neuract.pipeline.twin_data import contact_labelled
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig
    from test_neuralactuator_gate_rnn import make_model

    m = bench("bench_gate_fresh_test")
    eps = contact_labelled(generate(GenerateConfig(
        robot="so101", tasks=("push", "free"), minutes=0.2, units=1, seed=9,
        sim=SimConfig(episode_s=6.0))), 0.5)
    gates = [make_model(), make_model(gate_lag=4), make_model(gate_lag=4, gate_decide=1)]
    together = m.score(gates, eps)
    assert len(together) == 3
    for g, (rec, counts, tasks, bins) in zip(gates, together):
        rec1, counts1, tasks1, bins1 = m.score([g], eps)[0]
        assert rec["gate"]["f1"] == rec1["gate"]["f1"]
        np.testing.assert_array_equal(counts, counts1)
        np.testing.assert_array_equal(tasks, tasks1)
        assert bins == bins1
    assert len({rec["gate"]["f1"] for rec, *_ in together}) > 1  # three different gates


def test_summarize_headline_is_short_and_has_no_study(bench, monkeypatch):
    """The README's table: at most MAX_HEADLINE_ROWS rows, each from a user-facing
    benchmark's result file, every one readable from the committed results."""
    summ = bench("summarize")
    files = [f for f, _ in summ.HEADLINE]
    assert 0 < len(files) <= summ.MAX_HEADLINE_ROWS == 20
    assert set(files) <= set(summ.SOURCES) and not set(files) & set(summ.STUDY_SOURCES)
    assert not any(f.startswith("gate_") for f in files)
    table = summ.headline_table().splitlines()
    assert len(table) == 2 + len(files)
    assert not [ln for ln in table if "unreadable" in ln or "not yet measured" in ln]
    assert table[0] == "| area | figure | value | target / peer | measured | source |"
    assert all(ln.count(" | ") == 5 for ln in table[2:])
    # every row says when its figure was measured, at which commit
    when = [ln.split(" | ")[4] for ln in table[2:]]
    assert all(re.search(r"20\d\d-\d\d-\d\d @ [0-9a-f]{7}", w) or w.startswith("unknown")
               for w in when), when
    # a row function that cannot read its file says so instead of failing the table
    rows = summ.HEADLINE
    monkeypatch.setattr(summ, "HEADLINE", [("dynamics.json", lambda d: d["no such key"])])
    assert "unreadable result file" in summ.headline_table()
    monkeypatch.setattr(summ, "HEADLINE", rows * 2)
    with pytest.raises(ValueError, match="at most 20"):
        summ.headline_table()


def test_summarize_full_table_keeps_every_file_and_studies_apart(bench):
    summ = bench("summarize")
    md = summ.summary_markdown()
    bench_part, study_part = md.split("## Studies", 1)
    for f in summ.SOURCES:
        assert f"[{f[:-5]}.md]({f[:-5]}.md)" in bench_part or f"| {f[:-5]} |" in bench_part, f
    for f in summ.STUDY_SOURCES:
        assert f"({f[:-5]}.md)" in study_part or f"| {f[:-5]} |" in study_part, f
        assert f"({f[:-5]}.md)" not in bench_part, f
    assert "benchmarks/results/" not in md  # links relative to summary.md
    # then one row per result file saying when it was measured
    when = md.split("## When each file was measured", 1)[1]
    rows = [ln for ln in when.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert len(rows) == len(summ.SOURCES) + len(summ.STUDY_SOURCES)
    for f in [*summ.SOURCES, *summ.STUDY_SOURCES]:
        assert f"[{f[:-5]}.md]({f[:-5]}.md) |" in when or f"| {f} |" in when, f


def test_summarize_replaces_only_the_marked_block(bench):
    summ = bench("summarize")
    text = f"intro\n{summ.BEGIN}\nold\ntable\n{summ.END}\noutro {summ.BEGIN[:4]}\n"
    assert summ.replace_block(text, "| new |") == \
        f"intro\n{summ.BEGIN}\n| new |\n{summ.END}\noutro {summ.BEGIN[:4]}\n"
    assert summ.replace_block("no markers here\n", "| new |") == "no markers here\n"


def test_servo_families_held_out_rule_takes_each_labels_second_highest_value(bench):
    fam = bench("bench_servo_families")
    xl330 = [{"kp": kp, "mass": 0.49, "trajectory": t} for kp in (100, 200, 400, 800)
             for t in ("sin_sin", "up_and_down")]
    assert fam.held_out_rule(xl330) == "kp == 400"  # one mass: no mass rule
    sts = [{"kp": kp, "mass": m} for kp in (4, 8, 32) for m in (0.535, 0.969, 1.1682)]
    assert fam.held_out_rule(sts) == "kp == 8 or mass == 0.969"
    assert fam.held_out_rule([{"kp": 32, "mass": 1.13}, {"kp": 16, "mass": 1.13}]) == ""
    assert fam.trajectory_folds([{"trajectory": "b"}, {"trajectory": "a"},
                                 {"trajectory": "b"}]) == ['trajectory == "a"',
                                                           'trajectory == "b"']


def test_servo_families_repeat_floor_pairs_only_repetitions_and_is_none_without(bench):
    fam = bench("bench_servo_families")
    q = np.array([[0.0, 0.0, 0.0], [0.1, 0.3, 0.0], [5.0, 5.0, 5.0]])
    mask = np.array([[True, True, True], [True, True, False], [True, True, True]])
    labels = [{"kp": 1, "trajectory": "a"}, {"kp": 1, "trajectory": "a"},
              {"kp": 2, "trajectory": "a"}]
    # runs 0 and 1 repeat each other (2 jointly valid samples: 0.1, 0.3); run 2 stands alone
    assert fam.repeat_floor(q, mask, labels) == pytest.approx(0.2)
    labels[1] = {"kp": 3, "trajectory": "a"}
    assert fam.repeat_floor(q, mask, labels) is None
    assert fam.pooled_mae([(0.1, 10), (0.4, 30)]) == pytest.approx(0.325)
    assert fam.verdict(0.0113, 0.0076)["within_target"] is True  # 1.49x
    v = fam.verdict(0.0113, 0.0074)
    assert v["ratio_to_floor"] == pytest.approx(1.527, abs=1e-3) and not v["within_target"]
    assert fam.verdict(0.01, None) == {"ratio_to_floor": None, "within_target": None,
                                      "why_not_judged": "no repetitions: no noise floor"}


def test_servo_families_summary_rows_judge_the_floor_only_where_there_is_one(bench):
    summ = bench("summarize")
    rows = summ.SOURCES["servo_families.json"]({"target_ratio": 1.5, "families": {
        "sts3215": {"heldout_mae_rad": 0.0113, "noise_floor_rad": 0.0075,
                    "ratio_to_floor": 1.51, "peer_mae_rad": 0.0428},
        "xl330": {"heldout_mae_rad": 0.02, "noise_floor_rad": None, "ratio_to_floor": None,
                  "peer_mae_rad": None},
        "mx64": {"status": "no bench", "heldout_mae_rad": None}}})
    assert [r[0] for r in rows] == ["servo families: sts3215", "servo families: xl330",
                                    "servo families: mx64"]
    assert rows[0][2] == "0.0113" and "1.51x (target <= 1.5x)" in rows[0][3]
    assert "published BAM fit 0.0428" in rows[0][3]
    assert rows[1][3] == "no repetitions: no noise floor" and rows[2][2] == "no bench"
