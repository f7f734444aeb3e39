"""Write a copy of a robot's MJCF with given joint and position-actuator values, loadable by
plain ``mujoco.MjModel.from_xml_path`` from any directory.

The copy is MuJoCo's own rendering of the parsed description (``MjSpec.to_xml``; included
files are inlined, comments are not kept), with:

- every relative asset file (meshes, textures, height fields, skins) made absolute, resolved
  the way MuJoCo resolves it against the source file's folder and its ``meshdir`` /
  ``texturedir`` (so the copy can be written anywhere);
- per named joint: ``armature``, ``damping``, ``frictionloss`` and optionally ``ref`` (the
  joint and control ranges move with it, so that the same physical limits hold);
- per named joint, one position actuator (MuJoCo's affine general form: ``gainprm = kp``,
  ``biasprm = (0, -kp, -kv)``, unit gear, ``forcerange``, optional command ``delay`` with a
  history of ``ceil(delay / timestep) + 2`` samples, linearly interpolated): the
  joint's existing joint-transmission actuators are replaced by it (the first one's name and
  control range are kept), or it is added under the joint's name.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path

import mujoco
import numpy as np

from neuract.errors import ConfigError, RobotModelError

JOINT_KEYS = ("armature", "damping", "frictionloss", "kp", "kv", "forcerange")
"""what each joint's values must hold (optional: ``ref`` [rad], ``delay`` [s])"""


def _resolve(src_dir: Path, subdir: str, file: str) -> str:
    if not file or os.path.isabs(file):
        return file
    for d in (subdir, ""):
        base = Path(d) if os.path.isabs(d) else src_dir / d
        cand = (base / file).resolve()
        if cand.exists():
            return str(cand)
    base = Path(subdir) if os.path.isabs(subdir) else src_dir / subdir
    return str((base / file).resolve())  # missing: compile names it


def absolute_assets(spec: mujoco.MjSpec, src: Path) -> None:
    """Rewrite every relative asset file of ``spec`` (parsed from ``src``) as absolute."""
    src_dir = src.resolve().parent
    for items, sub in ((spec.meshes, spec.meshdir), (spec.skins, spec.meshdir),
                       (spec.hfields, spec.meshdir), (spec.textures, spec.texturedir)):
        for item in items:
            item.file = _resolve(src_dir, sub, item.file)
    for item in spec.textures:  # cube / skybox textures may name six files
        cube = list(getattr(item, "cubefiles", []) or [])
        if any(cube):
            item.cubefiles = [_resolve(src_dir, spec.texturedir, f) for f in cube]
    spec.meshdir = ""
    spec.texturedir = ""


def _joint(spec: mujoco.MjSpec, name: str, v: Mapping[str, float]) -> None:
    j = spec.joint(name)
    j.armature = float(v["armature"])
    damping = np.array(j.damping, dtype=float).reshape(-1)
    damping[:] = 0.0
    damping[0] = float(v["damping"])
    j.damping = damping
    j.frictionloss = float(v["frictionloss"])
    ref = float(v.get("ref", 0.0))
    if ref:
        j.ref = ref
        if j.limited != mujoco.mjtLimited.mjLIMITED_FALSE and j.range[0] < j.range[1]:
            j.range = [j.range[0] + ref, j.range[1] + ref]


def _set_position(act, v: Mapping[str, float], ref: float, timestep: float) -> None:
    kp, kv = float(v["kp"]), float(v["kv"])
    act.trntype = mujoco.mjtTrn.mjTRN_JOINT
    act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
    act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
    act.dyntype = mujoco.mjtDyn.mjDYN_NONE
    act.gainprm = [kp] + [0.0] * (len(act.gainprm) - 1)
    act.biasprm = [0.0, -kp, -kv] + [0.0] * (len(act.biasprm) - 3)
    act.gear = [1.0, 0, 0, 0, 0, 0]
    act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.forcerange = [-float(v["forcerange"]), float(v["forcerange"])]
    delay = float(v.get("delay", 0.0))
    act.delay = delay
    if delay > 0:  # MuJoCo silently shortens a delay its history cannot hold: size it
        act.nsample = math.ceil(delay / timestep) + 2
        act.interp = 1  # linear
    if ref and act.ctrllimited != mujoco.mjtLimited.mjLIMITED_FALSE \
            and act.ctrlrange[0] < act.ctrlrange[1]:
        act.ctrlrange = [act.ctrlrange[0] + ref, act.ctrlrange[1] + ref]


def _actuators(spec: mujoco.MjSpec, joint: str, v: Mapping[str, float]) -> str:
    """Replace the joint's actuators by one position actuator; returns its name."""
    mine = [a for a in spec.actuators
            if a.trntype == mujoco.mjtTrn.mjTRN_JOINT and a.target == joint]
    ref = float(v.get("ref", 0.0))
    if mine:
        for extra in mine[1:]:
            spec.delete(extra)
        _set_position(mine[0], v, ref, spec.option.timestep)
        return mine[0].name
    act = spec.add_actuator()
    taken = {a.name for a in spec.actuators}
    act.name = joint if joint not in taken else f"{joint}_position"
    act.target = joint
    act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
    _set_position(act, v, 0.0, spec.option.timestep)
    return act.name


def edit_mjcf(src: str | os.PathLike, values: Mapping[str, Mapping[str, float]],
              comment: str = "") -> tuple[str, dict[str, str]]:
    """(xml, {joint: actuator name}): the MJCF text of a copy of ``src`` with ``values`` per
    joint (module docstring), preceded by ``comment`` as an XML comment. Refuses
    (:class:`ConfigError`) joints ``src`` lacks, naming them; checks that the copy compiles."""
    src = Path(src)
    try:
        spec = mujoco.MjSpec.from_file(str(src))
    except ValueError as exc:
        raise RobotModelError(f"cannot parse robot description {src}: {exc}") from None
    missing = [j for j in values if spec.joint(j) is None]
    if missing:
        have = [j.name for j in spec.joints if j.name]
        raise ConfigError(f"robot description {str(src)!r} lacks the joint(s) {missing} the "
                          f"checkpoint names; its joints: {have}. Accepted: a description of "
                          "the arm the checkpoint was fitted on (--robot)")
    for name, v in values.items():
        lacking = [k for k in JOINT_KEYS if k not in v]
        if lacking:
            raise ConfigError(f"values for joint {name!r} lack {lacking}; accepted: "
                              f"{list(JOINT_KEYS)} (+ ref, delay)")
    absolute_assets(spec, src)
    names = {}
    for name, v in values.items():
        _joint(spec, name, v)
        names[name] = _actuators(spec, name, v)
    try:
        spec.compile()
        xml = spec.to_xml()
        mujoco.MjModel.from_xml_string(xml)
    except ValueError as exc:
        raise RobotModelError(f"the edited copy of {src} does not compile in MuJoCo: {exc}"
                              ) from None
    if comment:
        text = re.sub(r"--(?=\w)", "", comment).replace("--", "- -")  # XML: no "--"
        xml = f"<!--\n{text}\n-->\n{xml}"
    return xml, names


__all__ = ["JOINT_KEYS", "absolute_assets", "edit_mjcf"]
