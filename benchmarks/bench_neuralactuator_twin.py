"""NeuralActuator accuracy on the SO-101 twin, against every baseline, in one run.

Dataset: ``neuract twin`` SO-101 data (hidden servo physics: firmware P/D loop, DC motor,
current limit, saturation, Stribeck + load-dependent friction, backlash, thermal, sag),
all five tasks (free, lift, pick, push, degraded), 4 units; split by episode (25 % of each
task's episodes held out). Protocol: ``neuract.eval`` -- windowed open-loop rollouts at 10,
50, 100, 300, 600 samples and the full episode (simulator mode, same measured 8-step past
for every model), and estimator-mode torque RMSE (true torque known on the twin), force MAE,
gate F1 and condition accuracy.

Writes ``benchmarks/results/neuralactuator_twin.json`` and ``.md`` and the full run
(report.html, checkpoints) under ``runs/bench_neuralactuator_twin``.

Run: ``.venv/bin/python benchmarks/bench_neuralactuator_twin.py`` (about 20-30 min on a
shared 2-core machine); ``--quick`` for the demo-sized run.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from neuract.atomic import write_json  # noqa: E402
from neuract.pipeline.experiment import ExperimentConfig  # noqa: E402
from neuract.pipeline.report import public, write_summary  # noqa: E402
from neuract.pipeline.twin_experiment import (  # noqa: E402
    TwinDataConfig,
    TwinExperimentConfig,
    run_twin_experiment,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def config(quick: bool = False) -> TwinExperimentConfig:
    if quick:
        from neuract.demo import DemoConfig

        d = DemoConfig()
        return TwinExperimentConfig(ROOT / "runs" / "bench_neuralactuator_twin", d.data,
                                    d.experiment)
    # the full-episode horizon (30 s = 1870 samples, one sequential rollout per episode) is
    # left out on the twin for compute; the 600-sample horizon covers a third of an episode
    exp = ExperimentConfig(sim_steps=300, est_steps=600, baseline_iters=40,
                           parametric_friction=("coulomb_viscous", "stribeck"),
                           horizons=(10, 50, 100, 300, 600), full=False, figure_samples=300)
    return TwinExperimentConfig(ROOT / "runs" / "bench_neuralactuator_twin",
                                TwinDataConfig(minutes=16.0), exp)


def main(argv: list[str]) -> int:
    torch.set_num_threads(1)
    quick = "--quick" in argv
    cfg = config(quick)
    last = [""]

    def progress(stage: str, done: int, total: int) -> None:
        if stage != last[0]:
            print(f"  {stage}", flush=True)
            last[0] = stage

    res = run_twin_experiment(cfg, progress)
    out = public(res)
    out["benchmark"] = {
        "dataset": f"neuract twin so101, {cfg.data.minutes:g} min, {cfg.data.units} units, "
                   f"tasks {list(cfg.data.tasks)}, seed {cfg.data.seed}",
        "split": "by episode, last 25 % of each task's episodes held out",
        "protocol": "neuract.eval open-loop rollouts (simulator mode) at horizons "
                    f"{list(cfg.experiment.horizons)}{' + full' if cfg.experiment.full else ''}"
                    ", history 8; estimator-mode torque/force/gate/condition",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), torch "
                   f"{torch.__version__}, 1 thread",
        "quick": quick,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_json(RESULTS / "neuralactuator_twin.json", out)
    pre = ("Dataset: " + out["benchmark"]["dataset"] + ". Split: " + out["benchmark"]["split"]
           + ". Protocol: " + out["benchmark"]["protocol"] + ". Machine: "
           + out["benchmark"]["machine"] + ". NeuralActuator is trained pose-only (no torque "
           "labels); the twin's hidden true torque scores the torque estimates. Full report: "
           "runs/bench_neuralactuator_twin/report.html. Reproduce: "
           "`.venv/bin/python benchmarks/bench_neuralactuator_twin.py`.")
    write_summary(RESULTS, res, "NeuralActuator on the SO-101 twin", "neuralactuator_twin", pre)
    print((RESULTS / "neuralactuator_twin.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
