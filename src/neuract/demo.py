"""``neuract demo``: the main job, end to end, on a digital twin of the SO-101.

Twin data with hidden servo physics -> split by episode -> NeuralActuator trained pose-only
(simulator mode for rollouts, estimator mode for torque / force / gate / condition) -> the
baselines fitted on the same episodes (MuJoCo default servo, parametric servo, MLP and GRU
actuator nets, tau = Kt I, momentum observer, model residual, threshold / SVM / random forest)
-> one evaluation protocol -> ``runs/demo/report.html`` and a summary table.

The defaults are sized for the 15-minute budget on a shared 2-core CPU (about 10 minutes
with the machine under load from other jobs); ``--experiment.*`` / ``--data.*`` resize it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from neuract.pipeline.experiment_config import ExperimentConfig
from neuract.pipeline.progress import reporter
from neuract.pipeline.report import estimation_rows, rollout_rows, targets
from neuract.pipeline.twin_data import TwinDataConfig
from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment


def _demo_experiment() -> ExperimentConfig:
    return ExperimentConfig(sim_steps=120, est_steps=200, baseline_iters=15,
                            parametric_friction=("stribeck",), physics=True, context_s=1.0,
                            force_huber_delta=0.1, aux_batch=256,
                            horizons=(10, 50, 100, 300, 600), full=False, figure_samples=300)


@dataclass
class DemoConfig:
    """Twin SO-101 data -> NeuralActuator (pose-only) + baselines -> report."""

    out: Path = Path("runs/demo")
    """run directory (report.md / report.html, results.json, checkpoints/)"""
    data: TwinDataConfig = field(
        default_factory=lambda: TwinDataConfig(minutes=10.0, contact_min_force_n=0.5))
    """twin data: minutes, units, tasks, seed"""
    experiment: ExperimentConfig = field(default_factory=_demo_experiment)
    """training sizes (steps, model size) and the evaluation protocol"""
    quiet: bool = False
    """no progress bars"""


BENCHMARK_SCALE = ("the twin benchmark, benchmarks/bench_neuralactuator_twin.py: 144 min of "
                   "data, 3000 estimator steps, a recurrent contact gate also trained on "
                   "2160 min of other units' episodes; its figures are in the README's "
                   "results table")
"""where the twin targets are scored at scale (the demo's note names it)"""


def scale_note(cfg: DemoConfig) -> str:
    """What the demo's report and summary say about its scale: the run's data and training
    sizes against the twin benchmark's, which scores the targets."""
    e = cfg.experiment
    gate = f"a recurrent gate of {e.gate_rnn} units" if e.gate_rnn else "the gate head"
    return (f"This run's scale: {cfg.data.minutes:g} min of twin data, {e.sim_steps} simulator "
            f"and {e.est_steps} estimator training steps, {gate}. The demo's defaults are sized "
            "to finish in minutes, far below the scale at which the twin targets are scored ("
            f"{BENCHMARK_SCALE}), so at its defaults the targets are not expected to be met.")


def run(cfg: DemoConfig) -> dict:
    t0 = time.perf_counter()
    tcfg = TwinExperimentConfig(out=cfg.out, data=cfg.data, experiment=cfg.experiment)
    note = scale_note(cfg)
    with reporter(cfg.quiet) as progress:
        res = run_twin_experiment(tcfg, progress, note=note)
    wall = time.perf_counter() - t0
    # piped or logged (no terminal): wide enough that the tables do not wrap their cells
    out = Console(quiet=cfg.quiet, width=None if sys.stdout.isatty() else 160)
    for title, (cols, rows) in (
            ("Open-loop rollout, arm-mean joint MAE [deg] (simulator mode)", rollout_rows(res)),
            ("Estimation on held-out episodes (estimator mode)", estimation_rows(res))):
        t = Table(title=title)
        for c in cols:
            t.add_column(c)
        for r in rows:
            t.add_row(*["—" if v is None else str(v) for v in r])
        out.print(t)
    t = Table(title="Twin targets")
    for c in ("target", "ours", "met"):
        t.add_column(c)
    for tg in targets(res):
        t.add_row(tg["target"], tg["value"], tg["status"])
    out.print(t)
    out.print(note, soft_wrap=True)
    out.print(f"report: {Path(cfg.out) / 'report.html'} (and report.md); results: "
              f"{Path(cfg.out) / 'results.json'}; {wall / 60:.1f} min")
    res["wall_s"] = wall
    return res


__all__ = ["DemoConfig", "run"]
