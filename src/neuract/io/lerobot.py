"""LeRobot datasets (v2.x and v3.x layouts), read directly with pyarrow (no ``lerobot`` import).

Both layouts have ``meta/info.json`` (``codebase_version``, ``fps``, ``robot_type``,
``features``) and parquet files under ``data/``: v2.x one file per episode
(``data/chunk-000/episode_000000.parquet``), v3.x several episodes per file
(``data/chunk-000/file-000.parquet``). Every parquet file under ``data/`` is read and rows are
grouped by ``episode_index`` and ordered by ``frame_index``, which covers both.

Channels: ``observation.state`` -> q, ``action`` -> q_goal (leader command), ``timestamp`` ->
t; joint names from the feature's ``names`` (``shoulder_pan.pos`` -> ``shoulder_pan``);
rate = ``fps``; labels: task text, episode index, split (from ``info.json`` ``splits``),
robot type, codebase version.

Position units. LeRobot stores motor positions as configured when recording:

- ``rad`` or ``deg``: converted directly.
- ``range_m100_100`` (LeRobot's default for SO-100/SO-101 without ``use_degrees``): body
  joints normalised to -100..100 and the gripper to 0..100 over the calibrated range
  [range_min, range_max] of each motor (raw encoder steps, 4096 per revolution). With the
  LeRobot calibration file (``calibration=path.json``) the conversion is exact:
  raw = range_min + (v + 100) / 200 * (range_max - range_min) (gripper:
  raw = range_min + v / 100 * (range_max - range_min); a motor with ``drive_mode`` 1 stores
  -v, the gripper 100 - v, as LeRobot's ``_normalize`` does), and
  q = (raw - (range_min + range_max) / 2) * 2 pi / 4096 [rad], i.e. radians from the middle
  of the calibrated range, the zero of the bundled SO-101 model ("new calibration").
  Without it, the calibrated range is approximated by the joint range of the robot model
  (-100..100 -> [lower, upper]); this is warned about and recorded in the labels
  (``position_conversion``).
- ``auto`` (default): ``range_m100_100`` for ``so100*``/``so101*`` robot types (LeRobot's
  default), otherwise an error asking for an explicit unit. ``info.json`` does not record
  which mode was used, so pass ``deg`` for datasets recorded with ``use_degrees=True``.

A dataset neuract wrote (:func:`neuract.io.lerobot_write.write_lerobot`; its ``info.json``
has a ``neuract`` block) is in rad: ``auto`` reads it as such, without a warning, and every
channel it holds (``observation.velocity`` -> qd, ...) and each episode's metadata
(``neuract/meta`` in ``meta/episodes``) come back exactly as written.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neuract.data.plausibility import check_trajectory
from neuract.data.schema import CHANNELS, JOINT_CHANNELS
from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.errors import ConfigError, SchemaError
from neuract.io.common import check_joint_count, robot_joint_ranges
from neuract.io.lerobot_features import EPISODE_META_COLUMN, INFO_KEY, is_neuract
from neuract.io.registers import STS3215_RAD_PER_STEP

POSITION_UNITS = ("auto", "rad", "deg", "range_m100_100")


def _read_json(path: Path, what: str = "a LeRobot dataset's meta/info.json") -> Any:
    """JSON file ``path`` (``what`` it should be, for the errors)."""
    if not path.is_file():
        raise SchemaError(f"{path}: file not found; expected {what}")
    try:
        return json.loads(path.read_bytes())
    except UnicodeDecodeError:
        raise SchemaError(f"{path}: not a text file (not UTF-8); expected {what}") from None
    except json.JSONDecodeError as exc:
        raise SchemaError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


def _joint_names(info: dict[str, Any], key: str, path: Path) -> list[str]:
    feats = info.get("features", {})
    if key not in feats:
        raise SchemaError(f"{path}: feature {key!r} not found; features: {sorted(feats)}")
    names = feats[key].get("names")
    if isinstance(names, dict):  # v2.x: {"motors": [...]}
        names = next(iter(names.values()), None)
    if not names:
        shape = feats[key].get("shape", [0])
        names = [f"joint{i + 1}" for i in range(int(shape[0]))]
    return [str(n).removesuffix(".pos") for n in names]


def _tasks(root: Path) -> dict[int, str]:
    jl = root / "meta" / "tasks.jsonl"
    if jl.is_file():  # v2.x
        out = {}
        for line in jl.read_text().splitlines():
            if line.strip():
                d = json.loads(line)
                out[int(d["task_index"])] = str(d["task"])
        return out
    pqf = root / "meta" / "tasks.parquet"
    if pqf.is_file():  # v3.x: task text in the (pandas) index column
        import pyarrow.parquet as pq

        rows = pq.read_table(pqf).to_pylist()
        out = {}
        for r in rows:
            text = r.get("task", r.get("__index_level_0__"))
            out[int(r["task_index"])] = str(text)
        return out
    return {}


def _split_of(info: dict[str, Any], ep: int) -> str | None:
    for name, rng in (info.get("splits") or {}).items():
        try:
            lo, hi = (int(x) for x in str(rng).split(":"))
        except ValueError:
            continue
        if lo <= ep < hi:
            return name
    return None


def _converter(
    units: str,
    robot_type: str,
    robot: str,
    joints: list[str],
    calibration: str | os.PathLike | None,
    src: str,
    neuract: bool = False,
):
    """A function (T, n) values -> (T, n) rad, plus a description for the labels."""
    if units not in POSITION_UNITS:
        raise ConfigError(
            f"unknown LeRobot position unit {units!r}; accepted: {', '.join(POSITION_UNITS)}"
        )
    if units == "auto":
        if neuract:
            units = "rad"
        elif robot_type.startswith(("so100", "so101", "so_100", "so_101")):
            units = "range_m100_100"
        else:
            raise ConfigError(
                f"{src}: robot_type {robot_type!r}: cannot tell the position "
                f"unit; pass position_units as one of rad, deg, range_m100_100"
            )
    if units == "rad":
        return (lambda v: v), "rad"
    if units == "deg":
        return (lambda v: v * (math.pi / 180.0)), "deg -> rad"
    grip = np.array(["gripper" in j for j in joints])
    if calibration is not None:
        cal = _read_json(Path(calibration), "a LeRobot calibration JSON file (--calibration)")
        missing = [j for j in joints if j not in cal]
        if missing:
            raise SchemaError(
                f"{calibration}: no calibration for motor(s) {missing}; found {sorted(cal)}"
            )
        lo = np.array([float(cal[j]["range_min"]) for j in joints])
        hi = np.array([float(cal[j]["range_max"]) for j in joints])
        inv = np.array([bool(int(cal[j].get("drive_mode", 0))) for j in joints])

        def conv(v: np.ndarray) -> np.ndarray:
            # LeRobot's drive_mode inverts the normalised value: -v on -100..100 joints,
            # 100 - v on the 0..100 gripper
            frac = np.where(
                grip,
                np.where(inv, 100.0 - v, v) / 100.0,
                (np.where(inv, -v, v) + 100.0) / 200.0,
            )
            raw = lo + frac * (hi - lo)
            return (raw - (lo + hi) / 2.0) * STS3215_RAD_PER_STEP

        return conv, "range_m100_100 -> rad via calibration file"
    try:
        ranges = robot_joint_ranges(robot)
    except Exception as exc:
        raise ConfigError(
            f"{src}: normalised positions need a calibration file or a robot "
            f"model with joint ranges; robot {robot!r}: {exc}"
        ) from None
    missing = [j for j in joints if j not in ranges]
    if missing:
        raise SchemaError(
            f"{src}: joints {missing} have no range in robot {robot!r}; known: {sorted(ranges)}"
        )
    lo = np.array([ranges[j][0] for j in joints])
    hi = np.array([ranges[j][1] for j in joints])
    warnings.warn(
        f"{src}: positions are LeRobot-normalised (-100..100) and no calibration "
        f"file was given; mapping them onto the joint ranges of robot {robot!r} "
        "(approximate)",
        stacklevel=3,
    )

    def conv_model(v: np.ndarray) -> np.ndarray:
        frac = np.where(grip, v / 100.0, (v + 100.0) / 200.0)
        return lo + frac * (hi - lo)

    return conv_model, f"range_m100_100 -> rad via {robot} joint ranges (approximate)"


@dataclass
class _Info:
    """What ``meta/info.json`` says about the dataset, checked."""

    path: Path
    info: dict[str, Any]
    version: str
    fps: float
    robot_type: str
    robot: str
    joints: list[str]
    has_action: bool
    extra: dict[str, str]
    """feature -> channel of the other channels (a dataset neuract wrote; else empty)"""


def _read_info(root: Path, robot: str | None, state_key: str, action_key: str) -> _Info:
    info_path = root / "meta" / "info.json"
    info = _read_json(info_path)
    version = str(info.get("codebase_version", ""))
    if not version.startswith(("v2", "v3")):
        raise SchemaError(f"{info_path}: codebase_version {version!r}; supported: v2.x, v3.x")
    fps = info.get("fps")
    if not isinstance(fps, int | float) or fps <= 0:
        raise SchemaError(f"{info_path}: fps {fps!r}; expected a positive number")
    robot_type = str(info.get("robot_type") or "")
    robot = robot or robot_type.removesuffix("_follower").removesuffix("_leader") or "unknown"
    joints = _joint_names(info, state_key, info_path)
    check_joint_count(robot, len(joints), str(info_path))
    has_action = action_key in info.get("features", {})
    if has_action and _joint_names(info, action_key, info_path) != joints:
        has_action = False  # action in another space (e.g. end-effector): not a joint goal
    extra: dict[str, str] = {}
    if is_neuract(info):
        extra = {k: str(c) for k, c in info[INFO_KEY].get("channels", {}).items()
                 if k not in ("timestamp", state_key, action_key)}
    return _Info(info_path, info, version, fps, robot_type, robot, joints, has_action, extra)


def _read_tables(root: Path, want: list[str]) -> list[tuple[Path, pa.Table]]:
    """Every parquet file under ``data/``, each checked for the columns ``want``."""
    files = sorted((root / "data").rglob("*.parquet"))
    if not files:
        raise SchemaError(f"{root / 'data'}: no parquet files")
    tables = []
    for f in files:
        try:
            tab = pq.read_table(f)
        except (pa.ArrowInvalid, OSError) as exc:
            raise SchemaError(f"{f}: not a readable parquet file (truncated?): {exc}") from None
        missing = [c for c in want if c not in tab.column_names]
        if missing:
            raise SchemaError(f"{f}: missing column(s) {missing}; columns: {tab.column_names}")
        tables.append((f, tab))
    return tables


def _episode_parts(tables: list[tuple[Path, pa.Table]]) -> dict[int, list[tuple[Path, pa.Table]]]:
    """episode index -> its rows in each file (in file order)."""
    episodes: dict[int, list[tuple[Path, pa.Table]]] = {}
    for f, tab in tables:
        ep_col = tab.column("episode_index").to_numpy()
        for ep in np.unique(ep_col):
            episodes.setdefault(int(ep), []).append(
                (f, tab.filter(pc.equal(tab.column("episode_index"), ep)))
            )
    return episodes


def _episode(ep: int, parts: list[tuple[Path, pa.Table]], ds: _Info, conv, how: str,
             tasks: dict[int, str], state_key: str, action_key: str,
             episode_meta: dict[int, dict[str, Any]]) -> Trajectory:
    """One episode's rows (ordered by ``frame_index``) as a Trajectory."""
    src = ", ".join(str(f) for f, _ in parts)

    def col(name: str) -> np.ndarray:
        return np.concatenate([_values(t.column(name)) for _, t in parts], axis=0)

    order = np.argsort(col("frame_index"), kind="stable")
    ch: dict[str, np.ndarray] = {"t": col("timestamp")[order]}
    q = _per_joint(col(state_key)[order], len(ds.joints))
    if q.ndim != 2 or q.shape[1] != len(ds.joints):
        raise SchemaError(
            f"{src}: column {state_key!r} has shape {q.shape}; expected "
            f"(T, {len(ds.joints)}) for joints {ds.joints}"
        )
    ch["q"] = conv(q)
    if ds.has_action:
        ch["q_goal"] = conv(_per_joint(col(action_key)[order], len(ds.joints)))
    for key, channel in ds.extra.items():  # a dataset neuract wrote: its other channels
        v = col(key)[order]
        ch[channel] = v.reshape(-1, 1) if v.ndim == 1 and channel in JOINT_CHANNELS else v
    task_idx = int(col("task_index")[0]) if "task_index" in parts[0][1].column_names else 0
    labels = {
        "task": tasks.get(task_idx),
        "episode_index": ep,
        "split": _split_of(ds.info, ep),
        "robot_type": ds.robot_type,
        "lerobot_version": ds.version,
        "position_conversion": how,
    }
    meta = TrajectoryMeta(
        robot=ds.robot,
        joint_names=tuple(ds.joints),
        source=src,
        rate_hz=float(ds.fps),
        name=f"episode_{ep:06d}",
        labels=labels,
    )
    if ep in episode_meta:  # a dataset neuract wrote: the episode's metadata as written
        meta = TrajectoryMeta.from_dict(episode_meta[ep])
    traj = Trajectory(ch, meta)
    features = {"t": "timestamp", "q": state_key, "q_goal": action_key,
                **{c: k for k, c in ds.extra.items()}}
    check_trajectory(traj, where=_where(src, ep, col("frame_index")[order], features),
                     fix=_fix, declared=dict.fromkeys(("q", "q_goal"), how.split()[0]))
    return traj


def _where(src: str, ep: int, frames: np.ndarray, features: dict[str, str]):

    def where(ch: str, j: int | None, i: int | None) -> str:
        feat = features.get(ch, ch) + ("" if j is None else f"[{j}]")
        at = "" if i is None else f", frame {int(frames[i])}"
        return f"{src}: episode {ep}{at}, feature {feat!r}"

    return where


def _fix(ch: str, j: int | None, unit: str) -> str:
    if ch in ("q", "q_goal") and unit in POSITION_UNITS:  # info.json does not record it
        return f"pass --position-units {unit} (read_lerobot(position_units={unit!r}))"
    return (f"convert the dataset's {ch} values (they look like {unit}) to {CHANNELS[ch].unit}"
            if unit else "export the dataset again without this feature (no measurement)")


def _values(column: pa.ChunkedArray) -> np.ndarray:
    """A column as (T,) or, for fixed-size lists, (T, n) numbers (float64; bool and int8
    columns keep their dtype)."""
    arr = column.combine_chunks()
    if pa.types.is_fixed_size_list(arr.type):
        n = arr.type.list_size
        flat = arr.flatten().to_numpy(zero_copy_only=False)
        return flat.reshape(len(arr), n)
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        return np.asarray(arr.to_pylist(), dtype=np.float64)
    out = arr.to_numpy(zero_copy_only=False)
    return out if out.dtype.kind in "bi" else out.astype(np.float64)


def _per_joint(v: np.ndarray, n: int) -> np.ndarray:
    """Positions as (T, n): a one-joint feature (shape [1]) is stored as a plain column."""
    return v.reshape(-1, 1) if v.ndim == 1 and n == 1 else v.astype(np.float64, copy=False)


def _episode_meta(root: Path, ds: _Info) -> dict[int, dict[str, Any]]:
    """episode index -> its neuract metadata (a dataset neuract wrote; else empty)."""
    if not is_neuract(ds.info):
        return {}
    out: dict[int, dict[str, Any]] = {}
    for f in sorted((root / "meta" / "episodes").rglob("*.parquet")):
        try:
            tab = pq.read_table(f, columns=["episode_index", EPISODE_META_COLUMN])
        except (pa.ArrowException, OSError, KeyError) as exc:
            raise SchemaError(f"{f}: no readable {EPISODE_META_COLUMN!r} column: {exc}") from None
        for ep, text in zip(tab.column(0).to_pylist(), tab.column(1).to_pylist(), strict=True):
            out[int(ep)] = json.loads(text)
    return out


def read_lerobot(
    root: str | os.PathLike,
    robot: str | None = None,
    position_units: str = "auto",
    calibration: str | os.PathLike | None = None,
    state_key: str = "observation.state",
    action_key: str = "action",
) -> list[Trajectory]:
    """All episodes of a LeRobot dataset as Trajectories (see module doc)."""
    root = Path(root)
    ds = _read_info(root, robot, state_key, action_key)
    conv, how = _converter(position_units, ds.robot_type, ds.robot, ds.joints, calibration,
                           str(ds.path), neuract=is_neuract(ds.info))
    want = [state_key, "timestamp", "episode_index", "frame_index"]
    if ds.has_action:
        want.append(action_key)
    want += list(ds.extra)
    tables = _read_tables(root, want)
    tasks = _tasks(root)
    episodes = _episode_parts(tables)
    episode_meta = _episode_meta(root, ds)
    return [_episode(ep, episodes[ep], ds, conv, how, tasks, state_key, action_key, episode_meta)
            for ep in sorted(episodes)]


__all__ = ["POSITION_UNITS", "read_lerobot"]
