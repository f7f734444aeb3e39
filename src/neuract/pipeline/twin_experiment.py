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
    from neuract.twin.tasks import check_worn_tasks

    tasks = cfg.worn_train_tasks
    check_worn_tasks(tasks, "TwinDataConfig.worn_train_tasks", empty_ok=False)
    if m == 0:
        return None
    gen = generate_config(cfg)
    from neuract.twin.generate import check_minutes

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
    raise ConfigError(f"the data's robot is {robot!r}: evaluate and demo fit and score arm "
                      "models, so they need arm data (twin or NAD data of the SO-101 or the "
                      "OpenManipulator-X); accepted: ['so101', 'omx']")


def check_test_fraction(f: Any, name: str = "TwinDataConfig.test_fraction") -> None:
    if isinstance(f, bool) or not (isinstance(f, numbers.Real) and 0 < f < 1):
        raise ConfigError(f"{name} = {f!r}; expected a share 0 < f < 1 of each task's episodes "
                          "held out for testing")


def no_split_message(cfg: TwinDataConfig, n_train: int, n_test: int) -> str:
    """Why ``cfg``'s episodes give no training or no test episodes, naming what to change."""
    gen = generate_config(cfg)
    per_task = {t: 0 for t in gen.tasks}
    for _, _, _, task in _episode_table(gen):
        per_task[task] += 1
    counts = ", ".join(f"{n} {t}" for t, n in per_task.items())
    return (f"TwinDataConfig.minutes = {cfg.minutes:g} gives {gen.n_episodes()} episodes of "
            f"{cfg.episode_s:g} s ({counts}): {n_train} for training and {n_test} for testing. "
            "A task's last episodes (its degraded-motor episodes apart) are held out for "
            "testing only where it has at least two, and TwinDataConfig.test_fraction = "
            f"{cfg.test_fraction:g} of them; expected more TwinDataConfig.minutes (at least "
            f"{2 * len(gen.tasks) * cfg.episode_s / 60:g} for two episodes of each task), fewer "
            "TwinDataConfig.tasks, or a smaller TwinDataConfig.test_fraction")


def _episode_table(gen):
    from neuract.twin.generate import episode_table

    return episode_table(gen)


def check_twin_experiment(cfg: TwinExperimentConfig):
    """Refuse every bad option of a twin experiment before anything is written or computed
    (ConfigError naming ``TwinDataConfig.<field>`` / ``ExperimentConfig.<field>``, which the
    verbs write as ``--twin.minutes`` / ``--data.minutes``, ``--experiment.sim-steps``);
    returns the robot's experiment setup."""
    from neuract.pipeline.experiment import check_experiment

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
    for _, _, _, task in _episode_table(gen):
        per_task[task] = per_task.get(task, 0) + 1
    if max(per_task.values()) < 2:  # no task can have a test episode
        raise ConfigError(no_split_message(cfg.data, gen.n_episodes(), 0))
    return setup


def run_twin_experiment(cfg: TwinExperimentConfig, progress: ProgressFn | None = None,
                        title: str = "", note: str = "") -> dict[str, Any]:
    """Run the whole twin experiment; writes into ``cfg.out``: ``results.json``,
    ``report.md`` / ``report.html`` (+ ``figures/``), ``checkpoints/``, ``config.json``.
    ``note``: a paragraph the report's introduction ends with (e.g. the demo's scale)."""
    import torch

    from neuract.config import check_rerun, save_resolved
    from neuract.eval import write_report
    from neuract.pipeline.report import build_report, write_results

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
    intro = (f"Twin data: {cfg.data.minutes:g} min of {cfg.data.robot} telemetry, "
             f"{cfg.data.units} units, tasks {', '.join(cfg.data.tasks)}; "
             f"{len(train)} training / {len(test)} test episodes (split by episode). "
             "NeuralActuator trained pose-only (no torque labels) through the differentiable "
             "simulator; the twin's hidden true torque scores the estimates."
             + (f" {note}" if note else ""))
    name = ROBOT_TITLES.get(cfg.data.robot, cfg.data.robot)
    title = title or f"NeuralActuator on the {name} twin"
    write_results(out, res)  # first: a failing report must not lose the results
    write_report(out, build_report(res, title, intro))
    return res


GATE_CHUNK_MINUTES = 216.0
"""twin minutes per data seed of the extra gate episodes (``gate_train_minutes``)"""
GATE_ROW_BYTES_PER_MINUTE = 2.4e6
"""memory of the recurrent gate's feature rows per extra minute (measured: 2.24 MB per minute
of SO-101 twin telemetry at the twin estimator's 144 channels, float32), with a margin"""
GATE_SEED_OFFSET = 1000
"""the extra gate episodes' first data seed, past the main data's ``seed``"""


def gate_chunks(cfg: TwinDataConfig) -> list:
    """The :class:`~neuract.twin.generate.GenerateConfig` of each chunk of ``cfg``'s extra
    gate episodes (``gate_train_minutes``): other units (data seeds from ``seed +``
    :data:`GATE_SEED_OFFSET`), :data:`GATE_CHUNK_MINUTES` each (the last one the rest);
    empty without any. Validates the options."""
    m = cfg.gate_train_minutes
    if isinstance(m, bool) or not isinstance(m, numbers.Real) or not (math.isfinite(m)
                                                                       and m >= 0):
        raise ConfigError(f"TwinDataConfig.gate_train_minutes = {m!r}; expected minutes >= 0")
    w = cfg.workers
    if isinstance(w, bool) or not isinstance(w, int) or w < 1:
        raise ConfigError(f"TwinDataConfig.workers = {w!r}; expected an integer >= 1")
    from neuract.twin.tasks import TASKS

    tasks = cfg.gate_train_tasks
    if isinstance(tasks, str) or not tasks or any(t not in TASKS for t in tasks):
        raise ConfigError(f"TwinDataConfig.gate_train_tasks = {tasks!r}; expected one or more "
                          f"of {list(TASKS)}")
    if m == 0:
        return []
    base = generate_config(cfg)
    episode_min = base.sim.episode_s / 60.0
    if m < episode_min * (1 - 1e-9):
        raise ConfigError(f"TwinDataConfig.gate_train_minutes = {m:g} is less than one episode "
                          f"(TwinDataConfig.episode_s = {base.sim.episode_s:g} s); expected 0 "
                          f"or at least {episode_min:g} minutes")
    out, left, k = [], float(m), 0
    while left > 1e-9:
        chunk = min(left, GATE_CHUNK_MINUTES)
        if left - chunk < episode_min:  # a remainder under one episode joins this chunk
            chunk = left
        out.append(dataclasses.replace(base, tasks=tuple(tasks), minutes=chunk,
                                       seed=cfg.seed + GATE_SEED_OFFSET + k, workers=1))
        left -= chunk
        k += 1
    from neuract.twin.generate import available_memory, estimated_bytes

    # held at once: the main (and worn) episodes, one chunk per worker, every chunk's rows
    held = cfg.minutes + (cfg.worn_train_minutes or 0.0)
    need = (estimated_bytes(held, base.sim.episode_s, base.robot)
            + estimated_bytes(min(float(m), GATE_CHUNK_MINUTES * w), base.sim.episode_s,
                              base.robot) + float(m) * GATE_ROW_BYTES_PER_MINUTE)
    have = available_memory()
    if have is not None and need > have:
        raise ConfigError(f"TwinDataConfig.gate_train_minutes = {m:g} with workers = {w} needs "
                          f"about {need / 1e9:.3g} GB of memory (the main episodes, one "
                          f"{GATE_CHUNK_MINUTES:g}-min chunk per worker and about "
                          f"{GATE_ROW_BYTES_PER_MINUTE / 1e6:.2g} MB of feature rows per extra "
                          f"minute); this machine has {have / 1e9:.3g} GB available: expected "
                          "fewer minutes or workers")
    return out


_GATE_JOB: dict[str, Any] = {}
"""what a process computes the extra gate rows with (this one's, or a worker's)"""


def _gate_worker_init(model: Any, chunks: list, thr: float) -> None:
    import torch

    torch.set_num_threads(1)  # one core per worker
    _GATE_JOB.update(model=model, chunks=chunks, thr=thr)


def _gate_chunk_rows(k: int) -> list:
    from neuract.estimate.gate_rnn import gate_rows
    from neuract.twin import generate

    job = _GATE_JOB
    eps = contact_labelled(generate(job["chunks"][k]), job["thr"])
    return gate_rows(job["model"], eps)


def gate_extra_rows(cfg: TwinDataConfig, model: Any, progress: ProgressFn | None = None
                    ) -> list:
    """The recurrent gate's :class:`~neuract.estimate.gate_rnn.GateRows` of ``cfg``'s
    extra gate episodes (:func:`gate_chunks`), computed with the trained estimator ``model``
    by ``cfg.workers`` processes, chunk by chunk (only the rows are kept)."""
    import multiprocessing as mp

    chunks = gate_chunks(cfg)
    what = "recurrent contact gate: extra twin episodes of other units"
    if not chunks:
        return []
    thr = cfg.contact_min_force_n
    rows: list = []
    if progress:
        progress(what, 0, len(chunks))
    if cfg.workers <= 1 or len(chunks) == 1:
        _GATE_JOB.update(model=model, chunks=chunks, thr=thr)
        try:
            for k in range(len(chunks)):
                rows += _gate_chunk_rows(k)
                if progress:
                    progress(what, k + 1, len(chunks))
        finally:
            _GATE_JOB.clear()
        return rows
    # spawned (not forked) workers: nothing of this process's threads is inherited
    with mp.get_context("spawn").Pool(min(cfg.workers, len(chunks)),
                                      initializer=_gate_worker_init,
                                      initargs=(model, chunks, thr)) as pool:
        for k, r in enumerate(pool.imap(_gate_chunk_rows, range(len(chunks)))):
            rows += r  # in chunk order, whatever the order the workers finish in
            if progress:
                progress(what, k + 1, len(chunks))
    return rows


def _gate_on_raw_label(model: Any, test: Sequence[Any]) -> dict[str, Any]:
    """NeuralActuator's gate scored against the twin's raw contact label (any force) of the
    test episodes."""
    from neuract.estimate import estimate
    from neuract.eval import evaluate_estimator

    return evaluate_estimator(lambda tr: estimate(model, tr), test, "NeuralActuator")["gate"]


__all__ = ["TwinDataConfig", "TwinExperimentConfig", "check_twin_experiment", "contact_labelled",
           "gate_chunks", "gate_extra_rows", "generate_config",
           "generate_twin", "relabel_contact", "run_twin_experiment", "split_by_task",
           "twin_split", "worn_config"]
