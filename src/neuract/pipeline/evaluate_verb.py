"""``neuract evaluate``: fit (or load) NeuralActuator and the baselines, score them with one
protocol, write a report.

    neuract evaluate --source twin --out runs/eval_twin            # generate, fit, score
    neuract evaluate --source nad --nad ../shared/data/nad --out runs/eval_nad
    neuract evaluate --source nad --robot omx --twin-pretrain.minutes 72   # + sim-to-real
    neuract evaluate --source dataset --data runs/twin_so101 --out runs/eval_ds \\
        --checkpoints runs/demo/checkpoints                        # score trained models

It writes ``report.md`` / ``report.html`` (tables, rollout plot, force traces, confusion
matrix), ``results.json`` and the resolved config into the run directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from neuract.config import check_rerun, save_resolved
from neuract.data import load_dataset
from neuract.errors import ConfigError
from neuract.eval import write_report
from neuract.pipeline import nad_experiment
from neuract.pipeline.checkpoints import load_pretrained
from neuract.pipeline.experiment import run_experiment
from neuract.pipeline.experiment_config import ExperimentConfig, check_experiment
from neuract.pipeline.nad_data import load_nad
from neuract.pipeline.nad_experiment import RELEASE, TwinPretrainConfig
from neuract.pipeline.progress import progress_bar
from neuract.pipeline.report import build_report, targets, targets_line, write_results
from neuract.pipeline.setups import setup_for
from neuract.pipeline.splits import check_split, split_by_task
from neuract.pipeline.twin_data import TwinDataConfig
from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment


@dataclass
class EvaluateConfig:
    """Fit (or load) NeuralActuator and the baselines, score them, write a report."""

    source: str = "twin"
    """twin (generate twin data), nad (NAD CSV files) or dataset (a neuract dataset)"""
    out: Path = Path("runs/evaluate")
    """run directory"""
    data: Path | None = None
    """dataset: dataset directory (episodes labelled split=test are the test set, else 25 %
    of each task's episodes)"""
    nad: Path = Path("../shared/data/nad")
    """nad: NAD root"""
    robot: str = "so101"
    """nad: whose files (so101 or omx); a dataset names its own robot"""
    twin: TwinDataConfig = field(default_factory=TwinDataConfig)
    """twin: data to generate"""
    checkpoints: Path | None = None
    """directory with neuralactuator_simulator/ and/or neuralactuator_estimator/ checkpoints
    to evaluate instead of training those modes (e.g. runs/demo/checkpoints), or one
    checkpoint directory (e.g. from neuract adapt), used for its own mode"""
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    twin_pretrain: TwinPretrainConfig = field(default_factory=TwinPretrainConfig)
    """nad: also an estimator pretrained on the robot's twin, then fine-tuned on the train
    files, scored beside the others (off by default: minutes 0; the NAD benchmark uses 72)"""
    quiet: bool = False
    """no progress bars and no closing summary"""


def check_evaluate(cfg: EvaluateConfig) -> None:
    """Refuse a bad ``--source`` and options that do not apply to it (ConfigError naming
    the options), before anything is read or written."""
    cfg.twin_pretrain.validate()
    if cfg.source not in ("twin", "nad", "dataset"):
        raise ConfigError(f"--source {cfg.source!r}; accepted: ['twin', 'nad', 'dataset']")
    if cfg.source == "dataset" and cfg.data is None:
        raise ConfigError("--source dataset needs --data DATASET_DIR")
    if cfg.source == "nad" and cfg.robot not in ("omx", "so101"):
        raise ConfigError(f"--robot {cfg.robot!r} with --source nad; accepted: ['omx', 'so101'] "
                          "(the arms NAD recorded)")
    if cfg.twin_pretrain.minutes and cfg.source != "nad":
        raise ConfigError(f"--twin-pretrain.minutes {cfg.twin_pretrain.minutes:g} applies to "
                          f"--source nad (sim-to-real on the NAD files); got --source "
                          f"{cfg.source!r}")


def run_evaluate(cfg: EvaluateConfig) -> dict[str, Any]:
    torch.set_num_threads(1)
    check_evaluate(cfg)
    pre = load_pretrained(cfg.checkpoints)
    check_experiment(cfg.experiment, tuple(pre))  # before anything is written
    if cfg.source != "twin":  # a twin run checks its own (TwinExperimentConfig) config
        check_rerun(cfg, cfg.out)
    bar, progress = progress_bar(cfg.quiet)
    with bar:
        if cfg.source == "twin":
            if pre:
                raise ConfigError("--checkpoints applies to --source dataset or nad; a twin run "
                                  "generates fresh data and trains on it")
            tcfg = TwinExperimentConfig(cfg.out, cfg.twin, cfg.experiment)
            check_rerun(tcfg, cfg.out, options={"data": "twin"})  # named as evaluate's options
            return run_twin_experiment(tcfg, progress)
        train, test, setup, title, extra = _episodes(cfg)
        check_split(train, test)
        out = Path(cfg.out)  # only now that the data and the robot are known good
        out.mkdir(parents=True, exist_ok=True)
        save_resolved(cfg, out)
        res = run_experiment(setup, train, test, cfg.experiment, out_dir=out,
                             progress=progress, pretrained=pre)
        res.update(extra)
        if cfg.twin_pretrain.minutes:  # validated above: source nad
            res["twin_pretrained"] = nad_experiment.twin_pretrained(
                cfg.robot, setup, train, test, cfg.experiment, cfg.twin_pretrain, out, progress)
            if pre.get("estimator") is not None:
                res["own_estimator_label"] = "the estimator above (from --checkpoints)"
        res["data"] = {"train": [t.meta.name for t in train],
                       "test": [t.meta.name for t in test]}
    write_results(out, res)  # first: a failing report must not lose the results
    write_report(out, build_report(res, title))
    return res


def _episodes(cfg: EvaluateConfig) -> tuple[list, list, Any, str, dict[str, Any]]:
    """(train, test, robot setup, report title, extra results) of a NAD or dataset run."""
    if cfg.source == "nad":
        train, test = load_nad(cfg.nad, cfg.robot)
        return (train, test, setup_for(cfg.robot), f"NeuralActuator on NAD ({cfg.robot})",
                {"release": RELEASE})
    ds = load_dataset(cfg.data)
    trajs = [ds[i] for i in range(len(ds))]
    test = [t for t in trajs if t.meta.labels.get("split") == "test"]
    train = [t for t in trajs if t.meta.labels.get("split") != "test"]
    if not test or not train:
        train, test = split_by_task(trajs, 0.25)
    return train, test, setup_for(ds.robot), f"NeuralActuator on {cfg.data}", {}


def _done(cfg: EvaluateConfig, res: dict[str, Any]) -> None:
    """The closing line: where the report and the results are, and the targets met."""
    if cfg.quiet:
        return
    line = targets_line(targets(res)) if "estimation" in res else ""
    out = Path(cfg.out)
    print(f"neuract evaluate: report {out / 'report.html'} (and report.md), results "
          f"{out / 'results.json'}" + (f"; {line}" if line else ""))


def run(cfg: EvaluateConfig) -> dict[str, Any]:
    res = run_evaluate(cfg)
    _done(cfg, res)
    return res


__all__ = ["EvaluateConfig", "check_evaluate", "run", "run_evaluate"]
