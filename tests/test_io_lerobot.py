"""LeRobot reader: v3 (real dataset) and v2.x (synthetic) layouts, unit conversions."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuract.errors import ConfigError, SchemaError
from neuract.io.lerobot import read_lerobot

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def make_v21(root, robot_type="so101_follower", n_eps=2, T=10):
    (root / "meta").mkdir(parents=True)
    feats = {
        k: {"dtype": "float32", "shape": [6], "names": {"motors": JOINTS}}
        for k in ("action", "observation.state")
    }
    for k in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        feats[k] = {"dtype": "int64", "shape": [1], "names": None}
    info = {
        "codebase_version": "v2.1",
        "robot_type": robot_type,
        "fps": 50,
        "splits": {"train": "0:1", "test": f"1:{n_eps}"},
        "features": feats,
    }
    (root / "meta" / "info.json").write_text(json.dumps(info))
    (root / "meta" / "tasks.jsonl").write_text('{"task_index": 0, "task": "wave"}\n')
    for ep in range(n_eps):
        v = np.tile(np.array([-100, -50, 0, 50, 100, 25], np.float32), (T, 1))
        rows = {
            "observation.state": pa.array(list(v), type=pa.list_(pa.float32(), 6)),
            "action": pa.array(list(v + 1), type=pa.list_(pa.float32(), 6)),
            "timestamp": pa.array(np.arange(T, dtype=np.float32) / 50),
            "frame_index": pa.array(np.arange(T)),
            "episode_index": pa.array(np.full(T, ep)),
            "task_index": pa.array(np.zeros(T, dtype=np.int64)),
        }
        d = root / "data" / "chunk-000"
        d.mkdir(parents=True, exist_ok=True)
        # rows shuffled on disk: the reader must order by frame_index
        tab = pa.table(rows).take(pa.array(np.r_[T - 1, np.arange(T - 1)]))
        pq.write_table(tab, d / f"episode_{ep:06d}.parquet")
    return root


def test_v21_with_calibration_exact(tmp_path):
    root = make_v21(tmp_path / "ds")
    cal = {
        j: {"id": i + 1, "drive_mode": 0, "homing_offset": 0, "range_min": 1000, "range_max": 3000}
        for i, j in enumerate(JOINTS)
    }
    (tmp_path / "cal.json").write_text(json.dumps(cal))
    trajs = read_lerobot(root, calibration=tmp_path / "cal.json")
    assert len(trajs) == 2 and trajs[0].meta.joint_names == tuple(JOINTS)
    assert trajs[0].meta.rate_hz == 50.0 and trajs[0].meta.labels["task"] == "wave"
    assert [t.meta.labels["split"] for t in trajs] == ["train", "test"]
    step = 2 * math.pi / 4096
    # body: -100..100 spans range_min..range_max, zero at mid-range; gripper: 0..100
    expect = np.array([-1000, -500, 0, 500, 1000, -500]) * step
    np.testing.assert_allclose(trajs[0]["q"][0], expect, atol=1e-12)
    np.testing.assert_allclose(np.diff(trajs[0]["t"]), 0.02, atol=1e-6)
    # action (state + 1 unit): 1 unit is 2000/200 steps on the body, 2000/100 on the gripper
    goal = expect + np.array([10, 10, 10, 10, 10, 20]) * step
    np.testing.assert_allclose(trajs[1]["q_goal"], np.tile(goal, (10, 1)), atol=1e-12)


def test_units_deg_and_auto(tmp_path):
    root = make_v21(tmp_path / "ds", robot_type="koch_follower")
    with pytest.raises(ConfigError, match="cannot tell the position unit"):
        read_lerobot(root, robot="so101")
    tr = read_lerobot(root, robot="so101", position_units="deg")[0]
    np.testing.assert_allclose(tr["q"][0, 0], math.radians(-100))
    with pytest.raises(ConfigError, match="accepted: auto, rad, deg, range_m100_100"):
        read_lerobot(root, robot="so101", position_units="steps")
    with pytest.raises(SchemaError, match="data has 6 joints but robot 'panda' has 7"):
        read_lerobot(root, robot="panda", position_units="deg")


def test_truncated_parquet(tmp_path):
    root = make_v21(tmp_path / "ds")
    f = root / "data" / "chunk-000" / "episode_000001.parquet"
    f.write_bytes(f.read_bytes()[:100])
    with pytest.raises(SchemaError, match="episode_000001.parquet: not a readable parquet"):
        read_lerobot(root, position_units="rad")


@pytest.mark.realdata
def test_real_v3(shared_data, shared_robots):
    root = shared_data / "lerobot_so101_record_test" / "orig"
    with pytest.warns(UserWarning, match="approximate"):
        trajs = read_lerobot(root)
    assert [len(t) for t in trajs] == [373, 374, 372, 373]
    assert trajs[0].meta.robot == "so101" and trajs[0].meta.rate_hz == 30.0
    assert trajs[0].meta.labels["task"].startswith("Pick the orange cube")
    # cross-check against the derived CSV and the reference model's joint ranges
    A = np.loadtxt(root.parent / "so101_record_test_derived.csv", delimiter=",", skiprows=1)
    xml = ET.parse(shared_robots / "so101_new_calib.xml").getroot()
    rng = {
        j.get("name"): [float(x) for x in j.get("range").split()]
        for j in xml.iter("joint")
        if j.get("name") in JOINTS
    }
    lo = np.array([rng[j][0] for j in JOINTS])
    hi = np.array([rng[j][1] for j in JOINTS])
    state = A[A[:, 1] == 2][:, 10:16]
    frac = np.where(np.arange(6) == 5, state / 100, (state + 100) / 200)
    np.testing.assert_allclose(trajs[2]["q"], lo + frac * (hi - lo), atol=1e-5)
    for t in trajs:
        assert (t["q"] >= lo - 1e-9).all() and (t["q"] <= hi + 1e-9).all()
