"""NeuralActuator simulator mode on further twin data seeds (error bars for the rollouts).

The twin benchmark's simulator-mode configuration (144 min of SO-101 twin data, 5 % of each
task's episodes held out, the servo prior fitted pose-only first, 300 steps) on other data
seeds, with the estimator and the neural actuator nets left out (the rollouts do not depend
on them). Seed 0 is the twin benchmark itself (read from ``neuralactuator_twin.json``); seed
7 chose the 36-step training horizon, so it is not used here.

Writes ``benchmarks/results/twin_sim_seeds/seed_<s>.json`` and
``benchmarks/results/neuralactuator_twin_sim_seeds.{json,md}``.
Run: ``.venv/bin/python benchmarks/bench_neuralactuator_twin_sim_seeds.py [--seeds 11 13]``
(about 5 min per seed on one core; seeds can run in parallel processes, then ``--summarize``).
"""

from __future__ import annotations

import dataclasses
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
    twin_config,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402
from neuract.pipeline.twin_experiment import run_twin_experiment  # noqa: E402

SEEDS_DIR = RESULTS / "twin_sim_seeds"
HORIZONS = ("10", "50", "100", "300", "600")


def rollouts(res: dict) -> dict[str, dict[str, float]]:
    """model -> horizon -> arm-mean joint MAE [deg]."""
    out: dict[str, dict[str, float]] = {}
    for r in res["rollouts"]:
        out.setdefault(r["model"], {})[str(r["horizon"])] = r["arm_mean_deg"]
    return out


def run_seed(seed: int) -> dict:
    cfg = twin_config()
    exp = dataclasses.replace(cfg.experiment, est_steps=0, neural_baselines=(),
                              figure_samples=50)
    cfg = dataclasses.replace(cfg, out=ROOT / "runs" / f"bench_neuralactuator_twin_sim_s{seed}",
                              experiment=exp,  # the benchmark's data: worn push episodes too
                              data=dataclasses.replace(cfg.data, seed=seed))
    res = run_twin_experiment(cfg, progress_printer(),
                              title=f"NeuralActuator simulator mode, twin seed {seed}")
    row = {"seed": seed, "rollouts": rollouts(res), "best_parametric": res["best_parametric"],
           "n_test_episodes": res["n_test"]}
    SEEDS_DIR.mkdir(parents=True, exist_ok=True)
    write_result(SEEDS_DIR / f"seed_{seed}.json", row)
    return row


def summarize() -> int:
    main, main_prov = read_result(RESULTS / "neuralactuator_twin.json")
    rows = [{"seed": 0, "rollouts": rollouts(main)}]
    more, parts = read_results(seed_files(SEEDS_DIR))
    rows += more
    seeds = [r["seed"] for r in rows]
    na = "NeuralActuator"
    table, stats = [], {}
    for h in HORIZONS:
        ours = [r["rollouts"][na][h] for r in rows]
        par = [min(v[h] for k, v in r["rollouts"].items() if k.startswith("parametric"))
               for r in rows]
        mj = [r["rollouts"]["MuJoCo default servo"][h] for r in rows]
        stats[h] = {"ours": ours, "best_parametric": par, "mujoco": mj,
                    "ours_mean": float(np.mean(ours)), "ours_sd": float(np.std(ours, ddof=1)),
                    "parametric_mean": float(np.mean(par)),
                    "ours_best_on_every_seed": bool(all(o < p for o, p in zip(ours, par)))}
        table.append([f"h={h}", *(f"{o:.3f} / {p:.3f}" for o, p in zip(ours, par)),
                      f"{np.mean(ours):.3f} +- {np.std(ours, ddof=1):.3f}",
                      f"{np.mean(par):.3f}", "yes" if stats[h]["ours_best_on_every_seed"]
                      else "no"])
    out = {"seeds": seeds, "horizons": list(HORIZONS), "stats": stats,
           "note": "seed 0 = the twin benchmark; other seeds: its simulator-mode "
                   "configuration (servo prior, 36-step horizon, 300 steps) on fresh twin data"}
    write_result(RESULTS / "neuralactuator_twin_sim_seeds.json", out, parts=[main_prov, *parts])
    md = ("# NeuralActuator simulator mode over twin data seeds\n\n"
          "Open-loop rollouts (simulator mode), arm-mean joint MAE [deg]: NeuralActuator on its "
          "identified servo / the best pose-only parametric servo of the same run (the lower "
          "of Coulomb-viscous and Stribeck on the test episodes, which favours the baseline). "
          "Each seed: 144 min of SO-101 twin data, 5 % of each task's episodes held out. Seed "
          "0 is the twin benchmark; seed 7 chose the training horizon and is left out. "
          "Reproduce: `.venv/bin/python benchmarks/bench_neuralactuator_twin_sim_seeds.py`.\n\n"
          + markdown_table(["horizon"] + [f"seed {s}" for s in seeds]
                           + ["ours mean +- sd", "parametric mean", "ours best on every seed"],
                           table) + "\n")
    write_text(RESULTS / "neuralactuator_twin_sim_seeds.md", md)
    print(md)
    return 0


def main(argv: list[str]) -> int:
    return seeds_main(argv, [11, 13], run_seed, summarize)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
