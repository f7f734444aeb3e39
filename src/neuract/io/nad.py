"""NeuralActuator dataset (NAD) CSVs: OpenManipulator-X (44 columns) and SO-101 (46 columns).

Layout ``<group>/<task>[/<payload or variant>]/<split>/NNN.csv`` (e.g.
``so101/go_up_and_stay_still/500g/train/001.csv``, ``force_sensor/force_z_minus/test/001.csv``);
task, variant, payload mass, split and motor condition are inferred from the path.
Windows line endings are handled. Units (``nad/PROVENANCE.md``, ``nad/SOURCE_dataset_doc.md``):

=============================  ==========================  ===========================
NAD column                     OpenManipulator-X            SO-101 (raw STS3215)
=============================  ==========================  ===========================
timestamp                      s                            s
pos*, goal_pos* -> q, q_goal   rad                          rad
vel* -> qd                     rad/s                        steps/s, 4096 steps/rev
current* -> current [A]        mA                           counts, 6.5 mA per count
load* -> load [-1..1]          (absent)                     counts, 0.1 % duty, signed
pwm* -> pwm [-1..1]            counts, 885 = 100 % duty     (absent)
volts* -> voltage [V]          V                            decivolts (121 = 12.1 V)
temp* -> temperature [degC]    degC                         degC
force_x/y/z -> ee_force [N]    F/T sensor, -999 = none      payload weight on z, -999
=============================  ==========================  ===========================

End-effector force labels (``ee_force``, world/base frame, z up; the force the environment
exerts on the end effector): where all three axes are present (OMX F/T sensor tasks) they are
used as recorded; where only ``force_z`` is present it is a payload-weight label (payload
mass * g pointing down, e.g. -4.90 N for 500 g) and x, y are set to 0, which is exact for a
static weight; ``ee_force_mask`` is False where no label exists (-999; ``ee_force`` is 0
there). The weight label is cross-checked against the payload mass in the path (a mismatch
warns). ``contact`` is True where a weight label is present, or where an F/T reading exceeds
``CONTACT_THRESHOLD_N``. ``condition`` is 1 for ``*_degrade`` tasks, else 0.
The OMX ``aperture`` columns (derived from pos5) and the all-zero ``force_gripper_*`` columns
are not mapped.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from neuract.data.plausibility import check_trajectory
from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.errors import SchemaError
from neuract.io.common import check_joint_count
from neuract.io.registers import (
    dxl_pwm_to_fraction,
    mA_to_A,
    sts3215_current_to_A,
    sts3215_decivolts_to_V,
    sts3215_load_to_fraction,
    sts3215_steps_to_rad,
)
from neuract.io.table import Table, read_csv

G = 9.80665  # standard gravity [m/s^2]
NOMINAL_RATE_HZ = 60.0
"""NAD recording rate (about 58.8 Hz OpenManipulator-X, 62.3 Hz SO-101; ``nad/PROVENANCE.md``),
against which :mod:`neuract.data.plausibility` checks each file's recorded rate"""
SENTINEL = -999.0
CONTACT_THRESHOLD_N = 1.5
"""|F| above which an F/T reading counts as contact; the OMX sensor's no-contact readings
stay below ~1 N (noise and tare drift in ``force_z_minus_ref``-like segments)."""

OMX_JOINTS = ("joint1", "joint2", "joint3", "joint4", "gripper")
SO101_JOINTS = (
    "shoulder_pan",
    "shoulder_lift",
    "elbow_flex",
    "wrist_flex",
    "wrist_roll",
    "gripper",
)
SPLITS = ("train", "validation", "val", "test")


def _cols(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(1, n + 1)]


OMX_COLUMNS = [
    "timestamp",
    *_cols("pos", 5),
    "aperture",
    *_cols("goal_pos", 5),
    "goal_aperture",
    *_cols("current", 5),
    *_cols("vel", 5),
    *_cols("temp", 5),
    *_cols("pwm", 5),
    *_cols("volts", 5),
    "force_x",
    "force_y",
    "force_z",
    "force_gripper_x",
    "force_gripper_y",
    "force_gripper_z",
]
SO101_COLUMNS = [
    "timestamp",
    *_cols("pos", 6),
    *_cols("goal_pos", 6),
    *_cols("current", 6),
    *_cols("vel", 6),
    *_cols("load", 6),
    *_cols("temp", 6),
    *_cols("volts", 6),
    "force_x",
    "force_y",
    "force_z",
]

_PAYLOAD = re.compile(r"(?:^|_)(\d+)g$")


def payload_mass_kg(name: str) -> float | None:
    """Payload mass [kg] named in a task/variant folder: '500g' -> 0.5, 'empty' -> 0.0."""
    m = _PAYLOAD.search(name.removesuffix("_degrade"))
    if m:
        return int(m.group(1)) / 1000.0
    if name in ("empty",) or name.endswith(("_empty", "_no_force", "_empty_degrade")):
        return 0.0
    return None


def parse_nad_path(path: str | os.PathLike) -> dict[str, Any]:
    """Labels from ``<group>/<task>[/<variant>]/<split>/NNN.csv``."""
    p = Path(path)
    parts = p.parts
    episode = p.stem
    split = parts[-2] if len(parts) >= 2 and parts[-2] in SPLITS else None
    up = list(parts[:-2] if split else parts[:-1])
    variant = None
    if up and (_PAYLOAD.fullmatch(up[-1]) or up[-1] == "empty"):
        variant = up.pop()
    task = up.pop() if up else None
    group = up.pop() if up else None
    payload = payload_mass_kg(variant) if variant else (payload_mass_kg(task) if task else None)
    if group == "force_sensor":
        payload = None  # pushes, not payloads
    condition = "degraded" if task and task.endswith("_degrade") else "normal"
    return {
        "group": group,
        "task": task,
        "variant": variant,
        "split": split,
        "episode": episode,
        "payload_mass_kg": payload,
        "condition": condition,
    }


def detect_robot(table: Table) -> str:
    """``"omx"`` or ``"so101"`` from a NAD CSV header; SchemaError for any other header."""
    h = set(table.header)
    if "aperture" in h or "pwm1" in h:
        return "omx"
    if "load1" in h or "pos6" in h:
        return "so101"
    raise SchemaError(
        f"{table.path}: not a NAD CSV: expected the OpenManipulator-X (44 "
        f"columns, with 'aperture') or SO-101 (46 columns, with 'load1') header; "
        f"found {len(table.header)} columns: {table.header[:8]}..."
    )


def _stack(table: Table, prefix: str, n: int) -> np.ndarray:
    return np.stack([table.finite(c) for c in _cols(prefix, n)], axis=1)


def _forces(table: Table, labels: dict[str, Any]) -> dict[str, np.ndarray]:
    f = np.stack([table.finite(c) for c in ("force_x", "force_y", "force_z")], axis=1)
    have = f != SENTINEL
    full = have.all(axis=1)
    z_only = have[:, 2] & ~have[:, 0] & ~have[:, 1]
    mask = full | z_only
    force = np.where(full[:, None], f, 0.0)
    force[z_only, 2] = f[z_only, 2]
    partial = have.any(axis=1) & ~mask
    if partial.any():
        r = int(np.flatnonzero(partial)[0])
        warnings.warn(
            f"{table.where(r, 'force_x')}: force label with only some axes present "
            f"({int(partial.sum())} rows); treated as no label",
            stacklevel=3,
        )
    m = labels.get("payload_mass_kg")
    if z_only.any() and m:
        expect = -m * G
        off = np.abs(f[z_only, 2] - expect) > 0.02 * abs(expect) + 0.01
        if off.any():
            r = int(np.flatnonzero(z_only)[np.flatnonzero(off)[0]])
            warnings.warn(
                f"{table.where(r, 'force_z')}: weight label {f[r, 2]} N differs "
                f"from payload {m} kg * g = {expect:.3f} N",
                stacklevel=3,
            )
    contact = z_only | (full & (np.linalg.norm(force, axis=1) > CONTACT_THRESHOLD_N))
    return {"ee_force": force, "ee_force_mask": mask, "contact": contact}


def read_nad_csv(
    path: str | os.PathLike, robot: str | None = None, name: str | None = None
) -> Trajectory:
    """Read one NAD CSV as a Trajectory in SI units (see module doc)."""
    table = read_csv(path)
    kind = detect_robot(table)
    cols, joints = (OMX_COLUMNS, OMX_JOINTS) if kind == "omx" else (SO101_COLUMNS, SO101_JOINTS)
    table.require(cols, why=f"NAD {kind} layout, {len(cols)} columns")
    n = len(joints)
    robot = robot or kind
    check_joint_count(robot, n, table.path)
    labels = parse_nad_path(path)
    labels["nad_layout"] = kind
    ch: dict[str, np.ndarray] = {
        "t": table.time("timestamp"),
        "q": _stack(table, "pos", n),
        "q_goal": _stack(table, "goal_pos", n),
        "temperature": _stack(table, "temp", n),
    }
    if kind == "omx":
        ch["qd"] = _stack(table, "vel", n)
        ch["current"] = mA_to_A(_stack(table, "current", n))
        ch["pwm"] = dxl_pwm_to_fraction(_stack(table, "pwm", n))
        ch["voltage"] = _stack(table, "volts", n)
    else:
        ch["qd"] = sts3215_steps_to_rad(_stack(table, "vel", n))
        ch["current"] = sts3215_current_to_A(_stack(table, "current", n))
        ch["load"] = sts3215_load_to_fraction(_stack(table, "load", n))
        ch["voltage"] = sts3215_decivolts_to_V(_stack(table, "volts", n))
    ch.update(_forces(table, labels))
    ch["condition"] = np.full(
        len(table), 1 if labels["condition"] == "degraded" else 0, dtype=np.int8
    )
    if name is None:
        parts = [labels[k] for k in ("group", "task", "variant", "split") if labels[k]]
        name = "/".join([*parts, labels["episode"]])
    meta = TrajectoryMeta(
        robot=robot, joint_names=joints, source=str(path), name=name, labels=labels
    )
    traj = Trajectory(ch, meta)
    check_trajectory(traj, where=_where(table), fix=_fix, nominal_rate_hz=NOMINAL_RATE_HZ)
    return traj


_NAD_COLUMN = {"t": "timestamp", "q": "pos", "q_goal": "goal_pos", "qd": "vel",
               "current": "current", "pwm": "pwm", "load": "load", "voltage": "volts",
               "temperature": "temp", "ee_force": "force_"}


def _nad_column(ch: str, j: int | None) -> str | None:
    """The NAD column that feeds column ``j`` of channel ``ch`` (None: derived channels)."""
    base = _NAD_COLUMN.get(ch)
    if base is None or ch == "t":
        return base
    return f"{base}{'xyz'[j or 0]}" if ch == "ee_force" else f"{base}{(j or 0) + 1}"


def _where(table: Table):
    def where(ch: str, j: int | None, i: int | None) -> str:
        col = _nad_column(ch, j)
        if i is None:
            return f"{table.path}, column {col!r}"
        return table.where(i, col)

    return where


def _fix(ch: str, j: int | None, unit: str) -> str:
    col = _nad_column(ch, j)
    if not unit:
        return (f"a NAD CSV's {col!r} columns must hold the measured supply; repair the file, "
                "or read it with --format csv and a column mapping (--mapping) without them")
    declare = (f'"time": {{"column": "timestamp", "unit": "{unit}"}}' if ch == "t"
               else f'"unit": "{unit}" for it')
    return (f"NAD CSVs hold {col!r} in fixed units: convert the column, or read the file with "
            f"--format csv and a column mapping (--mapping) that declares {declare}")


def find_nad_files(root: str | os.PathLike) -> list[Path]:
    """All ``*.csv`` under ``root`` (or ``[root]`` for a file), sorted."""
    root = Path(root)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise SchemaError(f"{root}: no such file or directory")
    files = sorted(root.rglob("*.csv"))
    if not files:
        raise SchemaError(
            f"{root}: no *.csv files found (expected the NAD layout "
            "<group>/<task>[/<payload>]/<split>/NNN.csv)"
        )
    return files


def iter_nad(
    root: str | os.PathLike, robot: str | None = None, limit: int | None = None
) -> Iterator[Trajectory]:
    """Trajectories of every NAD CSV under ``root``. Names are paths relative to ``root``."""
    root = Path(root)
    for i, f in enumerate(find_nad_files(root)):
        if limit is not None and i >= limit:
            return
        rel = f.relative_to(root).with_suffix("") if root.is_dir() else Path(f.stem)
        yield read_nad_csv(f, robot=robot, name=str(rel).replace(os.sep, "/"))


__all__ = [
    "CONTACT_THRESHOLD_N",
    "OMX_COLUMNS",
    "OMX_JOINTS",
    "SO101_COLUMNS",
    "SO101_JOINTS",
    "find_nad_files",
    "iter_nad",
    "parse_nad_path",
    "payload_mass_kg",
    "read_nad_csv",
]
