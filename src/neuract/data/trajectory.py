"""``Trajectory``: one validated episode of telemetry in SI units, plus its metadata.

>>> traj["q"]            # (T, n_joints) joint positions [rad]
>>> traj.meta.labels     # payload mass, task, split, firmware gains, ...

Construction validates everything once (known channel names, shapes, finite values, strictly
increasing time) so that downstream code never re-checks. Arrays are stored read-only; use
:meth:`Trajectory.replace` to derive a modified copy.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuract.data.schema import CHANNELS, expected_shape, numpy_dtype
from neuract.errors import SchemaError


@dataclass(frozen=True)
class TrajectoryMeta:
    """Metadata of one episode.

    robot: robot name (bundled name such as ``so101``, ``pendulum``, or a description path).
    joint_names: names of the ``n_joints`` columns of every per-joint channel.
    source: file (or ``archive.tgz::member``) the episode was read from.
    rate_hz: nominal sample rate [Hz]; by default 1 / median sample spacing.
    name: episode name, unique inside a dataset.
    labels: JSON-serialisable episode labels (task, split, payload_mass_kg, kp, ...).
    counts: repair counters (dropped_samples, masked_samples, ...).
    units: channel -> unit of every channel present (filled in by :class:`Trajectory`).
    """

    robot: str
    joint_names: tuple[str, ...]
    source: str = ""
    rate_hz: float | None = None
    name: str = ""
    labels: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["joint_names"] = list(self.joint_names)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrajectoryMeta:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise SchemaError(
                f"unknown trajectory metadata field(s) {sorted(unknown)}; accepted: {sorted(known)}"
            )
        d = dict(d)
        d["joint_names"] = tuple(d.get("joint_names", ()))
        return cls(**d)


def _json_clean(obj: Any, where: str) -> Any:
    """Labels as plain JSON types (so that a save/load round trip is exact)."""
    if isinstance(obj, Mapping):
        return {str(k): _json_clean(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_clean(v, where) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        raise SchemaError(f"label {where!r} is {obj}; labels must be finite numbers")
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise SchemaError(
        f"label {where!r} has type {type(obj).__name__}; accepted: "
        "str, int, float, bool, None, lists and dicts of these"
    )


class Trajectory:
    """One episode: channels (name -> array, SI units) and :class:`TrajectoryMeta`.

    Required channels: ``t`` (T,) [s], strictly increasing, and ``q`` (T, n_joints) [rad].
    Every other channel is optional; see :mod:`neuract.data.schema` for names, shapes, units.
    """

    __slots__ = ("_channels", "meta")

    def __init__(self, channels: Mapping[str, Any], meta: TrajectoryMeta) -> None:
        src = meta.source or meta.name or "<trajectory>"
        for name in channels:
            if name not in CHANNELS:
                raise SchemaError(
                    f"{src}: unknown channel {name!r}; accepted channels: {', '.join(CHANNELS)}"
                )
        for req in ("t", "q"):
            if req not in channels:
                raise SchemaError(
                    f"{src}: required channel {req!r} is missing "
                    f"(present: {', '.join(channels) or 'none'})"
                )
        joint_names = tuple(str(j) for j in meta.joint_names)
        if len(set(joint_names)) != len(joint_names):
            raise SchemaError(f"{src}: joint names {list(joint_names)} are not unique")
        n_joints = len(joint_names)
        t = np.asarray(channels["t"])
        if t.ndim != 1 or t.shape[0] < 1:
            raise SchemaError(f"{src}: channel 't' has shape {t.shape}; expected (T,), T >= 1")
        n = t.shape[0]
        arrays: dict[str, np.ndarray] = {}
        for name in CHANNELS:  # canonical order
            if name not in channels:
                continue
            arr = np.asarray(channels[name])
            shape = expected_shape(name, n, n_joints)
            if arr.shape != shape:
                what = f" ({n_joints} joints: {list(joint_names)})" if arr.ndim == 2 else ""
                raise SchemaError(
                    f"{src}: channel {name!r} has shape {arr.shape}; expected {shape}{what}"
                )
            dtype = numpy_dtype(name)
            if dtype is np.float64:
                if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
                    raise SchemaError(
                        f"{src}: channel {name!r} has dtype {arr.dtype}; expected real numbers"
                    )
                _check_finite(arr.astype(np.float64), name, joint_names, src)
            elif dtype is np.bool_ and arr.dtype != np.bool_:
                if not np.isin(arr, (0, 1)).all():
                    raise SchemaError(f"{src}: channel {name!r} must be boolean (0/1)")
            out = np.array(arr, dtype=dtype, copy=True)
            out.setflags(write=False)
            arrays[name] = out
        check_time(arrays["t"], src)
        rate = meta.rate_hz
        if rate is None and n >= 2:
            rate = float(1.0 / np.median(np.diff(arrays["t"])))
        if rate is not None and not (math.isfinite(rate) and rate > 0):
            raise SchemaError(f"{src}: rate_hz is {rate}; expected a positive finite number")
        self._channels = arrays
        self.meta = dataclasses.replace(
            meta,
            joint_names=joint_names,
            rate_hz=None if rate is None else float(rate),
            labels=_json_clean(dict(meta.labels), "labels"),
            counts={str(k): int(v) for k, v in meta.counts.items()},
            units={k: CHANNELS[k].unit for k in arrays},
        )

    # -- mapping-like access -------------------------------------------------------------
    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self._channels[name]
        except KeyError:
            raise KeyError(
                f"channel {name!r} not in trajectory {self.meta.name!r}; "
                f"present: {', '.join(self._channels)}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._channels

    def __iter__(self) -> Iterator[str]:
        return iter(self._channels)

    def get(self, name: str, default: Any = None) -> Any:
        return self._channels.get(name, default)

    @property
    def channels(self) -> tuple[str, ...]:
        return tuple(self._channels)

    def __len__(self) -> int:
        return int(self._channels["t"].shape[0])

    @property
    def n_samples(self) -> int:
        return len(self)

    @property
    def n_joints(self) -> int:
        return len(self.meta.joint_names)

    @property
    def duration(self) -> float:
        """Time span t[-1] - t[0] [s]."""
        t = self._channels["t"]
        return float(t[-1] - t[0])

    # -- derived copies ------------------------------------------------------------------
    def replace(
        self,
        channels: Mapping[str, Any] | None = None,
        drop: tuple[str, ...] = (),
        **meta_changes: Any,
    ) -> Trajectory:
        """A new trajectory with some channels replaced/added/dropped or metadata changed."""
        new = {k: v for k, v in self._channels.items() if k not in drop}
        new.update(channels or {})
        meta = dataclasses.replace(self.meta, **meta_changes)
        return Trajectory(new, meta)

    def slice(self, start: int, stop: int) -> Trajectory:
        """Samples ``start:stop`` as a new trajectory (same metadata)."""
        return Trajectory({k: v[start:stop] for k, v in self._channels.items()}, self.meta)

    def equals(self, other: Trajectory) -> bool:
        """Exact equality of metadata and every channel (dtype, shape and values)."""
        if not isinstance(other, Trajectory) or self.meta != other.meta:
            return False
        if self.channels != other.channels:
            return False
        return all(
            a.dtype == other[k].dtype and np.array_equal(a, other[k])
            for k, a in self._channels.items()
        )

    def __repr__(self) -> str:
        return (
            f"Trajectory(name={self.meta.name!r}, robot={self.meta.robot!r}, "
            f"T={len(self)}, n_joints={self.n_joints}, channels={list(self._channels)})"
        )


def _check_finite(arr: np.ndarray, name: str, joint_names: tuple[str, ...], src: str) -> None:
    bad = ~np.isfinite(arr)
    if not bad.any():
        return
    idx = np.argwhere(bad)[0]
    row = int(idx[0])
    col = ""
    if arr.ndim == 2:
        j = int(idx[1])
        label = joint_names[j] if CHANNELS[name].kind == "joint" else "xyz"[j]
        col = f" column {j} ({label})"
    raise SchemaError(
        f"{src}: channel {name!r}{col}, sample {row}: value {arr[tuple(idx)]} "
        f"({int(bad.sum())} non-finite values in total); expected finite numbers "
        "(repair explicitly in the reader, e.g. mask and interpolate)"
    )


def check_time(t, where: str, name: str = "t") -> None:
    """Raise :class:`SchemaError` unless sample times ``t`` (..., T) [s] strictly increase.

    The message names ``where`` (file or argument), the channel, the first offending sample,
    its value and the previous one, and how many samples are affected. NaN counts as a break.
    """
    t = np.asarray(t, dtype=np.float64)
    if t.ndim == 0 or t.shape[-1] < 2:
        return
    d = np.diff(t, axis=-1)
    bad = np.argwhere(~(d > 0))
    if bad.size:
        j = tuple(int(x) for x in bad[0])
        i = j[:-1] + (j[-1] + 1,)
        kind = ("duplicated" if d[j] == 0 else "decreasing" if d[j] < 0 else "non-finite")
        at = i[-1] if t.ndim == 1 else i
        raise SchemaError(
            f"{where}: channel {name!r}, sample {at}: {kind} timestamp {float(t[i])!r} after "
            f"{float(t[j])!r} ({len(bad)} such samples); expected strictly increasing time"
        )


def labels_json(traj: Trajectory) -> str:
    """Canonical JSON text of a trajectory's labels (for grouping and hashing)."""
    return json.dumps(traj.meta.labels, sort_keys=True)


__all__ = ["Trajectory", "TrajectoryMeta", "check_time", "labels_json"]
