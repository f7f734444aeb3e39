"""Users' own CSV / Parquet logs, described by a column mapping.

A :class:`ColumnMapping` says which column holds time, which columns feed which channel and
joint, and the unit of every column (see :mod:`neuract.io.units` for the unit table)::

    {
      "robot": "so101",
      "joints": ["shoulder_pan", "shoulder_lift"],
      "time": {"column": "stamp_ms", "unit": "ms"},
      "columns": [
        {"column": "pos_a", "channel": "q", "joint": "shoulder_pan", "unit": "deg"},
        {"column": "pos_b", "channel": "q", "joint": "shoulder_lift", "unit": "deg"},
        {"column": "cur_a", "channel": "current", "joint": "shoulder_pan", "unit": "mA"},
        {"column": "cur_b", "channel": "current", "joint": "shoulder_lift", "unit": "mA"},
        {"column": "fz", "channel": "ee_force", "joint": "z", "unit": "N"}
      ],
      "force_sentinel": -999
    }

Per-joint channels must map every joint; ``ee_force`` axes are ``x``, ``y``, ``z`` (unmapped
axes are 0). With ``force_sentinel``, rows where a mapped force axis equals it get
``ee_force_mask`` False (and the force 0). Boolean channels take unit ``bool`` (0/1 or
true/false cells).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neuract.atomic import atomic_path
from neuract.data.plausibility import check_trajectory
from neuract.data.schema import CHANNELS
from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.errors import ConfigError, SchemaError
from neuract.io.common import check_joint_count
from neuract.io.table import Table, read_table
from neuract.io.units import check_unit, to_si


@dataclass(frozen=True)
class ColumnSpec:
    """One file column: which channel (and joint or force axis) it feeds, in which unit."""

    column: str
    channel: str
    unit: str
    joint: str | None = None


@dataclass(frozen=True)
class ColumnMapping:
    """How to read a user's table (see module doc)."""

    joints: tuple[str, ...]
    columns: tuple[ColumnSpec, ...]
    time_column: str = "t"
    time_unit: str = "s"
    robot: str = "custom"
    force_sentinel: float | None = None
    labels: dict[str, Any] = field(default_factory=dict)

    def validate(self, where: str = "column mapping") -> None:
        """Check channel names, joints, units and coverage; raise naming the entry."""
        check_unit(self.time_unit, "t", f"{where}: time column {self.time_column!r}")
        if not self.joints or len(set(self.joints)) != len(self.joints):
            raise ConfigError(
                f"{where}: joints {list(self.joints)} must be a non-empty list of unique names"
            )
        seen: dict[tuple[str, str | None], str] = {}
        for spec in self.columns:
            at = f"{where}: column {spec.column!r}"
            if spec.channel not in CHANNELS or spec.channel == "t":
                ok = [c for c in CHANNELS if c != "t"]
                raise SchemaError(
                    f"{at}: unknown channel {spec.channel!r}; accepted: {', '.join(ok)}"
                )
            check_unit(spec.unit, spec.channel, at)
            kind = CHANNELS[spec.channel].kind
            allowed = (
                self.joints if kind == "joint" else ("x", "y", "z") if kind == "vec3" else (None,)
            )
            if spec.joint not in allowed:
                raise ConfigError(
                    f"{at}: channel {spec.channel!r} needs joint in "
                    f"{list(allowed)}; got {spec.joint!r}"
                )
            key = (spec.channel, spec.joint)
            if key in seen:
                raise ConfigError(
                    f"{at}: {spec.channel}[{spec.joint}] is already fed by column {seen[key]!r}"
                )
            seen[key] = spec.column
        for ch in {s.channel for s in self.columns}:
            if CHANNELS[ch].kind == "joint":
                have = {s.joint for s in self.columns if s.channel == ch}
                missing = [j for j in self.joints if j not in have]
                if missing:
                    raise ConfigError(
                        f"{where}: channel {ch!r} maps joints {sorted(have)} "
                        f"but not {missing}; map every joint or none"
                    )
        if "q" not in {s.channel for s in self.columns}:
            raise ConfigError(f"{where}: no column feeds channel 'q' (joint positions)")

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "column mapping") -> ColumnMapping:
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: expected a JSON object with keys robot, joints, time, "
                              f"columns; got a {type(d).__name__}")
        known = {"robot", "joints", "time", "columns", "force_sentinel", "labels"}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {sorted(unknown)}; accepted: {sorted(known)}"
            )
        joints = d.get("joints", [])
        if not (isinstance(joints, list) and all(isinstance(j, str) for j in joints)):
            raise ConfigError(f"{where}: joints = {joints!r}; expected a list of joint names, "
                              'e.g. ["shoulder_pan", "shoulder_lift"]')
        for key, kind in (("time", dict), ("columns", list), ("labels", dict)):
            if key in d and not isinstance(d[key], kind):
                raise ConfigError(f"{where}: {key} = {d[key]!r}; expected a JSON "
                                  + ("object" if kind is dict else "list"))
        robot = d.get("robot", "custom")
        if not (isinstance(robot, str) and robot):
            raise ConfigError(f"{where}: robot = {robot!r}; expected a robot name (a string), "
                              'e.g. "so101"')
        sentinel = d.get("force_sentinel")
        if sentinel is not None and not (
            isinstance(sentinel, int | float) and not isinstance(sentinel, bool)
            and np.isfinite(sentinel)
        ):
            raise ConfigError(f"{where}: force_sentinel = {sentinel!r}; expected a finite "
                              "number (e.g. -999, not \"-999\") or null")
        time = d.get("time", {})
        time_keys = {"column", "unit"}
        unknown = set(time) - time_keys
        if unknown:
            raise ConfigError(
                f"{where}: time: unknown key(s) {sorted(unknown)}; accepted: {sorted(time_keys)}"
            )
        for key in sorted(time_keys):
            if key in time and not (isinstance(time[key], str) and time[key]):
                raise ConfigError(f"{where}: time.{key} = {time[key]!r}; expected a "
                                  + ("column name" if key == "column" else "unit name, e.g. "
                                     '"s" or "ms"'))
        cols = []
        spec_keys = {"column": "a column name", "channel": "a channel name",
                     "unit": "a unit name", "joint": "a joint name or axis, or null"}
        for i, c in enumerate(d.get("columns", [])):
            if not isinstance(c, dict):
                raise ConfigError(f"{where}: columns[{i}] = {c!r}; expected a JSON object "
                                  "with keys column, channel, unit, joint")
            for key, what in spec_keys.items():
                v = c.get(key)
                if key in c and not ((isinstance(v, str) and v) or (key == "joint" and v is None)):
                    raise ConfigError(f"{where}: columns[{i}].{key} = {v!r}; expected {what}")
            try:
                cols.append(ColumnSpec(**c))
            except TypeError as exc:
                raise ConfigError(
                    f"{where}: columns[{i}] {c!r}: {exc}; keys: column, channel, unit, joint"
                ) from None
        m = cls(
            joints=tuple(d.get("joints", ())),
            columns=tuple(cols),
            time_column=time.get("column", "t"),
            time_unit=time.get("unit", "s"),
            robot=robot,
            force_sentinel=sentinel,
            labels=dict(d.get("labels", {})),
        )
        m.validate(where)
        return m

    def to_dict(self) -> dict[str, Any]:
        return {
            "robot": self.robot,
            "joints": list(self.joints),
            "time": {"column": self.time_column, "unit": self.time_unit},
            "columns": [
                {"column": s.column, "channel": s.channel, "unit": s.unit, "joint": s.joint}
                for s in self.columns
            ],
            "force_sentinel": self.force_sentinel,
            "labels": self.labels,
        }


def load_mapping(path: str | os.PathLike) -> ColumnMapping:
    """Read a :class:`ColumnMapping` from a JSON file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: column mapping file not found")
    try:
        d = json.loads(p.read_bytes())
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a text file (not UTF-8); expected a JSON column "
                          "mapping") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    return ColumnMapping.from_dict(d, where=str(p))


def read_mapped(
    path: str | os.PathLike,
    mapping: ColumnMapping,
    robot: str | None = None,
    name: str | None = None,
) -> Trajectory:
    """Read a CSV/Parquet file through ``mapping`` into a Trajectory in SI units."""
    mapping.validate()
    robot = robot or mapping.robot
    table = read_table(path)
    src = table.path
    table.require(
        [mapping.time_column] + [s.column for s in mapping.columns],
        why="named in the column mapping",
    )
    check_joint_count(robot, len(mapping.joints), src)
    n, J = len(table), len(mapping.joints)
    ch: dict[str, np.ndarray] = {
        "t": table.time(mapping.time_column, to_si(1.0, mapping.time_unit).item())
    }
    jidx = {j: i for i, j in enumerate(mapping.joints)}
    for spec in mapping.columns:
        c = CHANNELS[spec.channel]
        if c.dtype == "bool":
            val = table.bools(spec.column)
        else:
            val = to_si(table.finite(spec.column), spec.unit, spec.channel)
        if c.kind == "joint":
            arr = ch.setdefault(spec.channel, np.zeros((n, J), dtype=val.dtype))
            arr[:, jidx[spec.joint]] = val
        elif c.kind == "vec3":
            arr = ch.setdefault(spec.channel, np.zeros((n, 3)))
            arr[:, "xyz".index(spec.joint)] = val
        else:
            ch[spec.channel] = val
    if "ee_force" in ch and mapping.force_sentinel is not None:
        axes = ["xyz".index(s.joint) for s in mapping.columns if s.channel == "ee_force"]
        raw = np.stack(
            [table.columns[s.column] for s in mapping.columns if s.channel == "ee_force"], axis=1
        )
        have = (raw != mapping.force_sentinel).all(axis=1)
        f = ch["ee_force"]
        f[np.ix_(~have, axes)] = 0.0
        if "ee_force_mask" not in ch:
            ch["ee_force_mask"] = have
    if "condition" in ch:
        ch["condition"] = ch["condition"].astype(np.int8)
    meta = TrajectoryMeta(
        robot=robot,
        joint_names=mapping.joints,
        source=src,
        name=name or Path(src).stem,
        labels=dict(mapping.labels),
    )
    traj = Trajectory(ch, meta)
    specs = _specs(mapping)
    declared: dict[str, list[str]] = {"t": [mapping.time_unit]}
    for chn in traj.channels:
        if chn != "t":
            n_cols = traj[chn].size // len(traj)
            declared[chn] = [specs[(chn, c)].unit if (chn, c) in specs else CHANNELS[chn].unit
                             for c in range(n_cols)]
    check_trajectory(traj, where=_where(table, mapping, specs), fix=_fix(mapping, specs),
                     declared=declared)
    return traj


def _specs(mapping: ColumnMapping) -> dict[tuple[str, int], ColumnSpec]:
    """(channel, column index in the channel) -> the mapping entry that feeds it."""
    out = {}
    for s in mapping.columns:
        kind = CHANNELS[s.channel].kind
        j = (mapping.joints.index(s.joint) if kind == "joint"
             else "xyz".index(s.joint) if kind == "vec3" else 0)
        out[(s.channel, j)] = s
    return out


def _where(table: Table, mapping: ColumnMapping, specs: dict[tuple[str, int], ColumnSpec]):
    def where(ch: str, j: int | None, i: int | None) -> str:
        spec = specs.get((ch, j or 0))
        col = mapping.time_column if ch == "t" else spec.column if spec else None
        if i is None:
            return f"{table.path}" + (f", column {col!r}" if col else f", channel {ch!r}")
        return table.where(i, col)

    return where


def _fix(mapping: ColumnMapping, specs: dict[tuple[str, int], ColumnSpec]):
    def fix(ch: str, j: int | None, unit: str) -> str | None:
        if ch == "t":
            return (f'declare "time": {{"column": "{mapping.time_column}", "unit": "{unit}"}} '
                    "in the column mapping (--mapping)")
        spec = specs.get((ch, j or 0))
        if spec is None:
            return None
        if not unit:
            return (f"leave column {spec.column!r} out of the column mapping (--mapping): it "
                    "holds no measurement")
        return (f'declare "unit": "{unit}" for column {spec.column!r} in the column mapping '
                f'(--mapping; now "{spec.unit}")')

    return fix


def canonical_mapping(traj: Trajectory) -> ColumnMapping:
    """The mapping that reads back what :func:`write_csv` writes for ``traj``."""
    cols = []
    for chn in traj.channels:
        if chn == "t":
            continue
        spec = CHANNELS[chn]
        keys = (
            traj.meta.joint_names
            if spec.kind == "joint"
            else ("x", "y", "z")
            if spec.kind == "vec3"
            else (None,)
        )
        unit = "1" if chn == "condition" else spec.unit
        for k in keys:
            col = chn if k is None else f"{chn}/{k}"
            cols.append(ColumnSpec(col, chn, unit, k))
    return ColumnMapping(
        joints=traj.meta.joint_names,
        columns=tuple(cols),
        time_column="t",
        time_unit="s",
        robot=traj.meta.robot,
        labels=dict(traj.meta.labels),
    )


def write_csv(traj: Trajectory, path: str | os.PathLike) -> None:
    """Write a trajectory as a CSV in SI units (float repr round-trips exactly)."""

    mapping = canonical_mapping(traj)
    header = ["t"] + [s.column for s in mapping.columns]
    cols = [traj["t"]]
    for s in mapping.columns:
        arr = traj[s.channel]
        if arr.ndim == 2:
            i = (
                traj.meta.joint_names.index(s.joint)
                if CHANNELS[s.channel].kind == "joint"
                else "xyz".index(s.joint)
            )
            arr = arr[:, i]
        cols.append(arr)
    lines = [",".join(header)]
    for r in range(len(traj)):
        lines.append(
            ",".join(str(int(c[r])) if c.dtype != np.float64 else repr(float(c[r])) for c in cols)
        )
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n")


__all__ = [
    "ColumnMapping",
    "ColumnSpec",
    "canonical_mapping",
    "load_mapping",
    "read_mapped",
    "write_csv",
]
