"""``neuract export --format mjcf``: a fitted parametric servo (a ``neuract fit`` output) written
into a copy of the robot's MJCF as MuJoCo's own joint and actuator attributes.

    neuract export --format mjcf --checkpoint runs/so101_fit --out runs/export/so101.xml \\
        [--robot so101|omx|FILE.xml] [--firmware-kp 16] [--voltage 12.1]

What each servo parameter becomes, and what has no MuJoCo form, is derived in
:mod:`neuract.sim.mujoco_form`; the copy is written by :mod:`neuract.robot.mjcf_edit` (asset
paths made absolute, so it loads from anywhere). The file opens with an XML comment that
records the checkpoint, the values and every approximation; the verb reports the same.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

from neuract.actuators import SERVO_TYPES, ServoActuator
from neuract.atomic import write_text
from neuract.config import from_dict
from neuract.errors import CheckpointError, ConfigError
from neuract.fit import saved
from neuract.fit.verb import FitConfig
from neuract.robot import load_robot
from neuract.robot.bundled import BUNDLED_ROBOTS, bundled_path
from neuract.robot.mjcf_edit import edit_mjcf
from neuract.sim.mujoco_form import MujocoForm, mujoco_form

MARKER = "Written by neuract export (format mjcf)"
"""first line of the comment an exported file opens with (``--overwrite`` replaces only such
a file)"""


def read_fit(ckpt: Path) -> FitConfig:
    """The resolved config of a ``neuract fit`` output, refusing anything else (naming what it
    is and which formats it exports to)."""
    path = Path(ckpt) / "config.json"
    if not path.is_file() or not (Path(ckpt) / "model.safetensors").is_file():
        raise CheckpointError(f"--checkpoint {str(ckpt)!r}: no config.json + model.safetensors; "
                              "--format mjcf takes a neuract fit output directory")
    try:
        info = json.loads(path.read_text())
    except ValueError as exc:
        raise CheckpointError(f"{str(path)!r} is not valid JSON: {exc}") from None
    if info.get("kind") == "neuralactuator":
        raise ConfigError(f"--checkpoint {str(ckpt)!r} is a NeuralActuator checkpoint, a "
                          "network with no MuJoCo form; it exports to --format onnx or aot. "
                          "--format mjcf takes a parametric servo fitted by neuract fit")
    if info.get("type") != "FitConfig":
        raise ConfigError(f"--checkpoint {str(ckpt)!r} is not a neuract fit output (config "
                          f"type {info.get('type')!r}); --format mjcf takes a parametric servo "
                          "fitted by neuract fit")
    try:
        cfg = from_dict(FitConfig, info["config"])
    except (ConfigError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{str(path)!r}: invalid fit config: {exc}") from None
    a = cfg.actuator
    if a.type not in SERVO_TYPES or a.residual != "none":
        what = (f"a neural actuator (--actuator.type {a.type})" if a.type not in SERVO_TYPES
                else f"a servo with a neural residual (--actuator.residual {a.residual})")
        raise ConfigError(f"--checkpoint {str(ckpt)!r} holds {what}, an ActuatorNet with no "
                          "MuJoCo form; --format mjcf accepts a parametric servo fit "
                          f"(--actuator.type {' | '.join(SERVO_TYPES)} without a residual)")
    return cfg


def _robot_file(robot: str) -> Path:
    if robot in BUNDLED_ROBOTS:
        return bundled_path(robot)
    path = Path(robot).expanduser()
    if not path.is_file():
        raise ConfigError(f"--robot {robot!r}: accepted: a bundled robot "
                          f"({', '.join(sorted(BUNDLED_ROBOTS))}) or an MJCF file path")
    return path


def load_fitted(ckpt: Path, robot: str | None = None) -> tuple[Any, FitConfig, list, list]:
    """(model, fit config, joint names, base armature) of a fit output: the servo and joint
    parameters, the joints it was fitted on (the fit's robot's, in order) and the armature
    that robot's file adds (neuract's plant includes it). ``robot``: the arm to take joints
    from where the fit ran on the bench pendulum."""
    cfg = read_fit(ckpt)  # what --format mjcf refuses, named
    fm = saved.load_fit(ckpt)
    model, n = fm.system, fm.n_dof
    if not isinstance(model.actuator, ServoActuator):  # read_fit refused the others
        raise ConfigError(f"--checkpoint {str(ckpt)!r}: not a parametric servo")
    source = cfg.robot if cfg.robot != "pendulum" else robot
    if source is None:
        raise ConfigError(f"--checkpoint {str(ckpt)!r} was fitted on the bench pendulum "
                          "(--robot pendulum); pass --robot (so101, omx or an MJCF file) to "
                          "name the arm to export to")
    plant = load_robot(source)
    names = list(plant.joint_names)
    if len(names) < n:
        raise ConfigError(f"--robot {source!r} has {len(names)} joints {names}; the "
                          f"checkpoint has {n}")
    base = ([0.0] * n if cfg.robot == "pendulum"
            else [float(x) for x in plant.armature[:n].tolist()])
    return model, cfg, names[:n], base


def _comment(ckpt: Path, src: Path, form: MujocoForm) -> str:
    lines = [MARKER,
             f"checkpoint: {Path(ckpt).resolve()}", f"robot description: {src.resolve()}",
             f"firmware kp {form.firmware_kp:g}, supply {form.voltage:g} V",
             "Derivation (neuract.sim.mujoco_form): actuator kp = kt V / R * kp_fw * g, "
             "kv = kt V / R * kd_fw * g, forcerange = +-kt V / R * max_duty (stall), joint "
             "damping = kt^2/R (back-EMF) + viscous friction + fitted damping, frictionloss = "
             "Coulomb friction + fitted frictionloss, armature = file's + fitted, joint ref = "
             "-(fitted encoder offset) so qpos and ctrl read encoder angles.",
             "joint: kp kv forcerange armature damping frictionloss ref delay"]
    for name, v in form.joints.items():
        lines.append(f"  {name}: {v.kp:.6g} {v.kv:.6g} {v.forcerange:.6g} {v.armature:.6g} "
                     f"{v.damping:.6g} {v.frictionloss:.6g} {0.0 - v.offset:.6g} {v.delay:.6g}")
    lines.append("Approximated or left out:" if form.approximations else
                 "Nothing approximated: this servo has an exact MuJoCo form (up to the "
                 "integrator).")
    lines += [f"  - {a}" for a in form.approximations]
    return "\n".join(lines)


def _check_dest(dest: Path, overwrite: bool, ckpt: Path) -> None:
    if dest.suffix.lower() != ".xml":
        raise ConfigError(f"--out {str(dest)!r}: expected a file name ending in .xml")
    if Path(os.path.realpath(dest)) in Path(os.path.realpath(ckpt)).parents or \
            os.path.realpath(dest).startswith(os.path.realpath(ckpt) + os.sep):
        raise ConfigError(f"--out {str(dest)!r} lies inside --checkpoint {str(ckpt)!r}; "
                          "choose another path")
    if not os.path.lexists(dest):
        return
    if dest.is_symlink() or not dest.is_file():
        raise ConfigError(f"--out {str(dest)!r} exists and is not a plain file; remove it or "
                          "choose another path")
    if not overwrite:
        raise ConfigError(f"--out {str(dest)!r} already exists; pass --overwrite to replace "
                          "it (only an MJCF file neuract export wrote is replaced)")
    with open(dest, errors="replace") as f:
        head = f.read(200)
    if MARKER not in head:
        raise ConfigError(f"--out {str(dest)!r} is not an MJCF file neuract export wrote (it "
                          f"does not open with {MARKER!r}); --overwrite replaces only those: "
                          "choose another path")


def export_mjcf(ckpt: Path, dest: Path, robot: str | None = None,
                firmware_kp: float | None = None, voltage: float | None = None,
                overwrite: bool = False) -> dict[str, Any]:
    """Write ``dest``; returns the report (values per joint, approximations)."""
    for name, v in (("--firmware-kp", firmware_kp), ("--voltage", voltage)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ConfigError(f"{name} {v!r}; accepted: a number > 0 (default: the "
                              "checkpoint servo's configured value)")
    dest = Path(dest)
    _check_dest(dest, overwrite, ckpt)
    model, cfg, names, base = load_fitted(ckpt, robot)
    src = _robot_file(robot if robot is not None else cfg.robot)
    form = mujoco_form(model.actuator, model.joints, names, base, firmware_kp, voltage)
    if firmware_kp is None and "kp" in cfg.train.label_inputs:
        form.approximations.append(
            f"firmware kp: the servo's configured {form.firmware_kp:g}; the fit fed each run's "
            "kp label where the runs carried one (give --firmware-kp for the deployed gain)")
    if voltage is None and cfg.train.use_voltage:
        form.approximations.append(
            f"supply: the servo's configured {form.voltage:g} V; the fit used each run's "
            "logged supply (give --voltage for the deployed one)")
    values = {n: {"kp": v.kp, "kv": v.kv, "forcerange": v.forcerange, "armature": v.armature,
                  "damping": v.damping, "frictionloss": v.frictionloss, "ref": -v.offset,
                  "delay": v.delay} for n, v in form.joints.items()}
    xml, actuators = edit_mjcf(src, values, _comment(ckpt, src, form))
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_text(dest, xml)
    return {"format": "mjcf", "mjcf": str(dest), "robot": str(src), "actuators": actuators,
            "firmware_kp": form.firmware_kp, "voltage": form.voltage,
            "joints": {n: dataclasses.asdict(v) for n, v in form.joints.items()},
            "approximations": list(form.approximations)}


def run(cfg) -> dict[str, Any]:
    """The verb's mjcf branch (``cfg``: :class:`neuract.pipeline.export_verb.ExportConfig`)."""
    if cfg.quantize != "none":
        raise ConfigError(f"--quantize {cfg.quantize!r} applies to onnx / aot; --format mjcf "
                          "writes MuJoCo attributes (accepted: none)")
    dest = Path(cfg.out) if cfg.out is not None else Path("runs/export/servo.xml")
    out = export_mjcf(Path(cfg.checkpoint), dest, getattr(cfg, "robot", None),
                      getattr(cfg, "firmware_kp", None), getattr(cfg, "voltage", None),
                      cfg.overwrite)
    if not cfg.quiet:
        print(f"wrote {dest}: {len(out['joints'])} joint(s) of {out['robot']} as MuJoCo "
              f"position actuators (firmware kp {out['firmware_kp']:g}, "
              f"{out['voltage']:g} V)")
        for n, v in out["joints"].items():
            print(f"  {n}: kp {v['kp']:.4g} kv {v['kv']:.4g} forcerange {v['forcerange']:.4g}"
                  f" armature {v['armature']:.4g} damping {v['damping']:.4g} frictionloss "
                  f"{v['frictionloss']:.4g}")
        for a in out["approximations"]:
            print(f"  approximated: {a}")
    return out


__all__ = ["MARKER", "export_mjcf", "load_fitted", "read_fit", "run"]
