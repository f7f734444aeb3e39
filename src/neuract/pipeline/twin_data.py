"""The twin experiment's data: which twin episodes a :class:`TwinDataConfig` generates (its
main data and extra worn-motor training episodes), their split by task, and the contact
label they are scored with.

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
from dataclasses import dataclass
from typing import Any

import numpy as np

import neuract.twin as twin
from neuract.errors import ConfigError
from neuract.pipeline.progress import ProgressFn
from neuract.pipeline.splits import split_by_task
from neuract.twin import GenerateConfig
from neuract.twin.config import Nonidealities, SimConfig
from neuract.twin.generate import check_minutes, episode_table
from neuract.twin.tasks import check_worn_tasks


@dataclass
class TwinDataConfig:
    """Twin data: robot, amount, units, seed."""

    robot: str = "so101"
    minutes: float = 12.0
    """telemetry minutes generated (train + test), in whole episodes of ``episode_s`` (rounded
    up); less than one episode, or more than fits in the available memory, is refused"""
    units: int = 4
    """simulated physical arms (hidden parameters differ per unit)"""
    tasks: tuple[str, ...] = ("free", "lift", "pick", "push", "degraded")
    episode_s: float = 30.0
    """episode length [s] (>= 1)"""
    test_fraction: float = 0.25
    """share of each task's episodes held out for testing (0 < f < 1; a task needs at least
    two episodes to have one tested)"""
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
    """twin data seed (an integer >= 0)"""
    worn_train_minutes: float = 0.0
    """extra minutes of ``worn_train_tasks`` episodes, every one with one or two degraded motors:
    new episodes of the same units and seed (numbered past the others), added to the training
    split after it is drawn, so the test episodes are the same as without (they join the
    training split whole: the estimator's calibration episodes, the last of each task's and
    worn-motor group, then come from them too)"""
    gate_train_minutes: float = 0.0
    """extra minutes of twin episodes of other units (``gate_train_tasks``; data seeds
    seed + 1000, seed + 1001, ..., 216 minutes and ``units`` units each) on which only the
    estimator's recurrent contact gate trains (``gate_rnn``); generated after the estimator is
    trained, chunk by chunk, keeping only the gate's feature rows (about 2.2 MB per minute for
    the SO-101 estimator with every channel); the test split is unchanged. 0: none"""
    gate_train_tasks: tuple[str, ...] = ("lift", "pick", "push", "degraded")
    """the tasks of the extra gate episodes (``gate_train_minutes``); default: every task of the
    default mix that has contact"""
    workers: int = 1
    """processes that compute the extra gate episodes (``gate_train_minutes``), one chunk
    each at a time (the result does not depend on it)"""
    current_noise_lsb: float = 0.0
    """reading noise of the current register, std [register LSBs] before rounding
    (``SimConfig.current_noise_lsb``; >= 0); 0: none, as in every benchmark here"""
    worn_train_tasks: tuple[str, ...] = ("degraded",)
    """the tasks of the extra worn-motor training episodes (``worn_train_minutes``), in turn:
    'degraded' (pick-and-place or teleoperation, as the main data's worn episodes), 'push' (a
    worn motor and pushes in one episode) or 'pick' ('free' and 'lift' plans have no worn
    motors: refused)"""


def generate_config(cfg: TwinDataConfig):
    """The :class:`~neuract.twin.generate.GenerateConfig` that generates ``cfg``'s data
    (validated)."""
    known = list(Nonidealities.__dataclass_fields__)
    bad = [k for k in cfg.ideal if k not in known]
    if bad or isinstance(cfg.ideal, str):
        raise ConfigError(f"TwinDataConfig.ideal = {cfg.ideal!r}: expected a tuple of twin "
                          f"non-ideality names to switch off; accepted: {known}")
    gen = GenerateConfig(robot=cfg.robot, tasks=tuple(cfg.tasks), minutes=cfg.minutes,
                         units=cfg.units, seed=cfg.seed,
                         sim=SimConfig(episode_s=cfg.episode_s,
                                       degraded_fraction=cfg.degraded_fraction,
                                       current_noise_lsb=cfg.current_noise_lsb,
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
    tasks = cfg.worn_train_tasks
    check_worn_tasks(tasks, "TwinDataConfig.worn_train_tasks", empty_ok=False)
    if m == 0:
        return None
    gen = generate_config(cfg)
    check_minutes(m, gen.sim.episode_s, gen.robot, "TwinDataConfig.worn_train_minutes",
                  "TwinDataConfig.episode_s")
    # the worn episodes join the main data in memory: the two together must fit
    check_minutes(cfg.minutes + m, gen.sim.episode_s, gen.robot,
                  "TwinDataConfig.minutes + TwinDataConfig.worn_train_minutes",
                  "TwinDataConfig.episode_s")
    per_unit = -(-gen.n_episodes() // gen.units)
    return dataclasses.replace(gen, tasks=tuple(tasks), minutes=float(m),
                               episode_offset=per_unit,
                               sim=dataclasses.replace(gen.sim, degraded_fraction=1.0,
                                                       degraded_tasks=tuple(tasks)))


def generate_twin(cfg: TwinDataConfig, progress: ProgressFn | None = None,
                  worn: bool = False) -> list:
    """The twin episodes of ``cfg``; worn: its extra worn-motor training episodes
    (:func:`worn_config`) instead."""
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
    return twin.generate(gen, on_chunk=chunk)  # the package's, looked up at each call


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


def check_test_fraction(f: Any, name: str = "TwinDataConfig.test_fraction") -> None:
    if isinstance(f, bool) or not (isinstance(f, numbers.Real) and 0 < f < 1):
        raise ConfigError(f"{name} = {f!r}; expected a share 0 < f < 1 of each task's episodes "
                          "held out for testing")


def no_split_message(cfg: TwinDataConfig, n_train: int, n_test: int) -> str:
    """Why ``cfg``'s episodes give no training or no test episodes, naming what to change."""
    gen = generate_config(cfg)
    per_task = {t: 0 for t in gen.tasks}
    for _, _, _, task in episode_table(gen):
        per_task[task] += 1
    counts = ", ".join(f"{n} {t}" for t, n in per_task.items())
    return (f"TwinDataConfig.minutes = {cfg.minutes:g} gives {gen.n_episodes()} episodes of "
            f"{cfg.episode_s:g} s ({counts}): {n_train} for training and {n_test} for testing. "
            "A task's last episodes (its degraded-motor episodes apart) are held out for "
            "testing only where it has at least two, and TwinDataConfig.test_fraction = "
            f"{cfg.test_fraction:g} of them; expected more TwinDataConfig.minutes (at least "
            f"{2 * len(gen.tasks) * cfg.episode_s / 60:g} for two episodes of each task), fewer "
            "TwinDataConfig.tasks, or a smaller TwinDataConfig.test_fraction")


__all__ = ["TwinDataConfig", "check_test_fraction", "contact_labelled", "generate_config",
           "generate_twin", "no_split_message", "relabel_contact", "twin_split", "worn_config"]
