"""High-level identification: runs on disk -> batch -> split by run -> fit -> saved model.

>>> model, report = identify(runs, ActuatorConfig(type="sts3215", friction="m1", delay=0.03))

Works for any plant: ``robot="pendulum"`` builds one bench pendulum per run from its labels
(mass, length, arm_mass); any other name or path is loaded with :func:`neuract.robot.load_robot`
and shared by every run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from neuract.actuators import ActuatorConfig, build_actuator
from neuract.errors import ConfigError, SchemaError
from neuract.fit.batch import RunBatch, batch_from_trajectories, split_runs
from neuract.fit.simulate import JointParams, JointParamsConfig
from neuract.fit.trainer import PlantFactory, SystemModel, TrainConfig, evaluate, fit


def load_runs(path: str | os.PathLike, limit: int = 0) -> list[Any]:
    """Trajectories from a neuract dataset directory (``meta/info.json``), a directory of BAM
    JSON logs, a BAM log tarball, or one BAM JSON file."""
    import warnings

    p = Path(path)
    if (p / "meta" / "info.json").is_file():
        from neuract.data import load_dataset

        ds = load_dataset(p)
        n = len(ds) if limit <= 0 else min(limit, len(ds))
        return [ds[i] for i in range(n)]
    if not p.exists():
        raise SchemaError(f"--data {str(p)!r}: no such file or directory; expected a dataset "
                          "directory (meta/info.json), BAM logs (*.json) or a .tgz of them")
    from neuract.io.bam import iter_bam_logs

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = list(iter_bam_logs(p, limit=limit or None))
    for w in caught[:1]:  # one summary line, not one per run
        warnings.warn(str(w.message), w.category, stacklevel=2)
    return runs


def plant_factory(robot: str = "pendulum", dtype: torch.dtype = torch.float64) -> PlantFactory:
    """A function labels -> plant for the rollout (see module docstring)."""
    if robot == "pendulum":
        from neuract.robot.pendulum import Pendulum

        return lambda labels: Pendulum.from_meta(labels, dtype=dtype)
    try:
        from neuract.robot import load_robot
    except ImportError as exc:  # pragma: no cover - the robot core ships with neuract
        raise ConfigError(f"robot {robot!r} needs neuract.robot: {exc}") from None
    model = load_robot(robot, dtype=dtype)
    return lambda labels: model


def build_model(actuator: ActuatorConfig, joints: JointParamsConfig, n_dof: int,
                dtype: torch.dtype = torch.float64) -> SystemModel:
    return SystemModel(build_actuator(actuator, n_dof), JointParams(n_dof, joints)).to(dtype)


def split_batch(batch: RunBatch, val_fraction: float, seed: int
                ) -> tuple[RunBatch, RunBatch | None, list[int], list[int]]:
    tr, va = split_runs(len(batch), val_fraction, seed)
    return batch.select(tr), (batch.select(va) if va else None), tr, va


def identify(runs: Sequence[Any] | RunBatch, actuator: ActuatorConfig | None = None,
             joints: JointParamsConfig | None = None, train: TrainConfig | None = None,
             robot: str = "pendulum", val_fraction: float = 0.1,
             ckpt_dir: str | Path | None = None, log=None,
             model: SystemModel | None = None) -> tuple[SystemModel, dict[str, Any]]:
    """Fit an actuator + joint parameters to recorded runs; returns (model, report)."""
    train = train or TrainConfig()
    batch = runs if isinstance(runs, RunBatch) else batch_from_trajectories(runs)
    n_dof = batch.q.shape[-1]
    if model is None:
        model = build_model(actuator or ActuatorConfig(), joints or JointParamsConfig(), n_dof)
    tr, va, tr_idx, va_idx = split_batch(batch, val_fraction, train.seed)
    pf = plant_factory(robot)
    report = fit(model, pf, tr, va, train, ckpt_dir=ckpt_dir, log=log)
    train_mae, _ = evaluate(model, pf, tr, train)
    report.update(
        train_mae_rad=train_mae,
        val_mae_rad=(evaluate(model, pf, va, train)[0] if va is not None else None),
        n_train_runs=len(tr_idx), n_val_runs=len(va_idx),
        val_runs=[batch.names[i] for i in va_idx],
        parameters=model.physical_parameters(),
    )
    return model, report
