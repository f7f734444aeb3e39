"""LeRobot v3.0 out: write_lerobot's layout against the format's schema, exact round trips
through neuract's LeRobot reader (twin, one-joint, real NAD and SO-101 data), refusals, and
``neuract ingest --out-format lerobot`` / ``--format neuract``."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuract.data.dataset import write_dataset
from neuract.data.schema import CHANNELS
from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.errors import ConfigError, SchemaError
from neuract.io.ingest import IngestConfig, run
from neuract.io.lerobot import read_lerobot
from neuract.io.lerobot_features import FEATURE_OF
from neuract.io.lerobot_write import write_lerobot
from neuract.twin.config import SimConfig
from neuract.twin.generate import GenerateConfig, generate

INFO_KEYS = {  # meta/info.json keys LeRobot v3.0 writes, and their types
    "codebase_version": str, "robot_type": str, "total_episodes": int, "total_frames": int,
    "total_tasks": int, "chunks_size": int, "data_files_size_in_mb": (int, float),
    "video_files_size_in_mb": (int, float), "fps": (int, float), "splits": dict,
    "data_path": str, "video_path": (str, type(None)), "features": dict,
}
STAT_KEYS = {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}
EPISODE_COLUMNS = {"episode_index", "tasks", "length", "data/chunk_index", "data/file_index",
                   "dataset_from_index", "dataset_to_index", "meta/episodes/chunk_index",
                   "meta/episodes/file_index"}
ARROW_OF = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(),
            "int8": pa.int8(), "bool": pa.bool_()}


def check_v3_layout(root: Path) -> dict:
    """Raise AssertionError unless ``root`` is laid out as LeRobot v3.0 publishes it; returns
    info.json."""
    info = json.loads((root / "meta" / "info.json").read_text())
    for key, typ in INFO_KEYS.items():
        assert isinstance(info.get(key), typ), (key, info.get(key))
    assert info["codebase_version"] == "v3.0"
    feats = {k: f for k, f in info["features"].items() if f["dtype"] not in ("video", "image")}
    for key in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert feats[key]["shape"] == [1], key
    for key, ft in feats.items():
        assert set(ft) >= {"dtype", "shape", "names"}, key
        assert ft["names"] is None or len(ft["names"]) == ft["shape"][0], key
    data = pq.read_table(sorted((root / "data").rglob("*.parquet"))).combine_chunks()
    assert set(data.column_names) == set(feats)
    for key, ft in feats.items():  # parquet column type vs feature dtype and shape
        typ = data.schema.field(key).type
        if ft["shape"] == [1]:
            assert typ == ARROW_OF[ft["dtype"]], (key, typ)
        else:
            assert pa.types.is_fixed_size_list(typ) and typ.list_size == ft["shape"][0], key
            assert typ.value_type == ARROW_OF[ft["dtype"]], (key, typ)
    assert data.num_rows == info["total_frames"]
    assert data.column("index").to_pylist() == list(range(info["total_frames"]))
    episodes = pq.read_table(sorted((root / "meta" / "episodes").rglob("*.parquet")))
    assert EPISODE_COLUMNS <= set(episodes.column_names)
    eps = episodes.to_pylist()
    assert [e["episode_index"] for e in eps] == list(range(info["total_episodes"]))
    assert sum(e["length"] for e in eps) == info["total_frames"]
    tasks = pq.read_table(root / "meta" / "tasks.parquet").to_pylist()
    assert len(tasks) == info["total_tasks"]
    task_text = {t["task_index"]: t["__index_level_0__"] for t in tasks}
    start = 0
    ep_col = data.column("episode_index").to_numpy()
    for e in eps:  # contiguous from/to indices; each episode wholly in the file it names
        assert (e["dataset_from_index"], e["dataset_to_index"]) == (start, start + e["length"])
        start += e["length"]
        path = root / info["data_path"].format(chunk_index=e["data/chunk_index"],
                                               file_index=e["data/file_index"])
        in_file = pq.read_table(path, columns=["episode_index", "task_index"])
        mine = in_file.column("episode_index").to_numpy() == e["episode_index"]
        assert mine.sum() == e["length"] == (ep_col == e["episode_index"]).sum()
        assert {task_text[i] for i in in_file.column("task_index").to_numpy()[mine]} \
            == set(e["tasks"])
        for key in feats:
            got = {name for name in STAT_KEYS if f"stats/{key}/{name}" in episodes.column_names}
            assert got == STAT_KEYS, (key, STAT_KEYS - got)
            assert e[f"stats/{key}/count"] == [e["length"]]
    stats = json.loads((root / "meta" / "stats.json").read_text())
    for key, ft in feats.items():
        assert set(stats[key]) == STAT_KEYS, key
        assert stats[key]["count"] == [info["total_frames"]], key
        assert len(stats[key]["mean"]) == ft["shape"][0], key
    return info


def _twin(seed=5):
    return generate(GenerateConfig(robot="so101", tasks=("push", "lift"), minutes=2 * 3 / 60,
                                   units=1, seed=seed, sim=SimConfig(episode_s=3.0, n_envs=2)))


def _read_quietly(root):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a dataset neuract wrote: rad, no unit guess, no warning
        return read_lerobot(root)


def _assert_same(a: list[Trajectory], b: list[Trajectory]):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.channels == y.channels
        for ch in x.channels:
            assert x[ch].dtype == y[ch].dtype and np.array_equal(x[ch], y[ch]), ch
        assert x.meta == y.meta
        assert x.equals(y)


def test_twin_round_trip_and_schema(tmp_path):
    trajs = _twin()
    # every channel but qdd, pwm, torque_enable, valid and overload (the protection is off)
    absent = {"qdd", "pwm", "torque_enable", "valid", "overload"}
    assert len(trajs) == 2 and set(trajs[0].channels) == set(CHANNELS) - absent
    out = write_lerobot(trajs, tmp_path / "lr", file_size_mb=0.05, chunks_size=1)
    # one episode per data file (the size limit), one file per chunk
    assert sorted(p.relative_to(out).as_posix() for p in (out / "data").rglob("*.parquet")) \
        == ["data/chunk-000/file-000.parquet", "data/chunk-001/file-000.parquet"]
    info = check_v3_layout(out)
    assert info["robot_type"] == "so101" and info["total_tasks"] == 2
    assert info["features"]["observation.state"]["names"][0] == "shoulder_pan.pos"
    assert info["features"]["action"]["names"][0] == "shoulder_pan.pos"
    assert info["features"]["observation.velocity"]["names"][0] == "shoulder_pan.vel"
    assert info["neuract"]["position_unit"] == "rad"
    assert info["neuract"]["units"]["observation.state"] == "rad"
    assert set(info["features"]) >= {FEATURE_OF[c] for c in trajs[0].channels}
    _assert_same(trajs, _read_quietly(out))
    # the global stats are those of all frames
    stats = json.loads((out / "meta" / "stats.json").read_text())
    q = np.concatenate([t["q"] for t in trajs])
    np.testing.assert_allclose(stats["observation.state"]["mean"], q.mean(0), rtol=1e-12)
    np.testing.assert_allclose(stats["observation.state"]["q50"], np.median(q, 0), rtol=1e-12)
    assert stats["observation.contact"]["max"] == [1.0]  # a push episode touches the arm


def test_one_joint_and_default_task(tmp_path):
    t = np.arange(50) / 100.0
    tr = Trajectory({"t": t, "q": np.sin(t)[:, None], "q_goal": np.cos(t)[:, None],
                     "valid": np.ones((50, 1), bool)},
                    TrajectoryMeta(robot="pendulum", joint_names=("hinge",), name="a"))
    out = write_lerobot([tr, tr.replace(name="b")], tmp_path / "lr")
    info = check_v3_layout(out)
    assert info["fps"] == 100 and isinstance(info["fps"], int)
    # a one-element feature is a plain column, as LeRobot stores shape (1,) features
    assert pq.read_schema(out / "data/chunk-000/file-000.parquet").field(
        "observation.state").type == pa.float64()
    tasks = pq.read_table(out / "meta" / "tasks.parquet")
    assert tasks.column("__index_level_0__").to_pylist() == ["servo telemetry"]
    assert b"pandas" in tasks.schema.metadata  # LeRobot reads the task text as the index
    _assert_same([tr, tr.replace(name="b")], _read_quietly(out))


def test_refusals(tmp_path):
    trajs = _twin()
    out = write_lerobot(trajs[:1], tmp_path / "lr")
    with pytest.raises(ConfigError, match="already exists; pass --overwrite"):
        write_lerobot(trajs, out)
    write_lerobot(trajs, out, overwrite=True)
    assert len(_read_quietly(out)) == 2
    plain = write_dataset(trajs, tmp_path / "plain")  # not a LeRobot output: never replaced
    with pytest.raises(ConfigError, match="not an earlier output of this kind"):
        write_lerobot(trajs, plain, overwrite=True)
    with pytest.raises(SchemaError, match=r"episode 1 .* has channels .*expected"):
        write_lerobot([trajs[0], trajs[1].replace(drop=("tau",))], tmp_path / "x")
    with pytest.raises(SchemaError, match="no trajectories"):
        write_lerobot([], tmp_path / "x")
    with pytest.raises(SchemaError, match="item 1 is a dict"):
        write_lerobot([trajs[0], {}], tmp_path / "x")
    with pytest.raises(ConfigError, match="file_size_mb 0"):
        write_lerobot(trajs, tmp_path / "x", file_size_mb=0)
    assert not (tmp_path / "x").exists()


def test_ingest_export_cli(tmp_path, capsys):
    src = write_dataset(_twin(), tmp_path / "twin")
    cfg = IngestConfig(source=src, format="neuract", out=tmp_path / "lr", out_format="lerobot",
                       quiet=True)
    run(cfg)
    check_v3_layout(tmp_path / "lr")
    _assert_same(_twin(), _read_quietly(tmp_path / "lr"))
    with pytest.raises(ConfigError, match="already exists"):
        run(cfg)
    with pytest.raises(ConfigError, match=r"--out-format 'hdf5'; accepted: neuract, lerobot"):
        run(IngestConfig(source=src, format="neuract", out=tmp_path / "y", out_format="hdf5"))
    assert not (tmp_path / "y").exists()


@pytest.mark.realdata
def test_real_nad_round_trip(shared_data, tmp_path):
    cfg = IngestConfig(source=shared_data / "nad", format="nad", include="so101/*",
                       out=tmp_path / "lr", out_format="lerobot", quiet=True)
    run(cfg)
    check_v3_layout(tmp_path / "lr")
    run(IngestConfig(source=shared_data / "nad", format="nad", include="so101/*",
                     out=tmp_path / "nad", quiet=True))
    from neuract.data.dataset import load_dataset

    _assert_same(list(load_dataset(tmp_path / "nad")), _read_quietly(tmp_path / "lr"))


@pytest.mark.realdata
def test_real_so101_lerobot_round_trip(shared_data, tmp_path):
    root = shared_data / "lerobot_so101_record_test" / "orig"
    check_v3_layout(root)  # the schema check accepts LeRobot's own v3.0 files
    with pytest.warns(UserWarning, match="approximate"):
        trajs = read_lerobot(root)
    out = write_lerobot(trajs, tmp_path / "lr", robot_type="so101_follower")
    info = check_v3_layout(out)
    assert info["total_frames"] == 1492 and info["fps"] == 30
    assert info["splits"] == {"train": "0:4"}
    _assert_same(trajs, _read_quietly(out))


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    trajs = _twin()
    old = write_lerobot(trajs[:1], tmp_path / "lr")
    before = sorted(p.relative_to(old).as_posix() for p in old.rglob("*"))

    def broken(*args, **kwargs):
        raise OSError("disk full")

    import neuract.io.lerobot_write as lw

    monkeypatch.setattr(lw, "_tasks_table", broken)  # fails after the data files are written
    with pytest.raises(OSError, match="disk full"):
        write_lerobot(trajs, tmp_path / "new")
    with pytest.raises(OSError, match="disk full"):
        write_lerobot(trajs, old, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lr"]  # no staging dir left over
    assert sorted(p.relative_to(old).as_posix() for p in old.rglob("*")) == before
    assert len(_read_quietly(old)) == 1
