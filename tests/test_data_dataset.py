"""Dataset on disk: exact round trip, stats equal numpy's, atomic (no partial output)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from neuract.data import Trajectory, TrajectoryMeta, load_dataset, write_dataset
from neuract.errors import ConfigError, SchemaError


def random_traj(rng, name, T=50, n=3, labels=None):
    t = np.cumsum(rng.uniform(0.005, 0.015, T))
    mask = rng.random(T) > 0.3
    ch = {
        "t": t,
        "q": rng.normal(size=(T, n)),
        "qd": rng.normal(size=(T, n)),
        "current": rng.normal(size=(T, n)),
        "torque_enable": rng.random((T, n)) > 0.5,
        "ee_force": rng.normal(size=(T, 3)),
        "ee_force_mask": mask,
        "condition": np.ones(T, dtype=np.int8),
    }
    meta = TrajectoryMeta(
        robot="toy",
        joint_names=("a", "b", "c")[:n],
        source=f"{name}.csv",
        name=name,
        labels=labels or {"task": name, "mass": 0.1 * T},
        counts={"dropped_samples": 2},
    )
    return Trajectory(ch, meta)


def test_round_trip_exact(tmp_path):
    rng = np.random.default_rng(0)
    trajs = [random_traj(rng, f"ep{i}", T=20 + i) for i in range(4)]
    out = write_dataset(trajs, tmp_path / "ds")
    ds = load_dataset(out)
    assert len(ds) == 4 and ds.robot == "toy" and ds.joint_names == ("a", "b", "c")
    for a, b in zip(trajs, ds):
        assert a.equals(b)
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["units"]["q"] == "rad" and info["counts"]["dropped_samples"] == 8
    assert info["n_samples"] == sum(len(t) for t in trajs)
    assert ds.where(task="ep2") == [2]
    assert ds.where(task="ep2", mass=trajs[2].meta.labels["mass"]) == [2]
    assert ds.where(task="ep2", mass=trajs[0].meta.labels["mass"]) == []  # every label must match


def test_stats_equal_numpy(tmp_path):
    rng = np.random.default_rng(1)
    trajs = [random_traj(rng, f"ep{i}", T=30 + 7 * i) for i in range(3)]
    ds = load_dataset(write_dataset(trajs, tmp_path / "ds"))
    q = np.concatenate([t["q"] for t in trajs])
    np.testing.assert_array_equal(ds.stats["q"]["mean"], np.mean(q, 0))
    np.testing.assert_array_equal(ds.stats["q"]["std"], np.std(q, 0))
    np.testing.assert_array_equal(ds.stats["q"]["min"], q.min(0))
    np.testing.assert_array_equal(ds.stats["q"]["max"], q.max(0))
    f = np.concatenate([t["ee_force"][t["ee_force_mask"]] for t in trajs])
    np.testing.assert_array_equal(ds.stats["ee_force"]["mean"], f.mean(0))
    assert ds.stats["ee_force"]["count"] == len(f)
    assert "torque_enable" not in ds.stats


def test_existing_dir_refused_and_overwrite(tmp_path):
    rng = np.random.default_rng(2)
    trajs = [random_traj(rng, "a")]
    write_dataset(trajs, tmp_path / "ds")
    with pytest.raises(ConfigError, match="already exists"):
        write_dataset(trajs, tmp_path / "ds")
    write_dataset([random_traj(rng, "b")], tmp_path / "ds", overwrite=True)
    assert load_dataset(tmp_path / "ds")[0].meta.name == "b"


def test_failed_write_leaves_nothing(tmp_path):
    rng = np.random.default_rng(3)
    good = random_traj(rng, "a")
    other_robot = Trajectory(
        {"t": np.arange(3.0), "q": np.zeros((3, 1))},
        TrajectoryMeta(robot="pendulum", joint_names=("p",), name="x"),
    )
    with pytest.raises(SchemaError, match="episode 1 .* robot 'pendulum'"):
        write_dataset([good, other_robot], tmp_path / "ds")
    with pytest.raises(SchemaError, match="occurs twice"):
        write_dataset([good, good], tmp_path / "ds")
    assert list(tmp_path.iterdir()) == []


def test_load_errors(tmp_path):
    with pytest.raises(SchemaError, match="not a neuract dataset"):
        load_dataset(tmp_path)
    rng = np.random.default_rng(4)
    out = write_dataset([random_traj(rng, "a")], tmp_path / "ds")
    (out / "data" / "episode_000000.parquet").unlink()
    with pytest.raises(SchemaError, match="episode file listed in meta/info.json is missing"):
        load_dataset(out)[0]
    # an empty or truncated episode file, and a channel of text: clear errors naming the file
    out = write_dataset([random_traj(rng, "b")], tmp_path / "ds2")
    f = out / "data" / "episode_000000.parquet"
    good = f.read_bytes()
    for broken in (b"", good[: len(good) // 2]):
        f.write_bytes(broken)
        with pytest.raises(SchemaError, match="not a readable parquet file"):
            load_dataset(out)[0]
    import pyarrow as pa
    import pyarrow.parquet as pq

    f.write_bytes(good)
    table = pq.read_table(f)
    col = table.column_names.index("q.j0") if "q.j0" in table.column_names else 1
    name = table.column_names[col]
    table = table.set_column(col, name, pa.array(["x"] * table.num_rows))
    pq.write_table(table, f)
    with pytest.raises(SchemaError, match="does not hold numbers"):
        load_dataset(out)[0]


def test_info_json_joint_lists_must_agree(tmp_path):
    rng = np.random.default_rng(5)
    out = write_dataset([random_traj(rng, "a"), random_traj(rng, "b")], tmp_path / "ds")
    info_path = out / "meta" / "info.json"
    good = json.loads(info_path.read_text())
    assert len(load_dataset(out)) == 2
    bad = json.loads(json.dumps(good))
    bad["n_joints"] += 1
    info_path.write_text(json.dumps(bad))
    with pytest.raises(SchemaError, match="n_joints"):
        load_dataset(out)
    bad = json.loads(json.dumps(good))
    bad["episodes"][1]["meta"]["joint_names"] = ["x", "y", "z"]
    info_path.write_text(json.dumps(bad))
    with pytest.raises(SchemaError, match="episode 1"):
        load_dataset(out)
