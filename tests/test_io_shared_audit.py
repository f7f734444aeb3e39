"""Audit of the readers against the real datasets in ../shared/data: multi-sample failed
position reads are masked, units are physically plausible against the raw files, corrupted
archives and non-telemetry files are refused naming the file, ingest is byte-deterministic.

Real-data tests are marked ``realdata`` and skip when ../shared/data is absent (conftest)."""

from __future__ import annotations

import json
import math
import shutil
import tarfile
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuract.data import load_dataset
from neuract.errors import SchemaError
from neuract.io.bam import find_spikes, iter_kscale_runs, read_bam_log
from neuract.io.common import DataRepairWarning
from neuract.io.ingest import IngestConfig, run
from neuract.io.lerobot import read_lerobot
from neuract.io.nad import read_nad_csv
from neuract.io.table import read_csv

KSCALE_BURSTS = [
    # (archive, member, raw entry indices of the failed reads, physical q range around them)
    (
        "raw.tgz",
        "raw/sysid_sts3215_sin_time_square_2025-03-17_225205.json",
        [289, 290],
        (0.37, 0.46),
    ),
    (
        "processed.tgz",
        "processed/sysid_sts3215_sin_sin_2025-03-17_224334.json",
        [1115, 1116, 1117],
        (-1.11, -1.04),
    ),
]


def _quiet_ingest(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run(IngestConfig(quiet=True, **kw))


# --------------------------------------------------------------- failed-read bursts (BAM)
def test_find_spikes_bursts_of_one_to_three_samples():
    q = np.r_[np.zeros(5), -3.14, -3.14, np.zeros(5), -3.0, -2.0, -2.2, np.zeros(5)]
    assert list(find_spikes(q)) == [5, 6, 12, 13, 14]
    assert find_spikes(np.r_[np.zeros(5), np.full(4, -3.14), np.zeros(5)]).size == 0  # > 3
    assert find_spikes(np.r_[np.zeros(5), np.full(3, 1.0), np.ones(5)]).size == 0  # a step
    assert list(find_spikes(np.r_[0.0, 3.0])) == []


def test_two_sample_burst_interpolated(tmp_path):
    entries = [
        {
            "timestamp": 0.01 * i,
            "position": 0.01 * i,
            "speed": 1.0,
            "goal_position": 0.0,
            "input_volts": 12.0,
            "temp": 40.0,
            "torque_enable": True,
        }
        for i in range(20)
    ]
    for i in (8, 9):
        entries[i]["position"] = -math.pi
    (tmp_path / "b.json").write_text(
        json.dumps(
            {"mass": 1.0, "length": 0.1, "kp": 8, "trajectory": "sin_sin", "entries": entries}
        )
    )
    with pytest.warns(DataRepairWarning, match="masked 2 sample"):
        tr = read_bam_log(tmp_path / "b.json")
    np.testing.assert_allclose(tr["q"][:, 0], 0.01 * np.arange(20), atol=1e-12)
    assert list(np.flatnonzero(~tr["valid"][:, 0])) == [8, 9]


@pytest.mark.realdata
@pytest.mark.parametrize("archive,member,idx,qrange", KSCALE_BURSTS)
def test_kscale_multi_sample_failed_reads_masked(shared_data, archive, member, idx, qrange):
    tgz = shared_data / "kscale_sts3215_12v" / archive
    with tarfile.open(tgz) as tf:
        entries = json.load(tf.extractfile(member))["entries"]
    raw_q = np.array([e["position"] for e in entries])
    assert (raw_q[idx] < -1.9).all()  # the source holds failed reads there
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataRepairWarning)
        (tr,) = iter_kscale_runs(tgz, members=[member])
    assert len(tr) == len(entries)  # no dropouts in these runs: indices line up
    masked = np.flatnonzero(~tr["valid"][:, 0])
    assert list(masked) == idx and tr.meta.counts["masked_samples"] == len(idx)
    lo, hi = qrange
    assert (tr["q"][idx, 0] >= lo).all() and (tr["q"][idx, 0] <= hi).all()
    keep = tr["valid"][:, 0]
    np.testing.assert_array_equal(tr["q"][keep, 0], raw_q[keep])
    assert tr["q"][:, 0].min() > -1.7  # the pendulum's range; no -pi reads left


# ------------------------------------------------------------ units against the raw files
@pytest.mark.realdata
def test_nad_units_against_raw_and_physics(shared_data):
    f = shared_data / "nad" / "so101" / "go_up_and_stay_still" / "500g" / "train" / "001.csv"
    tr = read_nad_csv(f)
    raw = read_csv(f)
    step = 2 * math.pi / 4096
    np.testing.assert_allclose(tr["qd"][:, 1], raw.finite("vel2") * step)  # steps/s -> rad/s
    np.testing.assert_allclose(tr["current"][:, 1], raw.finite("current2") * 6.5e-3)  # -> A
    np.testing.assert_allclose(tr["voltage"][:, 1], raw.finite("volts2") * 0.1)  # dV -> V
    np.testing.assert_allclose(tr["load"][:, 1], raw.finite("load2") / 1000)  # 0.1 % -> 1
    assert 10.5 < tr["voltage"].min() and tr["voltage"].max() < 13.5  # 12 V supply
    assert 15 < tr["temperature"].min() and tr["temperature"].max() < 80
    assert tr["current"].max() < 3.0 and np.abs(tr["load"]).max() <= 1.0
    # measured velocity agrees with the derivative of position (the joints that move)
    fd = np.gradient(tr["q"], tr["t"], axis=0)
    for j in (1, 2, 3):
        a, b = fd[:, j], tr["qd"][:, j]
        assert np.corrcoef(a, b)[0, 1] > 0.85
        assert 0.85 < a @ b / (b @ b) < 1.15
    # STS3215 load is stored with the register's sign: negative when driving towards +q
    assert np.corrcoef(tr["load"][:, 1], tr["q_goal"][:, 1] - tr["q"][:, 1])[0, 1] < -0.9

    f = shared_data / "nad" / "force_sensor" / "force_z_minus" / "train" / "001.csv"
    tr, raw = read_nad_csv(f), read_csv(f)
    np.testing.assert_allclose(tr["current"][:, 1], raw.finite("current2") * 1e-3)  # mA -> A
    np.testing.assert_allclose(tr["pwm"][:, 1], raw.finite("pwm2") / 885)
    assert 11.0 < tr["voltage"].min() and tr["voltage"].max() < 14.0
    # Dynamixel PWM pushes towards the goal
    assert np.corrcoef(tr["pwm"][:, 1], tr["q_goal"][:, 1] - tr["q"][:, 1])[0, 1] > 0.9


@pytest.mark.realdata
def test_xl330_pwm_decoded_and_signed(shared_data):
    f = shared_data / "bam_xl330_2026" / "raw" / "2026-01-15_10h28m42.json"
    load = np.array([e["load"] for e in json.loads(f.read_text())["entries"]], dtype=float)
    tr = read_bam_log(f)
    np.testing.assert_allclose(tr["pwm"][:, 0], np.where(load > 32767, load - 65536, load) / 885)
    on = tr["torque_enable"][:, 0]
    err = tr["q_goal"][on, 0] - tr["q"][on, 0]
    assert np.corrcoef(tr["pwm"][on, 0], err)[0, 1] > 0.95
    fd = np.gradient(tr["q"][:, 0], tr["t"])
    assert np.corrcoef(fd, tr["qd"][:, 0])[0, 1] > 0.9


# --------------------------------------------- corrupted files and non-telemetry files
@pytest.mark.realdata
@pytest.mark.parametrize("n_bytes", [10, 300_000])
def test_truncated_archive_named(shared_data, tmp_path, n_bytes):
    bad = tmp_path / "raw.tgz"
    with open(shared_data / "kscale_sts3215_12v" / "raw.tgz", "rb") as fh:
        bad.write_bytes(fh.read(n_bytes))
    with pytest.raises(SchemaError, match=r"raw\.tgz: truncated or corrupted archive"):
        _quiet_ingest(source=bad, format="bam", out=tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
    with pytest.raises(SchemaError, match=r"raw\.tgz: truncated or corrupted archive"):
        list(iter_kscale_runs(bad))


@pytest.mark.realdata
def test_truncated_real_files_named(shared_data, tmp_path):
    src = shared_data / "bam_feetech_2024" / "2024-10-26_12h23m27.json"
    text = src.read_bytes()
    (tmp_path / "bam").mkdir()
    (tmp_path / "bam" / src.name).write_bytes(text[: len(text) // 2])
    with pytest.raises(SchemaError, match="12h23m27.json: invalid or truncated JSON at line"):
        _quiet_ingest(source=tmp_path / "bam", format="bam", out=tmp_path / "ds")
    nad = shared_data / "nad" / "so101" / "go_up_and_stay_still" / "empty" / "train" / "001.csv"
    text = nad.read_bytes()
    (tmp_path / "001.csv").write_bytes(text[: len(text) // 2])
    with pytest.raises(SchemaError, match=r"001\.csv line \d+ .*truncated file"):
        _quiet_ingest(source=tmp_path / "001.csv", format="nad", out=tmp_path / "ds")
    assert not (tmp_path / "ds").exists()


@pytest.mark.realdata
def test_non_telemetry_files_refused_clearly(shared_data, tmp_path):
    with pytest.raises(SchemaError) as exc:
        _quiet_ingest(source=shared_data / "bam_atomic_mx_2024", format="bam", out=tmp_path / "a")
    msg = str(exc.value)
    assert "friction_1.json: not a BAM log: found a JSON object with keys" in msg
    assert "'timestamps'" in msg and "expected a JSON object with 'entries'" in msg
    # the K-Scale folder: its docs' JSON are refused, and the archives are pointed at
    with pytest.raises(SchemaError, match=r"friction_params/m1\.json: not a BAM log.*raw\.tgz"):
        _quiet_ingest(source=shared_data / "kscale_sts3215_12v", format="bam", out=tmp_path / "k")
    # a binary file with a .json name
    shutil.copy(
        shared_data / "lerobot_so101_record_test" / "orig" / "meta" / "tasks.parquet",
        tmp_path / "tasks.json",
    )
    with pytest.raises(SchemaError, match=r"tasks\.json: not a text file"):
        read_bam_log(tmp_path / "tasks.json")
    # a LeRobot dataset one level down is named
    with pytest.raises(
        SchemaError,
        match=r"not a LeRobot dataset root.*pass one as SOURCE: "
        r".*lerobot_so101_record_test/orig",
    ):
        _quiet_ingest(
            source=shared_data / "lerobot_so101_record_test", format="lerobot", out=tmp_path / "l"
        )
    # docs beside NAD CSVs are not read at all
    s = _quiet_ingest(
        source=shared_data / "nad", format="nad", include="so101/*", out=tmp_path / "n"
    )
    assert s["episodes"] == 3
    for d in ("a", "k", "l"):
        assert not (tmp_path / d).exists()


def test_json_null_and_duplicate_time_messages(tmp_path):
    entries = [{"timestamp": 0.01 * i, "position": 0.0} for i in range(5)]
    entries[3]["position"] = None
    (tmp_path / "n.json").write_text(json.dumps({"entries": entries}))
    with pytest.raises(SchemaError, match="entry 3, field 'position': value null; expected a"):
        read_bam_log(tmp_path / "n.json")
    (tmp_path / "d.csv").write_text("t,a\n1,0\n1,0\n")
    with pytest.raises(SchemaError) as exc:
        read_csv(tmp_path / "d.csv").time("t")
    assert "duplicated timestamp 1.0 after 1.0;" in str(exc.value)
    assert "np.float64" not in str(exc.value)


# ------------------------------------------------------------------- LeRobot drive mode
def test_lerobot_drive_mode_gripper(tmp_path):
    joints = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    root = tmp_path / "ds"
    (root / "meta").mkdir(parents=True)
    feats = {
        k: {"dtype": "float32", "shape": [6], "names": [f"{j}.pos" for j in joints]}
        for k in ("action", "observation.state")
    }
    for k in ("timestamp", "frame_index", "episode_index"):
        feats[k] = {"dtype": "int64", "shape": [1], "names": None}
    (root / "meta" / "info.json").write_text(
        json.dumps(
            {
                "codebase_version": "v3.0",
                "robot_type": "so101_follower",
                "fps": 30,
                "features": feats,
            }
        )
    )
    # LeRobot _normalize with drive_mode 1: body -norm, gripper 100 - norm. Raw steps
    # 1500 (body) and 2500 (gripper) in a 1000..3000 range: norm -50 and 75.
    v = np.array([50, 50, 50, 50, 50, 25], np.float32)
    d = root / "data" / "chunk-000"
    d.mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "observation.state": pa.array([v, v], type=pa.list_(pa.float32(), 6)),
                "action": pa.array([v, v], type=pa.list_(pa.float32(), 6)),
                "timestamp": pa.array(np.array([0.0, 1 / 30], np.float32)),
                "frame_index": pa.array([0, 1]),
                "episode_index": pa.array([0, 0]),
            }
        ),
        d / "file-000.parquet",
    )
    cal = {
        j: {"id": i + 1, "drive_mode": 1, "homing_offset": 0, "range_min": 1000, "range_max": 3000}
        for i, j in enumerate(joints)
    }
    (tmp_path / "cal.json").write_text(json.dumps(cal))
    (tr,) = read_lerobot(root, calibration=tmp_path / "cal.json")
    step = 2 * math.pi / 4096
    expect = np.array([-500, -500, -500, -500, -500, 500]) * step  # raw - mid-range (2000)
    np.testing.assert_allclose(tr["q"][0], expect, atol=1e-12)
    np.testing.assert_allclose(tr["q_goal"][1], expect, atol=1e-12)


# ------------------------------------------------------------------------ determinism
@pytest.mark.realdata
def test_ingest_byte_identical(shared_data, tmp_path):
    outs = []
    for k in range(2):
        for name, kw in (
            ("nad", dict(source=shared_data / "nad", format="nad", include="so101/*")),
            ("bam", dict(source=shared_data / "bam_xl330_2026" / "raw", format="bam")),
        ):
            out = tmp_path / f"{name}{k}"
            _quiet_ingest(out=out, **kw)
            outs.append(out)
    for a, b in zip(outs[:2], outs[2:], strict=True):
        files = sorted(p.relative_to(a) for p in (a / "data").glob("*.parquet"))
        files += [p.relative_to(a) for p in (a / "meta").glob("*.json")]
        assert len(files) > 2
        for f in files:
            assert (a / f).read_bytes() == (b / f).read_bytes(), f
    ds = load_dataset(outs[0])
    for tr in ds:
        assert np.all(np.diff(tr["t"]) > 0)
        assert all(np.isfinite(np.asarray(tr[c], dtype=float)).all() for c in tr.channels)
