"""What the twin's gear friction costs NeuralActuator's force and contact-gate estimates.

A paired ablation: the same twin data plan (seed, episodes, units, pushes, payloads) generated
twice, once with the full twin and once with its gearbox friction switched off
(``TwinDataConfig(ideal=("friction",))``; the motor, backlash, thermal, sag, noise, latency
and quantisation effects stay on), and the twin benchmark's estimator-mode NeuralActuator
configuration trained and scored on each. Where the friction holds part of a push at rest a
deflected, still arm reads like one parked by stiction off its goal (the push shows in the
telemetry, ``bench_gate_observability.py``, but only through how the arm got there); the
difference between the two arms measures how much of the force and gate error that explains.

Smaller than the benchmark to fit a session: ``MINUTES`` of twin data per data seed
(default ``SEEDS``, not the benchmark's), 25 % of each task's episodes held out, ``STEPS``
estimator steps, the simulator-mode models, neural baselines and long rollouts left out
(the estimator's figures do not depend on them). Estimator mode for every figure.

Run: ``.venv/bin/python benchmarks/studies/bench_neuralactuator_twin_friction.py [--seeds 11 13]
[--arm on|off]`` (every seed and arm in turn, about 20 min per seed on one core; one arm or
seed per process runs them in parallel), then ``--summarize``. Writes
``benchmarks/results/twin_friction/seed<s>_{on,off}.json`` and
``benchmarks/results/neuralactuator_twin_friction.{json,md}``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    gate_kind,
    read_result,
    twin_estimator_run,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402

ARMS_DIR = RESULTS / "twin_friction"
SEEDS = (11, 13)
MINUTES = 72.0
STEPS = 1500
ARMS = {"on": (), "off": ("friction",)}


def figures(res: dict) -> dict:
    est = {e["model"]: e for e in res["estimation"]}
    na = est["NeuralActuator"]
    force = na.get("force") or {}
    gate = na.get("gate") or {}
    return {"gate_kind": gate_kind(res), "torque_rmse": na["torque_rmse_mean"],
            "force_mae": force.get("all"), "force_mae_contact": force.get("contact"),
            "force_mae_no_contact": force.get("no_contact"),
            "gate_f1": gate.get("f1"), "gate_precision": gate.get("precision"),
            "gate_recall": gate.get("recall"), "events": gate.get("n_events"),
            "events_detected": gate.get("n_detected"),
            "latency_median_s": gate.get("latency_median_s"),
            "gate_f1_raw_label": (res.get("gate_raw_label") or {}).get("f1"),
            "n_test_episodes": res["data"].get("n_test_episodes"),
            **gate_breakdown_figures(na)}


def gate_breakdown_figures(na: dict) -> dict:
    """Where the gate is wrong (neuract.eval's breakdown): push-task F1, the share of misses
    and false alarms within 0.25 s of a contact onset or end and the F1 away from them, and
    the recall at small and large forces."""
    lc = (na.get("gate") or {}).get("label_changes") or {}
    b = list(lc.get("bands_s", [])).index(0.25) if 0.25 in lc.get("bands_s", []) else None
    rf = {tuple(x["force_n"]): x["recall"] for x in na.get("gate_recall_by_force") or []}
    return {"gate_f1_push": ((na.get("gate_by_task") or {}).get("push") or {}).get("f1"),
            "gate_miss_share_near_025": lc["miss_share_near"][b] if b is not None else None,
            "gate_false_alarm_share_near_025": (lc["false_alarm_share_near"][b]
                                                if b is not None else None),
            "gate_f1_away_025": lc["f1_away"][b] if b is not None else None,
            "gate_recall_05_1n": rf.get((0.5, 1.0)), "gate_recall_2_4n": rf.get((2.0, 4.0))}


def run_arm(seed: int, arm: str) -> dict:
    res = twin_estimator_run(f"bench_twin_friction_s{seed}_{arm}",
                             f"twin seed {seed}, friction {arm}",
                             {"seed": seed, "minutes": MINUTES, "test_fraction": 0.25,
                              "ideal": ARMS[arm], "worn_train_minutes": 0.0},
                             est_steps=STEPS, parametric_friction=("coulomb_viscous",),
                             baseline_iters=10, reference_steps=0)  # (measured without them)
    out = {"seed": seed, "friction": arm, **figures(res)}
    write_result(ARMS_DIR / f"seed{seed}_{arm}.json", out)
    print(json.dumps(out, indent=1))
    return out


KEYS = (("force_mae", "force MAE [N]", "{:.3f}"),
        ("force_mae_contact", "force MAE, contact [N]", "{:.3f}"),
        ("force_mae_no_contact", "force MAE, no contact [N]", "{:.3f}"),
        ("gate_f1", "gate F1", "{:.3f}"),
        ("gate_precision", "gate precision", "{:.3f}"),
        ("gate_recall", "gate recall", "{:.3f}"),
        ("events_detected", "contact events detected", "{}"),
        ("latency_median_s", "detection latency, median [s]", "{:.3f}"),
        ("gate_f1_raw_label", "gate F1, raw label", "{:.3f}"),
        ("gate_f1_push", "gate F1, push episodes", "{:.3f}"),
        ("gate_miss_share_near_025", "share of gate misses within 0.25 s of a contact onset "
         "or end", "{:.2f}"),
        ("gate_false_alarm_share_near_025", "share of gate false alarms within 0.25 s of one",
         "{:.2f}"),
        ("gate_f1_away_025", "gate F1 more than 0.25 s from every onset and end", "{:.3f}"),
        ("gate_recall_05_1n", "gate recall at 0.5-1 N", "{:.3f}"),
        ("gate_recall_2_4n", "gate recall at 2-4 N", "{:.3f}"),
        ("torque_rmse", "torque RMSE [N m]", "{:.3f}"))


def summarize() -> int:
    rows: dict[int, dict] = {}
    provs: dict[str, dict | None] = {}
    for path in sorted(ARMS_DIR.glob("seed*_*.json")):
        r, provs[path.stem] = read_result(path)
        rows.setdefault(int(r["seed"]), {})[r["friction"]] = r
    seeds = sorted(s for s, arms in rows.items() if set(arms) == set(ARMS))
    if not seeds:
        print(f"no seed with both arms {list(ARMS)} in {ARMS_DIR}; run --arm first")
        return 2
    kinds = {r.get("gate_kind", "head") for sd in seeds for r in rows[sd].values()}
    if len(kinds) > 1:  # (older files: the gate head)
        print(f"the arms decide contact with different gates ({sorted(kinds)}): rerun them "
              "with the current configuration before summarizing")
        return 2
    head, table = ["figure"], []
    for sd in seeds:
        head += [f"seed {sd}, friction on (full twin)", f"seed {sd}, friction off"]
    for k, name, fmt in KEYS:
        cells = []
        for sd in seeds:
            for a in ARMS:
                r = rows[sd][a]
                if k == "events_detected":
                    cells.append(f"{r[k]} / {r['events']}")
                else:
                    cells.append(fmt.format(r[k]) if r.get(k) is not None else "—")
        table.append([name] + cells)
    mean = {a: {k: float(np.mean([rows[sd][a][k] for sd in seeds]))
                for k in ("force_mae", "gate_f1")} for a in ARMS}
    write_result(RESULTS / "neuralactuator_twin_friction.json",
                 {"seeds": seeds, "minutes": MINUTES, "steps": STEPS, "test_fraction": 0.25,
                  "runs": {str(sd): rows[sd] for sd in seeds}, "mean": mean,
                  "gate": kinds.pop()},
                 parts=[provs[f"seed{sd}_{a}"] for sd in seeds for a in ARMS])
    md = ("# Twin gear friction and the force / gate estimates (ablation)\n\n"
          f"Per data seed, the same twin data plan ({MINUTES:g} min, 25 % of each task's "
          "episodes held out) generated with the full twin and with its gearbox friction "
          "switched off; the twin benchmark's estimator-mode NeuralActuator configuration, "
          f"{STEPS} steps, trained and scored on each (estimator mode; contact = external "
          "force >= 0.5 N). Mean over seeds: force MAE "
          f"{mean['on']['force_mae']:.3f} N with friction, {mean['off']['force_mae']:.3f} N "
          f"without; gate F1 {mean['on']['gate_f1']:.3f} / {mean['off']['gate_f1']:.3f}. "
          "Reproduce: `.venv/bin/python "
          "benchmarks/studies/bench_neuralactuator_twin_friction.py`.\n\n"
          + markdown_table(head, table) + "\n")
    write_text(RESULTS / "neuralactuator_twin_friction.md", md)
    print(md)
    return 0


def main(argv: list[str]) -> int:
    torch.set_num_threads(1)
    if "--summarize" in argv:
        return summarize()
    arms, seeds = list(ARMS), list(SEEDS)
    if "--arm" in argv:
        i = argv.index("--arm") + 1
        if i >= len(argv) or argv[i] not in ARMS:
            print(f"--arm: one of {list(ARMS)}")
            return 2
        arms = [argv[i]]
    if "--seeds" in argv:
        vals = []
        for v in argv[argv.index("--seeds") + 1:]:
            if v.startswith("--"):
                break
            vals.append(v)
        if not vals or not all(v.isdigit() for v in vals):
            print(f"--seeds: one or more non-negative integers; got {vals}")
            return 2
        seeds = [int(v) for v in vals]
    for sd in seeds:
        for a in arms:
            run_arm(sd, a)
    return summarize()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
