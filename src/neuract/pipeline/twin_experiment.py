"""The twin experiment: generate twin data -> split by episode -> fit NeuralActuator pose-only
-> fit the baselines -> evaluate everything with one protocol -> report.

The twin knows the true joint torque, end-effector force, contact and motor condition, so
every estimate can be scored; training never reads them except where a real robot would
have the label too (force from a sensor / payload weight, contact, known degraded motors),
and the torque head never sees a torque label.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neuract.errors import ConfigError
from neuract.pipeline.experiment import (
    ExperimentConfig,
    ProgressFn,
    run_experiment,
    split_by_task,
)


@dataclass
class TwinDataConfig:
    """Twin data: robot, amount, units, seed."""

    robot: str = "so101"
    minutes: float = 12.0
    """telemetry minutes generated (train + test)"""
    units: int = 4
    """simulated physical arms (hidden parameters differ per unit)"""
    tasks: tuple[str, ...] = ("free", "lift", "pick", "push", "degraded")
    episode_s: float = 30.0
    test_fraction: float = 0.25
    """share of each task's episodes held out for testing"""
    degraded_fraction: float = 0.25
    """share of 'degraded'-task episodes with one or two degraded motors"""
    contact_min_force_n: float = 0.0
    """contact (gate) label = an external end-effector force of at least this magnitude [N];
    0 keeps the twin's raw label (any nonzero force, including the first and last
    milli-newtons of a smooth push). NeuralActuator's gate is also scored on the raw label."""
    ideal: tuple[str, ...] = ()
    """twin non-idealities switched off (names of
    :class:`neuract.twin.config.Nonidealities` fields, e.g. ``("friction",)``): for ablations
    that measure what one effect costs an estimate; empty: the full twin"""
    seed: int = 0
    worn_train_minutes: float = 0.0
    """extra minutes of ``worn_train_tasks`` episodes, every one with one or two degraded motors:
    new episodes of the same units and seed (numbered past the others), added to the training
    split after it is drawn, so the test episodes are the same as without (they join the
    training split whole: the estimator's calibration episodes, the last of each task's and
    worn-motor group, then come from them too)"""
    worn_train_tasks: tuple[str, ...] = ("degraded",)
    """the tasks of the extra worn-motor training episodes (``worn_train_minutes``), in turn:
    'degraded' (pick-and-place or teleoperation, as the main data's worn episodes), 'push' (a
    worn motor and pushes in one episode) or 'pick' ('free' and 'lift' plans have no worn
    motors: refused)"""


@dataclass
class TwinExperimentConfig:
    """Twin data -> NeuralActuator + baselines -> report (``neuract evaluate --twin``)."""

    out: Path = Path("runs/twin_experiment")
    data: TwinDataConfig = field(default_factory=TwinDataConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)


def generate_config(cfg: TwinDataConfig):
    """The :class:`~neuract.twin.generate.GenerateConfig` that generates ``cfg``'s data
    (validated)."""
    from neuract.twin import GenerateConfig
    from neuract.twin.config import Nonidealities, SimConfig

    known = list(Nonidealities.__dataclass_fields__)
    bad = [k for k in cfg.ideal if k not in known]
    if bad or isinstance(cfg.ideal, str):
        raise ConfigError(f"TwinDataConfig.ideal = {cfg.ideal!r}: expected a tuple of twin "
                          f"non-ideality names to switch off; accepted: {known}")
    gen = GenerateConfig(robot=cfg.robot, tasks=tuple(cfg.tasks), minutes=cfg.minutes,
                         units=cfg.units, seed=cfg.seed,
                         sim=SimConfig(episode_s=cfg.episode_s,
                                       degraded_fraction=cfg.degraded_fraction,
                                       nonideal=Nonidealities(**{k: False for k in cfg.ideal})))
    gen.validate()
    return gen


def worn_config(cfg: TwinDataConfig):
    """The :class:`~neuract.twin.generate.GenerateConfig` of ``cfg``'s extra worn-motor
    training episodes (``worn_train_minutes`` of ``worn_train_tasks`` episodes, all with
    degraded motors, numbered past the main data's episodes); None without any."""
    m = cfg.worn_train_minutes
    if isinstance(m, bool) or not isinstance(m, numbers.Real) or not (math.isfinite(m)
                                                                       and m >= 0):
        raise ConfigError(f"TwinDataConfig.worn_train_minutes = {m!r}; expected minutes >= 0")
    from neuract.twin.tasks import check_worn_tasks

    tasks = cfg.worn_train_tasks
    check_worn_tasks(tasks, "TwinDataConfig.worn_train_tasks", empty_ok=False)
    if m == 0:
        return None
    gen = generate_config(cfg)
    per_unit = -(-gen.n_episodes() // gen.units)
    return dataclasses.replace(gen, tasks=tuple(tasks), minutes=float(m),
                               episode_offset=per_unit,
                               sim=dataclasses.replace(gen.sim, degraded_fraction=1.0,
                                                       degraded_tasks=tuple(tasks)))


def generate_twin(cfg: TwinDataConfig, progress: ProgressFn | None = None,
                  worn: bool = False) -> list:
    """The twin episodes of ``cfg``; worn: its extra worn-motor training episodes
    (:func:`worn_config`) instead."""
    from neuract.twin import generate

    gen = worn_config(cfg) if worn else generate_config(cfg)
    if gen is None:
        return []
    n = gen.n_episodes()
    done = [0]
    what = "twin data, extra worn-motor training episodes" if worn else \
        "twin data (hidden servo physics)"

    def chunk(k):
        done[0] += k
        if progress:
            progress(what, done[0], n)

    if progress:
        progress(what, 0, n)
    return generate(gen, on_chunk=chunk)


def twin_split(cfg: TwinDataConfig, progress: ProgressFn | None = None
               ) -> tuple[list, list, int]:
    """(train, test, n_worn) episodes of ``cfg``: its data split by task (``test_fraction``),
    then its ``n_worn`` extra worn-motor training episodes (:func:`worn_config`) added to the
    training split."""
    train, test = split_by_task(generate_twin(cfg, progress), cfg.test_fraction)
    worn = generate_twin(cfg, progress, worn=True)
    return train + worn, test, len(worn)


def relabel_contact(tr: Any, min_force_n: float) -> Any:
    """The trajectory with ``contact`` := contact and |ee_force| >= min_force_n [N]."""
    raw = np.asarray(tr["contact"], bool)
    f = np.linalg.norm(np.asarray(tr["ee_force"], dtype=np.float64), axis=1)
    return tr.replace(channels={"contact": raw & (f >= min_force_n)})


def contact_labelled(eps: Sequence[Any], min_force_n: float) -> list:
    """The episodes scored with contact = an external force of at least ``min_force_n`` [N]
    (:func:`relabel_contact`; 0: the twin's raw label, as they are)."""
    if not min_force_n >= 0:
        raise ConfigError(f"contact_min_force_n = {min_force_n}; expected >= 0 N")
    return [relabel_contact(tr, min_force_n) for tr in eps] if min_force_n > 0 else list(eps)


ROBOT_TITLES = {"so101": "SO-101", "omx": "OpenManipulator-X"}


def setup_for(robot: str):
    """The experiment setup of a twin robot: ``so101`` or ``omx`` (the 4-joint
    OpenManipulator-X arm with XM430 position servos, bundled as ``omx_arm``)."""
    from neuract.pipeline.experiment import so101_setup

    if robot == "so101":
        return so101_setup()
    if robot == "omx":
        from neuract.pipeline.nad_experiment import omx_setup

        return omx_setup()
    raise ConfigError(f"twin experiment robot {robot!r}; accepted: ['so101', 'omx']")


def run_twin_experiment(cfg: TwinExperimentConfig, progress: ProgressFn | None = None,
                        title: str = "") -> dict[str, Any]:
    """Run the whole twin experiment; writes into ``cfg.out``: ``results.json``,
    ``report.md`` / ``report.html`` (+ ``figures/``), ``checkpoints/``, ``config.json``."""
    import torch

    from neuract.config import check_rerun, save_resolved
    from neuract.eval import write_report
    from neuract.pipeline.experiment import check_experiment
    from neuract.pipeline.report import build_report, write_results

    torch.set_num_threads(1)
    # refuse bad values before anything is written or computed
    setup = setup_for(cfg.data.robot)
    worn_config(cfg.data)
    check_experiment(cfg.experiment)
    out = Path(cfg.out)
    check_rerun(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    save_resolved(cfg, out)
    train, test, n_worn = twin_split(cfg.data, progress)
    thr = cfg.data.contact_min_force_n
    res = run_experiment(setup, contact_labelled(train, thr), contact_labelled(test, thr),
                         cfg.experiment, out_dir=out, progress=progress)
    if thr > 0 and "estimator" in res["_neuralactuator"]:
        res["gate_raw_label"] = _gate_on_raw_label(res["_neuralactuator"]["estimator"], test)
    res["data"] = {**dataclasses.asdict(cfg.data), "n_train_episodes": len(train),
                   "n_worn_train_episodes": n_worn,
                   "n_test_episodes": len(test), "split": "by episode, stratified by task",
                   "test_episodes": [tr.meta.name for tr in test]}
    intro = (f"Twin data: {cfg.data.minutes:g} min of {cfg.data.robot} telemetry, "
             f"{cfg.data.units} units, tasks {', '.join(cfg.data.tasks)}; "
             f"{len(train)} training / {len(test)} test episodes (split by episode). "
             "NeuralActuator trained pose-only (no torque labels) through the differentiable "
             "simulator; the twin's hidden true torque scores the estimates.")
    name = ROBOT_TITLES.get(cfg.data.robot, cfg.data.robot)
    title = title or f"NeuralActuator on the {name} twin"
    write_results(out, res)  # first: a failing report must not lose the results
    write_report(out, build_report(res, title, intro))
    return res


def _gate_on_raw_label(model: Any, test: Sequence[Any]) -> dict[str, Any]:
    """NeuralActuator's gate scored against the twin's raw contact label (any force) of the
    test episodes."""
    from neuract.eval import evaluate_estimator
    from neuract.neuralactuator import estimate

    return evaluate_estimator(lambda tr: estimate(model, tr), test, "NeuralActuator")["gate"]


__all__ = ["TwinDataConfig", "TwinExperimentConfig", "contact_labelled", "generate_config",
           "generate_twin", "relabel_contact", "run_twin_experiment", "split_by_task",
           "twin_split", "worn_config"]
