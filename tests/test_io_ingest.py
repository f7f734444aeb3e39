"""``neuract ingest``: real datasets ingest and round-trip exactly; failures leave nothing."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest

from neuract.cli import main
from neuract.data import load_dataset
from neuract.io.ingest import IngestConfig, run


def ingest(*args):
    return main(["ingest", *map(str, args), "--quiet"])


def test_unknown_format_lists_formats(tmp_path, capsys):
    rc = ingest(tmp_path, "--format", "rosbag", "--out", tmp_path / "out")
    err = capsys.readouterr().err
    assert rc == 1 and "unknown format type 'rosbag'" in err
    assert "bam, csv, lerobot, nad" in err
    assert not (tmp_path / "out").exists()


def _csv_source(tmp_path, n_files=2, bad_last=False):
    src = tmp_path / "logs"
    src.mkdir()
    for k in range(n_files):
        lines = ["time,p1,p2,i1,i2"] + [f"{i * 0.01},{i},{-i},{100 * i},{50}" for i in range(30)]
        text = "\r\n".join(lines) + "\r\n"
        if bad_last and k == n_files - 1:
            text = text[:-12]  # truncated mid-row
        (src / f"run{k}.csv").write_text(text)
    mapping = {
        "robot": "planar2",
        "joints": ["joint1", "joint2"],
        "time": {"column": "time", "unit": "s"},
        "columns": [
            {"column": "p1", "channel": "q", "joint": "joint1", "unit": "deg"},
            {"column": "p2", "channel": "q", "joint": "joint2", "unit": "deg"},
            {"column": "i1", "channel": "current", "joint": "joint1", "unit": "mA"},
            {"column": "i2", "channel": "current", "joint": "joint2", "unit": "mA"},
        ],
    }
    (tmp_path / "map.json").write_text(json.dumps(mapping))
    return src, tmp_path / "map.json"


def test_csv_ingest_resample_derivatives(tmp_path):
    src, m = _csv_source(tmp_path)
    out = tmp_path / "ds"
    rc = ingest(
        src, "--format", "csv", "--mapping", m, "--out", out, "--resample-hz", "50",
        "--derivatives", "--derivative-window-s", "0.2",
    )
    assert rc == 0
    ds = load_dataset(out)
    assert len(ds) == 2 and ds.robot == "planar2"
    tr = ds[0]
    assert tr.meta.rate_hz == 50.0 and len(tr) == 15
    # q = i deg at t = i * 10 ms: qd = 100 deg/s exactly (linear), qdd = 0
    np.testing.assert_allclose(tr["qd"][:, 0], np.radians(100.0), rtol=1e-9)
    np.testing.assert_allclose(tr["qdd"], 0.0, atol=1e-6)
    assert tr.meta.labels["derivatives"]["window_samples"] == 11  # 0.2 s at 50 Hz, made odd
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["config"]["format"] == "csv"


@pytest.mark.parametrize(
    "extra,match",
    [
        ((), "line 31 (data row 30): 3 fields; expected 5 like the header (truncated file?)"),
        (("--robot", "panda"), "data has 2 joints but robot 'panda' has 7"),
    ],
)
def test_failed_ingest_leaves_no_output(tmp_path, capsys, extra, match):
    src, m = _csv_source(tmp_path, bad_last=not extra)
    out = tmp_path / "ds"
    rc = ingest(src, "--format", "csv", "--mapping", m, "--out", out, *extra)
    err = capsys.readouterr().err
    assert rc == 1 and match in err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ds")] == []


def test_csv_needs_mapping_and_out_must_be_new(tmp_path, capsys):
    src, m = _csv_source(tmp_path)
    assert ingest(src, "--format", "csv", "--out", tmp_path / "ds") == 1
    assert "needs --mapping" in capsys.readouterr().err
    (tmp_path / "ds").mkdir()
    assert ingest(src, "--format", "csv", "--mapping", m, "--out", tmp_path / "ds") == 1
    assert "already exists; pass --overwrite" in capsys.readouterr().err


def test_empty_source_file(tmp_path, capsys):
    (tmp_path / "e.csv").write_text("")
    rc = ingest(tmp_path / "e.csv", "--format", "nad", "--out", tmp_path / "ds")
    assert rc == 1 and "e.csv: empty file" in capsys.readouterr().err
    assert not (tmp_path / "ds").exists()


@pytest.mark.realdata
def test_nad_round_trip_exact(shared_data, tmp_path):
    from neuract.io.nad import read_nad_csv

    out = tmp_path / "nad_so101"
    summary = run(
        IngestConfig(
            source=shared_data / "nad", format="nad", out=out, include="so101/*", quiet=True
        )
    )
    assert summary["episodes"] == 3 and summary["robot"] == "so101"
    ds = load_dataset(out)
    for tr in ds:
        direct = read_nad_csv(shared_data / "nad" / (tr.meta.name + ".csv"), name=tr.meta.name)
        assert tr.equals(direct)
    cur = np.concatenate([t["current"] for t in ds])
    np.testing.assert_array_equal(ds.stats["current"]["mean"], cur.mean(0))
    np.testing.assert_array_equal(ds.stats["current"]["std"], cur.std(0))


@pytest.mark.realdata
def test_nad_mixed_robots_refused(shared_data, tmp_path, capsys):
    rc = ingest(shared_data / "nad", "--format", "nad", "--out", tmp_path / "ds")
    assert rc == 1 and "several robots" in capsys.readouterr().err
    assert not (tmp_path / "ds").exists()


@pytest.mark.realdata
def test_kscale_ingest_subset(shared_data, tmp_path):
    out = tmp_path / "ks"
    summary = run(
        IngestConfig(
            source=shared_data / "kscale_sts3215_12v" / "raw.tgz",
            format="bam",
            out=out,
            limit=25,
            quiet=True,
        )
    )
    assert summary["episodes"] == 25 and summary["robot"] == "pendulum"
    ds = load_dataset(out)
    assert {"mass", "length", "kp", "trajectory", "arm_mass"} <= set(ds[0].meta.labels)
    assert ds.info["counts"]["dropped_samples"] == summary["dropped_samples"]


@pytest.mark.realdata
def test_lerobot_and_bam_dirs_ingest(shared_data, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = run(
            IngestConfig(
                source=shared_data / "lerobot_so101_record_test" / "orig",
                format="lerobot",
                out=tmp_path / "lr",
                quiet=True,
            )
        )
    assert s["episodes"] == 4 and s["samples"] == 1492
    s = run(
        IngestConfig(
            source=shared_data / "bam_xl330_2026" / "raw",
            format="bam",
            out=tmp_path / "xl",
            quiet=True,
        )
    )
    assert s["episodes"] == 16 and "pwm" in s["channels"]
    s = run(
        IngestConfig(
            source=shared_data / "bam_feetech_2024",
            format="bam",
            out=tmp_path / "ft",
            quiet=True,
            resample_hz=50.0,
        )
    )
    assert s["episodes"] == 4 and load_dataset(tmp_path / "ft")[0].meta.rate_hz == 50.0


def test_summary_printed(tmp_path, capsys):
    src, m = _csv_source(tmp_path)
    rc = main(
        ["ingest", str(src), "--format", "csv", "--mapping", str(m), "--out", str(tmp_path / "ds")]
    )
    out = capsys.readouterr().out
    assert rc == 0
    for word in ("episodes", "duration", "rate", "channels", "labels", "dropped samples"):
        assert word in out
    shutil.rmtree(tmp_path / "ds")


@pytest.mark.parametrize("extra,match", [(["--limit", "0"], "--limit 0"),
                                         (["--limit", "-1"], "--limit -1"),
                                         (["--resample-hz", "1e9"], "--resample-hz"),
                                         (["--derivative-window-s", "nan"],
                                          "--derivative-window-s")])
def test_bad_numeric_options_are_named(tmp_path, capsys, extra, match):
    src, m = _csv_source(tmp_path)
    out = tmp_path / "ds"
    assert ingest(src, "--format", "csv", "--mapping", m, "--out", out, *extra) == 1
    assert match in capsys.readouterr().err and not out.exists()
