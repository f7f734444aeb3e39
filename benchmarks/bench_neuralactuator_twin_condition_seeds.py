"""The twin benchmark's motor-condition experiment over several data seeds: error bars for a
figure whose test split holds only about 37 episodes.

Each seed generates its own 72 min of 'degraded'-task twin data
(``common.twin_condition_config()`` with ``TwinDataConfig(seed=s)``) and runs
the same experiment: the parametric servo fit the reference channels build on,
NeuralActuator in estimator mode, the threshold / SVM / random-forest baselines and the random
forest on the identification channels. Seed 1 is the
condition experiment of the twin benchmark itself: its figures are read from
``neuralactuator_twin.json``, not recomputed.

Run: ``.venv/bin/python benchmarks/bench_neuralactuator_twin_condition_seeds.py
[--seeds 3 5]`` (about 12 min per seed on one core; seeds can run in separate processes, each
followed by the summary), or ``--summarize`` alone. Writes
``benchmarks/results/twin_condition_seeds/seed_<s>.json`` and
``benchmarks/results/neuralactuator_twin_condition_seeds.{json,md}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    ROOT,
    progress_printer,
    read_result,
    read_results,
    seed_files,
    seeds_main,
    twin_condition_config,
    write_result,
    write_seeds_summary,
)
from neuract.pipeline.report import (  # noqa: E402
    condition_balanced,
    episode_end_count,
    public,
)
from neuract.pipeline.twin_experiment import run_twin_experiment  # noqa: E402

SEEDS_DIR = RESULTS / "twin_condition_seeds"
BENCH_SEED = twin_condition_config().data.seed
MODELS = (("NeuralActuator", "NeuralActuator"), ("condition svm", "SVM"),
          ("condition random_forest", "random forest"),
          ("condition random_forest (identification channels)",
           "random forest (identification channels)"), ("condition threshold", "threshold"))


def figures(res: dict) -> dict:
    """Condition figures of one condition run's public results (or the benchmark's
    ``condition_experiment``)."""
    est = {e["model"]: e.get("condition") or {} for e in res["estimation"]}
    out = {}
    for key, name in MODELS:
        c = est.get(key) or {}
        out[name] = {"accuracy": c.get("accuracy"), "balanced": condition_balanced(c),
                     "auc": c.get("auc"), "episode_end": episode_end_count(c)}
    out["n_test_episodes"] = (res.get("data") or {}).get("n_test_episodes")
    return out


def run_seed(seed: int) -> dict:
    cfg = twin_condition_config()
    cfg = dataclasses.replace(cfg, out=ROOT / "runs" / f"bench_twin_condition_seed{seed}",
                              data=dataclasses.replace(cfg.data, seed=seed))
    res = run_twin_experiment(cfg, progress_printer(), title=f"condition, twin seed {seed}")
    out = {"seed": seed, **figures(public(res))}
    write_result(SEEDS_DIR / f"seed_{seed}.json", out)
    print(json.dumps(out, indent=1))
    return out


def summarize() -> int:
    main, main_prov = read_result(RESULTS / "neuralactuator_twin.json")
    rows = [{"seed": BENCH_SEED, **figures(main["condition_experiment"])}]
    more, parts = read_results(seed_files(SEEDS_DIR))
    rows += more
    seeds = [r["seed"] for r in rows]
    table, stats = [], {}
    for _, name in MODELS:
        for k, label in (("accuracy", "accuracy"), ("auc", "AUC")):
            v = np.array([np.nan if (r.get(name) or {}).get(k) is None else r[name][k]
                          for r in rows], dtype=float)
            mean = float(np.nanmean(v))
            sd = float(np.nanstd(v, ddof=1)) if np.isfinite(v).sum() > 1 else 0.0
            stats[f"{name} {k}"] = {"values": v.tolist(), "mean": mean, "sd": sd}
            table.append([f"{name} {label}"] + [f"{x:.3f}" for x in v]
                         + [f"{mean:.3f}", f"{sd:.3f}"])
        table.append([f"{name} right at the end of the episode"]
                     + [str((r.get(name) or {}).get("episode_end") or "—") for r in rows]
                     + ["", ""])
    out = {"seeds": seeds, "rows": rows, "stats": stats,
           "note": f"seed {BENCH_SEED} = the twin benchmark's condition experiment "
                   "(neuralactuator_twin.json); other seeds: the same configuration on their "
                   "own twin data and split"}
    return write_seeds_summary(
        "neuralactuator_twin_condition_seeds", out,
        "Motor condition on the SO-101 twin, over data seeds",
        "Each seed: its own 72 min of 'degraded'-task twin data (half of the episodes with "
        "1-2 degraded motors), split by episode, the twin benchmark's condition "
        "configuration (estimator mode, servo-reference and identification channels, both "
        "condition heads; accuracy = the decision 'the episode has a degraded motor', every "
        "test sample; the random forest on the identification channels reads the same "
        "running identification as the NeuralActuator, the SVM and the other random forest "
        "1 s windowed statistics). Seed "
        f"{BENCH_SEED} is the twin benchmark's condition experiment itself. Reproduce: "
        "`.venv/bin/python benchmarks/bench_neuralactuator_twin_condition_seeds.py "
        "--seeds ...` then `--summarize`.", table, parts=[main_prov, *parts])


def main(argv: list[str]) -> int:
    return seeds_main(argv, [3, 5], run_seed, summarize, bench_seed=BENCH_SEED)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
