"""The baselines an experiment fits, saved as checkpoints that load again.

``neuract evaluate`` (and ``demo``) write each baseline it scores in simulator mode under
``RUN/checkpoints/baseline_<name>/``:

* the fitted actuator families (the parametric servos, the MLP and GRU actuator nets) as a
  ``neuract fit`` output: ``config.json`` (a :class:`~neuract.fit.verb.FitConfig` naming the
  actuator, joint parameters, training options and the arm), ``model.safetensors`` and
  ``report.json`` (the baseline's name and fitted parameters), so that
  :func:`neuract.fit.saved.load_fit`, ``neuract simulate``, ``neuract score``, ``neuract
  export`` and the environments read them as any fit;
* MuJoCo's default position servo as ``config.json`` of kind ``mujoco_servo``: the arm (a
  bundled name or an MJCF path), its joints, the physics step and every joint's servo
  parameters (:data:`~neuract.pipeline.baselines.SERVO_PARAMS`).

``neuract evaluate --checkpoints RUN/checkpoints`` uses the baselines found there instead of
fitting them again (:func:`load_baselines`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuract.atomic import atomic_dir, is_output, write_json
from neuract.config import save_resolved
from neuract.errors import CheckpointError, ConfigError
from neuract.fit.checkpoint import save_weights
from neuract.fit.saved import FittedModel, is_fit_output, load_fit
from neuract.fit.verb import FitConfig
from neuract.pipeline import baselines as bl
from neuract.robot.bundled import BUNDLED_ROBOTS, bundled_path
from neuract.robot.match import arm_of

MUJOCO_KIND = "mujoco_servo"
MUJOCO_FORMAT = 1
PREFIX = "baseline_"
MUJOCO_DEST = {"marker": "config.json", "kind": lambda j: j.get("kind") == MUJOCO_KIND,
               "allowed": lambda name: name == "config.json"}
FIT_DEST = {"marker": "config.json", "kind": lambda j: j.get("type") == "FitConfig",
            "allowed": lambda name: name in ("config.json", "model.safetensors", "report.json")}


def checkpoint_name(name: str) -> str:
    """The directory of baseline ``name``: ``baseline_`` and the name in lower case, runs of
    other characters as ``_`` (``parametric sts3215+stribeck`` ->
    ``baseline_parametric_sts3215_stribeck``)."""
    return PREFIX + (re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "model")


@dataclass
class MujocoServo:
    """A saved MuJoCo position-servo baseline."""

    name: str
    robot: str
    """bundled robot name or MJCF path"""
    joint_names: tuple[str, ...]
    physics_dt: float
    params: dict[str, dict[str, Any]]
    path: Path

    @property
    def xml(self) -> str:
        return str(bundled_path(self.robot)) if self.robot in BUNDLED_ROBOTS else self.robot

    def simulator(self):
        """The protocol simulator (:func:`~neuract.pipeline.baselines.mujoco_servo_simulator`)
        with the saved parameters."""
        return bl.mujoco_servo_simulator(self.xml, self.joint_names, self.physics_dt,
                                         self.params)


def save_fitted(dest: Path, name: str, model, actuator, joints, train, robot: str,
                data: str, extra: dict[str, Any] | None = None) -> Path:
    """Write a fitted actuator family (a SystemModel) as a ``neuract fit`` output."""
    cfg = FitConfig(data=data, out=str(dest), actuator=actuator, joints=joints, train=train,
                    robot=robot)
    with atomic_dir(dest, overwrite=True, **FIT_DEST) as tmp:
        save_resolved(cfg, tmp)
        save_weights(model, tmp / "model.safetensors", {"actuator": actuator.type,
                                                        "baseline": name})
        write_json(tmp / "report.json", {"baseline": name, "source": "neuract evaluate",
                                         "parameters": model.physical_parameters(),
                                         **(extra or {})})
    return dest


def save_mujoco(dest: Path, name: str, robot: str, xml: str, joint_names, physics_dt: float
                = 0.002, params: dict[str, dict[str, Any]] | None = None) -> Path:
    """Write the MuJoCo servo baseline of ``xml`` (``robot``: how it is loaded again, a
    bundled name or the path) for ``joint_names``; params: its servo parameters (default:
    the MJCF's)."""
    info = {"kind": MUJOCO_KIND, "format": MUJOCO_FORMAT, "name": name, "robot": robot,
            "joint_names": list(joint_names), "physics_dt": physics_dt,
            "params": params or bl.mujoco_servo_params(xml, joint_names)}
    with atomic_dir(dest, overwrite=True, **MUJOCO_DEST) as tmp:
        write_json(tmp / "config.json", info)
    return dest


def save_baselines(out_dir: str | Path, setup, fitted: dict[str, Any], configs: dict[str, Any],
                   train, data: str, given: dict[str, Any] | None = None) -> dict[str, str]:
    """Every simulator-mode baseline of an experiment under ``out_dir/checkpoints/``: the
    MuJoCo servo of ``setup`` (where it has one) and each fitted model (name -> SystemModel,
    its ActuatorConfig in ``configs``), fitted with TrainConfig ``train`` on ``data``; a
    baseline among ``given`` (loaded from an earlier run) is written with its own options
    and parameters. Returns name -> checkpoint directory relative to ``out_dir``."""
    root = Path(out_dir) / "checkpoints"
    robot = setup.model_path or setup.name
    given = given or {}
    out: dict[str, str] = {}
    name = "MuJoCo default servo"
    saved = given.get(name)
    if isinstance(saved, MujocoServo):
        save_mujoco(root / checkpoint_name(name), name, saved.robot, saved.xml,
                    saved.joint_names, saved.physics_dt, saved.params)
        out[name] = f"checkpoints/{checkpoint_name(name)}"
    elif setup.mujoco_xml:
        xml = str(setup.mujoco_xml)
        kept = robot if robot in BUNDLED_ROBOTS and str(bundled_path(robot)) == xml else xml
        save_mujoco(root / checkpoint_name(name), name, kept, xml,
                    setup.robot64.joint_names)
        out[name] = f"checkpoints/{checkpoint_name(name)}"
    for name, model in fitted.items():
        old = given.get(name)
        if isinstance(old, FittedModel):
            c = old.config
            save_fitted(root / checkpoint_name(name), name, model, c.actuator, c.joints,
                        c.train, c.robot, c.data)
        else:
            save_fitted(root / checkpoint_name(name), name, model, configs[name],
                        bl.fit_joints(), train, robot, data)
        out[name] = f"checkpoints/{checkpoint_name(name)}"
    return out


def is_mujoco_servo(path: str | Path) -> bool:
    return is_output(Path(path), "config.json", lambda j: j.get("kind") == MUJOCO_KIND)


def load_mujoco(path: str | Path) -> MujocoServo:
    """Read a saved MuJoCo servo baseline (CheckpointError naming the file and field)."""
    p = Path(path) / "config.json"
    try:
        info = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{str(p)!r} unreadable: {e}") from None
    if info.get("kind") != MUJOCO_KIND:
        raise CheckpointError(f"{str(p)!r} has kind={info.get('kind')!r}; expected "
                              f"{MUJOCO_KIND!r}")
    if info.get("format") != MUJOCO_FORMAT:
        raise CheckpointError(f"{str(p)!r} has format={info.get('format')!r}; this version "
                              f"reads format {MUJOCO_FORMAT}")
    try:
        joints = tuple(str(j) for j in info["joint_names"])
        params = {j: {k: info["params"][j][k] for k in bl.SERVO_PARAMS} for j in joints}
        servo = MujocoServo(str(info.get("name", "MuJoCo default servo")), str(info["robot"]),
                            joints, float(info["physics_dt"]), params, Path(path))
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{str(p)!r}: field {e} missing or invalid; a MuJoCo servo "
                              "baseline names robot, joint_names, physics_dt and params per "
                              "joint") from None
    return servo


def baseline_name(path: Path) -> str:
    """The evaluate name of a saved baseline (its report.json / config.json says it), else
    the directory's name."""
    for f, key in (("report.json", "baseline"), ("config.json", "name")):
        try:
            name = json.loads((path / f).read_text()).get(key)
        except (OSError, ValueError, AttributeError):
            name = None
        if isinstance(name, str) and name:
            return name
    return path.name


def load_baselines(path: Path | None, arm: str | None = None) -> dict[str, Any]:
    """name -> :class:`~neuract.fit.saved.FittedModel` or :class:`MujocoServo` of every
    ``baseline_*`` checkpoint in ``path`` (a run directory, its ``checkpoints/``, or one
    baseline directory). arm: the data's arm; a baseline of another arm is refused
    (ConfigError naming both)."""
    if path is None:
        return {}
    path = Path(path)
    if (path / "checkpoints").is_dir():
        path = path / "checkpoints"
    dirs = ([path] if path.name.startswith(PREFIX) and (path / "config.json").is_file()
            else sorted(p for p in path.glob(PREFIX + "*") if p.is_dir()))
    out: dict[str, Any] = {}
    for d in dirs:
        if is_fit_output(d):
            m: FittedModel | MujocoServo = load_fit(d)
            robot = m.robot
        elif is_mujoco_servo(d):
            m = load_mujoco(d)
            robot = m.robot
        else:
            raise CheckpointError(f"--checkpoints {str(d)!r} is neither a fitted baseline (a fit "
                                  "output) nor a MuJoCo servo baseline (kind mujoco_servo)")
        if arm and robot in BUNDLED_ROBOTS and arm_of(robot) != arm_of(arm):
            raise ConfigError(f"--checkpoints {str(d)!r} is a baseline of {robot!r}; the data "
                              f"are {arm!r} episodes: give baselines fitted on {arm}")
        out[baseline_name(d)] = m
    return out


__all__ = ["MUJOCO_KIND", "MujocoServo", "checkpoint_name", "is_mujoco_servo",
           "load_baselines", "load_mujoco", "save_baselines", "save_fitted", "save_mujoco"]
