"""The twin experiment: generate twin data -> split by episode -> fit NeuralActuator pose-only
-> fit the baselines -> evaluate everything with one protocol -> report.

The data (:mod:`.twin_data`) and the recurrent gate's extra episodes (:mod:`.twin_gate`) live
apart; this module checks a whole twin experiment's options and runs it.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from neuract.config import check_rerun, save_resolved
from neuract.errors import ConfigError
from neuract.estimate import estimate
from neuract.eval import evaluate_estimator, write_report
from neuract.pipeline.experiment import run_experiment
from neuract.pipeline.experiment_config import ExperimentConfig, check_experiment
from neuract.pipeline.progress import ProgressFn
from neuract.pipeline.report import build_report, data_tasks, write_results
from neuract.pipeline.scoring import mark_unscored
from neuract.pipeline.setups import setup_for
from neuract.pipeline.twin_data import (
    TwinDataConfig,
    check_test_fraction,
    contact_labelled,
    generate_config,
    no_split_message,
    twin_split,
    worn_config,
)
from neuract.pipeline.twin_gate import gate_chunks, gate_extra_rows
from neuract.twin.generate import episode_table


@dataclass
class TwinExperimentConfig:
    """Twin data -> NeuralActuator + baselines -> report (``neuract evaluate --twin``)."""

    out: Path = Path("runs/twin_experiment")
    data: TwinDataConfig = field(default_factory=TwinDataConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)


ROBOT_TITLES = {"so101": "SO-101", "omx": "OpenManipulator-X"}


def check_twin_experiment(cfg: TwinExperimentConfig):
    """Refuse every bad option of a twin experiment before anything is written or computed
    (ConfigError naming ``TwinDataConfig.<field>`` / ``ExperimentConfig.<field>``, which the
    verbs write as ``--twin.minutes`` / ``--data.minutes``, ``--experiment.sim-steps``);
    returns the robot's experiment setup."""
    gen = generate_config(cfg.data)  # robot, tasks, minutes, seed, ... (named as options)
    check_test_fraction(cfg.data.test_fraction)
    thr = cfg.data.contact_min_force_n
    if isinstance(thr, bool) or not (isinstance(thr, numbers.Real) and thr >= 0):
        raise ConfigError(f"TwinDataConfig.contact_min_force_n = {thr!r}; expected a force "
                          ">= 0 N (0: the twin's raw contact label)")
    setup = setup_for(cfg.data.robot)
    worn_config(cfg.data)
    check_experiment(cfg.experiment)
    if gate_chunks(cfg.data) and not cfg.experiment.gate_rnn:
        raise ConfigError(f"TwinDataConfig.gate_train_minutes = {cfg.data.gate_train_minutes:g} "
                          "trains the recurrent contact gate only: set ExperimentConfig.gate_rnn "
                          "(hidden units), or gate_train_minutes = 0")
    per_task: dict[str, int] = {}
    for _, _, _, task in episode_table(gen):
        per_task[task] = per_task.get(task, 0) + 1
    if max(per_task.values()) < 2:  # no task can have a test episode
        raise ConfigError(no_split_message(cfg.data, gen.n_episodes(), 0))
    return setup


def run_twin_experiment(cfg: TwinExperimentConfig, progress: ProgressFn | None = None,
                        title: str = "", note: str = "") -> dict[str, Any]:
    """Run the whole twin experiment; writes into ``cfg.out``: ``results.json``,
    ``report.md`` / ``report.html`` (+ ``figures/``), ``checkpoints/``, ``config.json``.
    ``note``: a paragraph the report's introduction ends with (e.g. the demo's scale)."""
    torch.set_num_threads(1)
    # refuse bad values before anything is written or computed
    setup = check_twin_experiment(cfg)
    out = Path(cfg.out)
    check_rerun(cfg, out)
    train, test, n_worn = twin_split(cfg.data, progress)
    if not train or not test:  # e.g. a task's two episodes, one with a worn motor
        raise ConfigError(no_split_message(cfg.data, len(train), len(test)))
    # written once the data is known to split (a rerun of an interrupted run resumes)
    out.mkdir(parents=True, exist_ok=True)
    save_resolved(cfg, out)
    thr = cfg.data.contact_min_force_n
    extra = None
    if cfg.data.gate_train_minutes and cfg.experiment.gate_rnn:
        def extra(model, prog):
            return gate_extra_rows(cfg.data, model, prog)
    res = run_experiment(setup, contact_labelled(train, thr), contact_labelled(test, thr),
                         cfg.experiment, out_dir=out, progress=progress, gate_extra=extra)
    if thr > 0 and "estimator" in res["_neuralactuator"]:
        res["gate_raw_label"] = _gate_on_raw_label(res["_neuralactuator"]["estimator"], test)
    res["data"] = {**dataclasses.asdict(cfg.data), "n_train_episodes": len(train),
                   "n_worn_train_episodes": n_worn,
                   "n_test_episodes": len(test), "split": "by episode, stratified by task",
                   "test_episodes": [tr.meta.name for tr in test]}
    units = len({(tr.meta.labels or {}).get("unit") for tr in [*train, *test]})
    tasks = data_tasks(train, test, cfg.data.tasks)
    intro = (f"Twin data: {cfg.data.minutes:g} min of {cfg.data.robot} telemetry, "
             f"{units} unit{'s' if units != 1 else ''}" + (f", {tasks}" if tasks else "")
             + f"; {len(train)} training / {len(test)} test episodes (split by episode). "
             "NeuralActuator trained pose-only (no torque labels) through the differentiable "
             "simulator; the twin's hidden true torque scores the estimates."
             + (f" {note}" if note else ""))
    name = ROBOT_TITLES.get(cfg.data.robot, cfg.data.robot)
    title = title or f"NeuralActuator on the {name} twin"
    write_results(out, res)  # first: a failing report must not lose the results
    write_report(out, build_report(res, title, intro))
    return res


def _gate_on_raw_label(model: Any, test: Sequence[Any]) -> dict[str, Any]:
    """NeuralActuator's gate scored against the twin's raw contact label (any force) of the
    test episodes."""
    return mark_unscored(evaluate_estimator(lambda tr: estimate(model, tr), test,
                                            "NeuralActuator"))["gate"]


__all__ = ["ROBOT_TITLES", "TwinExperimentConfig", "check_twin_experiment",
           "run_twin_experiment"]
