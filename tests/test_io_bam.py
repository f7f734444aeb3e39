"""BAM / K-Scale pendulum logs: dropouts dropped and spikes masked (counted), labels kept,
real tarballs read member by member without extracting."""

from __future__ import annotations

import json
import tarfile

import numpy as np
import pytest

from neuract.errors import SchemaError
from neuract.io.bam import find_spikes, iter_bam_logs, iter_kscale_runs, read_bam_log
from neuract.io.common import DataRepairWarning


def bam_log(T=50, spikes=(), dropouts=(), motor="sts3215"):
    t = np.arange(T) * 0.01 + 1e-4
    q = 0.3 * np.sin(t * 3)
    entries = []
    for i in range(T):
        e = {
            "timestamp": t[i],
            "position": q[i],
            "speed": 0.9 * np.cos(t[i] * 3),
            "goal_position": q[i] + 0.01,
            "torque_enable": i < T - 5,
            "input_volts": 12.0,
            "temp": 36.0,
            "current": 120.0 + i,
            "load": 0,
            "torque": 1.0,
        }
        if i in spikes:
            e["position"] = -3.14
            e["speed"] = 4.7
        if i in dropouts:
            e["temp"] = 0
            e["position"] = -np.pi
        entries.append(e)
    return {
        "mass": 0.535,
        "length": 0.1,
        "kp": 24,
        "trajectory": "sin_sin",
        "motor": motor,
        "sample_rate": 100.0,
        "entries": entries,
    }


def test_channels_units_labels(tmp_path):
    p = tmp_path / "run.json"
    p.write_text(json.dumps(bam_log()))
    tr = read_bam_log(p)
    assert tr.meta.joint_names == ("pendulum",) and tr.meta.robot == "pendulum"
    assert tr.meta.labels["mass"] == 0.535 and tr.meta.labels["kp"] == 24
    assert tr.meta.labels["task"] == "sin_sin" and tr.meta.rate_hz == 100.0
    np.testing.assert_allclose(tr["current"][:, 0], (120.0 + np.arange(50)) * 1e-3)  # mA -> A
    raw = bam_log()["entries"]
    for ch, field in (("t", "timestamp"), ("q", "position"), ("qd", "speed"),
                      ("q_goal", "goal_position"), ("voltage", "input_volts"),
                      ("temperature", "temp")):
        got = tr[ch] if ch == "t" else tr[ch][:, 0]
        np.testing.assert_array_equal(got, [e[field] for e in raw], err_msg=ch)
    assert tr["torque_enable"][:, 0].sum() == 45
    assert tr["valid"].all() and tr.meta.counts == {"dropped_samples": 0, "masked_samples": 0}


def test_dropouts_and_spikes_counted(tmp_path):
    p = tmp_path / "run.json"
    raw = bam_log(spikes=(10, 30), dropouts=(20, 21))
    p.write_text(json.dumps(raw))
    with pytest.warns(DataRepairWarning, match="dropped 2 .* masked 2"):
        tr = read_bam_log(p)
    assert len(tr) == 48
    assert tr.meta.counts == {"dropped_samples": 2, "masked_samples": 2}
    masked = np.flatnonzero(~tr["valid"][:, 0])
    t_raw = np.array([e["timestamp"] for e in raw["entries"]])
    np.testing.assert_array_equal(tr["t"][masked], t_raw[[10, 30]])
    # masked samples are linear interpolations of their neighbours; the others are untouched
    q, qd = tr["q"][:, 0], tr["qd"][:, 0]
    for i in masked:
        w = (tr["t"][i] - tr["t"][i - 1]) / (tr["t"][i + 1] - tr["t"][i - 1])
        assert q[i] == pytest.approx((1 - w) * q[i - 1] + w * q[i + 1])
        assert qd[i] == pytest.approx((1 - w) * qd[i - 1] + w * qd[i + 1])  # the speed too
    assert np.abs(q).max() < 0.31
    kept = [e for i, e in enumerate(raw["entries"]) if i not in (10, 20, 21, 30)]
    t_kept = [e["timestamp"] for e in kept]
    rest = np.isin(tr["t"], t_kept)
    assert rest.sum() == 46
    np.testing.assert_array_equal(q[rest], [e["position"] for e in kept])
    np.testing.assert_array_equal(qd[rest], [e["speed"] for e in kept])


def test_find_spikes_ignores_steps():
    q = np.r_[np.zeros(5), np.ones(5)]  # a real step is not a spike
    assert find_spikes(q).size == 0
    q[2] = -3.0
    assert list(find_spikes(q)) == [2]


def test_xl330_pwm_decoded(tmp_path):
    raw = bam_log(motor="xl330")
    for i, e in enumerate(raw["entries"]):
        e["load"] = 65536 - 100 if i % 2 else 885
        del e["current"]
    p = tmp_path / "x.json"
    p.write_text(json.dumps(raw))
    tr = read_bam_log(p)
    np.testing.assert_allclose(tr["pwm"][:4, 0], [1.0, -100 / 885, 1.0, -100 / 885])


@pytest.mark.parametrize(
    "content,match",
    [
        ("", "empty file"),
        ('{"mass": 1, "entries": [{"timestamp": 0', "invalid or truncated JSON at line 1"),
        ('{"mass": 1}', "not a BAM log"),
        (
            '{"entries": [{"timestamp": 0, "position": 1}, {"timestamp": 1}]}',
            "entry 1 has no field 'position'",
        ),
        ('{"entries": [{"timestamp": 0, "position": NaN}]}', "entry 0, field 'position'"),
        (
            '{"entries": [{"timestamp": 0, "position": 0}, {"timestamp": 0, "position": 0}]}',
            "sample 1: duplicated timestamp",
        ),
    ],
)
def test_bad_logs(tmp_path, content, match):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(SchemaError, match=match) as ei:
        read_bam_log(p)
    assert "bad.json" in str(ei.value)


def test_tarball_members_read_without_extracting(tmp_path):
    src = tmp_path / "logs"
    src.mkdir()
    for k in range(3):
        (src / f"run{k}.json").write_text(json.dumps(bam_log(spikes=(5,) if k == 1 else ())))
    tgz = tmp_path / "logs.tgz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(src, arcname="raw")
    with pytest.warns(DataRepairWarning, match="3 runs read; .* masked 1"):
        trajs = list(iter_kscale_runs(tgz))
    assert [t.meta.name for t in trajs] == ["run0", "run1", "run2"]
    assert trajs[0].meta.labels["arm_mass"] == 0.036
    with pytest.warns(DataRepairWarning, match="run1.json: dropped 0 .* masked 1"):
        assert len(list(iter_bam_logs(src))) == 3


def _reference_kscale(tf, member):
    """Independent loader, as in kscale_sts3215_12v/PROVENANCE.md."""
    d = json.load(tf.extractfile(member))
    E = d["entries"]
    ok = np.array([e["temp"] != 0 and e["input_volts"] != 0 for e in E])
    q = np.array([e["position"] for e in E])[ok]
    return d, ok, q


@pytest.mark.realdata
def test_kscale_raw_subset(shared_data):
    tgz = shared_data / "kscale_sts3215_12v" / "raw.tgz"
    with tarfile.open(tgz) as tf:
        members = [m for m in tf.getmembers() if m.name.endswith(".json")][:40]
        refs = {m.name: _reference_kscale(tf, m) for m in members}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataRepairWarning)
        trajs = list(iter_kscale_runs(tgz, limit=40))
    assert len(trajs) == 40
    for tr in trajs:
        d, ok, q = refs[tr.meta.source.split("::")[1]]
        assert tr.meta.counts["dropped_samples"] == int((~ok).sum())
        valid = tr["valid"][:, 0]
        np.testing.assert_array_equal(tr["q"][valid, 0], q[valid])
        assert tr.meta.labels["mass"] == d["mass"] and tr.meta.labels["kp"] == d["kp"]
        assert tr.meta.labels["trajectory"] == d["trajectory"]
        assert abs(tr.meta.rate_hz - 100.0) < 1e-9
        assert 10.0 < np.median(tr["voltage"]) < 13.5  # a 12 V servo
        assert np.abs(tr["q"]).max() < 1.7  # no -pi failed reads left


@pytest.mark.realdata
@pytest.mark.slow
def test_kscale_full_counts(shared_data):
    import warnings

    for name, runs, drops in (("raw.tgz", 960, 22), ("processed.tgz", 476, 35)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataRepairWarning)
            trajs = list(iter_kscale_runs(shared_data / "kscale_sts3215_12v" / name))
        assert len(trajs) == runs
        assert sum(t.meta.counts["dropped_samples"] for t in trajs) == drops
        masked = sum(t.meta.counts["masked_samples"] for t in trajs)
        if name == "raw.tgz":
            assert 140 <= masked <= 180  # PROVENANCE: about 160 samples in about 150 runs
            assert sum(len(t) for t in trajs) == 576000 - drops


@pytest.mark.realdata
def test_bam_folders(shared_data):
    for sub, n in (
        ("bam_xl330_2026/raw", 16),
        ("bam_xl330_2026/processed", 16),
        ("bam_feetech_2024", 4),
    ):
        trajs = list(iter_bam_logs(shared_data / sub))
        assert len(trajs) == n
        for tr in trajs:
            assert 5.9 < tr.duration < 6.1
            assert {"mass", "length", "kp", "trajectory"} <= set(tr.meta.labels)
    raw = list(iter_bam_logs(shared_data / "bam_xl330_2026/raw"))
    assert all(np.abs(t["pwm"]).max() <= 1.0 for t in raw)
