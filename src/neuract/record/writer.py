"""A neuract dataset that grows one episode at a time, with nothing lost on a crash.

The recording directory is a neuract dataset (:mod:`neuract.data.dataset`) from its first
episode on::

    OUT/
      data/episode_000000.parquet          finished episodes (each renamed into place whole)
      data/episode_000001.partial.csv      the episode being recorded (or a crash's leftover)
      meta/info.json, meta/stats.json      rewritten atomically after every episode
      config.json                          the recording's resolved config

While an episode runs its samples are appended to ``episode_NNNNNN.partial.csv`` (a first
line ``# neuract partial episode {json}`` naming the robot, joints and labels, then a header
of the dataset's column names and one line per sample, every value written exactly:
``repr`` of the float), flushed to the operating system every ``flush_s`` and synced to the
disk every second; ``meta/info.json`` lists it under ``recording.in_progress``. At the
episode's end the parquet file is written under a temporary name and renamed into place, the
partial file removed, and the metadata rewritten. A crash (even SIGKILL or a power cut) thus
leaves every finished episode readable and the current one in its partial file, clearly
named; :func:`recover` (``neuract record --recover OUT``) turns such files into episodes
labelled ``partial: true``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from neuract.atomic import atomic_path, check_dest, write_json, write_text
from neuract.config import save_resolved
from neuract.data.dataset import (
    DATASET_DEST,
    FORMAT,
    Dataset,
    _columns,
    _info,
    _to_table,
    compute_stats,
)
from neuract.data.schema import CHANNELS
from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.errors import ConfigError, SchemaError

PARTIAL_SUFFIX = ".partial.csv"
HEAD = "# neuract partial episode "


def _episode_name(i: int) -> str:
    return f"episode_{i:06d}"


class RecordingWriter:
    """Episodes of ``robot`` (``joint_names``) written into the dataset directory ``out`` as
    they are recorded (see the module docstring). overwrite: replace an earlier dataset at
    ``out``; append: add episodes to it (same robot and joints); config: the resolved config
    saved as ``config.json``; flush_s: how often the partial file is flushed [s]."""

    def __init__(self, out: str | os.PathLike, robot: str, joint_names: Sequence[str], *,
                 overwrite: bool = False, append: bool = False, config: Any = None,
                 flush_s: float = 0.2) -> None:
        self.out = Path(out)
        self.robot, self.joint_names = robot, tuple(joint_names)
        self.flush_s = float(flush_s)
        self.trajs: list[Trajectory] = []
        self.episodes: list[dict[str, Any]] = []
        if append and (self.out / "meta" / "info.json").is_file():
            self._load_existing()
        else:
            check_dest(self.out, overwrite, **DATASET_DEST)
            if self.out.exists():
                import shutil
                shutil.rmtree(self.out)
        (self.out / "data").mkdir(parents=True, exist_ok=True)
        (self.out / "meta").mkdir(exist_ok=True)
        if config is not None:
            save_resolved(config, self.out)
        self._fh = None
        self._rows: list[list[float]] = []
        self._cols: list[str] = []
        self._channels: list[str] = []
        self._labels: dict[str, Any] = {}
        self._source = ""
        self._write_meta()

    def _load_existing(self) -> None:
        ds = Dataset(self.out)
        if ds.robot != self.robot or ds.joint_names != self.joint_names:
            raise ConfigError(f"--append: the dataset {str(self.out)!r} holds robot "
                              f"{ds.robot!r} joints {list(ds.joint_names)}; this recording is "
                              f"robot {self.robot!r} joints {list(self.joint_names)}")
        leftovers = sorted((self.out / "data").glob("*" + PARTIAL_SUFFIX))
        if leftovers:
            raise ConfigError(f"--append: {leftovers[0]} is a partial episode a crash left; "
                              f"recover it first: neuract record --recover --out {self.out}")
        self.trajs = list(ds)
        self.episodes = list(ds.episodes)

    # -- an episode ------------------------------------------------------------------------

    @property
    def index(self) -> int:
        """The index the next (or current) episode gets."""
        return len(self.episodes)

    def partial_path(self, i: int | None = None) -> Path:
        return self.out / "data" / (_episode_name(self.index if i is None else i)
                                    + PARTIAL_SUFFIX)

    def begin(self, channels: Sequence[str], labels: dict[str, Any], source: str = "") -> Path:
        """Start an episode holding ``channels`` (besides ``t``); its partial file's path."""
        if self._fh is not None:
            raise ConfigError("RecordingWriter.begin: an episode is already open")
        self._channels = [c for c in CHANNELS if c in channels and c != "t"]
        self._cols = ["t"] + [col for c in self._channels
                              for col in _columns(c, self.joint_names)]
        self._labels, self._source = dict(labels), source
        self._rows = []
        path = self.partial_path()
        self._fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in finish()
        head = {"robot": self.robot, "joint_names": list(self.joint_names),
                "name": _episode_name(self.index), "source": source, "labels": self._labels}
        self._fh.write(HEAD + json.dumps(head) + "\n" + ",".join(self._cols) + "\n")
        self._fh.flush()
        self._last_flush = self._last_sync = time.monotonic()
        self._write_meta(in_progress=path)
        return path

    def add(self, t: float, sample: dict[str, np.ndarray]) -> None:
        """Append one sample (channel -> (n,) per joint, or a scalar)."""
        row = [float(t)]
        for c in self._channels:
            row.extend(np.atleast_1d(np.asarray(sample[c], dtype=float)).tolist())
        self._rows.append(row)
        self._fh.write(",".join(map(repr, row)) + "\n")
        now = time.monotonic()
        if now - self._last_flush >= self.flush_s:
            self._fh.flush()
            self._last_flush = now
            if now - self._last_sync >= 1.0:
                os.fsync(self._fh.fileno())
                self._last_sync = now

    def finish(self, counts: dict[str, int], end: str,
               labels: dict[str, Any] | None = None) -> Trajectory | None:
        """End the episode: its parquet file renamed into place, the partial file removed,
        the metadata rewritten; the episode (None if it holds no sample: nothing written)."""
        fh, self._fh = self._fh, None
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
        partial = self.partial_path()
        lab = {**self._labels, **(labels or {}), "end": end}
        if not self._rows:
            partial.unlink(missing_ok=True)
            self._write_meta()
            return None
        tr = _trajectory(np.array(self._rows, dtype=float), self._cols, self.robot,
                         self.joint_names, _episode_name(self.index), self._source, lab, counts)
        self._add_episode(tr)
        partial.unlink(missing_ok=True)
        self._write_meta()
        return tr

    def _add_episode(self, tr: Trajectory) -> None:
        rel = f"data/{_episode_name(self.index)}.parquet"
        with atomic_path(self.out / rel) as tmp:
            pq.write_table(_to_table(tr), tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        self.trajs.append(tr)
        self.episodes.append({"index": self.index, "file": rel, "n_samples": len(tr),
                              "duration_s": tr.duration, "channels": list(tr.channels),
                              "meta": tr.meta.to_dict()})

    def close(self) -> None:
        """Close an open episode's file without finishing it (it stays partial)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    # -- metadata -------------------------------------------------------------------------

    def _write_meta(self, in_progress: Path | None = None) -> None:
        partial = sorted(p.relative_to(self.out).as_posix()
                         for p in (self.out / "data").glob("*" + PARTIAL_SUFFIX))
        if self.trajs:
            first = self.trajs[0].meta
            totals: dict[str, int] = {}
            for tr in self.trajs:
                for k, v in tr.meta.counts.items():
                    totals[k] = totals.get(k, 0) + v
            chans = [c for c in CHANNELS if any(c in tr for tr in self.trajs)]
            info = _info(self.trajs, first, self.episodes, totals, chans)
        else:
            info = {"format": FORMAT, "version": 1, "robot": self.robot,
                    "joint_names": list(self.joint_names), "n_joints": len(self.joint_names),
                    "n_episodes": 0, "n_samples": 0, "duration_s": 0.0, "rates_hz": None,
                    "channels": {}, "units": {}, "counts": {}, "episodes": []}
        info["recording"] = {
            "in_progress": (None if in_progress is None
                            else in_progress.relative_to(self.out).as_posix()),
            "partial": partial,
            "note": "a *.partial.csv file under data/ is an episode a recording did not "
                    "finish (a crash); 'neuract record --recover --out DIR' turns it into an "
                    "episode labelled partial"}
        write_json(self.out / "meta" / "info.json", info)
        write_text(self.out / "meta" / "stats.json",
                   json.dumps(compute_stats(self.trajs), indent=2, allow_nan=False) + "\n")


def _trajectory(rows: np.ndarray, cols: list[str], robot: str, joints: Sequence[str],
                name: str, source: str, labels: dict[str, Any],
                counts: dict[str, int]) -> Trajectory:
    """A trajectory from rows whose columns are the dataset's column names ``cols``."""
    idx = {c: k for k, c in enumerate(cols)}
    out: dict[str, np.ndarray] = {"t": rows[:, 0]}
    for ch in CHANNELS:
        names = _columns(ch, joints)
        if ch == "t" or names[0] not in idx:
            continue
        arr = rows[:, [idx[n] for n in names]]
        out[ch] = arr[:, 0] if CHANNELS[ch].kind in ("time", "scalar") else arr
    meta = TrajectoryMeta(robot=robot, joint_names=tuple(joints), source=source, name=name,
                          labels=labels, counts=dict(counts))
    return Trajectory(out, meta)


def read_partial(path: str | os.PathLike) -> Trajectory | None:
    """The samples of a partial episode file (a torn last line, from a crash in the middle
    of a write, is left out); None if it holds none."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    if len(lines) < 2 or not lines[0].startswith(HEAD):
        raise SchemaError(f"{path}: not a neuract partial episode (its first line should "
                          f"start with {HEAD.strip()!r})")
    head = json.loads(lines[0][len(HEAD):])
    cols = lines[1].split(",")
    rows = []
    for line in lines[2:]:
        parts = line.split(",")
        if len(parts) != len(cols):
            continue  # the torn last line
        try:
            rows.append([float(x) for x in parts])
        except ValueError:
            continue
    if not rows:
        return None
    arr = np.array(rows, dtype=float)
    keep = np.concatenate([[True], np.diff(arr[:, 0]) > 0])
    return _trajectory(arr[keep], cols, head["robot"], head["joint_names"], head["name"],
                       head.get("source", ""), {**head.get("labels", {}), "partial": True,
                                                "end": "crash"}, {"samples": int(keep.sum())})


def recover(out: str | os.PathLike) -> list[str]:
    """Turn the partial episode files a crash left in the dataset ``out`` into episodes
    (labels ``partial: true``, ``end: "crash"``), appended after the finished ones; the names
    of the episodes recovered."""
    out = Path(out)
    if not (out / "meta" / "info.json").is_file():
        raise ConfigError(f"--recover: {str(out)!r} is not a recording (no meta/info.json)")
    info = json.loads((out / "meta" / "info.json").read_text())
    ds_writer = RecordingWriter.__new__(RecordingWriter)
    ds_writer.out, ds_writer.robot = out, info["robot"]
    ds_writer.joint_names = tuple(info["joint_names"])
    ds_writer.trajs = list(Dataset(out)) if info.get("episodes") else []
    ds_writer.episodes = list(info.get("episodes", []))
    done = []
    for path in sorted((out / "data").glob("*" + PARTIAL_SUFFIX)):
        tr = read_partial(path)
        if tr is not None:
            tr = Trajectory({c: tr[c] for c in tr.channels}, TrajectoryMeta(
                robot=tr.meta.robot, joint_names=tr.meta.joint_names, source=tr.meta.source,
                name=_episode_name(ds_writer.index), labels=tr.meta.labels,
                counts=tr.meta.counts))
            ds_writer._add_episode(tr)
            done.append(tr.meta.name)
        path.unlink()
    ds_writer._write_meta()
    return done


__all__ = ["PARTIAL_SUFFIX", "RecordingWriter", "read_partial", "recover"]
