"""``neuract evaluate``: fit (or load) NeuralActuator and the baselines, score them with one
protocol, write a report.

    neuract evaluate --source twin --out runs/eval_twin            # generate, fit, score
    neuract evaluate --source nad --nad ../shared/data/nad --out runs/eval_nad
    neuract evaluate --source nad --robot omx --twin-pretrain.minutes 72   # + sim-to-real
    neuract evaluate --source dataset --data runs/twin_so101 --out runs/eval_ds \\
        --checkpoints runs/demo/checkpoints                        # score trained models

It writes ``report.md`` / ``report.html`` (tables, rollout plot, force traces, confusion
matrix), ``results.json`` and the resolved config into the run directory, and every
simulator-mode baseline as a checkpoint under ``checkpoints/baseline_<name>/``
(:mod:`neuract.pipeline.baseline_checkpoints`): ``neuract score``, ``neuract simulate`` and a
later ``evaluate --checkpoints`` read them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from neuract.atomic import check_parent, undone_on_error
from neuract.config import check_rerun, save_resolved
from neuract.data import load_dataset
from neuract.data.dataset import is_dataset, require_channels
from neuract.errors import ConfigError
from neuract.eval import write_report
from neuract.neuralactuator.features import channels_for
from neuract.pipeline import nad_experiment
from neuract.pipeline.baseline_checkpoints import load_baselines
from neuract.pipeline.checkpoints import load_pretrained
from neuract.pipeline.experiment import run_experiment
from neuract.pipeline.experiment_config import (
    ExperimentConfig,
    check_experiment,
    train_state_path,
)
from neuract.pipeline.nad_data import load_nad
from neuract.pipeline.nad_experiment import RELEASE, TwinPretrainConfig
from neuract.pipeline.progress import reporter
from neuract.pipeline.report import build_report, targets, targets_line, write_results
from neuract.pipeline.setups import setup_for
from neuract.pipeline.splits import check_split, split_by_task
from neuract.pipeline.streaming import read_channels
from neuract.pipeline.twin_data import TwinDataConfig
from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment
from neuract.robot.match import arm_of, check_arm


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
    robot: str = ""
    """nad: whose files (so101 or omx; empty: so101); dataset: the arm to fit (empty: the
    dataset's; another arm needs --force-robot)"""
    force_robot: bool = False
    """dataset: fit --robot's arm on a dataset recorded on another one (refused otherwise)"""
    twin: TwinDataConfig = field(default_factory=TwinDataConfig)
    """twin: data to generate"""
    checkpoints: Path | None = None
    """a run's checkpoints (e.g. runs/demo/checkpoints): its neuralactuator_<mode>/ used
    instead of training, its baseline_*/ instead of fitting; or one checkpoint (e.g. from
    neuract adapt), for its own mode"""
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
    if cfg.source == "nad" and (cfg.robot or "so101") not in ("omx", "so101"):
        raise ConfigError(f"--robot {cfg.robot!r} with --source nad; accepted: ['omx', 'so101'] "
                          "(the arms NAD recorded)")
    if cfg.source == "dataset" and cfg.robot and arm_of(cfg.robot) not in ("omx", "so101"):
        raise ConfigError(f"--robot {cfg.robot!r} with --source dataset; accepted: 'so101', "
                          "'omx' (the arms evaluate fits), or none: the dataset's robot")
    if cfg.twin_pretrain.minutes and cfg.source != "nad":
        raise ConfigError(f"--twin-pretrain.minutes {cfg.twin_pretrain.minutes:g} applies to "
                          f"--source nad (sim-to-real on the NAD files); got --source "
                          f"{cfg.source!r}")


def _kept(out: Path) -> bool:
    """Whether a failed run into ``out`` is kept: it saved a NeuralActuator training state
    to resume from (as after an interrupt), or its results (only the report failed)."""
    return (out / "results.json").is_file() or any(
        train_state_path(out, m).is_file() for m in ("simulator", "estimator", "gate_rnn"))


def run_evaluate(cfg: EvaluateConfig) -> dict[str, Any]:
    torch.set_num_threads(1)
    check_evaluate(cfg)
    if cfg.source == "nad" and not cfg.robot:  # the default arm, written as such
        cfg = dataclasses.replace(cfg, robot="so101")
    pre = load_pretrained(cfg.checkpoints)
    check_experiment(cfg.experiment, tuple(pre))  # before anything is written
    if cfg.source != "twin":  # a twin run checks its own (TwinExperimentConfig) config
        check_rerun(cfg, cfg.out)
    check_parent(cfg.out, "--out")
    # a run that fails leaves no --out behind (nor files in an empty one), unless it saved
    # a training state to resume from, or its results
    with undone_on_error(cfg.out, keep=_kept) as out:
        return _run(cfg, pre, out)


def _run(cfg: EvaluateConfig, pre: dict[str, Any], out: Path) -> dict[str, Any]:
    with reporter(cfg.quiet) as progress:  # stages; a resumed training says so
        if cfg.source == "twin":
            if cfg.checkpoints is not None:
                raise ConfigError("--checkpoints applies to --source dataset or nad; a twin run "
                                  "generates fresh data and trains on it")
            tcfg = TwinExperimentConfig(cfg.out, cfg.twin, cfg.experiment)
            check_rerun(tcfg, cfg.out, options={"data": "twin"})  # named as evaluate's options
            return run_twin_experiment(tcfg, progress)
        train, test, setup, title, extra = _episodes(cfg, pre)
        check_split(train, test)
        given = load_baselines(cfg.checkpoints, arm=setup.name)
        # only now that the data and the robot are known good
        out.mkdir(parents=True, exist_ok=True)
        save_resolved(cfg, out)
        res = run_experiment(setup, train, test, cfg.experiment, out_dir=out,
                             progress=progress, pretrained=pre, baselines=given)
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


def _episodes(cfg: EvaluateConfig, pre: dict[str, Any]
              ) -> tuple[list, list, Any, str, dict[str, Any]]:
    """(train, test, robot setup, report title, extra results) of a NAD or dataset run;
    ``pre``: the checkpoints given (mode -> model), whose channels the episodes must carry."""
    if cfg.source == "nad":
        train, test = load_nad(cfg.nad, cfg.robot)
        setup = setup_for(cfg.robot)
        _require_channels(cfg, setup, pre, [*train, *test], cfg.nad, "--nad")
        return (train, test, setup, f"NeuralActuator on NAD ({cfg.robot})",
                {"release": RELEASE})
    is_dataset(cfg.data)  # a directory lacking its meta/info.json is refused as such
    ds = load_dataset(cfg.data)
    trajs = [ds[i] for i in range(len(ds))]
    setup = setup_for(arm_of(cfg.robot) if cfg.robot else ds.robot)
    if cfg.robot:
        check_arm(cfg.robot, setup.robot.joint_names, list(ds.joint_names),
                  f"--data {str(cfg.data)!r}", ds.robot, cfg.force_robot)
    _require_channels(cfg, setup, pre, trajs, cfg.data, "--data")
    test = [t for t in trajs if t.meta.labels.get("split") == "test"]
    train = [t for t in trajs if t.meta.labels.get("split") != "test"]
    if not test or not train:
        train, test = split_by_task(trajs, 0.25)
    return train, test, setup, f"NeuralActuator on {cfg.data}", {}


def _require_channels(cfg: EvaluateConfig, setup: Any, pre: dict[str, Any], trajs: list,
                      data: Path, option: str) -> None:
    """Refuse, before anything is written, episodes that lack a channel a model this run
    trains (or was given) reads, naming the episode and how to add what it lacks."""
    require_channels(trajs, ("t", "q", "q_goal"), data, "every model evaluate scores", option)
    x = cfg.experiment
    for mode, steps in (("simulator", x.sim_steps), ("estimator", x.est_steps)):
        if mode in pre:
            chans = read_channels(pre[mode].cfg.channels)
        elif steps > 0:
            chans = read_channels(channels_for(
                mode, setup.effort, physics=x.physics and mode == "estimator",
                context=bool(x.context_s) and mode == "estimator",
                reference=bool(x.reference_steps) and mode == "estimator",
                ident=x.ident and mode == "estimator"))
        else:
            continue
        require_channels(trajs, chans, data, f"the NeuralActuator {mode}-mode model", option)


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
