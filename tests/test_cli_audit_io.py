"""CLI audit of ingest / estimate / simulate / export / adapt: existing outputs, degenerate
episodes, malformed inputs and the wording of errors (each test: one finding)."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

from _tiny import TINY, tiny_episodes
from neuract.cli import main
from neuract.errors import CheckpointError, ConfigError, SchemaError


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """Untrained tiny estimator / simulator checkpoints, a twin dataset and a dataset of one
    one-sample episode."""
    from neuract.data import write_dataset
    from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig, save_checkpoint

    root = tmp_path_factory.mktemp("audit")
    ck = {}
    for mode in ("estimator", "simulator"):
        cfg = NeuralActuatorConfig(n_joints=6, mode=mode, effort="load", **TINY)
        ck[mode] = save_checkpoint(NeuralActuator(cfg), root / f"ck_{mode}")
    eps = tiny_episodes(0.1)
    ds = write_dataset(eps, root / "ds")
    one = write_dataset([eps[0].slice(0, 1)], root / "one")
    return root, ck, ds, one


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    return err.splitlines()[-1] if err else ""


# --------------------------------------------------------------------------- 1. export
def test_export_refuses_an_existing_out_unless_overwrite(kit, tmp_path, capsys):
    _, ck, _, _ = kit
    other = tmp_path / "other.onnx"
    other.write_text("important\n")
    base = ["export", "--checkpoint", str(ck["estimator"]), "--check-windows", "4", "--quiet"]
    assert main([*base, "--out", str(other)]) == 1
    err = _err(capsys)
    assert "other.onnx" in err and "already exists" in err and "--overwrite" in err
    assert other.read_text() == "important\n"
    # --overwrite replaces only an ONNX file neuract export wrote
    assert main([*base, "--out", str(other), "--overwrite"]) == 1
    assert "not an ONNX file neuract export wrote" in _err(capsys)
    assert other.read_text() == "important\n"
    mine = tmp_path / "mine.onnx"
    assert main([*base, "--out", str(mine)]) == 0
    assert main([*base, "--out", str(mine)]) == 1
    assert "already exists" in _err(capsys)
    assert main([*base, "--out", str(mine), "--overwrite"]) == 0


def test_export_aot_refuses_an_existing_directory_before_compiling(kit, tmp_path, capsys,
                                                                   monkeypatch):
    import neuract.neuralactuator.compiled as compiled

    def no_compile(*a, **k):
        raise AssertionError("compile_aot reached: the existing --out was not refused")

    monkeypatch.setattr(compiled, "compile_aot", no_compile)
    _, ck, _, _ = kit
    pk = tmp_path / "pk"
    pk.mkdir()
    assert main(["export", "--checkpoint", str(ck["estimator"]), "--format", "aot", "--out",
                 str(pk), "--quiet"]) == 1
    assert "already exists" in _err(capsys) and pk.is_dir()


def test_export_interrupted_leaves_no_folder_it_created(kit, tmp_path, capsys, monkeypatch):
    import neuract.pipeline.export_verb as ev

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ev, "_export", interrupted)
    _, ck, _, _ = kit
    out = tmp_path / "new" / "deep" / "a.onnx"
    assert main(["export", "--checkpoint", str(ck["estimator"]), "--out", str(out),
                 "--quiet"]) == 130
    assert not (tmp_path / "new").exists()
    # a folder that existed before is kept
    (tmp_path / "kept").mkdir()
    assert main(["export", "--checkpoint", str(ck["estimator"]), "--out",
                 str(tmp_path / "kept" / "a.onnx"), "--quiet"]) == 130
    assert (tmp_path / "kept").is_dir() and not any((tmp_path / "kept").iterdir())


def test_a_failed_export_leaves_no_folder_it_created(kit, tmp_path, capsys, monkeypatch):
    import neuract.neuralactuator.export as ex

    def off(ref, got):  # every output far from torch's: the check fails
        return {k: {"max_abs_diff": 9.0, "mean_abs_over_std": 9.0, "max_abs_over_std": 9.0}
                for k in ex.OUTPUTS}

    monkeypatch.setattr(ex, "output_deviation", off)
    _, ck, _, _ = kit
    out = tmp_path / "new" / "deep" / "a.onnx"
    assert main(["export", "--checkpoint", str(ck["estimator"]), "--out", str(out),
                 "--check-windows", "4", "--quiet"]) == 1
    assert "does not compute what the checkpoint computes" in _err(capsys)
    assert not (tmp_path / "new").exists()


# --------------------------------------------------------------------------- 2. estimate/simulate
def test_estimate_and_simulate_overwrite_only_their_own_outputs(kit, capsys):
    root, ck, ds, _ = kit
    est, sim = root / "est_out", root / "sim_out"
    assert main(["estimate", "--checkpoint", str(ck["estimator"]), "--data", str(ds),
                 "--out", str(est), "--quiet"]) == 0
    assert main(["simulate", "--checkpoint", str(ck["simulator"]), "--data", str(ds),
                 "--out", str(sim), "--quiet"]) == 0
    est_summary = (est / "summary.json").read_text()
    sim_summary = (sim / "summary.json").read_text()
    assert main(["estimate", "--checkpoint", str(ck["estimator"]), "--data", str(ds),
                 "--out", str(sim), "--quiet", "--overwrite"]) == 1
    err = _err(capsys)
    assert "sim_out" in err and "neuract simulate output" in err
    assert main(["simulate", "--checkpoint", str(ck["simulator"]), "--data", str(ds),
                 "--out", str(est), "--quiet", "--overwrite"]) == 1
    assert "neuract estimate output" in _err(capsys)
    assert (sim / "summary.json").read_text() == sim_summary
    assert (est / "summary.json").read_text() == est_summary
    # each still replaces its own (the summary.json of earlier versions names the mode too)
    assert main(["estimate", "--checkpoint", str(ck["estimator"]), "--data", str(ds),
                 "--out", str(est), "--quiet", "--overwrite"]) == 0
    assert main(["simulate", "--checkpoint", str(ck["simulator"]), "--data", str(ds),
                 "--out", str(sim), "--quiet", "--overwrite"]) == 0


def test_check_out_default_is_simulates_own_outputs(tmp_path):
    """check_out's default mode and OUT_DEST (the former name of SIMULATE_DEST) describe
    simulate's outputs only."""
    from neuract.atomic import atomic_dir
    from neuract.pipeline.streaming import OUT_DEST, SIMULATE_DEST, check_out

    assert OUT_DEST is SIMULATE_DEST
    old = tmp_path / "old_estimate"
    old.mkdir()
    (old / "summary.json").write_text(json.dumps({"mode": "estimator", "episodes": []}))
    with pytest.raises(ConfigError, match="neuract estimate output"):
        check_out(old, True)
    with pytest.raises(ConfigError), atomic_dir(old, overwrite=True, **OUT_DEST):
        pass
    assert (old / "summary.json").is_file()


# --------------------------------------------------------------------------- 3. short episodes
def test_adapt_refuses_a_one_sample_episode(kit, capsys):
    root, ck, _, one = kit
    out = root / "adapt_one"
    assert main(["adapt", "--checkpoint", str(ck["estimator"]), "--data", str(one),
                 "--out", str(out), "--steps", "1", "--quiet"]) == 1
    err = _err(capsys)
    assert "--data" in err and "1 samples" in err and "history of 8" in err
    assert not out.exists()


def test_smooth_velocity_of_one_sample_is_zero():
    from neuract.neuralactuator.data import smooth_velocity

    np.testing.assert_array_equal(smooth_velocity(np.ones((1, 3)), np.zeros(1)),
                                  np.zeros((1, 3)))


def test_estimate_stream_refuses_a_short_episode_like_the_whole_pass(kit, capsys):
    root, ck, _, one = kit
    for extra in ([], ["--stream"]):
        out = root / f"est_one{len(extra)}"
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            assert main(["estimate", "--checkpoint", str(ck["estimator"]), "--data", str(one),
                         "--out", str(out), "--quiet", *extra]) == 1
        assert "fewer than the model's history of 8" in _err(capsys)
        assert not out.exists()


# --------------------------------------------------------------------------- 4. binary input
def test_ingest_of_a_binary_file_names_it(tmp_path, capsys):
    from neuract.io.table import read_csv

    b = tmp_path / "b.csv"
    b.write_bytes(bytes([0xB0, 0xFF, 0x80, 0x41, 0x2C, 0x0A]) * 50)
    with pytest.raises(SchemaError, match="not a text file"):
        read_csv(b)
    assert main(["ingest", str(b), "--format", "nad", "--out", str(tmp_path / "o"),
                 "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "b.csv" in err and "not a text file" in err


# --------------------------------------------------------------------------- 5. CSV mapping
_MAPPING = {"robot": "planar2", "joints": ["a", "b"], "time": {"column": "t", "unit": "s"},
            "columns": [{"column": "qa", "channel": "q", "joint": "a", "unit": "rad"},
                        {"column": "qb", "channel": "q", "joint": "b", "unit": "rad"},
                        {"column": "fz", "channel": "ee_force", "joint": "z", "unit": "N"}],
            "force_sentinel": -999}


@pytest.mark.parametrize("change, needle", [
    ({"force_sentinel": "-999"}, "force_sentinel = '-999'"),
    ({"force_sentinel": True}, "force_sentinel = True"),
    ({"force_sentinel": float("nan")}, "force_sentinel = nan"),
    ({"time": {"column": "t", "unit": "s", "offset": 3}}, "time: unknown key(s) ['offset']"),
    ({"time": {"column": 5}}, "time.column = 5"),
    ({"robot": 7}, "robot = 7"),
    ({"columns": [{"column": "qa", "channel": "q", "joint": "a", "unit": 1}]},
     "columns[0].unit = 1"),
    ({"columns": ["qa"]}, "columns[0] = 'qa'"),
])
def test_mapping_value_types_are_checked(change, needle):
    from neuract.io.csv import ColumnMapping

    with pytest.raises(ConfigError) as exc:
        ColumnMapping.from_dict({**_MAPPING, **change})
    assert needle in str(exc.value)


def test_mapping_numeric_sentinel_masks_forces(tmp_path):
    from neuract.io.csv import ColumnMapping, read_mapped

    p = tmp_path / "log.csv"
    p.write_text("t,qa,qb,fz\n0,0,0,-999\n0.01,0,0,2.5\n")
    tr = read_mapped(p, ColumnMapping.from_dict(_MAPPING))
    assert tr["ee_force_mask"].tolist() == [False, True]


# --------------------------------------------------------------------------- 6. robots, lengths
def _nad_so101(path, rows: int, dt: float = 0.01):
    from neuract.io.nad import SO101_COLUMNS

    lines = [",".join(SO101_COLUMNS)]
    for r in range(rows):
        vals = {c: ("-999" if c.startswith("force") else "0.5" if c.startswith("pos")
                    else "120" if c.startswith("volts") else "0") for c in SO101_COLUMNS}
        vals["timestamp"] = repr(r * dt)
        lines.append(",".join(vals[c] for c in SO101_COLUMNS))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_ingest_refuses_an_unknown_robot(tmp_path, capsys):
    src = _nad_so101(tmp_path / "001.csv", 5)
    out = tmp_path / "o"
    assert main(["ingest", str(src), "--format", "nad", "--robot", "foo", "--out", str(out),
                 "--quiet"]) == 1
    err = _err(capsys)
    assert "--robot 'foo'" in err and "so101" in err and "pendulum" in err
    assert not out.exists()
    assert main(["ingest", str(src), "--format", "nad", "--robot", "so101", "--out", str(out),
                 "--quiet"]) == 0


def test_bam_refuses_a_robot_of_another_joint_count(tmp_path, capsys):
    from neuract.io.bam import parse_bam_log

    log = {"mass": 0.5, "entries": [{"timestamp": 0.01 * i, "position": 0.1 * i}
                                    for i in range(5)]}
    with pytest.raises(SchemaError, match="data has 1 joints but robot 'so101' has 6"):
        parse_bam_log(log, "x.json", robot="so101")
    assert parse_bam_log(log, "x.json").meta.robot == "pendulum"
    src = tmp_path / "log.json"
    src.write_text(json.dumps(log))
    out = tmp_path / "o"
    assert main(["ingest", str(src), "--format", "bam", "--robot", "so101", "--out", str(out),
                 "--quiet"]) == 1
    assert "robot 'so101' has 6" in _err(capsys) and not out.exists()


def test_ingest_refuses_one_sample_episodes(tmp_path, capsys):
    one = _nad_so101(tmp_path / "one.csv", 1)
    out = tmp_path / "o"
    assert main(["ingest", str(one), "--format", "nad", "--out", str(out), "--quiet"]) == 1
    err = _err(capsys)
    assert "one.csv" in err and "1 sample(s)" in err and "at least 2" in err
    three = _nad_so101(tmp_path / "three.csv", 3, dt=0.5)  # 1 s long
    assert main(["ingest", str(three), "--format", "nad", "--out", str(out), "--quiet",
                 "--resample-hz", "0.5"]) == 1
    err = _err(capsys)
    assert "--resample-hz 0.5" in err and "at least 1 Hz" in err
    assert not out.exists()
    assert main(["ingest", str(three), "--format", "nad", "--out", str(out), "--quiet",
                 "--resample-hz", "1"]) == 0


def test_ingest_skip_bad_leaves_out_bad_episodes_with_a_warning(tmp_path, capsys):
    from neuract.data.dataset import load_dataset

    src = tmp_path / "src"
    src.mkdir()
    _nad_so101(src / "a.csv", 5)
    _nad_so101(src / "b.csv", 1)  # one sample: too short
    (src / "c.csv").write_bytes(bytes([0xB0, 0xFF, 0x80, 0x41, 0x2C, 0x0A]) * 50)  # unreadable
    out = tmp_path / "o"
    assert main(["ingest", str(src), "--format", "nad", "--out", str(out), "--quiet"]) == 1
    assert not out.exists()  # by default the first bad episode stops it, nothing written
    with pytest.warns(UserWarning, match="left out \\(--skip-bad\\)") as rec:
        assert main(["ingest", str(src), "--format", "nad", "--out", str(out), "--quiet",
                     "--skip-bad"]) == 0
    msgs = " ".join(str(w.message) for w in rec)
    assert "b.csv" in msgs and "c.csv" in msgs and "a.csv" not in msgs
    assert len(load_dataset(out)) == 1
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    _nad_so101(only_bad / "b.csv", 1)
    with pytest.warns(UserWarning):
        assert main(["ingest", str(only_bad), "--format", "nad", "--out",
                     str(tmp_path / "o2"), "--quiet", "--skip-bad"]) == 1
    assert "every one left out by --skip-bad" in _err(capsys)


# --------------------------------------------------------------------------- 7. messages
def test_missing_calibration_file_is_named(tmp_path, capsys):
    src = tmp_path / "ds"
    (src / "meta").mkdir(parents=True)
    (src / "meta" / "info.json").write_text("{}")
    assert main(["ingest", str(src), "--format", "lerobot", "--calibration",
                 str(tmp_path / "nonexist.json"), "--out", str(tmp_path / "o"),
                 "--quiet"]) == 1
    err = _err(capsys)
    assert "--calibration" in err and "nonexist.json" in err and "not found" in err
    assert "meta/info.json" not in err


def test_calibration_reader_says_what_is_missing(tmp_path):
    from neuract.io.lerobot import _read_json

    with pytest.raises(SchemaError) as exc:
        _read_json(tmp_path / "cal.json", "a LeRobot calibration JSON file (--calibration)")
    assert "file not found" in str(exc.value) and "calibration" in str(exc.value)


def test_unwritable_out_names_the_given_path(tmp_path, monkeypatch, capsys):
    """(as root a read-only folder is writable: the refusal is simulated)"""
    real_mkdir, real_open = os.mkdir, os.open

    def mkdir(p, *a, **k):
        if str(p).endswith(".tmp"):
            raise PermissionError(13, "Permission denied", str(p))
        return real_mkdir(p, *a, **k)

    def open_(p, flags, *a, **k):
        if str(p).endswith(".tmp"):
            raise PermissionError(13, "Permission denied", str(p))
        return real_open(p, flags, *a, **k)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", open_)
    src = _nad_so101(tmp_path / "001.csv", 5)
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", str(src), "--format", "nad", "--out", "ro_out", "--quiet"]) == 1
    err = _err(capsys)
    assert "'ro_out'" in err and "Permission denied" in err and ".tmp" not in err
    from neuract.atomic import write_json

    with pytest.raises(PermissionError) as exc:
        write_json("res.json", {})
    assert "'res.json'" in str(exc.value) and ".tmp" not in str(exc.value)


@pytest.mark.parametrize("value", [float("nan"), [float("inf")], "3"])
def test_checkpoint_tau_max_must_be_finite_positive(kit, tmp_path, value):
    import shutil

    from neuract.neuralactuator import read_config

    _, ck, _, _ = kit
    bad = tmp_path / "ck"
    shutil.copytree(ck["estimator"], bad)
    info = json.loads((bad / "config.json").read_text())
    info["config"]["tau_max"] = value
    (bad / "config.json").write_text(json.dumps(info))
    with pytest.raises(CheckpointError) as exc:
        read_config(bad)
    msg = str(exc.value)
    assert "tau_max" in msg and "finite and > 0" in msg and "has no len" not in msg


def test_adapt_leaves_out_episodes_shorter_than_the_history_and_trains_on_the_rest(tmp_path):
    """Only a dataset with no usable episode is refused; a short episode among full ones is
    left out with a warning (it gave no windows before either)."""
    from neuract.data import write_dataset
    from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig, save_checkpoint

    ck = save_checkpoint(NeuralActuator(NeuralActuatorConfig(n_joints=6, mode="simulator",
                                                             effort="load", **TINY)),
                         tmp_path / "ck")
    eps = tiny_episodes(0.3)
    ds = write_dataset([eps[0].slice(0, 5).replace(name="short")] + eps, tmp_path / "mix")
    with pytest.warns(UserWarning, match=r"1 episode\(s\) shorter than the model's history of 8 "
                                         r"samples left out \(e.g. 'short', 5 samples\)"):
        rc = main(["adapt", "--checkpoint", str(ck), "--data", str(ds), "--out",
                   str(tmp_path / "o"), "--steps", "2", "--holdout", "0", "--quiet"])
    assert rc == 0 and (tmp_path / "o").is_dir()


def test_ingest_accepts_a_robot_description_file(tmp_path, capsys):
    """--robot may be the arm's MJCF/URDF file (simulate and adapt resolve it so); only a name
    that is neither a known robot nor a file is refused."""
    from neuract.robot.bundled import bundled_path

    src = _nad_so101(tmp_path / "001.csv", 5)
    xml = tmp_path / "my_arm.xml"
    xml.write_text(bundled_path("so101").read_text())
    assert main(["ingest", str(src), "--format", "nad", "--robot", str(xml), "--out",
                 str(tmp_path / "o"), "--quiet"]) == 0
    assert main(["ingest", str(src), "--format", "nad", "--robot", str(tmp_path / "none.xml"),
                 "--out", str(tmp_path / "o2"), "--quiet"]) == 1
    assert "MJCF/URDF file" in _err(capsys)
