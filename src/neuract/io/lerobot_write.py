"""Write neuract episodes as a LeRobot v3.0 dataset (pyarrow only, no ``lerobot`` import).

Layout written (LeRobot's ``codebase_version`` ``v3.0``)::

    DIR/
      meta/info.json                         version, robot_type, fps, totals, path templates,
                                             features (dtype, shape, names), ``neuract`` block
      meta/stats.json                        per feature: min, max, mean, std, count, q01..q99
      meta/tasks.parquet                     task text (pandas index) -> task_index
      meta/episodes/chunk-000/file-000.parquet
                                             one row per episode: episode_index, tasks, length,
                                             data/chunk_index, data/file_index,
                                             dataset_from_index, dataset_to_index,
                                             stats/<feature>/<stat>, neuract/meta
      data/chunk-XXX/file-YYY.parquet        one row per frame, several episodes per file

Every channel of the episodes becomes a feature (:mod:`neuract.io.lerobot_features`):
``observation.state`` = q [rad], ``action`` = q_goal [rad], ``timestamp`` = t [s] as
recorded (not shifted to start at 0), and each other channel an ``observation.*`` feature in
its SI unit. Values are stored as float64 (bool / int8 channels as bool / int8), so that
:func:`neuract.io.lerobot.read_lerobot` gives back exactly the episodes written, metadata
included (``neuract/meta``). An episode is never split across data files; a data file is
closed once it holds about ``file_size_mb`` MB, and a chunk holds ``chunks_size`` files.
Writing is atomic: the directory is assembled under a temporary name and renamed at the end.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neuract.atomic import atomic_dir, write_json
from neuract.data.schema import CHANNELS
from neuract.data.trajectory import Trajectory
from neuract.errors import ConfigError, SchemaError
from neuract.io.lerobot_features import (
    EPISODE_META_COLUMN,
    FEATURE_OF,
    INDEX_FEATURES,
    INFO_FORMAT,
    INFO_KEY,
    INFO_VERSION,
    feature_spec,
    is_neuract,
)

CODEBASE_VERSION = "v3.0"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
DEFAULT_TASK = "servo telemetry"
"""task text of an episode without a ``task`` label (LeRobot needs one per frame)"""

LEROBOT_DEST = {"marker": "meta/info.json", "kind": is_neuract,
                "allowed": lambda name: name in ("meta", "data")}
"""what makes a directory a LeRobot dataset neuract wrote (``--overwrite`` replaces only such
a directory: :func:`neuract.atomic.check_dest`)"""


def _check(trajs: list[Trajectory], out: Path) -> tuple[str, ...]:
    """The channels every episode has, after checking that all are Trajectories of one robot
    with the same joints and channels, under names of their own."""
    if not trajs:
        raise SchemaError(f"no trajectories to write to {out}; expected at least one episode")
    names: set[str] = set()
    for i, tr in enumerate(trajs):
        if not isinstance(tr, Trajectory):
            raise SchemaError(f"item {i} is a {type(tr).__name__}; expected a Trajectory")
        first = trajs[0]
        if (tr.meta.robot, tr.meta.joint_names) != (first.meta.robot, first.meta.joint_names):
            raise SchemaError(
                f"episode {i} ({tr.meta.name}) has robot {tr.meta.robot!r} joints "
                f"{list(tr.meta.joint_names)}; expected robot {first.meta.robot!r} joints "
                f"{list(first.meta.joint_names)} like episode 0")
        if tr.channels != first.channels:
            raise SchemaError(
                f"episode {i} ({tr.meta.name}) has channels {list(tr.channels)}; a LeRobot "
                f"dataset stores the same features in every frame: expected "
                f"{list(first.channels)} like episode 0 (drop or add channels first)")
        if tr.meta.name in names:
            raise SchemaError(f"episode name {tr.meta.name!r} occurs twice; names must be "
                              "unique within a dataset")
        names.add(tr.meta.name)
    return trajs[0].channels


def _column(arr: np.ndarray, dtype: str) -> pa.Array:
    """One feature's values: a scalar column for shape (1,), else fixed-size lists."""
    typ = pa.from_numpy_dtype(np.dtype(dtype))
    if arr.ndim == 1:
        return pa.array(arr.astype(dtype, copy=False), type=typ)
    if arr.shape[1] == 1:
        return pa.array(np.ascontiguousarray(arr[:, 0]).astype(dtype, copy=False), type=typ)
    flat = pa.array(np.ascontiguousarray(arr).astype(dtype, copy=False).ravel(), type=typ)
    return pa.FixedSizeListArray.from_arrays(flat, arr.shape[1])


def _frames(tr: Trajectory, features: dict[str, dict[str, Any]], channel_of: dict[str, str],
            ep: int, start: int, task_index: int) -> dict[str, np.ndarray]:
    """Every feature of one episode as a (T,) or (T, n) array."""
    n = len(tr)
    cols = {key: tr[channel_of[key]] for key in features if key in channel_of}
    cols["frame_index"] = np.arange(n, dtype=np.int64)
    cols["episode_index"] = np.full(n, ep, dtype=np.int64)
    cols["index"] = np.arange(start, start + n, dtype=np.int64)
    cols["task_index"] = np.full(n, task_index, dtype=np.int64)
    return cols


def _stats(x: np.ndarray) -> dict[str, Any]:
    """LeRobot's statistics of one feature's (N,) or (N, n) values: per element min, max,
    mean, std (ddof 0), quantiles q01..q99, and count [N]."""
    x = x.reshape(len(x), -1)
    xf = x.astype(np.float64)
    whole = x.dtype.kind in "iu"  # min/max of index features stay integers, as LeRobot's
    out: dict[str, Any] = {
        "min": (x.min(0) if whole else xf.min(0)).tolist(),
        "max": (x.max(0) if whole else xf.max(0)).tolist(),
        "mean": xf.mean(0).tolist(),
        "std": xf.std(0).tolist(),
        "count": [int(len(x))],
    }
    qs = np.quantile(xf, QUANTILES, axis=0)
    for q, v in zip(QUANTILES, qs, strict=True):
        out[f"q{round(q * 100):02d}"] = v.tolist()
    return out


def _hf_features(features: dict[str, dict[str, Any]]) -> bytes:
    """The ``huggingface`` schema metadata of a data file (the ``datasets`` feature types)."""
    hf: dict[str, Any] = {}
    for key, ft in features.items():
        value = {"dtype": ft["dtype"], "_type": "Value"}
        hf[key] = value if ft["shape"] == [1] else {"feature": value, "length": ft["shape"][0],
                                                    "_type": "List"}
    return json.dumps({"info": {"features": hf}}).encode()


def _features(trajs: list[Trajectory], channels: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``info.json`` features: action, observation.*, timestamp, then the index features."""
    joints = trajs[0].meta.joint_names
    order = ["q_goal"] + [c for c in CHANNELS if c not in ("q_goal", "t")] + ["t"]
    feats = {FEATURE_OF[c]: feature_spec(c, joints) for c in order if c in channels}
    for key in INDEX_FEATURES:
        feats[key] = {"dtype": "int64", "shape": [1], "names": None}
    return feats


def _task_of(tr: Trajectory, default: str) -> str:
    task = tr.meta.labels.get("task")
    return task if isinstance(task, str) and task else default


def _splits(trajs: list[Trajectory]) -> dict[str, str]:
    """LeRobot ``splits`` ("name": "from:to"): each ``split`` label where every one is a
    contiguous run of episodes; else all episodes as "train"."""
    labels = [tr.meta.labels.get("split") for tr in trajs]
    runs: dict[str, str] = {}
    i = 0
    while i < len(labels):
        j = i
        while j < len(labels) and labels[j] == labels[i]:
            j += 1
        if not isinstance(labels[i], str) or labels[i] in runs:
            return {"train": f"0:{len(trajs)}"}
        runs[labels[i]] = f"{i}:{j}"
        i = j
    return runs


def _check_options(fps: float, file_size_mb: float, chunks_size: int) -> None:
    if not (np.isfinite(fps) and fps > 0):
        raise SchemaError(f"episode rate {fps!r} Hz; LeRobot's fps must be a positive number "
                          "(give the episodes a rate_hz)")
    if not (np.isfinite(file_size_mb) and file_size_mb > 0):
        raise ConfigError(f"file_size_mb {file_size_mb!r}; expected a size > 0 MB")
    if not (isinstance(chunks_size, int) and chunks_size >= 1):
        raise ConfigError(f"chunks_size {chunks_size!r}; expected a whole number of files >= 1")


def _fps(trajs: list[Trajectory]) -> float:
    """The dataset's fps: the median episode rate, as an int where it is one."""
    rates = [tr.meta.rate_hz for tr in trajs if tr.meta.rate_hz]
    fps = float(np.median(rates)) if rates else float("nan")
    return int(round(fps)) if np.isfinite(fps) and abs(fps - round(fps)) < 1e-9 else fps


class _DataFiles:
    """Packs episodes' frames into data files of about ``limit`` bytes (never splitting an
    episode); ``add`` returns the (chunk, file) index the episode went to."""

    def __init__(self, root: Path, features: dict[str, dict[str, Any]], limit: float,
                 chunks_size: int) -> None:
        self.root, self.features, self.limit, self.chunks_size = root, features, limit, chunks_size
        self.counter, self.parts, self.size = 0, [], 0
        self.meta = {b"huggingface": _hf_features(features)}

    def where(self) -> tuple[int, int]:
        return divmod(self.counter, self.chunks_size)

    def add(self, cols: dict[str, np.ndarray]) -> tuple[int, int]:
        size = sum(a.nbytes for a in cols.values())
        if self.parts and self.size + size > self.limit:
            self.flush()
        table = pa.table({k: _column(cols[k], ft["dtype"]) for k, ft in self.features.items()})
        self.parts.append(table)
        self.size += size
        return self.where()

    def flush(self) -> None:
        if not self.parts:
            return
        chunk, file = self.where()
        path = self.root / DATA_PATH.format(chunk_index=chunk, file_index=file)
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.concat_tables(self.parts)
        pq.write_table(table.replace_schema_metadata(self.meta), path)
        self.counter, self.parts, self.size = self.counter + 1, [], 0


def _tasks_table(tasks: list[str]) -> pa.Table:
    """``meta/tasks.parquet`` as pandas writes a frame indexed by task text (LeRobot reads
    it with pandas; the task text is the index)."""
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode",
                            "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
             "numpy_type": "int64", "metadata": None},
            {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode",
             "numpy_type": "object", "metadata": None},
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.0",
    }
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()),
                      "__index_level_0__": pa.array(tasks, pa.string())})
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def _episode_row(ep: int, tr: Trajectory, task: str, where: tuple[int, int], start: int,
                 stats: dict[str, dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "episode_index": ep, "tasks": [task], "length": len(tr),
        "data/chunk_index": where[0], "data/file_index": where[1],
        "dataset_from_index": start, "dataset_to_index": start + len(tr),
    }
    for key, st in stats.items():
        for name, v in st.items():
            row[f"stats/{key}/{name}"] = v
    row["meta/episodes/chunk_index"] = 0
    row["meta/episodes/file_index"] = 0
    row[EPISODE_META_COLUMN] = json.dumps(tr.meta.to_dict())
    return row


def _info(trajs: list[Trajectory], features: dict[str, Any], tasks: list[str], fps: float,
          robot_type: str, files: _DataFiles, file_size_mb: float) -> dict[str, Any]:
    first = trajs[0].meta
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": len(trajs),
        "total_frames": int(sum(len(t) for t in trajs)),
        "total_tasks": len(tasks),
        "chunks_size": files.chunks_size,
        "data_files_size_in_mb": file_size_mb,
        "video_files_size_in_mb": 500,
        "fps": fps,
        "splits": _splits(trajs),
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH,
        "features": features,
        INFO_KEY: {
            "format": INFO_FORMAT,
            "version": INFO_VERSION,
            "robot": first.robot,
            "joint_names": list(first.joint_names),
            "position_unit": "rad",
            "channels": {FEATURE_OF[c]: c for c in trajs[0].channels},
            "units": {FEATURE_OF[c]: CHANNELS[c].unit for c in trajs[0].channels},
        },
    }


def write_lerobot(
    trajs: Iterable[Trajectory],
    out_dir: str | os.PathLike,
    overwrite: bool = False,
    robot_type: str | None = None,
    task: str = DEFAULT_TASK,
    file_size_mb: float = 100.0,
    chunks_size: int = 1000,
) -> Path:
    """Write episodes as a LeRobot v3.0 dataset directory (atomically); returns its path.

    ``robot_type`` defaults to the episodes' robot name; ``task`` is the task text of
    episodes without a ``task`` label. See the module doc for the layout.
    """
    trajs = list(trajs)
    out = Path(out_dir)
    channels = _check(trajs, out)
    fps = _fps(trajs)
    _check_options(fps, file_size_mb, chunks_size)
    robot_type = robot_type or Path(trajs[0].meta.robot).stem
    features = _features(trajs, channels)
    channel_of = {FEATURE_OF[c]: c for c in channels}
    tasks = list(dict.fromkeys(_task_of(tr, task) for tr in trajs))
    rows, all_cols, start = [], [], 0
    with atomic_dir(out, overwrite=overwrite, **LEROBOT_DEST) as tmp:
        files = _DataFiles(tmp, features, file_size_mb * 1e6, chunks_size)
        for ep, tr in enumerate(trajs):
            name = _task_of(tr, task)
            cols = _frames(tr, features, channel_of, ep, start, tasks.index(name))
            where = files.add(cols)
            stats = {k: _stats(v) for k, v in cols.items()}
            rows.append(_episode_row(ep, tr, name, where, start, stats))
            all_cols.append(cols)
            start += len(tr)
        files.flush()
        (tmp / EPISODES_PATH).parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), tmp / EPISODES_PATH)
        pq.write_table(_tasks_table(tasks), tmp / "meta" / "tasks.parquet")
        stats = {k: _stats(np.concatenate([c[k] for c in all_cols])) for k in features}
        write_json(tmp / "meta" / "stats.json", stats)
        write_json(tmp / "meta" / "info.json",
                   _info(trajs, features, tasks, fps, robot_type, files, file_size_mb))
    return out


__all__ = ["CODEBASE_VERSION", "DEFAULT_TASK", "LEROBOT_DEST", "write_lerobot"]
