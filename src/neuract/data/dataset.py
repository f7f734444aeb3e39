"""A dataset on disk: one parquet file per episode plus JSON metadata.

Layout of a dataset directory::

    DIR/
      data/episode_000000.parquet   one row per sample; columns "t", "q/<joint>", ...,
                                    "ee_force/x", "ee_force_mask", ... (float64 / bool / int8)
      meta/info.json                format version, robot, joint names, channel schema and
                                    units, sample rates, totals, per-episode metadata
      meta/stats.json               per channel and element: mean, std, min, max, count
      config.json                   (optional) the resolved config of the run that wrote it

Statistics are over all samples of all episodes (``std`` with ddof=0, as numpy's default),
except ``ee_force``, whose statistics use only the samples where ``ee_force_mask`` is True;
``stats.json`` is strict JSON (a statistic that is not finite is written as null). Every
episode read is checked by :mod:`neuract.data.plausibility`.
Writing is atomic: the directory is assembled under a temporary name and renamed at the end,
so a failed write leaves nothing behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neuract.atomic import atomic_dir, write_json, write_text
from neuract.config import save_resolved
from neuract.data.plausibility import Fix, Where, check_trajectory
from neuract.data.schema import CHANNELS, FLOAT_CHANNELS, numpy_dtype
from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.errors import SchemaError

FORMAT = "neuract-dataset"
VERSION = 1


def _columns(channel: str, joint_names: Sequence[str]) -> list[str]:
    kind = CHANNELS[channel].kind
    if kind == "joint":
        return [f"{channel}/{j}" for j in joint_names]
    if kind == "vec3":
        return [f"{channel}/{a}" for a in "xyz"]
    return [channel]


def _to_table(traj: Trajectory) -> pa.Table:
    cols: dict[str, np.ndarray] = {}
    for ch in traj.channels:
        arr = traj[ch]
        names = _columns(ch, traj.meta.joint_names)
        if arr.ndim == 1:
            cols[names[0]] = arr
        else:
            for i, name in enumerate(names):
                cols[name] = np.ascontiguousarray(arr[:, i])
    return pa.table(cols)


DATASET_DEST = {"marker": "meta/info.json", "kind": lambda j: j.get("format") == FORMAT,
                "allowed": lambda name: name in ("meta", "data", "config.json")}
"""what makes a directory a neuract dataset (``--overwrite`` replaces only such a directory:
:func:`neuract.atomic.check_dest`)"""


def _from_table(
    table: pa.Table, meta: TrajectoryMeta, channels: Sequence[str], path: Path
) -> Trajectory:
    present = set(table.column_names)
    out: dict[str, np.ndarray] = {}
    for ch in channels:
        if ch not in CHANNELS:
            raise SchemaError(
                f"{path}: unknown channel {ch!r} in meta/info.json; accepted: {', '.join(CHANNELS)}"
            )
        names = _columns(ch, meta.joint_names)
        missing = [n for n in names if n not in present]
        if missing:
            raise SchemaError(f"{path}: missing column(s) {missing} for channel {ch!r}")
        try:
            cols = [table.column(n).to_numpy().astype(numpy_dtype(ch), copy=False)
                    for n in names]
        except (ValueError, TypeError, pa.ArrowException) as exc:
            raise SchemaError(f"{path}: channel {ch!r} does not hold numbers of type "
                              f"{numpy_dtype(ch)} ({exc})") from None
        out[ch] = cols[0] if CHANNELS[ch].kind in ("time", "scalar") else np.stack(cols, 1)
    return Trajectory(out, meta)


def _where(path: Path, tr: Trajectory) -> Where:
    """Names a value's place in an episode file: row and parquet column."""

    def where(ch: str, j: int | None, i: int | None) -> str:
        name = _columns(ch, tr.meta.joint_names)[j or 0]
        return f"{path}{'' if i is None else f' row {i}'}, column {name!r}"

    return where


def _refix(root: Path) -> Fix:
    """How a dataset's implausible values are fixed: at their source."""

    def fix(ch: str, j: int | None, unit: str) -> str:
        if not unit:
            return (f"the dataset {str(root)!r} holds no measurement in this column: ingest "
                    "its source again without it")
        return (f"the dataset {str(root)!r} was written from values in {unit}: ingest its "
                f"source again declaring that unit")

    return fix


def _finite_or_none(x: Any) -> Any:
    """``x`` (nested lists of floats) with every non-finite number replaced by None."""
    if isinstance(x, list):
        return [_finite_or_none(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def compute_stats(trajs: Iterable[Trajectory]) -> dict[str, dict[str, Any]]:
    """Per-channel statistics over all samples (see module doc).

    Returns ``{channel: {"mean": [...], "std": [...], "min": [...], "max": [...],
    "count": int}}`` with one list entry per element (joint / axis); scalar channels give
    one-element lists.
    """
    parts: dict[str, list[np.ndarray]] = {}
    for tr in trajs:
        for ch in tr.channels:
            if ch not in FLOAT_CHANNELS:
                continue
            arr = tr[ch].reshape(len(tr), -1)
            if ch == "ee_force" and "ee_force_mask" in tr:
                arr = arr[tr["ee_force_mask"]]
            parts.setdefault(ch, []).append(arr)
    stats: dict[str, dict[str, Any]] = {}
    for ch, chunks in parts.items():
        x = np.concatenate(chunks, axis=0)
        if x.shape[0] == 0:
            continue
        with np.errstate(over="ignore", invalid="ignore"):  # a sum past 1.8e308: None
            stats[ch] = {
                "mean": _finite_or_none(np.mean(x, axis=0).tolist()),
                "std": _finite_or_none(np.std(x, axis=0).tolist()),
                "min": np.min(x, axis=0).tolist(),
                "max": np.max(x, axis=0).tolist(),
                "count": int(x.shape[0]),
            }
    return stats


def _check_episodes(trajs: list[Trajectory], out: Path) -> TrajectoryMeta:
    """The first episode's meta, after checking that every item is a Trajectory of the same
    robot and joints under a name of its own."""
    if not trajs:
        raise SchemaError(f"no trajectories to write to {out}; expected at least one episode")
    first = trajs[0].meta
    names: set[str] = set()
    for i, tr in enumerate(trajs):
        if not isinstance(tr, Trajectory):
            raise SchemaError(f"item {i} is a {type(tr).__name__}; expected a Trajectory")
        if tr.meta.robot != first.robot or tr.meta.joint_names != first.joint_names:
            raise SchemaError(
                f"episode {i} ({tr.meta.source or tr.meta.name}) has robot "
                f"{tr.meta.robot!r} joints {list(tr.meta.joint_names)}; expected robot "
                f"{first.robot!r} joints {list(first.joint_names)} like episode 0"
            )
        if tr.meta.name in names:
            raise SchemaError(
                f"episode name {tr.meta.name!r} occurs twice; names must be unique within a dataset"
            )
        names.add(tr.meta.name)
    return first


def _info(trajs: list[Trajectory], first: TrajectoryMeta, episodes: list[dict[str, Any]],
          totals: dict[str, int], all_channels: list[str]) -> dict[str, Any]:
    """The content of ``meta/info.json``."""
    rates = [tr.meta.rate_hz for tr in trajs if tr.meta.rate_hz is not None]
    return {
        "format": FORMAT,
        "version": VERSION,
        "robot": first.robot,
        "joint_names": list(first.joint_names),
        "n_joints": len(first.joint_names),
        "n_episodes": len(trajs),
        "n_samples": int(sum(len(t) for t in trajs)),
        "duration_s": float(sum(t.duration for t in trajs)),
        "rates_hz": (
            {"min": min(rates), "median": float(np.median(rates)), "max": max(rates)}
            if rates
            else None
        ),
        "channels": {
            c: {
                "kind": CHANNELS[c].kind,
                "unit": CHANNELS[c].unit,
                "dtype": CHANNELS[c].dtype,
                "doc": CHANNELS[c].doc,
            }
            for c in all_channels
        },
        "units": {c: CHANNELS[c].unit for c in all_channels},
        "counts": totals,
        "episodes": episodes,
    }


def write_dataset(
    trajs: Iterable[Trajectory],
    out_dir: str | os.PathLike,
    overwrite: bool = False,
    config: Any = None,
) -> Path:
    """Write trajectories as a dataset directory (atomically); returns its path.

    All trajectories must share the robot and joint names. ``config``, if given, is a
    dataclass written as ``config.json`` (the resolved config of the producing run).
    """
    trajs = list(trajs)
    out = Path(out_dir)
    first = _check_episodes(trajs, out)
    episodes = []
    totals: dict[str, int] = {}
    all_channels: list[str] = []
    with atomic_dir(out, overwrite=overwrite, **DATASET_DEST) as tmp:
        (tmp / "data").mkdir()
        for i, tr in enumerate(trajs):
            rel = f"data/episode_{i:06d}.parquet"
            pq.write_table(_to_table(tr), tmp / rel)
            episodes.append(
                {
                    "index": i,
                    "file": rel,
                    "n_samples": len(tr),
                    "duration_s": tr.duration,
                    "channels": list(tr.channels),
                    "meta": tr.meta.to_dict(),
                }
            )
            for k, v in tr.meta.counts.items():
                totals[k] = totals.get(k, 0) + v
            all_channels += [c for c in tr.channels if c not in all_channels]
        all_channels = [c for c in CHANNELS if c in all_channels]
        write_json(tmp / "meta" / "info.json", _info(trajs, first, episodes, totals, all_channels))
        # strict JSON: a non-finite number would be written as NaN / Infinity, which JSON
        # does not have (compute_stats gives None where a statistic overflows)
        write_text(tmp / "meta" / "stats.json",
                   json.dumps(compute_stats(trajs), indent=2, allow_nan=False) + "\n")
        if config is not None:
            save_resolved(config, tmp)
    return out


def _dataset_parts(root: Path) -> list[str]:
    """What of a dataset's layout the directory ``root`` holds (besides meta/info.json)."""
    found = []
    data = root / "data"
    eps = sorted(data.glob("episode_*.parquet")) if data.is_dir() else []
    if eps:
        found.append(f"{eps[0].relative_to(root)}" + (f" and {len(eps) - 1} more episode "
                                                      "file(s)" if len(eps) > 1 else ""))
    if (root / "meta" / "stats.json").is_file():
        found.append("meta/stats.json")
    elif (root / "meta").is_dir():
        found.append("meta/")
    return found


def is_dataset(path: str | os.PathLike, option: str = "--data") -> bool:
    """Whether ``path`` is a dataset directory (it holds ``meta/info.json``). A directory that
    looks like one (episode files under ``data/``, a ``meta/`` folder) but lacks its
    ``meta/info.json`` is refused (:class:`SchemaError` naming what it holds and what is
    missing) rather than read as another format; anything else is not a dataset (False).
    ``option`` names ``path`` in the message (empty: the path alone)."""
    root = Path(path)
    info = root / "meta" / "info.json"
    if info.is_file():
        return True
    if not root.is_dir():
        return False
    found = _dataset_parts(root)
    if found:
        where = f"{option} {str(root)!r}" if option else str(root)
        raise SchemaError(f"{where} looks like a neuract dataset ({', '.join(found)}) but "
                          f"{info} is missing (it lists the episodes, their channels and the "
                          "joints): restore it, or write the dataset again (neuract ingest, "
                          "neuract twin)")
    return False


def require_channels(trajs: Sequence[Trajectory], channels: Sequence[str],
                     data: str | os.PathLike, needed_by: str, option: str = "--data") -> None:
    """Refuse (:class:`SchemaError`, one line) the first episode of ``trajs`` (read from
    ``data``, in its order) that lacks one of ``channels``, which ``needed_by`` reads: the
    message names the data, the episode (index, name, file), the missing channels and how to
    get them (velocities and accelerations: ``neuract ingest --derivatives``)."""
    for i, tr in enumerate(trajs):
        missing = [c for c in channels if c not in tr]
        if not missing:
            continue
        file = _episode_file(data, i, tr)
        ep = f"episode {i} ({tr.meta.name!r}" + (f", {file}" if file else "") + ")"
        has = ", ".join(tr.channels)
        s = "s" if len(missing) > 1 else ""
        head = (f"{option} {str(data)!r}: {ep} has no channel{s} {', '.join(missing)}, "
                f"required by {needed_by} (it has {has})")
        if set(missing) <= {"qd", "qdd"}:
            src = (f"neuract ingest {str(data)!r} --format neuract" if is_dataset(data, "")
                   else "neuract ingest SOURCE --format FORMAT")
            raise SchemaError(f"{head}; compute velocities and accelerations from q: {src} "
                              "--derivatives --out NEW_DATASET (with --resample-hz RATE where "
                              f"its time steps are not uniform), then pass {option} "
                              "NEW_DATASET")
        raise SchemaError(f"{head}; accepted: episodes that carry {', '.join(channels)}")


def _episode_file(data: str | os.PathLike, i: int, tr: Trajectory) -> str:
    """The file episode ``i`` (``tr``) of ``data`` was read from: its parquet file in a
    dataset, else the source its reader recorded (empty if none)."""
    try:
        if is_dataset(data, ""):
            ep = json.loads((Path(data) / "meta" / "info.json").read_text())["episodes"][i]
            if ep["meta"]["name"] == tr.meta.name:
                return str(Path(data) / ep["file"])
    except (OSError, ValueError, KeyError, IndexError, TypeError, SchemaError):
        pass
    return str(tr.meta.source or "")


class Dataset:
    """A dataset directory opened for reading; iterating yields :class:`Trajectory` objects.

    ``len(ds)`` episodes; ``ds[i]`` reads episode ``i`` from its parquet file; ``ds.info`` and
    ``ds.stats`` hold ``meta/info.json`` and ``meta/stats.json``.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        info_path = self.root / "meta" / "info.json"
        if not is_dataset(self.root, option=""):  # one that looks like it says what it lacks
            raise SchemaError(f"{self.root} is not a neuract dataset: {info_path} is missing")
        try:
            self.info: dict[str, Any] = json.loads(info_path.read_text())
        except json.JSONDecodeError as exc:
            raise SchemaError(
                f"{info_path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
        if self.info.get("format") != FORMAT or self.info.get("version") != VERSION:
            raise SchemaError(
                f"{info_path}: format {self.info.get('format')!r} version "
                f"{self.info.get('version')!r}; expected {FORMAT!r} version "
                f"{VERSION}"
            )
        self._check_joints(info_path)
        stats_path = self.root / "meta" / "stats.json"
        self.stats: dict[str, Any] = (
            json.loads(stats_path.read_text()) if stats_path.is_file() else {}
        )

    def _check_joints(self, info_path: Path) -> None:
        """Every episode names the dataset's joints, as many as ``n_joints`` says."""
        names = list(self.info.get("joint_names") or [])
        if self.info.get("n_joints", len(names)) != len(names):
            raise SchemaError(f"{info_path}: n_joints {self.info.get('n_joints')} but "
                              f"{len(names)} joint_names {names}")
        for i, ep in enumerate(self.info.get("episodes", [])):
            got = list((ep.get("meta") or {}).get("joint_names") or [])
            if got != names:
                raise SchemaError(f"{info_path}: episode {i} ({ep.get('file')}) names joints "
                                  f"{got}; the dataset's joint_names are {names}")

    @property
    def robot(self) -> str:
        return self.info["robot"]

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(self.info["joint_names"])

    @property
    def episodes(self) -> list[dict[str, Any]]:
        """Per-episode records of info.json (file, n_samples, duration_s, meta)."""
        return self.info["episodes"]

    def __len__(self) -> int:
        return len(self.info["episodes"])

    def __getitem__(self, i: int) -> Trajectory:
        eps = self.info["episodes"]
        if not -len(eps) <= i < len(eps):
            raise IndexError(f"episode {i} out of range for {len(eps)} episodes")
        ep = eps[i]
        path = self.root / ep["file"]
        if not path.is_file():
            raise SchemaError(f"{path}: episode file listed in meta/info.json is missing")
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            raise SchemaError(f"{path}: not a readable parquet file (empty, truncated or "
                              f"replaced?): {exc}") from None
        if table.num_rows != ep["n_samples"]:
            raise SchemaError(
                f"{path}: {table.num_rows} rows; meta/info.json says "
                f"{ep['n_samples']} (truncated or replaced file?)"
            )
        tr = _from_table(table, TrajectoryMeta.from_dict(ep["meta"]), ep["channels"], path)
        check_trajectory(tr, where=_where(path, tr), fix=_refix(self.root))
        return tr

    def __iter__(self) -> Iterator[Trajectory]:
        for i in range(len(self)):
            yield self[i]

    def where(self, **labels: Any) -> list[int]:
        """Indices of episodes whose labels equal all the given values."""
        return [
            i
            for i, ep in enumerate(self.episodes)
            if all(ep["meta"]["labels"].get(k) == v for k, v in labels.items())
        ]

    def __repr__(self) -> str:
        return (
            f"Dataset({str(self.root)!r}, robot={self.robot!r}, episodes={len(self)}, "
            f"samples={self.info['n_samples']})"
        )


def load_dataset(root: str | os.PathLike) -> Dataset:
    """Open a dataset directory written by :func:`write_dataset` (or ``neuract ingest``)."""
    return Dataset(root)


__all__ = ["Dataset", "compute_stats", "is_dataset", "load_dataset", "require_channels",
           "write_dataset"]
