"""Collect the figures of every benchmark result file into two tables.

Reads ``benchmarks/results/*.json`` (written by the ``bench_*.py`` scripts in ``benchmarks/``
and ``benchmarks/studies/``) and writes

- the headline table (:data:`HEADLINE`: at most :data:`MAX_HEADLINE_ROWS` rows, one per figure
  a user of the library cares about, with its target or peer beside it; no study) between the
  ``results:begin`` / ``results:end`` markers of the README, touching nothing else there;
- the full table (every row of every result file, the studies' in a section of their own) to
  ``benchmarks/results/summary.md``.

Nothing here measures anything: it only copies figures out of the result files, so the README
cannot drift from them.

    python benchmarks/summarize.py
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from neuract.atomic import write_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
MAX_HEADLINE_ROWS = 20
"""the most rows the README's headline table may have"""

Row = tuple[str, str, str, str]  # (area, figure, ours, target or peer)


def _f(x, nd=3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{nd}g}" if abs(x) < 1e3 else f"{x:,.0f}"
    return str(x)


def _dynamics(d: dict) -> list[Row]:
    rows = [("dynamics", "SO-101 rollout fwd+bwd vs MuJoCo fwd-only (ratio, lower is better)",
             _f(d.get("rollout_ratio_vs_mujoco")), "<= 10")]
    return rows


def _sts(d: dict) -> list[Row]:
    models = d.get("models", {})
    scored = {k: v.get("heldout_mae_rad") for k, v in models.items()
              if isinstance(v, dict) and v.get("heldout_mae_rad") is not None}
    if not scored:
        return []
    ours = {k: v for k, v in scored.items() if k.startswith(("ours", "neuract"))} or scored
    best = min(ours, key=ours.get)
    rows = [("STS3215 pendulum", f"held-out MAE [rad], best ours ({best})", _f(ours[best]),
             "<= 0.015")]
    for k, v in sorted(scored.items(), key=lambda kv: kv[1]):
        if k not in ours:
            rows.append(("STS3215 pendulum", f"held-out MAE [rad], peer {k}", _f(v), "-"))
    return rows


def _twin(d: dict) -> list[Row]:
    return [("twin", f"{robot} telemetry-s per wall-s (1 process)", f"{_f(v, 3)}x", ">= 100x")
            for robot, v in d.get("realtime_factor", {}).items()]


def _twin_current_noise(d: dict) -> list[Row]:
    rows = []
    for robot, s in d.get("summary", {}).items():
        tw = s["twin_mean"]
        best = f"{s['nearest_level_lsb']:g}"
        rows.append((f"twin current register ({robot})",
                     f"share of rest samples whose current register changes, twin with "
                     f"SimConfig.current_noise_lsb={best} (nearest level) vs the NAD files",
                     f"{tw[str(s['nearest_level_lsb'])]:.2f}",
                     f"real {s['real_mean']:.2f} ({s['files']} files); twin default (0 LSB) "
                     f"{tw['0.0']:.2f}"))
    return rows


def _planar2(d: dict) -> list[Row]:
    return [
        ("Sensors 2025 planar2", "gravity R^2", _f(d.get("gravity_r2"), 6), ">= 0.9999"),
        ("Sensors 2025 planar2", "inertia max relative error", _f(d.get("inertia_max_rel_error")),
         "<= 0.02"),
        ("Sensors 2025 planar2", "CT tracking RMS learned / true", _f(d.get("tracking_rms_ratio")),
         "<= 1.2"),
    ]


def _servo_families(d: dict) -> list[Row]:
    """One row per servo family: the sts3215-best recipe's held-out MAE against the bench's
    repetition noise floor (the target), the published BAM fit beside it where there is one."""
    rows = []
    target = d.get("target_ratio", 1.5)
    tag = " (--quick)" if d.get("quick") else ""
    for fam, r in d.get("families", {}).items():
        area = f"servo families: {fam}{tag}"
        if r.get("heldout_mae_rad") is None:
            rows.append((area, "held-out MAE [rad], sts3215-best recipe", r.get("status", "-"),
                         "-"))
            continue
        floor, ratio = r.get("noise_floor_rad"), r.get("ratio_to_floor")
        judged = (f"floor {_f(floor)}: {_f(ratio)}x (target <= {_f(target)}x)"
                  if ratio is not None else "no repetitions: no noise floor")
        peer = r.get("peer_mae_rad")
        rows.append((area, "held-out MAE [rad], sts3215-best recipe", _f(r["heldout_mae_rad"]),
                     judged + (f"; published BAM fit {_f(peer)}" if peer is not None else "")))
    return rows


def _real_arms(d: dict) -> list[Row]:
    rows = []
    for ds, body in d.get("datasets", {}).items():
        models = body.get("models", {})
        means = {m: sum(v["nmse"]) / len(v["nmse"]) for m, v in models.items()
                 if isinstance(v, dict) and v.get("nmse")}
        if means:
            best = min(means, key=means.get)
            rows.append(("real arms", f"{ds}: mean torque nMSE, best ({best})", _f(means[best]),
                         "-"))
    return rows


def _inference(d: dict) -> list[Row]:
    rows = []
    for name, b in d.get("backends", {}).items():
        if name.startswith("naive"):
            continue
        # the targets are the default model's; the twin estimator's rows show its cost
        pre = "the default model's target: " if name.startswith("twin") else ""
        rows.append(("NeuralActuator inference", f"{name}: batch-1 p50 [ms]",
                     _f(b.get("batch1_p50_ms")), pre + "<= 0.15"))
        rows.append(("NeuralActuator inference", f"{name}: batch-32 [samples/s]",
                     _f(b.get("batch32_samples_per_s")), pre + ">= 11,000"))
    if d.get("stream_step_p50_ms") is not None:
        rows.append(("NeuralActuator inference", "streamed estimator step, batch 1, p50 [ms]",
                     _f(d["stream_step_p50_ms"]), "<= 0.5"))
    return rows


def _rollout_rows(area: str, res: dict) -> list[Row]:
    """NeuralActuator vs the MuJoCo default servo, arm-mean joint MAE per horizon."""
    by = {}
    for r in res.get("rollouts", []):
        by.setdefault(r["model"], {})[r["horizon"]] = r.get("arm_mean_deg")
    na = by.get("NeuralActuator", {})
    mj = next((v for k, v in by.items() if k.startswith("MuJoCo")), {})
    rows = []
    for h in na:
        others = {k: v[h] for k, v in by.items() if k != "NeuralActuator" and v.get(h) is not None}
        best = min(others, key=others.get) if others else None
        note = f"MuJoCo default servo {_f(mj.get(h))}"
        if best:
            note += f"; best other model: {best} {_f(others[best])}"
        rows.append((area, f"rollout arm-mean joint MAE [deg], h={h} [simulator]", _f(na[h]),
                     note))
    return rows


def _na_targets(area: str, res: dict) -> list[Row]:
    from neuract.pipeline.report import targets

    out = []
    for t in targets(res):
        met = {True: "met", False: "NOT met"}.get(t.get("met"), t.get("status", ""))
        out.append((area, f"{t['target']} [{t.get('mode', '')}]", str(t.get("value")), met))
    return out


def _na_twin(d: dict) -> list[Row]:
    rows = _na_targets("NeuralActuator twin", d)
    cond = d.get("condition_experiment")
    if isinstance(cond, dict):
        rows += [r for r in _na_targets("NeuralActuator twin (condition run)", cond)
                 if "condition" in r[1]]
    fresh = RESULTS / "neuralactuator_twin_gate_seeds.json"
    if fresh.is_file():  # the gate target on this split beside the fresh seeds' figures
        import json

        st = json.loads(fresh.read_text())
        g = st["stats"]["gate_f1"]["values"]
        other = [f"seed {s} {_f(v)}" for s, v in zip(st["seeds"], g) if s != 0]
        if other:
            rows = [(a, f, m, n + " on this split; other data seeds: " + ", ".join(other)
                     + " (see the recurrent-gate seeds row)") if "gate F1" in f else (a, f, m, n)
                    for a, f, m, n in rows]
    return rows + _rollout_rows("NeuralActuator twin", d)


def _na_twin_omx(d: dict) -> list[Row]:
    area = "NeuralActuator OMX twin"
    return _na_targets(area, d) + _rollout_rows(area, d)


def _na_twin_seeds(d: dict) -> list[Row]:
    st, seeds = d["stats"], d["seeds"]
    area = f"NeuralActuator twin, {len(seeds)} data seeds (gate head, before session 20)"
    rows = []
    for k, name, target in (("torque_ratio", "torque RMSE ratio parametric / ours", ">= 2"),
                            ("force_mae", "force MAE [N]", "<= 0.3"),
                            ("gate_f1", "gate F1", ">= 0.95"),
                            ("condition_accuracy", "condition accuracy, main mix", ">= 0.95")):
        v = st[k]
        rows.append((area, f"{name}, mean +- sd [estimator]",
                     f"{_f(v['mean'])} +- {_f(v['sd'], 2)}",
                     f"{target}; per seed {', '.join(_f(x) for x in v['values'])}"))
    return rows


def _na_twin_gate_seeds(d: dict) -> list[Row]:
    """The recurrent gate on the benchmark's seed and fresh seeds."""
    v, seeds = d["stats"]["gate_f1"], d["seeds"]
    per = ", ".join(f"seed {s} {_f(x)}" for s, x in zip(seeds, v["values"]))
    roles = {0: "the benchmark, looked at while sizing the gate",
             11: "the lift task added to the gate's extra episodes after its misses",
             7: "earlier non-gate choices"}
    fresh = [str(s) for s in seeds if s not in roles]
    said = [f"seed {s}: {r}" for s, r in roles.items() if s in seeds]
    if fresh:
        said.append(f"seed{'s' if len(fresh) > 1 else ''} {', '.join(fresh)}: fresh")
    return [(f"NeuralActuator twin, recurrent gate, {len(seeds)} data seeds",
             "gate F1, mean +- sd [estimator]", f"{_f(v['mean'])} +- {_f(v['sd'], 2)}",
             f">= 0.95; {per} ({'; '.join(said)})")]


def _na_twin_condition_seeds(d: dict) -> list[Row]:
    st, seeds = d["stats"], d["seeds"]
    v = st["NeuralActuator accuracy"]
    peers = ", ".join(f"{name} {_f(st[f'{name} accuracy']['mean'])}"
                      for name in ("SVM", "random forest",
                                   "random forest (identification channels)")
                      if f"{name} accuracy" in st)
    return [(f"NeuralActuator twin (condition run), {len(seeds)} data seeds",
             "condition accuracy, mean +- sd [estimator]",
             f"{_f(v['mean'])} +- {_f(v['sd'], 2)}",
             f">= 0.95; per seed {', '.join(_f(x) for x in v['values'])}; {peers}")]


def _na_twin_friction(d: dict) -> list[Row]:
    seeds, runs = d["seeds"], d["runs"]
    area = f"NeuralActuator twin, gear friction ablation (gate {d['gate']})"
    note = f"seeds {', '.join(map(str, seeds))}, {_f(d['minutes'])} min each"
    rows = []
    for k, name, target in (("force_mae", "force MAE [N]", "target <= 0.3"),
                            ("gate_f1", "gate F1", "target >= 0.95")):
        per = "; ".join(f"seed {sd}: {_f(runs[str(sd)]['on'][k])} / {_f(runs[str(sd)]['off'][k])}"
                        for sd in seeds)
        rows.append((area, f"{name}, full twin / friction off, mean [estimator]",
                     f"{_f(d['mean']['on'][k])} / {_f(d['mean']['off'][k])}",
                     f"{target}; {note}; {per}"))
    return rows


def _gate_observability(d: dict) -> list[Row]:
    area = "SO-101 twin, gate label observability"
    rows = []
    for key, name in (("test", f"twin benchmark test split ({d['n_test_episodes']} episodes)"),
                      ("all", f"all {d['n_episodes']} episodes")):
        r = d[key]
        small = 100 * (r["deflection_steps"]["0"] + r["deflection_steps"]["1"])
        rows.append((area, f"gate F1 ceiling (contact samples whose telemetry differs from the "
                     f"force-free episode), {name}", _f(r["f1_ceiling"], 4),
                     f"{r['hidden_samples']} of {r['contact_samples']} contact samples hidden, "
                     f"{r['events_hidden']} of {r['events']} events hidden whole; arm moved "
                     f"<= 1 encoder step on {small:.1f} % of contact samples"))
    return rows


def _na_nad(d: dict) -> list[Row]:
    rows = []
    for robot in ("omx", "so101"):
        if isinstance(d.get(robot), dict):
            rows += _na_targets(f"NeuralActuator NAD {robot}", d[robot])
            rows += _rollout_rows(f"NeuralActuator NAD {robot}", d[robot])
            rows += _nad_twin_pretrained(robot, d[robot])
    return rows


def _nad_twin_pretrained(robot: str, r: dict) -> list[Row]:
    tp = r.get("twin_pretrained")
    if not tp or not tp.get("fine_tuned"):
        return []
    own = next(e for e in r["estimation"] if e["model"] == "NeuralActuator")
    area = f"NeuralActuator NAD {robot}, pretrained on the twin"
    c, ft, zs = tp["config"], tp["fine_tuned"], tp["zero_shot"]
    what = (f"{c['minutes']:g} twin min, then {c['fine_tune_steps']} steps on the train files "
            "[estimator]")
    rows = []
    for key, name, target in (("force", "force MAE [N]", "<= 0.3"),
                              ("gate", "gate F1", ">= 0.95")):
        def val(rec, key=key):
            v = (rec.get(key) or {}).get("all" if key == "force" else "f1")
            return f"{v:.3f}" if v is not None else "-"
        negatives = (ft.get("force") or {}).get("n_no_contact")
        note = ("; the labelled test samples hold none without contact, so a gate that always "
                "fires scores 1" if key == "gate" and negatives == 0 else "")
        rows.append((area, f"{name}, {what}", val(ft),
                     f"target {target}; trained on the train files only {val(own)}; "
                     f"zero-shot (twin only) {val(zs)}{note}"))
    return rows


def _na_twin_sim_seeds(d: dict) -> list[Row]:
    area = f"NeuralActuator twin, {len(d['seeds'])} data seeds"
    rows = []
    for h in d["horizons"]:
        st = d["stats"][h]
        rows.append((area, f"rollout arm-mean joint MAE [deg], h={h}, mean +- sd [simulator]",
                     f"{_f(st['ours_mean'])} +- {_f(st['ours_sd'], 2)}",
                     f"best parametric {_f(st['parametric_mean'])}; ours best on every seed: "
                     f"{'yes' if st['ours_best_on_every_seed'] else 'no'}"))
    return rows


def _na_adapt(d: dict) -> list[Row]:
    roll = d["rollouts"]
    ad = next(k for k in roll if k.startswith("NeuralActuator adapted"))
    rows = []
    for h in roll[ad]:
        others = {k: v[h] for k, v in roll.items() if k != ad and v.get(h) is not None}
        best = min(others, key=others.get)
        note = (f"unadapted {_f(roll['NeuralActuator (base, old units)'][h])}; best other "
                f"model: {best} {_f(others[best])}")
        rows.append(("NeuralActuator twin, new unit", f"rollout arm-mean joint MAE [deg], "
                     f"h={h}, {ad} [simulator]", _f(roll[ad][h]), note))
    return rows


INT8_VARIANTS = {"ONNX Runtime (int8 trunk)": "NeuralActuator int8 ONNX export",
                 "torch int8 trunk (neuract::linear_w8, as compile_aot int8)":
                     "NeuralActuator int8 trunk in torch (compile_aot's arithmetic, run eager)"}


def _int8(d: dict) -> list[Row]:
    m = d.get("models", {})
    f32 = m.get("torch (float32)", {})
    return [(area, f"{name}, float32 -> int8 trunk [estimator]",
             f"{_f(f32.get(k), 4)} -> {_f(m[variant].get(k), 4)}",
             f"the twin benchmark's estimator ({d['gate_kind']}) on its test episodes")
            for variant, area in INT8_VARIANTS.items() if variant in m
            for k, name in (("torque_rmse", "torque RMSE [N m]"), ("force_mae", "force MAE [N]"),
                            ("gate_f1", "gate F1"), ("condition_accuracy", "condition accuracy"))]


def _worn(d: dict) -> list[Row]:
    rows = []
    for ep in d.get("episodes", []):
        v = list(ep["versions"].values())  # each names the motors worn in it
        as_gen = next(x for x in v if x["worn_motors"] == ep["worn"])
        healthy = next(x for x in v if not x["worn_motors"])
        singles = "; ".join(f"{x['worn_motors'][0]} worn {x['false_alarms']}" for x in v
                            if len(x["worn_motors"]) == 1 and len(ep["worn"]) > 1)
        rows.append(("SO-101 twin, gate and worn motors", f"false-alarm samples, test episode "
                     f"{ep['episode']} with {' and '.join(ep['worn'])} worn [estimator]",
                     str(as_gen["false_alarms"]),
                     f"same episode with healthy motors {healthy['false_alarms']}"
                     + (f"; {singles}" if singles else "")
                     + f"; training episodes with worn motors "
                     f"{d['train_episodes_with_worn_motors']} of {d['train_episodes']}; "
                     f"{d['gate_kind']}"))
    return rows


def _stiction(d: dict) -> list[Row]:
    area = "SO-101 twin, gate against breakaway friction"
    low = [b for b in d["recall_by_ratio"] if b["r"][1] is not None and b["r"][1] <= 3]
    missed = sum(b["missed"] for b in low)
    orc = "; ".join(f"r >= {o['c']:g}: {_f(o['f1'])}" for o in d["stiction_oracles"])
    return [(area, "gate misses on contacts that load no joint beyond 3x its breakaway "
             "friction [estimator]", f"{missed} of {d['gate']['missed']}",
             "recall by r (the largest joint external torque J^T F over that joint's "
             "breakaway friction): " + "; ".join(
                 f"{b['r'][0]:g}-{b['r'][1]:g}: {b['recall']:.2f}" for b in low)),
            (area, "stiction oracle F1 (contact reported where r >= c; true force known)",
             orc, f"the benchmark's estimator ({d['gate_kind']}): {_f(d['gate']['f1'])}; "
             "target >= 0.95")]


def _long_gate(d: dict) -> list[Row]:
    w = d["whole"]
    carried = next(v for k, v in w.items() if "carried" in k)
    cleared = next((v for k, v in w.items() if "cleared" in k), None)
    blocks = [b for b in d["blocks"] if "carried" in b.get("gate_state", "carried")]
    per = ", ".join(_f(b["f1"]) for b in blocks)
    return [("SO-101 twin, gate on long episodes",
             f"gate F1, {d['episodes']} push episodes of {d['episode_s']:g} s, state carried"
             " [estimator]", _f(carried["f1"]),
             (f"state cleared every 30 s {_f(cleared['f1'])}; " if cleared else "")
             + f"per {d['block_s']:g}-s block {per}; the benchmark's 30-s push test episodes "
             f"{_f(d['benchmark_push_test']['f1'])}")]


def _seed_mix(d: dict) -> list[Row]:
    rows = sorted(d["rows"], key=lambda r: r["push_share"])
    per = "; ".join(f"seed {r['seed']}: push share {r['push_share']:.2f}, F1 {_f(r['f1'])}, "
                    f"push recall {r['push_recall']:.2f}" for r in rows)
    return [("SO-101 twin, gate across seeds' task mix",
             f"gate F1 on each seed's own split vs its push share, {len(rows)} seeds "
             "[estimator]", f"correlation {d['corr_f1_push_share']:+.2f}; same-mix F1 "
             f"{d['same_mix_f1_mean']:.3f} +- {d['same_mix_f1_sd']:.3f}",
             f"{per}; recall on the other tasks >= "
             f"{min(r['other_recall'] for r in rows):.3f}; same-mix F1: per-task recall and "
             "false-alarm rate on the seeds' mean task mix (a diagnostic; target >= 0.95 on "
             "each own split)")]


def _fresh_test(d: dict) -> list[Row]:
    rows = d["rows"]
    per = "; ".join(
        f"seed {r['seed']}: own split {_f(r['own_split']['f1'])}, fresh "
        f"{r['fresh']['f1']:.3f} ({r['fresh']['f1_interval_95'][0]:.3f}-"
        f"{r['fresh']['f1_interval_95'][1]:.3f}), split-size sd {r['split_size_f1']['sd']:.3f}"
        for r in rows)
    fresh = [r["fresh"]["f1"] for r in rows]
    sizes = "/".join(str(n) for n in sorted({r["own_split"]["episodes"] for r in rows}))
    out: list[Row] = [(
        "SO-101 twin, gate on a large fresh test set",
        f"gate F1 on {d['fresh_minutes']:g} min of new episodes of each run's units, "
        f"{len(rows)} seed{'s' if len(rows) > 1 else ''} [estimator]",
        f"{min(fresh):.3f}-{max(fresh):.3f}" if len(rows) > 1 else f"{fresh[0]:.3f}",
        f"{per}; split-size sd: the F1's spread over random test splits of the run's "
        f"own size ({sizes} episodes) drawn from the fresh episodes; target >= 0.95")]
    for r in rows:
        fb = r["fresh"].get("recall_by_force_n")
        if fb:
            out.append(("SO-101 twin, gate on a large fresh test set",
                        f"contact-sample recall by external force, seed {r['seed']}, run's "
                        "gate [estimator]",
                        ", ".join(f"{b['lo']:g}-{b['hi']:g} N {_f(b['recall'])}"
                                  if b["hi"] is not None else
                                  f">= {b['lo']:g} N {_f(b['recall'])}" for b in fb),
                        "contact = external force >= 0.5 N"))
        for name, v in (r.get("variants") or {}).items():
            dv = v["fresh_f1_minus_run_gate"]
            out.append(("SO-101 twin, gate on a large fresh test set",
                        f"gate F1 on the fresh episodes, {name} gate "
                        f"({v['gate_kind']}), seed {r['seed']} [estimator]",
                        f"{v['fresh']['f1']:.3f}",
                        f"run's gate {r['fresh']['f1']:.3f}; change {dv['mean']:+.3f} (paired "
                        f"95 % interval {dv['interval_95'][0]:+.3f} to "
                        f"{dv['interval_95'][1]:+.3f}); own split {v['own_split']['f1']:.3f}; "
                        f"median latency {_ms(r['fresh'].get('latency_median_s'))} / "
                        f"{_ms(v['fresh'].get('latency_median_s'))} ms; target >= 0.95"))
    return out


def _ms(x: float | None) -> str:
    """Seconds as whole milliseconds ('-' if unknown)."""
    return "-" if x is None else f"{1000 * x:.0f}"


def _retrained_gate(label: str) -> Callable[[dict], list[Row]]:
    """Rows of a gate_retrain benchmark (bench_gate_lag / bench_gate_conv): ``label`` names
    the retrained gate."""

    def rows(d: dict) -> list[Row]:
        r = d["rows"]
        per = "; ".join(
            f"seed {x['seed']}: {x['gru']['f1']:.3f} -> {x['new_gate']['f1']:.3f}, median "
            f"latency {_ms(x['gru'].get('latency_median_s'))} -> "
            f"{_ms(x['new_gate'].get('latency_median_s'))} ms" for x in r)
        return [(f"SO-101 twin, {label} retrained on the runs' estimators",
                 f"gate F1 on each run's test split, run's gate / retrained, mean over "
                 f"{len(r)} seed{'s' if len(r) > 1 else ''} [estimator]",
                 f"{d['gru_f1_mean']:.3f} / {d['new_f1_mean']:.3f}",
                 f"{per}; target >= 0.95")]

    return rows


def _decided_gate(d: dict) -> list[Row]:
    """Rows of bench_gate_decide: the fixed-lag gate decided at a shorter lag."""
    r, k = d["rows"], d["gate_decide"]
    per = "; ".join(
        f"seed {x['seed']}: {x['gru']['f1']:.3f} / {x['lag_gate']['f1']:.3f} / "
        f"{x['new_gate']['f1']:.3f}, median latency "
        f"{_ms(x['gru'].get('latency_median_s'))} / {_ms(x['lag_gate'].get('latency_median_s'))}"
        f" / {_ms(x['new_gate'].get('latency_median_s'))} ms" for x in r)
    lag = sum(x["lag_gate"]["f1"] for x in r) / len(r)
    return [(f"SO-101 twin, fixed-lag gate decided at lag {k} (filter calibrated there)",
             f"gate F1 on each run's test split, causal / lag 10 / lag {k}, mean over "
             f"{len(r)} seed{'s' if len(r) > 1 else ''} [estimator]",
             f"{d['gru_f1_mean']:.3f} / {lag:.3f} / {d['new_f1_mean']:.3f}",
             f"{per}; target >= 0.95")]


def _ambiguity(d: dict) -> list[Row]:
    rows = sorted(d["rows"], key=lambda r: r["f1"])
    L = d["shown_lag"]
    out = []
    for k in d["tolerances_lsb"]:
        same = "exactly" if k == 0 else f"within {k} register count{'s' if k > 1 else ''}"
        g = [r["tolerance_lsb"][str(k)] for r in rows]
        per = "; ".join(f"seed {r['seed']}: F1 {_f(r['f1'])}, lag >= {L} "
                        f"{100 * x['lag_share'][str(L)]:.1f} %, push recall where shown "
                        f"{x['recall_push_shown']:.2f}, if found where shown "
                        f"{_f(x['f1_if_found_where_shown'])}" for r, x in zip(rows, g))
        out.append(("SO-101 twin, what the telemetry shows of each push",
                    f"gate F1 if it also found every contact the telemetry shows within "
                    f"{L} samples (registers compared {same}), {len(rows)} seeds [estimator]",
                    f"{min(x['f1_if_found_where_shown'] for x in g):.3f}-"
                    f"{max(x['f1_if_found_where_shown'] for x in g):.3f}",
                    f"{per}; evidence-only F1 {min(x['evidence_only_f1'] for x in g):.3f}-"
                    f"{max(x['evidence_only_f1'] for x in g):.3f} (a diagnostic; target >= 0.95 "
                    "on each own split)"))
    return out


def _envs(d: dict) -> list[Row]:
    rows = []
    if "parametric_vs_mujoco_ratio" in d:
        rows += [
            ("Gymnasium envs", "single SO-101 env [steps/s]: MuJoCo servo / parametric servo / "
             "NeuralActuator", f"{_f(d['mujoco_steps_per_s'])} / "
             f"{_f(d['parametric_steps_per_s'])} / "
             f"{_f(d['neuralactuator_single_steps_per_s'])}", "- / >= 0.5 of MuJoCo / >= 2,000"),
            ("Gymnasium envs", "parametric / MuJoCo steps/s", _f(d["parametric_vs_mujoco_ratio"]),
             ">= 0.5"),
            ("Gymnasium envs", f"{d['batch']} NeuralActuator envs [env steps/s] / network alone "
             "[samples/s]", f"{_f(d['neuralactuator_batched_steps_per_s'])} / "
             f"{_f(d['network_batched_samples_per_s'])}",
             f"ratio {_f(d['batched_env_cost_vs_network'])}x, <= 1.5x")]
    for where, g in (d.get("mjcf_export_gap_deg") or {}).items():
        if isinstance(g, dict) and "difference" in g:
            rows.append(("MJCF export", f"{where}: held-out open-loop MAE [deg], plain MuJoCo "
                         "with the exported file / neuract's model",
                         f"{_f(g.get('mujoco_export_vs_measured'))} / "
                         f"{_f(g.get('neuract_vs_measured'))}",
                         f"the export's price {_f(g['difference'])} deg"))
    return rows


def _bc_force(d: dict) -> list[Row]:
    rows = []
    for task, r in (d.get("tasks") or {}).items():
        lo, hi = r["difference_ci"]
        rows.append(("policies: BC with the force estimate", f"{task}: success (q, a) / "
                     "(q, a, f) on unseen twin units, paired",
                     f"{100 * r['success_qa']:.1f} % / {100 * r['success_qaf']:.1f} %",
                     f"difference {100 * r['difference']:+.1f} points (95 % CI {100 * lo:+.1f} "
                     f"to {100 * hi:+.1f}); target: CI excludes 0 and >= +10"))
    return rows


def _rl_loop(d: dict) -> list[Row]:
    t, g = d["tracking_rms_mrad"], d["gap_closed"]
    rows = []
    for kind in ("parametric", "neural"):
        loop = t.get(f"loop_{kind}")
        if not loop:
            continue
        rows.append((f"policies: identification in the RL loop ({kind})",
                     "SO-101 point-to-point tracking RMS [mrad]: MuJoCo-servo policy / loop "
                     f"({kind}, per iteration) / oracle",
                     f"{_f(t['mujoco'])} / {' -> '.join(_f(x) for x in loop)} / "
                     f"{_f(t['oracle'])}",
                     f"gap closed {_f(g.get(kind))} (target >= 0.75)"))
    return rows


SOURCES: dict[str, Callable[[dict], list[Row]]] = {
    "dynamics.json": _dynamics,
    "bc_force.json": _bc_force,
    "rl_sysid_loop.json": _rl_loop,
    "envs.json": _envs,
    "sts3215_pendulum.json": _sts,
    "servo_families.json": _servo_families,
    "twin.json": _twin,
    "planar2_sensors2025.json": _planar2,
    "real_arms.json": _real_arms,
    "neuralactuator_twin.json": _na_twin,
    "neuralactuator_twin_seeds.json": _na_twin_seeds,
    "neuralactuator_twin_gate_seeds.json": _na_twin_gate_seeds,
    "neuralactuator_twin_condition_seeds.json": _na_twin_condition_seeds,
    "neuralactuator_twin_sim_seeds.json": _na_twin_sim_seeds,
    "neuralactuator_twin_omx.json": _na_twin_omx,
    "neuralactuator_adapt.json": _na_adapt,
    "neuralactuator_nad.json": _na_nad,
    "inference.json": _inference,
    "int8_accuracy.json": _int8,
}
"""the result files of the user-facing benchmarks (``benchmarks/bench_*.py``) and their rows"""

STUDY_SOURCES: dict[str, Callable[[dict], list[Row]]] = {
    "twin_current_noise.json": _twin_current_noise,
    "neuralactuator_twin_friction.json": _na_twin_friction,
    "gate_observability.json": _gate_observability,
    "gate_worn_motor.json": _worn,
    "gate_stiction.json": _stiction,
    "gate_long_episodes.json": _long_gate,
    "gate_seed_mix.json": _seed_mix,
    "gate_ambiguity.json": _ambiguity,
    "gate_fresh_test.json": _fresh_test,
    "gate_lag.json": _retrained_gate("fixed-lag gate (10 samples)"),
    "gate_conv.json": _retrained_gate("gate with a convolution front"),
    "gate_decide.json": _decided_gate,
}
"""the result files of the studies (``benchmarks/studies/bench_*.py``) and their rows"""


# ------------------------------------------------------------------ headline table ------
def _load(fname: str) -> dict | None:
    """A result file's contents, or None where it is not there yet."""
    path = RESULTS / fname
    return json.loads(path.read_text()) if path.is_file() else None


# ------------------------------------------------------ when each figure was measured ------
# A result file written by a benchmark records its provenance (benchmarks/common.py,
# provenance()): the commit it measured and the neuract modules it loaded. A figure is stale
# when a later commit changed one of those modules, the script or benchmarks/common.py. A file
# written before provenance was recorded falls back on the commit that last changed it in git,
# its script (the one that names it) and that script's imports, read from the source.

SHARED = "benchmarks/common.py"
"""the code every benchmark script shares (its later changes make any result stale)"""


def git(root: Path, *args: str) -> str | None:
    """What ``git args`` prints in ``root``; None where git is missing or fails."""
    try:
        r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def module_paths(name: str, root: Path) -> list[str]:
    """The repository paths of neuract module ``name`` (``neuract.robot``): its file, or for a
    package its ``__init__.py`` and the data files beside it outside its subpackages
    (``src/neuract/robot/assets``, as a folder); a module gone since: the paths it had."""
    base = root / "src" / Path(*name.split("."))

    def rel(p: Path) -> str:
        return p.relative_to(root).as_posix()

    if (base / "__init__.py").is_file():
        out = [rel(base / "__init__.py")]
        for p in sorted(base.iterdir()):
            if p.is_dir() and p.name != "__pycache__" and not (p / "__init__.py").is_file():
                out.append(rel(p))
            elif p.is_file() and p.suffix not in (".py", ".pyc"):
                out.append(rel(p))
        return out
    if base.with_suffix(".py").is_file():
        return [rel(base.with_suffix(".py"))]
    return [rel(base.with_suffix(".py")), rel(base / "__init__.py")]


def _module_file(name: str, root: Path) -> Path | None:
    base = root / "src" / Path(*name.split("."))
    for p in (base / "__init__.py", base.with_suffix(".py")):
        if p.is_file():
            return p
    return None


_PARSED: dict[tuple[str, int], ast.Module] = {}
_IMPORTS: dict[tuple[str, int, str | None], list[tuple[str, list[str]]]] = {}


def _parse(path: Path) -> ast.Module:
    """``path``'s syntax tree (each version of a file parsed once)."""
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _PARSED:
        _PARSED[key] = ast.parse(path.read_text())
    return _PARSED[key]


def _file_imports(path: Path, package: str | None) -> list[tuple[str, list[str]]]:
    """:func:`_imports` of a file (each version read once)."""
    key = (str(path), path.stat().st_mtime_ns, package)
    if key not in _IMPORTS:
        _IMPORTS[key] = _imports(_parse(path), package)
    return _IMPORTS[key]


def _imports(tree: ast.AST, package: str | None) -> list[tuple[str, list[str]]]:
    """(module, names imported from it) of every import statement in ``tree``, those inside
    functions too; relative imports resolved against ``package``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                if not package:
                    continue
                parts = package.split(".")
                up = parts[:len(parts) - node.level + 1]
                mod = ".".join(up + ([mod] if mod else []))
            out.append((mod, [a.name for a in node.names]))
    return out


def _used_shared(tree: ast.Module, names: set[str]) -> list[ast.AST]:
    """The statements of a shared module (benchmarks/common.py) that ``names`` reach: its
    top-level imports and the definitions of the names, and of the module's names those use,
    transitively."""
    defs: dict[str, ast.AST] = {}
    nodes: list[ast.AST] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            nodes.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defs[n.id] = node
    todo, seen = [n for n in names if n in defs], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        nodes.append(defs[name])
        todo += [n.id for n in ast.walk(defs[name])
                 if isinstance(n, ast.Name) and n.id in defs and n.id not in seen]
    return nodes


def import_closure(script: Path, root: Path) -> set[str]:
    """The repository paths of the code ``script`` runs, read from the sources (no import):
    the script, ``benchmarks/common.py`` where it imports from it (the neuract modules only
    the names it imports reach), and every neuract module imported, transitively (imports
    inside functions too), with the packages above each."""
    files = {script.relative_to(root).as_posix()}
    found = list(_file_imports(script, None))
    shared = root / SHARED
    from_shared = {n for m, names in found if m == "common" for n in names}
    if any(m == "common" and not names for m, names in found):  # import common: all of it
        from_shared |= {"*"}
    if from_shared and shared.is_file():
        files.add(SHARED)
        stree = _parse(shared)
        nodes = [stree] if "*" in from_shared else _used_shared(stree, from_shared)
        for node in nodes:
            found += _imports(node, None)
    modules: set[str] = set()
    todo = [(m, names) for m, names in found if m == "neuract" or m.startswith("neuract.")]
    while todo:
        mod, names = todo.pop()
        # the module, the packages above it, and names that are submodules
        chain = mod.split(".")
        cands = [".".join(chain[:i]) for i in range(1, len(chain) + 1)]
        cands += [f"{mod}.{n}" for n in names if _module_file(f"{mod}.{n}", root)]
        for m in cands:
            if m in modules:
                continue
            modules.add(m)
            path = _module_file(m, root)
            if path is None:
                continue
            package = m if path.name == "__init__.py" else m.rpartition(".")[0]
            todo += [(x, ns) for x, ns in _file_imports(path, package)
                     if x == "neuract" or x.startswith("neuract.")]
    for m in modules:
        files.update(module_paths(m, root))
    return files


def writer_script(stem: str, root: Path) -> Path | None:
    """The benchmark script that writes ``results/<stem>.json``: ``bench_<stem>.py`` (in
    ``benchmarks/`` or ``benchmarks/studies/``), else one whose source holds the string
    ``"<stem>"`` or ``"<stem>.json"`` (those that write results first, then ``bench_<x>``
    whose ``x`` starts the stem, as ``bench_sts3215`` writes ``sts3215_pendulum``, then other
    ``bench_*``)."""
    bench = root / "benchmarks"
    scripts = sorted(bench.glob("*.py")) + sorted((bench / "studies").glob("*.py"))
    for p in scripts:
        if p.stem == f"bench_{stem}":
            return p
    named = []
    for p in scripts:
        if p.name in ("summarize.py", "common.py", "run_all.py", "__init__.py"):
            continue
        src = p.read_text()
        consts = {n.value for n in ast.walk(_parse(p))
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        if {stem, f"{stem}.json"} & consts:
            writes = "write_result(" in src or "write_json(" in src
            prefix = p.stem.startswith("bench_") and stem.startswith(p.stem[len("bench_"):])
            named.append((not writes, not prefix, not p.stem.startswith("bench_"), p.name, p))
    return min(named)[-1] if named else None


def _touches(files: set[str], dirty: list[str]) -> bool:
    """Whether a changed path (an untracked folder ends in '/') is or holds one of ``files``,
    or lies in one (a data folder)."""
    for d in dirty:
        d = d.rstrip("/")
        if any(f == d or f.startswith(d + "/") or d.startswith(f + "/") for f in files):
            return True
    return False


@dataclass
class Measured:
    """When and on what code a result file was measured, and whether that code has changed
    since (``status``: current, stale, dirty (measured with uncommitted changes to it) or
    unknown)."""

    how: str | None  # "provenance", "committed" (no provenance: the last commit of the file)
    date: str | None = None  # YYYY-MM-DD (UTC) of the oldest run it holds
    commit: str | None = None  # that run's commit
    status: str = "unknown"
    runs: int = 1  # the measurements the file is built from (its own and its parts)
    unrecorded: int = 0  # of those, recorded without provenance
    files: set[str] = field(default_factory=set)  # the code whose changes make it stale

    def cell(self) -> str:
        if self.how is None:
            return "unknown (no provenance; not in git)"
        when = f"{self.date} @ {self.commit[:7]}" if self.commit else f"{self.date or '?'}"
        text = f"committed {when} (no provenance)" if self.how == "committed" else when
        if self.runs > 1:
            text += f" (oldest of {self.runs} runs"
            text += f", {self.unrecorded} without provenance)" if self.unrecorded else ")"
        return text + {"stale": "; stale: code changed since",
                       "dirty": "; measured with uncommitted changes",
                       "unknown": "; staleness unknown", "current": ""}[self.status]


@functools.cache
def _cell_of(fname: str, mtime_ns: int) -> str:
    return measured(fname).cell()


def _cell(fname: str) -> str:
    """The ``measured`` cell of a result file of :data:`RESULTS` (worked out once per version
    of the file)."""
    path = RESULTS / fname
    return _cell_of(fname, path.stat().st_mtime_ns if path.is_file() else 0)


STATUS_ORDER = ("stale", "dirty", "unknown", "current")
"""a file's status: the first of these that any of its runs has"""


def measured(fname: str, root: Path = ROOT, results: Path | None = None) -> Measured:
    """:class:`Measured` of the result file ``fname`` in ``results`` (default
    ``<root>/benchmarks/results``), its code and its git history read in ``root``."""
    results = results or root / "benchmarks" / "results"
    path = results / fname
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return Measured(None)
    prov = data.get("provenance") if isinstance(data, dict) else None
    if isinstance(prov, dict):
        runs = [prov, *prov.get("parts", [])]
        files = {SHARED}
        for name in prov.get("modules", []):
            files.update(module_paths(name, root))
        files.update(r["script"] for r in runs
                     if isinstance(r.get("script"), str) and not Path(r["script"]).is_absolute())
        how = "provenance"
        # neuract imported from elsewhere than the checkout: its commit is not the code's
        outside = prov.get("neuract_in_checkout") is False
    else:
        log = git(root, "log", "-1", "--format=%H %cI", "--", path.relative_to(root).as_posix())
        if not log:
            return Measured(None)
        commit, date = log.split()
        runs = [{"commit": commit, "measured_utc": date}]
        script = writer_script(path.stem, root)
        files = {SHARED} | (import_closure(script, root) if script else set())
        how, outside = "committed", False
    statuses = []
    for r in runs:
        c = r.get("commit")
        n = (git(root, "rev-list", "--count", f"{c}..HEAD", "--", *sorted(files))
             if c and not outside else None)
        if n is None:
            statuses.append("unknown")
        elif int(n) > 0:
            statuses.append("stale")
        elif _touches(files, r.get("dirty_files") or []):
            statuses.append("dirty")
        else:
            statuses.append("current")
    dated = [r for r in runs if r.get("commit") and r.get("measured_utc")]
    oldest = min(dated, key=lambda r: r["measured_utc"]) if dated else (runs[0] if runs else {})
    return Measured(how, (oldest.get("measured_utc") or "")[:10] or None, oldest.get("commit"),
                    next(s for s in STATUS_ORDER if s in statuses), len(runs),
                    sum(1 for r in runs if not r.get("commit")), files)


def _met(ok: bool | None) -> str:
    return {True: " (met)", False: " (NOT met)"}.get(ok, "")


def _na(res: dict) -> dict:
    """NeuralActuator's estimator-mode record of a twin or NAD run."""
    return next(e for e in res["estimation"] if e["model"] == "NeuralActuator")


def _rollout(res: dict, model: str, h) -> float | None:
    return next((r.get("arm_mean_deg") for r in res.get("rollouts", [])
                 if r["model"] == model and str(r["horizon"]) == str(h)), None)


def _longest(res: dict, model: str = "NeuralActuator"):
    """The longest rollout horizon of ``model`` ('full' beats any number)."""
    hs = [r["horizon"] for r in res.get("rollouts", []) if r["model"] == model]
    return "full" if "full" in hs else max(hs)


def _h_dynamics(d: dict) -> Row:
    return ("dynamics", "SO-101 differentiable rollout, forward + backward, against MuJoCo's "
            "forward pass alone (time ratio, lower is better)",
            _f(d.get("rollout_ratio_vs_mujoco")), "<= 10")


def _inference_best(d: dict, key: str, pick) -> tuple[str, float, float | None]:
    """(backend, value, torch eager's value) of the default model's best backend by ``key``."""
    back = {k: v[key] for k, v in d["backends"].items()
            if not k.startswith(("naive", "twin")) and v.get(key) is not None}
    best = pick(back, key=back.get)
    return best, back[best], back.get("torch-eager")


def _h_latency(d: dict) -> Row:
    best, v, eager = _inference_best(d, "batch1_p50_ms", min)
    return ("inference", f"NeuralActuator step, batch 1, p50 latency [ms], fastest backend "
            f"({best})", _f(v), f"target <= {_f(d['targets']['batch1_p50_ms'])}"
            f"{_met(v <= d['targets']['batch1_p50_ms'])}; torch eager {_f(eager)}")


def _h_stream(d: dict) -> Row:
    """The whole streamed estimator step (features + network) on the demo's estimator."""
    v = d.get("stream_step_p50_ms")
    if v is None:
        return ("inference", "streamed estimator step, batch 1, p50 [ms]", "not yet measured",
                "target <= 0.5")
    st = d.get("stream_step", {})
    old = st.get("torch_fallback", {}).get("p50_ms")
    rt = st.get("runtime", {}).get("p50_ms")
    return ("inference", "streamed estimator step (features + network), demo's estimator, batch "
            f"1, p50 [ms] ({st.get('network', 'n/a')}, physics {st.get('physics', 'n/a')})",
            _f(v), f"target <= 0.5{_met(v <= 0.5)}, aim 0.2; neuract.runtime (no torch) "
            f"{_f(rt)}; torch path {_f(old)}")


def _h_throughput(d: dict) -> Row:
    best, v, eager = _inference_best(d, "batch32_samples_per_s", max)
    t = d["targets"]["batch32_samples_per_s"]
    return ("inference", f"NeuralActuator, batch 32, throughput [samples/s], fastest backend "
            f"({best})", _f(v), f"target >= {_f(float(t))}{_met(v >= t)}; torch eager "
            f"{_f(eager)}")


def _h_twin(d: dict) -> Row:
    rf = d.get("realtime_factor", {})
    return ("twin", "simulated telemetry seconds per wall-clock second (one process)",
            ", ".join(f"{r} {_f(v)}x" for r, v in rf.items()),
            ">= 100x" + _met(all(v >= 100 for v in rf.values()) if rf else None))


def _h_sts(d: dict) -> Row:
    mae = {k: v["heldout_mae_rad"] for k, v in d.get("models", {}).items()
           if isinstance(v, dict) and v.get("heldout_mae_rad") is not None}
    ours = {k: v for k, v in mae.items() if k.startswith(("ours", "neuract"))}
    best = min(ours, key=ours.get)
    peers = []
    for name, prefix in (("BAM, best fit or published", ("bam", "kscale")),
                         ("MuJoCo Menagerie", ("menagerie",)), ("mujoco.sysid", ("mujoco_sysid",))):
        cand = {k: v for k, v in mae.items() if k.startswith(prefix)}
        if cand:
            k = min(cand, key=cand.get)
            peers.append(f"{name} ({k}) {_f(cand[k])}")
    return ("STS3215 pendulum (real servo)", f"held-out position MAE [rad], best neuract model "
            f"({best})", _f(ours[best]), f"target <= 0.015{_met(ours[best] <= 0.015)}; "
            + "; ".join(peers))


def _h_nad_rollout(d: dict) -> Row:
    ours, servo = [], []
    for robot in ("omx", "so101"):
        r = d[robot]
        h = _longest(r)
        ours.append(f"{robot} {_f(_rollout(r, 'NeuralActuator', h))}")
        servo.append(f"{robot} {_f(_rollout(r, 'MuJoCo default servo', h))}")
    rel = d["benchmark"]["release_numbers"]
    return ("NAD (real arms)", "open-loop rollout, arm-mean joint MAE [deg], whole test "
            "episodes [simulator]", ", ".join(ours),
            f"MuJoCo default servo {', '.join(servo)}; the NeuralActuator release (full NAD, "
            f"its own metrics): omx {rel['omx_no_load_joint_deg']} without load, "
            f"{rel['omx_force_sensor_tasks_joint_deg']} on the force-sensor tasks; so101 worst "
            f"joint {rel['so101_worst_joint_deg']}")


def _h_nad_force(d: dict) -> Row:
    tuned, own = [], []
    for robot in ("omx", "so101"):
        r = d[robot]
        ft = ((r.get("twin_pretrained") or {}).get("fine_tuned") or {}).get("force") or {}
        tuned.append(f"{robot} {_f(ft.get('all'))}")
        own.append(f"{robot} {_f((_na(r).get('force') or {}).get('all'))}")
    rel = d["benchmark"]["release_numbers"]
    return ("NAD (real arms)", "end-effector force MAE [N], pretrained on the twin, then "
            "fine-tuned on the train files [estimator]", ", ".join(tuned),
            f"target <= 0.3; trained on the train files only {', '.join(own)}; the release "
            f"(full NAD): omx contact force {rel['omx_contact_force_N']}, so101 "
            f"{rel['so101_force_N']}")


def _targets(res: dict) -> dict[str, dict]:
    """The twin targets of a run (``neuract.pipeline.report.targets``) by their first word
    (torque, force, gate, condition)."""
    from neuract.pipeline.report import targets

    return {t["target"].split(" ")[0]: t for t in targets(res)}


def _h_twin_torque(d: dict) -> Row:
    t = _targets(d)["torque"]
    return ("NeuralActuator, SO-101 twin", "joint torque from telemetry, RMSE [N m] against "
            "the best parametric servo model [estimator]", t["value"],
            f"target >= 2x lower{_met(t['met'])}")


def _h_twin_force(d: dict) -> Row:
    f = _na(d).get("force") or {}
    return ("NeuralActuator, SO-101 twin", "end-effector force MAE [N] [estimator]",
            _f(f.get("all")), f"target <= 0.3{_met(f.get('all') <= 0.3)}; contact samples "
            f"{_f(f.get('contact'))}, no contact {_f(f.get('no_contact'))}")


def _h_twin_gate(d: dict) -> Row:
    f1 = (_na(d).get("gate") or {}).get("f1")
    note = f"target >= 0.95{_met(f1 >= 0.95)} on this split"
    st = _load("neuralactuator_twin_gate_seeds.json")
    if st:
        v = st["stats"]["gate_f1"]
        note += (f"; {len(st['seeds'])} data seeds {_f(v['mean'])} +- {_f(v['sd'], 2)} ("
                 + ", ".join(f"{_f(x)}" for x in v["values"]) + ")")
    return ("NeuralActuator, SO-101 twin", "contact gate F1 (recurrent gate) [estimator]",
            _f(f1), note)


def _h_twin_condition(d: dict) -> Row:
    acc = ((_na(d).get("condition") or {}).get("accuracy"))
    cond = d.get("condition_experiment") or {}
    run = (_na(cond).get("condition") or {}).get("accuracy") if cond else None
    note = f"target >= 95 %{_met(acc >= 0.95)}"
    if run is not None:
        note += (f"; the condition run (half the episodes with degraded motors) "
                 f"{100 * run:.1f} %")
    st = _load("neuralactuator_twin_condition_seeds.json")
    if st:
        v = st["stats"]["NeuralActuator accuracy"]
        note += (f", over {len(st['seeds'])} data seeds {100 * v['mean']:.1f} +- "
                 f"{100 * v['sd']:.1f} %")
        rf = st["stats"].get("random forest (identification channels) accuracy")
        if rf:
            note += f" (best peer, a random forest: {100 * rf['mean']:.1f} %)"
    return ("NeuralActuator, SO-101 twin", "motor condition accuracy (episode has a degraded "
            "motor) [estimator]", f"{100 * acc:.1f} %", note)


def _h_twin_rollout(d: dict) -> Row:
    h = _longest(d)
    others = {r["model"]: r.get("arm_mean_deg") for r in d["rollouts"]
              if str(r["horizon"]) == str(h) and r["model"] != "NeuralActuator"
              and r.get("arm_mean_deg") is not None}
    best = min(others, key=others.get)
    note = (f"MuJoCo default servo {_f(others.get('MuJoCo default servo'))}; best other model "
            f"({best}) {_f(others[best])}")
    st = _load("neuralactuator_twin_sim_seeds.json")
    if st and str(h) in st["stats"]:
        s = st["stats"][str(h)]
        note += (f"; {len(st['seeds'])} data seeds {_f(s['ours_mean'])} +- {_f(s['ours_sd'], 2)}"
                 f", best on every seed: {'yes' if s['ours_best_on_every_seed'] else 'no'}")
    return ("NeuralActuator, SO-101 twin", f"open-loop rollout, arm-mean joint MAE [deg], "
            f"{h} samples [simulator]", _f(_rollout(d, "NeuralActuator", h)), note)


def _h_omx(d: dict) -> Row:
    ts = _targets(d)
    na = _na(d)
    g = (na.get("gate") or {}).get("f1")
    c = (na.get("condition") or {}).get("accuracy")
    ratio = ts["torque"]["value"].rsplit("(", 1)[-1].rstrip(")") if "torque" in ts else "n/a"
    missed = [k for k, t in ts.items() if t["met"] is False]
    unscored = [k for k, t in ts.items() if t["met"] is None]
    return ("NeuralActuator, OpenManipulator-X twin", "torque vs best parametric / force MAE "
            "[N] / gate F1 / condition accuracy [estimator]",
            f"{ratio} / {_f((na.get('force') or {}).get('all'))} / {_f(g)} / "
            f"{100 * c:.1f} %" if c is not None else "-",
            f">= 2x / <= 0.3 / >= 0.95 / >= 95 %: {len(ts) - len(missed) - len(unscored)} of "
            f"{len(ts) - len(unscored)} met" + (f" (not: {', '.join(missed)})" if missed else "")
            + (f"; not scored: {', '.join(unscored)}" if unscored else ""))


def _h_adapt(d: dict) -> Row:
    roll = d["rollouts"]
    ad = next(k for k in roll if k.startswith("NeuralActuator adapted"))
    h = max(roll[ad], key=int)
    scratch = next((k for k in roll if "from scratch" in k), None)
    return ("NeuralActuator, new twin unit", f"open-loop rollout, arm-mean joint MAE [deg], "
            f"{h} samples, {ad} [simulator]", _f(roll[ad][h]),
            f"unadapted {_f(roll['NeuralActuator (base, old units)'][h])}"
            + (f"; {scratch} {_f(roll[scratch][h])}" if scratch else ""))


def _h_planar2(d: dict) -> Row:
    return ("identification, Sensors 2025 planar arm", "gravity R^2 / inertia max relative "
            "error / computed-torque tracking RMS learned vs true",
            f"{_f(d.get('gravity_r2'), 6)} / {_f(d.get('inertia_max_rel_error'))} / "
            f"{_f(d.get('tracking_rms_ratio'))}", ">= 0.9999 / <= 0.02 / <= 1.2" + _met(
                d["gravity_r2"] >= 0.9999 and d["inertia_max_rel_error"] <= 0.02
                and d["tracking_rms_ratio"] <= 1.2))


def _h_real_arms(d: dict) -> Row:
    best, peer = [], []
    for ds, body in d.get("datasets", {}).items():
        means = {m: sum(v["nmse"]) / len(v["nmse"]) for m, v in body.get("models", {}).items()
                 if isinstance(v, dict) and v.get("nmse")}
        fitted = {m: v for m, v in means.items() if "no fit" not in m}
        if fitted:
            m = min(fitted, key=fitted.get)
            best.append(f"{ds.split('_')[0]} {_f(fitted[m])} ({m.split(' (')[0]})")
        given = {m: v for m, v in means.items() if "no fit" in m}
        if given:
            peer.append(f"{ds.split('_')[0]} {_f(min(given.values()))}")
    return ("real arms, inverse dynamics", "held-out torque nMSE (mean over joints), best "
            "fitted model per arm", "; ".join(best),
            "published parameters without a fit: " + ", ".join(peer) if peer else "-")


def _h_int8(d: dict) -> Row:
    m = d["models"]
    f32, q = m["torch (float32)"], m["ONNX Runtime (int8 trunk)"]
    keys = ("torque_rmse", "force_mae", "gate_f1", "condition_accuracy")
    return ("NeuralActuator int8 export (ONNX)", "torque RMSE / force MAE / gate F1 / condition "
            "accuracy with the int8 trunk [estimator]",
            " / ".join(_f(q.get(k), 4) for k in keys),
            "float32 " + " / ".join(_f(f32.get(k), 4) for k in keys)
            + "; the twin benchmark's estimator on its test episodes")


def _h_envs_single(d: dict) -> Row:
    r, na = d["parametric_vs_mujoco_ratio"], d["neuralactuator_single_steps_per_s"]
    return ("Gymnasium envs", "single SO-101 env steps/s: parametric servo over MuJoCo's own "
            "servo / NeuralActuator [steps/s]", f"{_f(r)} / {_f(na)}",
            f"target >= 0.5{_met(r >= 0.5)} / >= 2,000{_met(na >= 2000)}; MuJoCo servo "
            f"{_f(d['mujoco_steps_per_s'])} steps/s")


def _h_envs_batched(d: dict) -> Row:
    c = d["batched_env_cost_vs_network"]
    return ("Gymnasium envs", f"{d['batch']} NeuralActuator envs: the network's batched "
            "samples/s over the env's steps/s (env cost, lower is better)", f"{_f(c)}x",
            f"target <= 1.5x{_met(c <= 1.5)}; env "
            f"{_f(d['neuralactuator_batched_steps_per_s'])} steps/s")


HEADLINE: list[tuple[str, Callable[[dict], Row]]] = [
    ("dynamics.json", _h_dynamics),
    ("inference.json", _h_latency),
    ("inference.json", _h_throughput),
    ("inference.json", _h_stream),
    ("twin.json", _h_twin),
    ("sts3215_pendulum.json", _h_sts),
    ("neuralactuator_nad.json", _h_nad_rollout),
    ("neuralactuator_nad.json", _h_nad_force),
    ("neuralactuator_twin.json", _h_twin_torque),
    ("neuralactuator_twin.json", _h_twin_force),
    ("neuralactuator_twin.json", _h_twin_gate),
    ("neuralactuator_twin.json", _h_twin_condition),
    ("neuralactuator_twin.json", _h_twin_rollout),
    ("neuralactuator_twin_omx.json", _h_omx),
    ("neuralactuator_adapt.json", _h_adapt),
    ("planar2_sensors2025.json", _h_planar2),
    ("real_arms.json", _h_real_arms),
    ("int8_accuracy.json", _h_int8),
    ("envs.json", _h_envs_single),
    ("envs.json", _h_envs_batched),
]
"""the README's rows: (the result file, its row); each file must be a user-facing
benchmark's (:data:`SOURCES`)"""

ERRORS = (KeyError, TypeError, ValueError, ZeroDivisionError, ImportError, StopIteration)
"""what a result file of another layout raises in a row function (the row says so)"""


def _link(fname: str, prefix: str) -> str:
    md = fname[:-5] + ".md"
    return f"[{md}]({prefix}{md})" if (RESULTS / md).is_file() else fname


def headline_table(prefix: str = "benchmarks/results/") -> str:
    """The README's table: one row per :data:`HEADLINE` entry, links under ``prefix``; the
    ``measured`` column says when and at which commit (:func:`measured`), and whether the
    code measured has changed since."""
    if len(HEADLINE) > MAX_HEADLINE_ROWS:
        raise ValueError(f"HEADLINE has {len(HEADLINE)} rows; the README takes at most "
                         f"{MAX_HEADLINE_ROWS}")
    lines = ["| area | figure | value | target / peer | measured | source |",
             "|---|---|---|---|---|---|"]
    when: dict[str, str] = {}
    for fname, fn in HEADLINE:
        d = _load(fname)
        if d is None:
            lines.append(f"| {fname[:-5]} | not yet measured | - | - | - | - |")
            continue
        try:
            a, f, o, t = fn(d)
        except ERRORS as exc:
            a, f, o, t = fname[:-5], f"unreadable result file ({exc!r})", "-", "-"
        if fname not in when:
            when[fname] = _cell(fname)
        lines.append(f"| {a} | {f} | {o} | {t} | {when[fname]} | {_link(fname, prefix)} |")
    return "\n".join(lines)


def build_table(sources: dict[str, Callable[[dict], list[Row]]] | None = None,
                prefix: str = "benchmarks/results/") -> str:
    """The full table of ``sources`` (default: :data:`SOURCES` and :data:`STUDY_SOURCES`),
    links under ``prefix``."""
    lines = ["| area | figure | value | target / note | source |", "|---|---|---|---|---|"]
    for fname, fn in (sources if sources is not None else {**SOURCES, **STUDY_SOURCES}).items():
        d = _load(fname)
        if d is None:
            lines.append(f"| {fname[:-5]} | not yet measured | - | - | - |")
            continue
        try:
            rows = fn(d)
        except ERRORS as exc:
            rows = [(fname[:-5], f"unreadable result file ({exc})", "-", "-")]
        lines += [f"| {a} | {f} | {o} | {t} | {_link(fname, prefix)} |" for a, f, o, t in rows]
    return "\n".join(lines)


def measured_table(files: list[str]) -> str:
    """When each of ``files`` was measured (:func:`measured`), one row per file."""
    lines = ["| result file | measured |", "|---|---|"]
    for fname in files:
        cell = _cell(fname) if (RESULTS / fname).is_file() else "not yet measured"
        lines.append(f"| {_link(fname, '')} | {cell} |")
    return "\n".join(lines)


def summary_markdown() -> str:
    """``benchmarks/results/summary.md``: every row, the benchmarks' then the studies', then
    when each file was measured."""
    return ("# Benchmark summary\n\n"
            "Every figure of every result file (the README shows the headline rows only). "
            "Regenerate with `python benchmarks/summarize.py`.\n\n"
            "## Benchmarks (`benchmarks/bench_*.py`)\n\n" + build_table(SOURCES, "") + "\n\n"
            "## Studies (`benchmarks/studies/`)\n\n"
            "Diagnostics and experiments behind the figures above (the contact gate, the "
            "twin's realism); not user-facing figures.\n\n"
            + build_table(STUDY_SOURCES, "") + "\n\n"
            "## When each file was measured\n\n"
            "The date and commit of the run (of the oldest run, for a file built from "
            "several), and \"stale\" where a later commit changed the code it ran: the "
            "neuract modules it loaded, its script or `benchmarks/common.py` (see "
            "docs/benchmarks.md). A file written before the results recorded their "
            "provenance shows the commit that last changed it, \"no provenance\".\n\n"
            + measured_table([*SOURCES, *STUDY_SOURCES]) + "\n")


def replace_block(text: str, table: str) -> str:
    """``text`` with the block between the markers replaced by ``table`` (nothing else
    changed); ``text`` as it is where it lacks either marker."""
    if BEGIN not in text or END not in text:
        return text
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main() -> int:
    write_text(RESULTS / "summary.md", summary_markdown())
    table = headline_table()
    text = README.read_text()
    new = replace_block(text, table)
    if new != text:
        write_text(README, new)
    elif BEGIN not in text or END not in text:
        print(f"{README.name}: no {BEGIN} / {END} markers; README not changed", file=sys.stderr)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
