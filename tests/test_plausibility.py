"""Plausibility and units checks (neuract.data.plausibility): implausible inputs are refused
naming file, row, column, value and bound; likely unit mistakes name the cause and the fix;
unusual values are kept and counted in one warning; stats.json is strict JSON.

The end-to-end table runs ``neuract ingest`` (and ``fit``) on small bad files; the unit tests
below it exercise the layer itself."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from neuract.cli import main
from neuract.data import Trajectory, TrajectoryMeta, load_dataset, write_dataset
from neuract.data.plausibility import (
    LABEL_RULES,
    RATE,
    RULES,
    UNKNOWN_POSITION,
    ImplausibleValueWarning,
    check_trajectory,
    joint_ranges,
    position_rules,
)
from neuract.errors import DataError, SchemaError
from neuract.io.bam import read_bam_log
from neuract.io.nad import SO101_COLUMNS, read_nad_csv

# ------------------------------------------------------------------------------ builders


def nad_so101(path, rows=20, dt=0.016, **override):
    """A NAD SO-101 CSV of plausible values; ``override`` column -> value (all rows) or
    column -> {row: value}."""
    base = {"pos": "0.1", "goal_pos": "0.12", "vel": "0", "current": "10", "load": "5",
            "temp": "35", "volts": "120", "force": "-999"}
    lines = [",".join(SO101_COLUMNS)]
    for r in range(rows):
        vals = {c: next(v for k, v in base.items() if c.startswith(k)) for c in SO101_COLUMNS
                if c != "timestamp"}
        vals["timestamp"] = repr(r * dt)
        for c, v in override.items():
            vals[c] = str(v.get(r, vals[c]) if isinstance(v, dict) else v)
        lines.append(",".join(vals[c] for c in SO101_COLUMNS))
    path.write_text("\n".join(lines) + "\n")
    return path


def bam(path, rows=30, dt=0.01, **meta):
    entries = [{"timestamp": dt * i, "position": 0.3 * math.sin(0.1 * i), "speed": 0.1,
                "goal_position": 0.3, "torque_enable": True, "input_volts": 12.0,
                "temp": 36.0, "current": 100.0} for i in range(rows)]
    d = {"mass": 0.535, "length": 0.1, "kp": 24, "trajectory": "sin_sin", "motor": "sts3215",
         "entries": entries, **meta}
    path.write_text(json.dumps(d))
    return path


def csv_log(tmp_path, columns, rows=20, dt=0.01, time_unit="s", robot="so101", t0=0.0):
    """A CSV log and its mapping: columns is a list of (name, channel, joint, unit, f(row))."""
    joints = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll",
              "gripper"] if robot == "so101" else ["j1"]
    cols = [("t", None, None, None, lambda r: t0 + r * dt)] + list(columns)
    lines = [",".join(c[0] for c in cols)]
    for r in range(rows):
        lines.append(",".join(repr(float(c[4](r))) for c in cols))
    (tmp_path / "log.csv").write_text("\n".join(lines) + "\n")
    mapping = {"robot": robot, "joints": joints, "time": {"column": "t", "unit": time_unit},
               "columns": [{"column": n, "channel": ch, "joint": j, "unit": u}
                           for n, ch, j, u, _ in columns]}
    (tmp_path / "map.json").write_text(json.dumps(mapping))
    return tmp_path / "log.csv", tmp_path / "map.json"


SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def so101_q(unit, f):
    """q columns of every SO-101 joint, values f(row, joint index)."""
    return [(f"q{j}", "q", name, unit, (lambda r, j=j: f(r, j))) for j, name in enumerate(SO101)]


def deg_motion(r, j):  # degrees: 0..40, inside every SO-101 joint's range
    return 20.0 + 20.0 * math.sin(0.2 * r) * (j + 1) / 6


def rad_motion(r, j):  # radians: -0.2..0.6, inside every SO-101 joint's range
    return 0.2 + 0.4 * math.sin(0.2 * r) * (j + 1) / 6


# -------------------------------------------------------- end to end through neuract ingest


def _nad_1e300(tmp_path):
    return ["--format", "nad", str(nad_so101(tmp_path / "001.csv", pos3={5: "1e300"}))]


def _nad_degrees(tmp_path):
    return ["--format", "nad", str(nad_so101(tmp_path / "001.csv", pos2={4: "70", 5: "-40"}))]


def _nad_ms(tmp_path):
    return ["--format", "nad", str(nad_so101(tmp_path / "001.csv", dt=16.0))]


def _nad_temperature(tmp_path):
    return ["--format", "nad", str(nad_so101(tmp_path / "001.csv", temp4={7: "-300"}))]


def _nad_current(tmp_path):
    return ["--format", "nad", str(nad_so101(tmp_path / "001.csv", current1={2: "1e30"}))]


def _csv(tmp_path, columns, **kw):
    log, mapping = csv_log(tmp_path, columns, **kw)
    return ["--format", "csv", str(log), "--mapping", str(mapping)]


def _csv_rad_for_degrees(tmp_path):
    return _csv(tmp_path, so101_q("rad", deg_motion))


def _csv_deg_for_radians(tmp_path):
    return _csv(tmp_path, so101_q("deg", rad_motion))


def _csv_ms(tmp_path):
    return _csv(tmp_path, so101_q("rad", rad_motion), dt=16.7)


def _csv_zero_volts(tmp_path):
    volts = [(f"v{j}", "voltage", n, "V", lambda r: 0.0) for j, n in enumerate(SO101)]
    return _csv(tmp_path, so101_q("rad", rad_motion) + volts)


def _csv_kelvin(tmp_path):
    temp = [(f"T{j}", "temperature", n, "degC", lambda r: 300.0 + 0.1 * r)
            for j, n in enumerate(SO101)]
    return _csv(tmp_path, so101_q("rad", rad_motion) + temp)


def _csv_decivolts(tmp_path):
    volts = [(f"v{j}", "voltage", n, "V", lambda r: 121.0) for j, n in enumerate(SO101)]
    return _csv(tmp_path, so101_q("rad", rad_motion) + volts)


def _csv_milliamperes(tmp_path):
    cur = [(f"i{j}", "current", n, "A", lambda r: 800.0 + 10 * r) for j, n in enumerate(SO101)]
    return _csv(tmp_path, so101_q("rad", rad_motion) + cur)


def _nad_zero_volts(tmp_path):
    return ["--format", "nad", str(nad_so101(tmp_path / "001.csv", volts1="0"))]


def _bam_degrees(tmp_path):
    p = bam(tmp_path / "run.json")
    d = json.loads(p.read_text())
    for i, e in enumerate(d["entries"]):
        e["position"] = 70.0 * math.sin(0.1 * i)
    p.write_text(json.dumps(d))
    return ["--format", "bam", str(p)]


def _bam_negative_mass(tmp_path):
    return ["--format", "bam", str(bam(tmp_path / "run.json", mass=-1))]


def _bam_ms_against_sample_rate(tmp_path):  # 5 kHz in ms reads 5 Hz: inside the hard bound
    p = bam(tmp_path / "run.json", dt=0.0002, sample_rate=5000.0)
    d = json.loads(p.read_text())
    for e in d["entries"]:
        e["timestamp"] *= 1000.0
    p.write_text(json.dumps(d))
    return ["--format", "bam", str(p)]


CASES = [
    # (case, argv builder, substrings the one-line error holds)
    ("nad_position_1e300", _nad_1e300,
     ["001.csv line 7 (data row 6), column 'pos3'", "q (joint 'elbow_flex') = 1e+300 rad",
      "hard bound [-3.38", "joint range of robot 'so101'"]),
    ("nad_position_degrees", _nad_degrees,
     ["001.csv line 6 (data row 5), column 'pos2'", "= 70 rad",
      "likely cause: degrees read as radians", '--format csv', '"unit": "deg"']),
    ("nad_timestamps_ms", _nad_ms,
     ["column 'timestamp'", "0.0625 Hz", "min in all",
      "likely cause: timestamps in milliseconds read as seconds",
      '"time": {"column": "timestamp", "unit": "ms"}']),
    ("nad_temperature_below_absolute_zero", _nad_temperature,
     ["line 9 (data row 8), column 'temp4'", "temperature (joint 'wrist_flex') = -300 degC",
      "[-55, 200] degC", "absolute zero"]),
    ("nad_current_1e30", _nad_current,
     ["line 4 (data row 3), column 'current1'", "= 6.5e+27 A", "[-500, 500] A"]),
    ("csv_radians_declared_for_degrees", _csv_rad_for_degrees,
     ["log.csv line", "column 'q0'", "likely cause: degrees read as radians",
      '"unit": "deg" for column \'q0\'', '(--mapping; now "rad")']),
    ("csv_degrees_declared_for_radians", _csv_deg_for_radians,
     ["log.csv, column 'q5'", "declared in deg", "likely cause: radians read as degrees",
      '"unit": "rad" for column \'q5\'']),
    ("csv_timestamps_ms", _csv_ms,
     ["log.csv, column 't'", "0.05988 Hz", "milliseconds read as seconds",
      '"time": {"column": "t", "unit": "ms"}']),
    ("csv_zero_volts", _csv_zero_volts,
     ["log.csv, column 'v0'", "0 V on every one of 20 samples", "leave column 'v0' out"]),
    ("csv_kelvin", _csv_kelvin,
     ["column 'T0'", "= 300 degC", "likely cause: kelvin read as degrees Celsius",
      '"unit": "K" for column \'T0\'']),
    ("csv_decivolts", _csv_decivolts,
     ["column 'v0'", "= 121 V", "likely cause: decivolts read as volts", '"unit": "dV"']),
    ("csv_milliamperes", _csv_milliamperes,
     ["column 'i0'", "= 800 A", "likely cause: milliamperes read as amperes", '"unit": "mA"']),
    ("nad_zero_volts", _nad_zero_volts,
     ["001.csv, column 'volts1'", "0 V on every one of 20 samples", "--format csv"]),
    ("bam_position_degrees", _bam_degrees,
     ["run.json: entry 1, field 'position'", "= 6.98834 rad", "degrees read as radians",
      "this log's look like deg"]),
    ("bam_negative_mass", _bam_negative_mass,
     ["run.json: field 'mass' = -1", "[0, 1000] kg"]),
    ("bam_timestamps_ms_against_sample_rate", _bam_ms_against_sample_rate,
     ["run.json: field 'timestamp'", "a rate of 5 Hz", "the nominal rate 5000 Hz",
      "milliseconds read as seconds (read as ms: 5000 Hz)"]),
]


@pytest.mark.parametrize("build,expect", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_ingest_refuses(tmp_path, capsys, build, expect):
    src = tmp_path / "in"
    src.mkdir()
    fmt, *rest = build(src)[1:]
    out = tmp_path / "out"
    assert main(["ingest", "--format", fmt, *rest, "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("neuract ingest: error: ") and "\n" not in err, err
    for part in expect:
        assert part in err, f"{part!r} not in {err}"
    assert "tensor(" not in err and "Traceback" not in err
    assert not out.exists()


def test_ingest_accepts_plausible_files_of_every_builder(tmp_path, capsys):
    """The builders above make plausible files unless told otherwise: each bad case fails
    for the reason it names, not another."""
    ok = [
        lambda d: ["--format", "nad", str(nad_so101(d / "001.csv"))],
        lambda d: ["--format", "bam", str(bam(d / "run.json"))],
        lambda d: _csv(d, so101_q("rad", rad_motion)),
        lambda d: _csv(d, so101_q("deg", deg_motion)),
        lambda d: _csv(d, so101_q("rad", rad_motion), dt=16.7, time_unit="ms"),
    ]
    for i, build in enumerate(ok):
        (tmp_path / f"in{i}").mkdir()
        fmt_opt, fmt, *rest = build(tmp_path / f"in{i}")
        out = tmp_path / f"o{i}"
        with warnings.catch_warnings():  # (not --quiet: it silences the readers' warnings)
            warnings.simplefilter("error", ImplausibleValueWarning)
            rc = main(["ingest", fmt_opt, fmt, *rest, "--out", str(out)])
        assert rc == 0, capsys.readouterr().err
        json.loads((out / "meta" / "stats.json").read_text(), parse_constant=_no_constant)


def test_lerobot_radians_declared_for_degrees_names_position_units(tmp_path, capsys):
    from test_io_lerobot import make_v21

    root = make_v21(tmp_path / "ds", robot_type="koch_follower")  # values -100..100
    assert main(["ingest", str(root), "--format", "lerobot", "--robot", "so101",
                 "--position-units", "rad", "--out", str(tmp_path / "o"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "feature 'observation.state[0]'" in err and "frame 0" in err
    assert "degrees read as radians" in err and "--position-units deg" in err
    assert main(["ingest", str(root), "--format", "lerobot", "--robot", "so101",
                 "--position-units", "deg", "--out", str(tmp_path / "o"), "--quiet"]) == 0


@pytest.mark.parametrize("threads", ["0", "-2"])
def test_fit_refuses_threads_below_one(tmp_path, capsys, threads):
    data = bam(tmp_path / "run.json")
    rc = main(["fit", "--data", str(data), "--out", str(tmp_path / "fit"), "--threads", threads])
    assert rc == 1
    err = capsys.readouterr().err
    assert f"--threads {threads}; expected a number of CPU threads >= 1" in err
    assert not (tmp_path / "fit").exists()


def _no_constant(name):
    raise AssertionError(f"stats.json holds {name}: not strict JSON")


def _traj(**ch):
    t = np.arange(20) * 0.01
    base = {"t": t, "q": 0.1 * np.ones((20, 1))}
    base.update(ch)
    return Trajectory(base, TrajectoryMeta(robot="pendulum", joint_names=("pendulum",),
                                           name="e0", source="mem"))


def test_stats_json_is_strict_json_even_for_huge_values(tmp_path):
    big = _traj(current=np.full((20, 1), 1e308))  # the sum overflows: mean, std not finite
    write_dataset([big], tmp_path / "ds")
    stats = json.loads((tmp_path / "ds" / "meta" / "stats.json").read_text(),
                       parse_constant=_no_constant)
    assert stats["current"]["mean"] == [None] and stats["current"]["max"] == [1e308]
    assert stats["q"]["mean"] == [pytest.approx(0.1)]


def test_dataset_written_before_the_checks_is_checked_on_load(tmp_path, capsys):
    """A neuract dataset holding an implausible value (written by an older version) is
    refused by the loader that fit, simulate and evaluate use, and by ingest --format neuract."""
    q = np.full((20, 1), 0.1)
    q[4, 0] = 70.0  # degrees in a radian channel
    write_dataset([_traj(q=q)], tmp_path / "ds")
    ds = load_dataset(tmp_path / "ds")
    with pytest.raises(DataError, match=r"episode_000000.parquet row 4, column 'q/pendulum': "
                       r"q \(joint 'pendulum'\) = 70 rad is outside .*degrees read as radians"
                       r".*ingest its source again"):
        ds[0]
    assert main(["ingest", str(tmp_path / "ds"), "--format", "neuract", "--out",
                 str(tmp_path / "o"), "--quiet"]) == 1
    assert "row 4, column 'q/pendulum'" in capsys.readouterr().err
    rc = main(["fit", "--data", str(tmp_path / "ds"), "--out", str(tmp_path / "fit")])
    assert rc == 1 and "= 70 rad is outside" in capsys.readouterr().err


def test_skip_bad_leaves_out_an_implausible_file(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    nad_so101(src / "a.csv")
    nad_so101(src / "b.csv", pos1={3: "1e300"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["ingest", str(src), "--format", "nad", "--skip-bad", "--out",
                     str(tmp_path / "o"), "--quiet"]) == 0
    assert len(load_dataset(tmp_path / "o")) == 1
    assert any("b.csv line 5" in str(w.message) for w in caught)


# --------------------------------------------------------------------------- the layer


def test_every_bound_carries_a_reason():
    rules = [*RULES.values(), RATE, UNKNOWN_POSITION, *position_rules("so101", SO101),
             *position_rules("pendulum", ["pendulum"])]
    for rule in rules:
        for b in (rule.hard, rule.typical):
            if b is not None:
                assert b.lo <= b.hi and len(b.reason) > 10, b
        if rule.typical is not None:
            assert rule.hard.lo <= rule.typical.lo and rule.typical.hi <= rule.hard.hi
    for bound, unit in LABEL_RULES.values():
        assert bound.reason and unit in ("kg", "m")


def test_position_bounds_follow_the_robot_model():
    assert joint_ranges("so101")["shoulder_pan"] == pytest.approx((-1.92, 1.92), abs=1e-3)
    assert joint_ranges("nope") == {} and joint_ranges("planar2") == {}  # unlimited hinges
    pan, grip = position_rules("so101", ["shoulder_pan", "gripper"])
    assert pan.hard.lo == pytest.approx(-1.92 - 1.92, abs=1e-3)
    assert "joint range of robot 'so101'" in pan.hard.reason
    assert grip.hard.lo == pytest.approx(-0.1745 - 0.96, abs=1e-3)
    (bench,) = position_rules("pendulum", ["pendulum"])
    assert bench.hard.hi == pytest.approx(math.pi + 0.5 * 2 * math.pi)
    assert position_rules("planar2", ["j1"]) == [UNKNOWN_POSITION]


def test_hard_bound_message_names_place_value_and_bound():
    tr = _traj(voltage=np.r_[np.full(19, 12.0), -3.0][:, None])
    with pytest.raises(DataError) as exc:
        check_trajectory(tr, where=lambda ch, j, i: f"f.csv row {i} col {ch}{j}")
    msg = str(exc.value)
    assert msg.startswith("f.csv row 19 col voltage0: voltage (joint 'pendulum') = -3 V")
    assert "hard bound [0, 80] V (a supply voltage is not negative" in msg
    assert "1 value(s) of this column are outside" in msg
    assert isinstance(exc.value, SchemaError)  # --skip-bad and every caller treat it so


def test_unit_mistake_needs_every_value_to_fit_in_the_other_unit():
    cur = np.full((20, 1), 0.5)
    cur[3] = 900.0  # one spike: 0.9 A as mA, but 0.5 A reads 0.0005 A as mA: still fits
    with pytest.raises(DataError, match="milliamperes read as amperes"):
        check_trajectory(_traj(current=cur))
    cur[4] = 1e6  # 1000 A as mA: outside the typical range, so no unit is suggested
    with pytest.raises(DataError, match="outside the hard bound") as exc:
        check_trajectory(_traj(current=cur))
    assert "likely cause" not in str(exc.value)


def test_fix_none_drops_the_suggestion():
    q = np.full((20, 1), 0.1)
    q[2] = 80.0
    with pytest.raises(DataError) as exc:
        check_trajectory(_traj(q=q), fix=lambda ch, j, unit: None)
    assert "likely cause" not in str(exc.value) and "= 80 rad" in str(exc.value)


def test_unusual_values_are_kept_and_counted_in_one_warning():
    temp = np.full((20, 1), 40.0)
    temp[5:12] = 95.0
    volt = np.full((20, 1), 12.0)
    volt[0] = 0.0  # one failed read
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        counts = check_trajectory(_traj(temperature=temp, voltage=volt))
    assert counts == {"temperature (joint 'pendulum')": 7, "voltage (joint 'pendulum')": 1}
    msgs = [str(w.message) for w in caught if w.category is ImplausibleValueWarning]
    assert len(msgs) == 1
    assert "mem: 8 unusual value(s) kept" in msgs[0]
    assert "temperature (joint 'pendulum'): 7 outside [-10, 85] degC" in msgs[0]
    assert "e.g. 95 degC at mem sample 5" in msgs[0]


def test_rate_against_nominal_warns_or_names_the_unit():
    tr = _traj()  # 100 Hz
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert check_trajectory(tr, nominal_rate_hz=30.0) == {"sample rate": 1}
    assert "within a factor 2 of the nominal 30 Hz" in str(caught[0].message)
    with pytest.raises(DataError, match=r"outside \[0.5, 2\] x the nominal rate 1e\+05 Hz.*"
                       r"milliseconds read as seconds \(read as ms: 1e\+05 Hz\)"):
        check_trajectory(tr, nominal_rate_hz=1e5)
    assert check_trajectory(tr, nominal_rate_hz=100.0) == {}
    fast = tr.replace(channels={"t": np.arange(20) * 1e-5})  # a column in s declared ms
    with pytest.raises(DataError, match=r"hard bound \[2, 20000\] Hz.*seconds read as "
                       r"milliseconds \(read as s: 100 Hz\); fix: declare t in s"):
        check_trajectory(fast, declared={"t": "ms"}, nominal_rate_hz=100.0)


def test_labels_the_physics_uses():
    for labels, part in [({"mass": -1}, "field 'mass' = -1;"),
                         ({"length": 0.0}, "field 'length' = 0.0;"),
                         ({"mass": "heavy"}, "field 'mass' = 'heavy';"),
                         ({"arm_mass": True}, "field 'arm_mass' = True;")]:
        tr = _traj().replace(labels=labels)
        with pytest.raises(DataError, match=part.replace("(", r"\(")):
            check_trajectory(tr)
    assert check_trajectory(_traj().replace(labels={"mass": 0.5, "length": 0.1,
                                                    "payload_mass_kg": None})) == {}


def test_degrees_declared_for_radians_only_on_a_robot_with_ranges():
    t = np.arange(20) * 0.01
    q = np.deg2rad(1.5 * np.sin(np.arange(20)))[:, None]  # as declared: within 1.5 degrees
    meta = TrajectoryMeta(robot="custom", joint_names=("a",), source="mem")
    check_trajectory(Trajectory({"t": t, "q": q}, meta), declared={"q": "deg"})  # unknown arm
    with pytest.raises(DataError, match="radians read as degrees"):
        check_trajectory(_traj(q=q), declared={"q": "deg"})  # the bench's one-turn register
    check_trajectory(_traj(q=q), declared={"q": "rad"})


def test_bam_reader_names_entries_after_dropped_dropouts(tmp_path):
    p = bam(tmp_path / "run.json")
    d = json.loads(p.read_text())
    d["entries"][2]["temp"] = 0  # a dropout, dropped: sample 9 is entry 10
    d["entries"][10]["speed"] = 5000.0
    p.write_text(json.dumps(d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DataError, match=r"run.json: entry 10, field 'speed': qd"):
            read_bam_log(p)


def test_nad_reader_accepts_its_own_layout(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ImplausibleValueWarning)
        tr = read_nad_csv(nad_so101(tmp_path / "001.csv"))
    assert tr["voltage"][0, 0] == pytest.approx(12.0)
