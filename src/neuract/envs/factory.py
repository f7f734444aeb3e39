"""``actuator=`` of an environment -> its backend (see :mod:`neuract.envs.backends`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neuract.actuators.base import Actuator
from neuract.envs.backends import (
    NOMINAL_SUPPLY_V,
    LearnedBackend,
    MujocoServoBackend,
    TwinBackend,
)
from neuract.envs.batch_model import replicate
from neuract.envs.tasks import RATE_HZ
from neuract.errors import CheckpointError, ConfigError
from neuract.sim.simulate import JointParams
from neuract.twin.generate import GenerateConfig
from neuract.twin.model import TwinModel

ACCEPTED = ("'mujoco' (the shipped model's position servo), 'twin' or 'twin:UNIT' (the twin's "
            "hidden servos), a neuract fit output directory, a simulator-mode NeuralActuator "
            "checkpoint directory, or an (Actuator, JointParams) pair")


def _substeps(cfg: GenerateConfig, substeps: int | None) -> int:
    if substeps is None:
        return max(1, round(cfg.sim.physics_hz / RATE_HZ[cfg.robot]))
    if not (isinstance(substeps, int) and substeps >= 1):
        raise ConfigError(f"substeps = {substeps!r}; expected an integer >= 1 physics steps "
                          "per telemetry period")
    return substeps


def load_learned(path: str | Path, robot: str, n: int) -> tuple[Actuator, JointParams, str]:
    """The actuator and joint parameters saved at ``path`` (a ``neuract fit`` output or a
    simulator-mode NeuralActuator checkpoint), checked against ``robot``'s ``n`` joints."""
    from neuract.fit.saved import is_fit_output, load_fit

    p = Path(path)
    if is_fit_output(p):
        fm = load_fit(p)
        fitted_on = Path(fm.robot).stem if fm.robot else ""
        if fitted_on not in (robot, f"{robot}_arm"):
            raise ConfigError(f"actuator {str(p)!r} was fitted on robot {fm.robot!r}; this "
                              f"environment is {robot!r} (fit it on {robot!r} data with "
                              f"--robot {robot})")
        if fm.n_dof != n:
            raise ConfigError(f"actuator {str(p)!r} has {fm.n_dof} joints; robot {robot!r} has "
                              f"{n}")
        return fm.system.actuator, fm.system.joints, "fit"
    cfg_path = p / "config.json"
    try:
        kind = json.loads(cfg_path.read_text()).get("kind")
    except (OSError, ValueError, AttributeError):
        kind = None
    if kind != "neuralactuator":
        raise CheckpointError(f"actuator {str(p)!r}: not a neuract fit output nor a "
                              f"NeuralActuator checkpoint; accepted: {ACCEPTED}")
    from neuract.neuralactuator import TransformerActuator

    act = TransformerActuator.from_checkpoint(p)
    if act.n_joints != n:
        raise ConfigError(f"actuator {str(p)!r} has {act.n_joints} joints; robot {robot!r} has "
                          f"{n}")
    return act, act.joints, "neuralactuator"


def build_backend(actuator: Any, tm: TwinModel, cfg: GenerateConfig, n_envs: int, unit: int,
                  substeps: int | None = None) -> tuple[Any, str, int]:
    """(backend, kind, unit) for ``actuator`` (see :data:`ACCEPTED`)."""
    robot, hz = cfg.robot, cfg.sim.physics_hz
    rate, sub, volt = RATE_HZ[robot], _substeps(cfg, substeps), NOMINAL_SUPPLY_V[robot]
    if isinstance(actuator, tuple) and len(actuator) == 2 and isinstance(actuator[0], Actuator):
        act, joints = actuator
        backend = LearnedBackend(_plant(cfg, n_envs, sub), tm, rate, sub, volt, act, joints)
        return _fixed(backend, cfg), "actuator", unit
    if isinstance(actuator, str) and actuator == "mujoco":
        bm = replicate(robot, hz, n_envs, shipped=True)
        return _fixed(MujocoServoBackend(bm, tm, rate, sub, volt), cfg), "mujoco", unit
    if isinstance(actuator, str) and (actuator == "twin" or actuator.startswith("twin:")):
        if actuator != "twin":
            text = actuator.split(":", 1)[1]
            if not text.isdigit():
                raise ConfigError(f"actuator {actuator!r}: the unit after 'twin:' must be an "
                                  "integer >= 0")
            unit = int(text)
        from neuract.twin.generate import ROBOT_SPECS

        return TwinBackend(tm, ROBOT_SPECS[robot](), cfg.sim, n_envs), "twin", unit
    if isinstance(actuator, (str, Path)) and Path(actuator).is_dir():
        act, joints, kind = load_learned(actuator, robot, tm.n)
        backend = LearnedBackend(_plant(cfg, n_envs, sub), tm, rate, sub, volt, act, joints)
        return _fixed(backend, cfg), kind, unit
    raise ConfigError(f"actuator {actuator!r}; accepted: {ACCEPTED}")


def _plant(cfg: GenerateConfig, n_envs: int, substeps: int):
    """All rows' arms in one model: the description's joint armature (as ``neuract fit``'s
    plant, :func:`neuract.robot.load_robot`), no passive joint forces (the actuator's joint
    parameters apply those) and no actuators."""
    bm = replicate(cfg.robot, cfg.sim.physics_hz, n_envs, shipped=True)
    bm.model.dof_damping[:] = 0.0
    bm.model.dof_frictionloss[:] = 0.0
    return bm


def _fixed(backend, cfg: GenerateConfig):
    """A fixed-rate backend's episode length: the telemetry periods in ``episode_s``."""
    backend.n_steps = int(cfg.sim.episode_s * RATE_HZ[cfg.robot]) - 1
    return backend


__all__ = ["ACCEPTED", "build_backend", "load_learned"]
