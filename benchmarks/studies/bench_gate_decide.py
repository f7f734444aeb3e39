"""The fixed-lag recurrent gate decided at a shorter lag than it was trained with, against the
run's causal gate and the same gate decided at its full lag.

``bench_gate_lag.py`` retrains each run's recurrent gate as a fixed-lag gate (one logit per
lag 0-10, every lag trained on its look-back target) and decides each sample at lag 10: 0.17 s
after it. This benchmark takes that retrained gate as it is and only moves its decision to lag
:data:`DECIDE` (``NeuralActuatorConfig.gate_decide``), with the gate's filter calibrated again
at that lag on the run's own calibration episodes
(:func:`neuract.estimate.calibrate.set_gate_decision_lag`, the run's smoothing
candidates); no weight changes. Each gate is scored on the run's test split: the run's causal
gate and the lag-10 gate must reproduce the F1 their benchmarks recorded (else it stops).
Estimator mode for every figure; contact = external force >= 0.5 N.

Run: ``.venv/bin/python benchmarks/studies/bench_gate_decide.py [--seeds 0 7]`` (after
``bench_gate_lag.py`` for those seeds; some 10-15 min per seed here, mostly generating the
run's data again), or ``--summarize`` alone. The checkpoint goes to
``runs/bench_gate_decide_seed<s>/``; writes ``benchmarks/results/gate_decide/seed_<s>.json``
and ``benchmarks/results/gate_decide.{json,md}``. ``bench_gate_fresh_test.py --variants
gate_decide`` scores that checkpoint on each seed's fresh episodes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

import numpy as np  # noqa: E402

from common import (  # noqa: E402
    GATE_DECIDE,
    GATE_DECIDE_VARIANT,
    GATE_LAG,
    GATE_LAG_VARIANT,
    GATE_SEEDS_PROVENANCE,
    RESULTS,
    RETRAIN_SEEDS,
    check_recorded,
    fmt_ms,
    gate_run_data,
    load_gate,
    machine,
    read_results,
    score_gate,
    seed_files,
    seeds_main,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402

DECIDE = GATE_DECIDE
"""the decision lag [samples] (``common.GATE_DECIDE``, where its choice is told)"""
VARIANT = GATE_DECIDE_VARIANT


def run_seed(seed: int) -> dict:
    from neuract.estimate.calibrate import set_gate_decision_lag
    from neuract.neuralactuator.checkpoint import read_config, save_checkpoint

    t0 = time.perf_counter()
    lagged, lag_f1 = load_gate(GATE_LAG_VARIANT, seed)
    model, cfg, _, g_eps, test = gate_run_data(seed)
    plain = score_gate(model, test)
    recorded = check_recorded(seed, plain["f1"])
    del model
    full = score_gate(lagged, test)
    if abs(full["f1"] - lag_f1) > 1e-6:
        raise SystemExit(f"seed {seed}: the fixed-lag gate scores F1 {full['f1']:.6f} on the "
                         f"run's test split here but bench_gate_lag.py recorded {lag_f1:.6f}")
    print(f"seed {seed}: run's gate F1 {plain['f1']:.4f}, lag-{lagged.cfg.gate_lag} gate "
          f"{full['f1']:.4f} (both as recorded); deciding at lag {DECIDE} ...", flush=True)
    cal = set_gate_decision_lag(lagged, DECIDE, g_eps, cfg.experiment.gate_tau_grid)
    new = score_gate(lagged, test)
    extra = read_config(GATE_LAG_VARIANT.checkpoint(seed))[1]["extra"]
    extra.update(gate_threshold=lagged.gate_threshold, gate_tau_s=lagged.gate_tau_s,
                 gate_release=lagged.gate_release, gate_decided_by="bench_gate_decide.py")
    save_checkpoint(lagged, VARIANT.checkpoint(seed), extra=extra,
                    overwrite=True)
    res = {"seed": seed, "gate_lag": lagged.cfg.gate_lag, "gate_decide": DECIDE,
           "gru": plain, "gru_recorded_f1": recorded, "lag_gate": full, "new_gate": new,
           "filter": {k: cal[k] for k in ("gate_tau_s", "gate_threshold", "gate_release")},
           "calibration_episodes": cal["calibration_episodes"],
           "machine": machine(), "seconds": round(time.perf_counter() - t0, 1)}
    write_result(VARIANT.seeds_dir / f"seed_{seed}.json", res)
    print(json.dumps(res, indent=1), flush=True)
    return res


def summary_table(rows: list[dict]) -> list[str]:
    """The summary's Markdown table: one row per seed, then the means."""
    table = ["| seed | run's causal gate F1 | lag 10 F1 | "
             f"lag {DECIDE} F1 | lag {DECIDE} minus causal | lag {DECIDE} P / R | events | "
             f"median latency [ms] (causal / lag 10 / lag {DECIDE}) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g, f, n = r["gru"], r["lag_gate"], r["new_gate"]
        table.append(f"| {r['seed']} | {g['f1']:.3f} | {f['f1']:.3f} | {n['f1']:.3f} | "
                     f"{n['f1'] - g['f1']:+.3f} | {n['precision']:.3f} / {n['recall']:.3f} | "
                     f"{n['n_detected']}/{n['n_events']} | "
                     f"{fmt_ms(g.get('latency_median_s'))} / {fmt_ms(f.get('latency_median_s'))} / "
                     f"{fmt_ms(n.get('latency_median_s'))} |")
    mean = {k: float(np.mean([r[k]["f1"] for r in rows])) for k in ("gru", "lag_gate",
                                                                      "new_gate")}
    table.append(f"| mean | {mean['gru']:.3f} | {mean['lag_gate']:.3f} | "
                 f"{mean['new_gate']:.3f} | {mean['new_gate'] - mean['gru']:+.3f} | | | |")
    return table


def summarize() -> int:
    rows, parts = read_results(seed_files(VARIANT.seeds_dir))
    if not rows:
        print("no seed run yet: run with --seeds first")
        return 2
    out = {"seeds": [r["seed"] for r in rows], "gate_decide": DECIDE, "rows": rows,
           "gru_f1_mean": float(np.mean([r["gru"]["f1"] for r in rows])),
           "new_f1_mean": float(np.mean([r["new_gate"]["f1"] for r in rows])),
           "note": GATE_SEEDS_PROVENANCE}
    write_result(RESULTS / "gate_decide.json", out, parts=parts)
    md = (f"# {VARIANT.title}\n\n"
          f"The fixed-lag gate that `bench_gate_lag.py` retrained on each run's estimator (one "
          f"logit per lag 0-{GATE_LAG}) decided at lag {DECIDE} ({DECIDE} samples, "
          f"{1000 * DECIDE / 60:.0f} ms at 60 Hz) instead of {GATE_LAG}, its filter "
          "calibrated again at that lag on the run's calibration episodes; no weight changes. "
          "Scored on each run's test split beside the run's causal gate and the same gate "
          "decided at lag 10 (both reproduce their recorded F1). The lag was chosen on seed "
          "0's fresh episodes (scratch), so seed 0 is not an independent test of it. "
          "Estimator mode; contact = external force >= 0.5 N. Target: F1 >= 0.95. "
          f"{GATE_SEEDS_PROVENANCE} Reproduce: `.venv/bin/python "
          "benchmarks/studies/bench_gate_decide.py --seeds ...`.\n\n"
          + "\n".join(summary_table(rows)) + "\n")
    write_text(RESULTS / "gate_decide.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(seeds_main(sys.argv[1:], RETRAIN_SEEDS, run_seed, summarize, bench_seed=None))
