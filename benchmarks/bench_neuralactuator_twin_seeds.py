"""NeuralActuator's twin estimation figures over several data seeds: error bars for the twin
benchmark, whose single test split holds only 16 episodes.

Each seed generates its own twin data (``TwinDataConfig(seed=s)``, otherwise the twin
benchmark's: 144 min, 5 tasks, 4 units, 5 % of each task's episodes held out) and trains the
benchmark's estimator-mode NeuralActuator with the same configuration; the parametric servo
baselines are fitted as in the benchmark (torque ratio against the one chosen on the training
episodes), the simulator-mode models and rollouts are left out (the estimator's figures do
not depend on them). Seed 0 is the twin benchmark itself: its figures are read from
``neuralactuator_twin.json``, not recomputed.

Run: ``.venv/bin/python benchmarks/bench_neuralactuator_twin_seeds.py [--seeds 7 11 13]``
(the default seeds; about 15 min per seed on one core, so seeds can run in separate
processes, each followed by the summary), or ``--summarize`` alone. Every seed here uses the
gate head (``gate_rnn=0``; the recurrent gate's seeds: ``bench_neuralactuator_twin_gate_seeds.py``).
The summary refuses to pool seeds whose estimators decide contact with different gates: since
the twin benchmark (seed 0) uses the recurrent gate, it refuses until seed 0 is scored with
the gate head too; the committed summary is from before (session 19).
Writes ``benchmarks/results/twin_seeds/seed_<s>.json`` and
``benchmarks/results/neuralactuator_twin_seeds.{json,md}``.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

from common import (  # noqa: E402
    RESULTS,
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

SEEDS_DIR = RESULTS / "twin_seeds"


def run_seed(seed: int) -> dict:
    # the gate head, as this file's committed seeds (the recurrent gate's seeds:
    # bench_neuralactuator_twin_gate_seeds.py)
    res = twin_estimator_run(f"bench_twin_seed{seed}", f"twin seed {seed}",
                             {"seed": seed, "gate_train_minutes": 0.0}, gate_rnn=0)
    out = {"seed": seed, **twin_figures(res)}
    write_result(SEEDS_DIR / f"seed_{seed}.json", out)
    print(json.dumps(out, indent=1))
    return out


def summarize() -> int:
    main, main_prov = read_result(RESULTS / "neuralactuator_twin.json")
    rows = [{"seed": 0, **twin_figures(main)}]
    more, parts = read_results(seed_files(SEEDS_DIR))
    rows += more
    kinds = {r["seed"]: r.get("gate_kind", "head") for r in rows}  # older files: the head
    if len(set(kinds.values())) > 1:
        print(f"the seeds' estimators decide contact with different gates ({kinds}): rerun "
              "the seeds whose gate differs from seed 0's (the twin benchmark's) with the "
              "current configuration before summarizing")
        return 2
    seeds = [r["seed"] for r in rows]
    table, stats = seed_table(rows)
    out = {"seeds": seeds, "rows": rows, "stats": stats,
           "note": "seed 0 = the twin benchmark (neuralactuator_twin.json); other seeds: the "
                   "same estimator configuration on their own twin data and split"}
    return write_seeds_summary(
        "neuralactuator_twin_seeds", out, "NeuralActuator on the SO-101 twin, over data seeds",
        "Each seed: its own 144 min of twin data, 5 % of each task's episodes held out "
        f"({rows[0].get('n_test_episodes')} test episodes), the twin benchmark's "
        "estimator-mode configuration (estimator mode for every figure here). Seed 0 is the "
        "twin benchmark itself. Reproduce: `.venv/bin/python "
        "benchmarks/bench_neuralactuator_twin_seeds.py --seeds ...` then `--summarize`.", table,
        parts=[main_prov, *parts])


def main(argv: list[str]) -> int:
    return seeds_main(argv, [7, 11, 13], run_seed, summarize)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
