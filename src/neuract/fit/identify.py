"""High-level identification: runs on disk -> batch -> split by run -> fit -> saved model.

>>> model, report = identify(runs, ActuatorConfig(type="sts3215", friction="m1", delay=0.03))

Works for any plant: ``robot="pendulum"`` builds one bench pendulum per run from its labels
(mass, length, arm_mass); any other name or path is loaded with :func:`neuract.robot.load_robot`
and shared by every run.

With ``ckpt_dir`` the fit is resumable; the checkpoint records the run key
(:func:`fit_run_key`: actuator, joint and training options, plant, validation split and a
fingerprint of the data) and a rerun whose key differs is refused, naming what differs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from neuract.actuators import ActuatorConfig, build_actuator
from neuract.config import to_dict
from neuract.data import load_dataset
from neuract.data.dataset import is_dataset
from neuract.errors import ConfigError, SchemaError
from neuract.fit.batch import RunBatch, batch_from_trajectories, split_runs
from neuract.fit.trainer import (
    PlantFactory,
    SystemModel,
    TrainConfig,
    data_fingerprint,
    evaluate,
    fit,
    train_key,
)
from neuract.io.bam import iter_bam_logs
from neuract.robot import load_robot
from neuract.robot.pendulum import Pendulum
from neuract.sim.simulate import JointParams, JointParamsConfig


def load_runs(path: str | os.PathLike, limit: int = 0) -> list[Any]:
    """Trajectories from a neuract dataset directory (``meta/info.json``), a directory of BAM
    JSON logs, a BAM log tarball, or one BAM JSON file."""
    import warnings

    p = Path(path)
    if is_dataset(p):  # one lacking its meta/info.json is refused as such, not read as logs
        ds = load_dataset(p)
        n = len(ds) if limit <= 0 else min(limit, len(ds))
        return [ds[i] for i in range(n)]
    if not p.exists():
        raise SchemaError(f"--data {str(p)!r}: no such file or directory; expected a dataset "
                          "directory (meta/info.json), BAM logs (*.json) or a .tgz of them")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = list(iter_bam_logs(p, limit=limit or None))
    for w in caught[:1]:  # one summary line, not one per run
        warnings.warn(str(w.message), w.category, stacklevel=2)
    return runs


def load_batch(path: str | os.PathLike, limit: int = 0, duration: float = 0.0
               ) -> tuple[list[Any], RunBatch]:
    """(runs, batch) of :func:`load_runs`: the runs on their common grid (step: 1 / the first
    run's rate; per-run median supply voltage), at most ``duration`` s of each (0: whole
    runs). What ``neuract fit --data`` reads, and the benchmarks."""
    runs = load_runs(path, limit)
    return runs, batch_from_trajectories(runs, duration=duration or None)


def plant_factory(robot: str = "pendulum", dtype: torch.dtype = torch.float64,
                  arm_mass: float | None = None) -> PlantFactory:
    """A function labels -> plant for the rollout (see module docstring). arm_mass: the
    pendulum's arm mass [kg] for runs whose labels give none (default: the K-Scale bench arm
    of the run's length)."""
    if robot == "pendulum":

        return lambda labels: Pendulum.from_meta(labels, dtype=dtype, arm_mass=arm_mass)
    if arm_mass is not None:
        raise ConfigError(f"arm_mass {arm_mass!r} applies to the bench pendulum (robot "
                          f"'pendulum'), not to robot {robot!r}")
    model = load_robot(robot, dtype=dtype)
    return lambda labels: model


def build_model(actuator: ActuatorConfig, joints: JointParamsConfig, n_dof: int,
                dtype: torch.dtype = torch.float64) -> SystemModel:
    return SystemModel(build_actuator(actuator, n_dof), JointParams(n_dof, joints)).to(dtype)


def split_batch(batch: RunBatch, val_fraction: float, seed: int
                ) -> tuple[RunBatch, RunBatch | None, list[int], list[int]]:
    tr, va = split_runs(len(batch), val_fraction, seed)
    return batch.select(tr), (batch.select(va) if va else None), tr, va


def fit_run_key(batch: RunBatch, actuator: ActuatorConfig, joints: JointParamsConfig,
                train: TrainConfig, robot: str, val_fraction: float, **extra: Any
                ) -> dict[str, Any]:
    """What a resumed fit must share with the run that wrote its checkpoint: every option
    that changes the result (model, training, data selection in ``extra``) and a fingerprint
    of the whole data set (:func:`~neuract.fit.trainer.data_fingerprint`). Leaves out what
    does not (paths, threads, checkpoint cadence); the data path too, as the fingerprint
    identifies the data wherever it lies. A robot given as a file path is keyed by its
    absolute path (``./arm.xml`` and ``/abs/arm.xml`` are the same robot)."""

    if robot and Path(robot).exists():
        robot = str(Path(robot).resolve())
    return {"actuator": to_dict(actuator), "joints": to_dict(joints), "robot": robot,
            "val_fraction": val_fraction, **extra, "train": train_key(train),
            "data": data_fingerprint(batch)}


def _structure(model: SystemModel) -> str:
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(f"{k}{tuple(v.shape)};".encode())
    return h.hexdigest()[:16]


def identify(runs: Sequence[Any] | RunBatch, actuator: ActuatorConfig | None = None,
             joints: JointParamsConfig | None = None, train: TrainConfig | None = None,
             robot: str = "pendulum", val_fraction: float = 0.1,
             ckpt_dir: str | Path | None = None, log=None,
             model: SystemModel | None = None, run_key: dict[str, Any] | None = None,
             resume_hint: str | None = None, restart_hint: str | None = None,
             arm_mass: float | None = None, progress=None,
             indices: tuple[Sequence[int], Sequence[int]] | None = None
             ) -> tuple[SystemModel, dict[str, Any]]:
    """Fit an actuator + joint parameters to recorded runs; returns (model, report).

    run_key: stored with the checkpoints in ``ckpt_dir`` and compared on resume (default
    :func:`fit_run_key` of these arguments); resume_hint / restart_hint complete the error
    that refuses a checkpoint of another run (see :func:`~neuract.fit.trainer.fit`).
    arm_mass: a pendulum's arm mass [kg] where the runs' labels give none (see
    :func:`plant_factory`). progress: ``progress(iteration, total, info)`` after each training
    iteration (see :func:`~neuract.fit.trainer.fit`). indices: the (training, validation)
    run indices (default: a random split by run of all runs, ``val_fraction``, ``train.seed``;
    :func:`neuract.fit.recipe.fit_model` passes them with the test runs left out).
    """
    train = train or TrainConfig()
    actuator = actuator or ActuatorConfig()
    joints = joints or JointParamsConfig()
    batch = runs if isinstance(runs, RunBatch) else batch_from_trajectories(runs)
    n_dof = batch.q.shape[-1]
    given = model is not None
    if model is None:  # a network's initial weights from the seed, as the rest of the fit
        torch.manual_seed(train.seed)
        model = build_model(actuator, joints, n_dof)
    if ckpt_dir is not None and run_key is None:
        run_key = fit_run_key(batch, actuator, joints, train, robot, val_fraction,
                              **({} if arm_mass is None else {"arm_mass": arm_mass}))
        if given:  # a caller's model: its configs may not describe it, its tensors do
            run_key["model"] = _structure(model)
    if indices is None:
        tr, va, tr_idx, va_idx = split_batch(batch, val_fraction, train.seed)
    else:
        tr_idx, va_idx = list(indices[0]), list(indices[1])
        tr, va = batch.select(tr_idx), (batch.select(va_idx) if va_idx else None)
    pf = plant_factory(robot, arm_mass=arm_mass)
    report = fit(model, pf, tr, va, train, ckpt_dir=ckpt_dir, log=log, run_key=run_key,
                 resume_hint=resume_hint, restart_hint=restart_hint, progress=progress)
    train_mae, _ = evaluate(model, pf, tr, train)
    report.update(
        train_mae_rad=train_mae,
        val_mae_rad=(evaluate(model, pf, va, train)[0] if va is not None else None),
        n_train_runs=len(tr_idx), n_val_runs=len(va_idx),
        val_runs=[batch.names[i] for i in va_idx],
        parameters=model.physical_parameters(),
    )
    return model, report
