"""Collect the headline figure of every benchmark result file into one table.

Reads ``benchmarks/results/*.json`` (written by the ``bench_*.py`` scripts), writes
``benchmarks/results/summary.md`` and replaces the block between the ``results:begin`` /
``results:end`` markers in the README. Nothing here measures anything: it only copies
figures out of the result files, so the README cannot drift from them.

    python benchmarks/summarize.py
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"

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
        met = {True: "met", False: "NOT met"}.get(t.get("met"), "")
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


SOURCES: dict[str, Callable[[dict], list[Row]]] = {
    "dynamics.json": _dynamics,
    "sts3215_pendulum.json": _sts,
    "twin.json": _twin,
    "twin_current_noise.json": _twin_current_noise,
    "planar2_sensors2025.json": _planar2,
    "real_arms.json": _real_arms,
    "neuralactuator_twin.json": _na_twin,
    "neuralactuator_twin_seeds.json": _na_twin_seeds,
    "neuralactuator_twin_gate_seeds.json": _na_twin_gate_seeds,
    "neuralactuator_twin_condition_seeds.json": _na_twin_condition_seeds,
    "neuralactuator_twin_friction.json": _na_twin_friction,
    "gate_observability.json": _gate_observability,
    "neuralactuator_twin_sim_seeds.json": _na_twin_sim_seeds,
    "neuralactuator_twin_omx.json": _na_twin_omx,
    "neuralactuator_adapt.json": _na_adapt,
    "neuralactuator_nad.json": _na_nad,
    "inference.json": _inference,
    "int8_accuracy.json": _int8,
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


def build_table() -> str:
    lines = ["| area | figure | measured | target / note | source |", "|---|---|---|---|---|"]
    for fname, fn in SOURCES.items():
        path = RESULTS / fname
        if not path.is_file():
            lines.append(f"| {fname[:-5]} | not yet measured | - | - | - |")
            continue
        try:
            rows = fn(json.loads(path.read_text()))
        except (KeyError, TypeError, ValueError, ZeroDivisionError, ImportError) as exc:
            rows = [(fname[:-5], f"unreadable result file ({exc})", "-", "-")]
        md = fname[:-5] + ".md"
        link = f"[{md}](benchmarks/results/{md})" if (RESULTS / md).is_file() else fname
        lines += [f"| {a} | {f} | {o} | {t} | {link} |" for a, f, o, t in rows]
    return "\n".join(lines)


def main() -> int:
    table = build_table()
    (RESULTS / "summary.md").write_text("# Benchmark summary\n\n" + table.replace(
        "(benchmarks/results/", "(") + "\n")
    text = README.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        README.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
