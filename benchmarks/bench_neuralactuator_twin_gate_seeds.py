"""The twin benchmark's recurrent contact gate on other twin data seeds: a check of the gate
target beyond the benchmark's own split (``common.GATE_SEEDS_PROVENANCE`` says which seeds
were looked at while choosing what; seeds 23 and 31 are fresh). Its seeds, run directories and
provenance are in ``common.py``: the gate studies read them too.

The twin benchmark's recurrent gate (``common.GATE_RNN`` units, ``GATE_TRAIN_MINUTES`` extra minutes
of other units) was sized with an exploratory probe (``studies/probe_gate_recurrent.py``) that
printed, beside the calibration F1 it selected on, the F1 on the benchmark's own test
episodes. This script trains the benchmark's estimator configuration, recurrent gate
included, on other twin data seeds (their own 144 min, split and extra-gate units: data seeds
``seed + 1000`` on) and scores it the same way (estimator mode for every figure here; the
simulator-mode models, neural baselines and long rollouts are left out).

Run: ``.venv/bin/python benchmarks/bench_neuralactuator_twin_gate_seeds.py [--seeds 7 11]``
(about 40-75 min per seed on this 2-core machine; ``common.GATE_SEEDS`` by default), or
``--summarize`` alone. Writes
``benchmarks/results/twin_gate_seeds/seed_<s>.json`` and
``benchmarks/results/neuralactuator_twin_gate_seeds.{json,md}``.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

from common import (  # noqa: E402
    GATE_SEEDS,
    GATE_SEEDS_DIR,
    GATE_SEEDS_PROVENANCE,
    RESULTS,
    gate_seed_recorded,
    gate_seed_run_dir,
    read_result,
    read_results,
    seed_files,
    seed_table,
    seeds_main,
    twin_estimator_run,
    twin_figures,
    write_result,
    write_seeds_summary,
)


def run_seed(seed: int) -> dict:
    res = twin_estimator_run(gate_seed_run_dir(seed).name, f"twin seed {seed} (recurrent gate)",
                             {"seed": seed})
    g = res["models"]["NeuralActuator[estimator]"].get("gate_rnn") or {}
    out = {"seed": seed, **twin_figures(res),
           "gate_rnn": {k: g.get(k) for k in ("hidden", "extra_minutes", "kept_iteration",
                                              "calib_f1", "selected_on")}}
    write_result(GATE_SEEDS_DIR / f"seed_{seed}.json", out)
    print(json.dumps(out, indent=1))
    return out


def summarize() -> int:
    rows = [{"seed": 0, **gate_seed_recorded(0)}]
    more, parts = read_results(seed_files(GATE_SEEDS_DIR))
    rows += more
    parts.insert(0, read_result(RESULTS / "neuralactuator_twin.json")[1])  # seed 0's
    kinds = {r["seed"]: r["gate_kind"] for r in rows}
    if len(set(kinds.values())) > 1:
        print(f"the runs decide contact with different gates ({kinds}): rerun them with the "
              "current configuration before summarizing")
        return 2
    table, stats = seed_table(rows)
    out = {"seeds": [r["seed"] for r in rows], "rows": rows, "stats": stats,
           "gate": kinds[0],
           "note": GATE_SEEDS_PROVENANCE}
    return write_seeds_summary(
        "neuralactuator_twin_gate_seeds", out,
        "NeuralActuator's recurrent gate on the SO-101 twin, fresh data seeds",
        "Each seed: its own 144 min of twin data, 5 % of each task's episodes held out, and "
        "its own extra units for the recurrent gate (data seeds seed + 1000 on); the twin "
        f"benchmark's estimator configuration, gate {kinds[0]} (estimator mode for "
        f"every figure). {GATE_SEEDS_PROVENANCE} Reproduce: `.venv/bin/python "
        "benchmarks/bench_neuralactuator_twin_gate_seeds.py --seeds ...`.", table,
        parts=parts)


def main(argv: list[str]) -> int:
    return seeds_main(argv, GATE_SEEDS, run_seed, summarize)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
