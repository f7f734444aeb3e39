"""The real-data experiment on the NAD files (NeuralActuator release data, OMX and SO-101).

Per robot: train on the ``train`` files, evaluate on the ``test`` files with the same
protocol as the twin experiment. Robot-specific choices (stated in every report):

* SO-101: the bundled description (6 joints, gripper included); MuJoCo default servo = its
  ``sts3215`` position actuators (kp 17.8 N m/rad). The ``empty`` payload file carries no
  force column (-999); its payload is known to be 0 g, so its force label is 0 N.
* OpenManipulator-X: the bundled description models the gripper as two slide joints, NAD
  logs one gripper angle; the gripper is left out (4 arm joints). The arm keeps the NAD
  release's joint defaults (armature 0.1, damping 1.0). MuJoCo default servo: a position
  actuator per joint with the XM430-W350 default gains (:mod:`.setups`).

The files are read by :mod:`.nad_data`; :func:`twin_pretrained` adds the sim-to-real
estimator, pretrained on the robot's twin.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import neuract.neuralactuator as na
from neuract.config import check_rerun, save_resolved
from neuract.errors import ConfigError
from neuract.eval import write_report
from neuract.neuralactuator import save_checkpoint
from neuract.pipeline import experiment
from neuract.pipeline.checkpoints import calibrated
from neuract.pipeline.experiment_config import (
    ExperimentConfig,
    check_experiment,
    train_config,
    train_state_path,
)
from neuract.pipeline.nad_data import load_nad
from neuract.pipeline.progress import ProgressFn, with_loss
from neuract.pipeline.report import build_report, write_results
from neuract.pipeline.setups import RobotSetup, omx_setup, so101_setup
from neuract.pipeline.twin_data import TwinDataConfig, contact_labelled, twin_split
from neuract.twin.generate import check_minutes

# the NeuralActuator release's numbers (full NAD, GPU, far more data than these 6 files)
RELEASE = {
    "omx_no_load_joint_deg": "0.13-0.63",
    "omx_force_sensor_tasks_joint_deg": "0.82-1.03",
    "omx_contact_force_N": "0.44-0.57",
    "payload_force_N": "0.005-0.23",
    "condition_accuracy": "100 % (random forest 67 %)",
    "so101_worst_joint_deg": "1.1-1.5",
    "so101_force_N": "0.22",
}


def _nad_experiment() -> ExperimentConfig:
    return ExperimentConfig(sim_steps=200, est_steps=200, baseline_iters=40, physics=True,
                            horizons=(10, 50, 100, 300, 600), full=True)


@dataclass
class TwinPretrainConfig:
    """Sim-to-real estimator: pretrained on the robot's twin, then fine-tuned on the NAD train
    files, scored on the NAD test files beside the estimator trained on the train files alone
    (:func:`twin_pretrained`). The estimator's configuration is the experiment's."""

    minutes: float = 0.0
    """twin telemetry minutes to pretrain on (all five tasks, over ``units`` units; 0: no such
    arm)"""
    steps: int = 1500
    """estimator optimiser steps on the twin"""
    fine_tune_steps: int = 200
    """estimator optimiser steps on the NAD train files (0: the pretrained model as it is)"""
    fine_tune_lr: float = 3e-4
    contact_min_force_n: float = 1.5
    """the twin's contact label: an external force of at least this [N] (NAD's F/T contact
    threshold, :data:`neuract.io.nad.CONTACT_THRESHOLD_N`; NAD calls any payload weight
    contact, so on the twin a payload under 153 g is no contact, unlike NAD's payload files,
    which hold 0 g or 500 g)"""
    seed: int = 0
    """twin data seed"""
    units: int = 16
    """simulated units (arms) the twin minutes are spread over: each unit draws its own motor
    constants, friction and starting temperatures. 16 against 4 (the twin benchmarks'): the
    zero-shot force MAE on the NAD train files went 1.850 -> 1.502 N (OMX) and 1.912 -> 1.473 N
    (SO-101), chosen there before the test files were scored with it"""

    def validate(self) -> TwinPretrainConfig:
        def real(k: str, lo: float, strict: bool = False) -> None:
            v = getattr(self, k)
            ok = (isinstance(v, numbers.Real) and not isinstance(v, bool)
                  and math.isfinite(v) and (v > lo if strict else v >= lo))
            if not ok:
                raise ConfigError(f"TwinPretrainConfig.{k} = {v!r}; expected a number "
                                  f"{'>' if strict else '>='} {lo:g}")

        real("minutes", 0.0)
        real("fine_tune_lr", 0.0, strict=True)
        real("contact_min_force_n", 0.0)
        for k in ("steps", "fine_tune_steps", "seed", "units"):
            v = getattr(self, k)
            lo = 1 if k == "units" else 0
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ConfigError(f"TwinPretrainConfig.{k} = {v!r}; expected an integer >= {lo}")
        if self.minutes:  # whole 30-s twin episodes, held in memory
            check_minutes(self.minutes, TwinDataConfig.episode_s, "so101",
                          "TwinPretrainConfig.minutes", "the twin's episode length")
        if self.minutes and self.steps < 1:
            raise ConfigError(f"TwinPretrainConfig.steps = {self.steps}; pretraining on "
                              f"{self.minutes:g} twin minutes needs at least 1 step")
        return self


@dataclass
class NADExperimentConfig:
    """NAD train files -> NeuralActuator + baselines -> NAD test files."""

    nad: Path = Path("../shared/data/nad")
    """NAD root (``<group>/<task>[/<payload>]/<split>/NNN.csv``)"""
    out: Path = Path("runs/nad_experiment")
    robots: tuple[str, ...] = ("omx", "so101")
    experiment: ExperimentConfig = field(default_factory=_nad_experiment)
    twin_pretrain: TwinPretrainConfig = field(default_factory=TwinPretrainConfig)
    """an extra estimator pretrained on the twin and fine-tuned on the train files (off by
    default: ``minutes`` 0)"""


def run_nad_experiment(cfg: NADExperimentConfig, progress: ProgressFn | None = None
                       ) -> dict[str, Any]:
    """Run every robot; writes ``<out>/<robot>/{results.json, report.*}`` and returns
    ``{robot: results}``."""
    torch.set_num_threads(1)
    cfg.twin_pretrain.validate()
    check_experiment(cfg.experiment)  # before anything is written
    out = Path(cfg.out)
    check_rerun(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    save_resolved(cfg, out)
    results = {}
    for robot in cfg.robots:
        if robot not in ("omx", "so101"):
            raise ConfigError(f"NAD robot {robot!r}; accepted: ['omx', 'so101']")
        (out / robot).mkdir(parents=True, exist_ok=True)
        setup = omx_setup() if robot == "omx" else so101_setup()
        train, test = load_nad(cfg.nad, robot)
        exp = cfg.experiment
        longest = max(len(tr) for tr in test)
        exp = dataclasses.replace(exp, horizons=tuple(h for h in exp.horizons
                                                      if h < longest - exp.size.history))
        res = experiment.run_experiment(setup, train, test, exp, out_dir=out / robot,
                                        progress=progress)
        res["data"] = {"train_files": [tr.meta.name for tr in train],
                       "test_files": [tr.meta.name for tr in test],
                       "joints": list(train[0].meta.joint_names)}
        res["release"] = RELEASE
        if cfg.twin_pretrain.minutes:
            res["twin_pretrained"] = twin_pretrained(robot, setup, train, test, exp,
                                                     cfg.twin_pretrain, out / robot, progress)
        intro = (f"NAD {robot}: trained on {len(train)} train file(s) "
                 f"({res['train_minutes'] * 60:.0f} s), evaluated on {len(test)} test "
                 f"file(s) ({res['test_minutes'] * 60:.0f} s). The release's numbers "
                 f"(trained on the full NAD, far more data): {RELEASE}.")
        write_results(out / robot, res)  # first: a failing report must not lose them
        write_report(out / robot, build_report(res, f"NeuralActuator on NAD ({robot})",
                                               intro))
        results[robot] = res
    return results


def _estimator_row(res: dict[str, Any]) -> dict[str, Any]:
    """NeuralActuator's estimation record of a run (force, gate, ...), without its name."""
    row = next(r for r in res["estimation"] if r["model"] == "NeuralActuator")
    return {k: v for k, v in row.items() if k != "model"}


def twin_pretrained(robot: str, setup: RobotSetup, train: list, test: list,
                    exp: ExperimentConfig, pre: TwinPretrainConfig, out: Path,
                    progress: ProgressFn | None = None, data: Any = None) -> dict[str, Any]:
    """The sim-to-real estimator of ``robot``: trained in estimator mode on ``pre.minutes`` of
    the robot's twin (contact label ``pre.contact_min_force_n``; the experiment's estimator
    configuration; its thresholds calibrated on the twin's training episodes), scored on the
    NAD ``test`` files as it is (``zero_shot``; also on the ``train`` files, which it has not
    seen: ``zero_shot_on_train_files``, for choices that must leave the test files alone) and
    after ``pre.fine_tune_steps`` steps on the NAD ``train`` files (``fine_tuned``; the twin's
    normalisation and thresholds kept).
    Also its figures on 5 % of the twin episodes held out (``twin``). Checkpoints:
    ``out/twin_pretrained/{twin,fine_tuned}/checkpoints``, beside each one's training state
    while it trains (``train_neuralactuator_estimator.safetensors``: a run killed during the
    pretraining or the fine-tuning resumes from it when started again with the same options
    and data, to the same result; removed once that stage's scores are in). ``data``: a
    :class:`~neuract.pipeline.twin_data.TwinDataConfig` to pretrain on instead of the
    one ``pre`` describes (its robot must be ``robot``; its own contact label is used)."""
    pre.validate()
    if data is None:
        data = TwinDataConfig(robot=robot, minutes=float(pre.minutes), units=int(pre.units),
                              test_fraction=0.05, contact_min_force_n=pre.contact_min_force_n,
                              seed=pre.seed)
    elif data.robot != robot:
        raise ConfigError(f"twin_pretrained: data.robot = {data.robot!r}, but the NAD robot is "
                          f"{robot!r}")
    tw_train, tw_test, _ = twin_split(data, progress)
    tw_train = contact_labelled(tw_train, data.contact_min_force_n)
    tw_test = contact_labelled(tw_test, data.contact_min_force_n)
    est = dataclasses.replace(exp, sim_steps=0, baseline_iters=0, neural_baselines=(),
                              horizons=(10,), full=False)
    out = Path(out) / "twin_pretrained"
    twin = experiment.run_experiment(setup, tw_train, tw_test,
                                     dataclasses.replace(est, est_steps=pre.steps),
                                     out_dir=out / "twin", progress=progress)
    model = twin["_neuralactuator"]["estimator"]
    # the pretrained model keeps its own gate
    est = dataclasses.replace(est, gate_rnn=0, gate_conv=0, gate_lag=0, gate_decide=-1)
    zero = experiment.run_experiment(setup, train, test, est, progress=progress,
                                     pretrained={"estimator": model})
    # the pretrained model on the train files it has not seen: a validation figure for
    # choices about the pretraining that leaves the test files alone
    zero_train = experiment.run_experiment(setup, train, train, est, progress=progress,
                                           pretrained={"estimator": model})
    rec: dict[str, Any] = {
        "config": dataclasses.asdict(pre),
        "twin": {"data": dataclasses.asdict(data), "train_episodes": len(tw_train),
                 "test_episodes": len(tw_test), "train_minutes": twin["train_minutes"],
                 "estimation": _estimator_row(twin)},
        "thresholds": calibrated(model),
        "zero_shot": _estimator_row(zero),
        "zero_shot_on_train_files": _estimator_row(zero_train)}
    if pre.fine_tune_steps:
        rec.update(_fine_tuned(model, robot, setup, train, test, exp, est, pre, data, out,
                               progress))
    return rec


def _fine_tuned(model: Any, robot: str, setup: RobotSetup, train: list, test: list,
                exp: ExperimentConfig, est: ExperimentConfig, pre: TwinPretrainConfig,
                data: TwinDataConfig, out: Path, progress: ProgressFn | None
                ) -> dict[str, Any]:
    """The twin-pretrained ``model`` fine-tuned on the NAD ``train`` files
    (``pre.fine_tune_steps``), its checkpoint written into ``out/fine_tuned``, scored on the
    ``test`` files: ``fine_tuned`` and ``fine_tune_final_loss`` of :func:`twin_pretrained`."""
    tuned = copy.deepcopy(model)
    # the experiment's estimator schedule (horizon, substeps, losses), fewer steps; its
    # training state beside the fine-tuned checkpoint, as the other stages keep theirs
    state = train_state_path(out / "fine_tuned", "estimator")
    tc = train_config(exp, "estimator", pre.fine_tune_steps, lr=pre.fine_tune_lr,
                      checkpoint=str(state))
    stage = "twin-pretrained estimator: fine-tune on the train files"
    if progress is not None:
        progress(stage, 0, pre.fine_tune_steps)
    tuned, rep = na.fine_tune(tuned, train, setup.robot, tc, site=setup.site,
                              progress=None if progress is None
                              else lambda s, t, info: with_loss(progress, stage, s, t,
                                                                info.get("loss")))
    save_checkpoint(tuned, out / "fine_tuned" / "checkpoints" / "neuralactuator_estimator",
                    extra={"robot": setup.name, "pretrained_on": f"twin {robot}, "
                           f"{data.minutes:g} min, {data.units} units, seed {data.seed}",
                           **calibrated(tuned)},
                    overwrite=True)
    ft = experiment.run_experiment(setup, train, test, est, progress=progress,
                                   pretrained={"estimator": tuned})
    rec = {"fine_tuned": _estimator_row(ft),
           "fine_tune_final_loss": {k: v for k, v in (rep.get("final") or {}).items()
                                    if isinstance(v, (int, float))}}
    state.unlink(missing_ok=True)  # done: nothing left to resume
    return rec


__all__ = ["NADExperimentConfig", "RELEASE", "TwinPretrainConfig", "run_nad_experiment",
           "twin_pretrained"]
