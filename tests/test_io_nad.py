"""NAD CSV reader: register scales against physics and the robot model, labels from the path,
and every kind of bad input named by file, line and column."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from neuract.errors import SchemaError
from neuract.io.nad import (
    SO101_COLUMNS,
    iter_nad,
    parse_nad_path,
    payload_mass_kg,
    read_nad_csv,
)


def so101_rows(T=20, payload_n=-4.90):
    """Synthetic SO-101 rows in raw NAD units (steps/s, counts, decivolts)."""
    rows = []
    for i in range(T):
        r = {"timestamp": 0.016 * i + 0.01}
        for j in range(1, 7):
            r[f"pos{j}"] = 0.1 * j
            r[f"goal_pos{j}"] = 0.1 * j + 0.01
            r[f"current{j}"] = 10 * j
            r[f"vel{j}"] = 4096 if j == 2 else 0  # one revolution per second on joint 2
            r[f"load{j}"] = -250 if j == 3 else 100
            r[f"temp{j}"] = 35
            r[f"volts{j}"] = 121
        r["force_x"] = r["force_y"] = -999
        r["force_z"] = payload_n if i >= 5 else -999
        rows.append(r)
    return rows


def write_csv(path, rows, columns=SO101_COLUMNS, newline="\r\n", cut=None):
    lines = [",".join(columns)]
    lines += [",".join(str(r[c]) for c in columns) for r in rows]
    text = newline.join(lines) + newline
    if cut is not None:
        text = text[:cut]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def nad_file(tmp_path, **kw):
    return tmp_path / "so101" / "go_up_and_stay_still" / "500g" / "train" / "003.csv"


def test_synthetic_so101_scales(tmp_path):
    p = write_csv(nad_file(tmp_path), so101_rows())
    tr = read_nad_csv(p)
    assert tr.meta.robot == "so101" and tr.n_joints == 6
    np.testing.assert_allclose(tr["t"], 0.016 * np.arange(20) + 0.01)
    np.testing.assert_array_equal(tr["q"][3], 0.1 * np.arange(1, 7))  # already rad
    np.testing.assert_array_equal(tr["q_goal"][3], 0.1 * np.arange(1, 7) + 0.01)
    assert tr["temperature"][0, 4] == 35.0
    assert tr["qd"][0, 1] == pytest.approx(2 * math.pi)  # 4096 steps/s = 1 rev/s
    assert tr["current"][0, 2] == pytest.approx(30 * 6.5e-3)  # 6.5 mA per count
    assert tr["load"][0, 2] == pytest.approx(-0.25)  # 0.1 % per count
    assert tr["voltage"][0, 0] == pytest.approx(12.1)  # decivolts
    assert tr.meta.labels["payload_mass_kg"] == 0.5 and tr.meta.labels["split"] == "train"
    assert tr.meta.labels["task"] == "go_up_and_stay_still"
    # weight label: world frame, z up, payload pulls down; no label before it is held
    assert not tr["ee_force_mask"][:5].any() and tr["ee_force_mask"][5:].all()
    np.testing.assert_array_equal(tr["ee_force"][5], [0.0, 0.0, -4.90])
    np.testing.assert_array_equal(tr["ee_force"][0], [0.0, 0.0, 0.0])
    assert tr["ee_force"][5, 2] == pytest.approx(-0.5 * 9.80665, abs=0.01)
    assert (tr["contact"] == tr["ee_force_mask"]).all()
    assert tr.meta.labels["condition"] == "normal" and (tr["condition"] == 0).all()
    p = write_csv(tmp_path / "motor_condition" / "pick_place_empty_degrade" / "test" / "002.csv",
                  so101_rows())
    deg = read_nad_csv(p)
    assert deg.meta.labels["condition"] == "degraded" and (deg["condition"] == 1).all()


def test_weight_label_mismatch_warns(tmp_path):
    p = write_csv(nad_file(tmp_path), so101_rows(payload_n=-2.94))
    with pytest.warns(UserWarning, match="differs from payload 0.5 kg"):
        read_nad_csv(p)


def test_path_labels():
    lab = parse_nad_path("nad/weight/pick_place_object_300g/validation/001.csv")
    assert lab["group"] == "weight" and lab["payload_mass_kg"] == 0.3
    assert lab["split"] == "validation" and lab["variant"] is None
    lab = parse_nad_path("x/motor_condition/pick_place_empty_degrade/test/002.csv")
    assert lab["condition"] == "degraded" and lab["payload_mass_kg"] == 0.0
    assert parse_nad_path("force_sensor/force_x_plus/train/001.csv")["payload_mass_kg"] is None
    assert payload_mass_kg("empty") == 0.0 and payload_mass_kg("200g") == 0.2


def _bad(tmp_path, rows=None, columns=SO101_COLUMNS, **kw):
    return write_csv(nad_file(tmp_path), rows or so101_rows(), columns=columns, **kw)


def test_missing_column(tmp_path):
    p = _bad(tmp_path, columns=[c for c in SO101_COLUMNS if c != "load4"])
    with pytest.raises(SchemaError, match=r"003.csv: missing column\(s\) \['load4'\]"):
        read_nad_csv(p)


@pytest.mark.parametrize("t3,kind", [(0.042, "duplicated"), (0.001, "non-monotonic")])
def test_bad_timestamps(tmp_path, t3, kind):
    rows = so101_rows()
    rows[3]["timestamp"] = rows[2]["timestamp"] if kind == "duplicated" else t3
    with pytest.raises(
        SchemaError,
        match=rf"003.csv line 5 \(data row 4\), column "
        rf"'timestamp': {kind}",
    ):
        read_nad_csv(_bad(tmp_path, rows))


@pytest.mark.parametrize("val", ["nan", "inf", "-inf"])
def test_non_finite(tmp_path, val):
    rows = so101_rows()
    rows[7]["temp4"] = val
    with pytest.raises(SchemaError, match=r"line 9 \(data row 8\), column 'temp4'.*finite"):
        read_nad_csv(_bad(tmp_path, rows))


def test_not_a_number_and_empty_cell(tmp_path):
    rows = so101_rows()
    rows[2]["vel1"] = "abc"
    with pytest.raises(SchemaError, match=r"line 4 \(data row 3\), column 'vel1': value 'abc'"):
        read_nad_csv(_bad(tmp_path, rows))
    rows[2]["vel1"] = ""
    with pytest.raises(SchemaError, match="column 'vel1': empty cell; expected a number"):
        read_nad_csv(_bad(tmp_path, rows))


def test_truncated_and_empty(tmp_path):
    full = _bad(tmp_path).read_text()
    p = _bad(tmp_path, cut=len(full) - 40)
    with pytest.raises(
        SchemaError,
        match=r"line 21 \(data row 20\): \d+ fields; expected 46 "
        r"like the header \(truncated file\?\)",
    ):
        read_nad_csv(p)
    p.write_text("")
    with pytest.raises(SchemaError, match="003.csv: empty file"):
        read_nad_csv(p)
    p.write_text(",".join(SO101_COLUMNS) + "\r\n")
    with pytest.raises(SchemaError, match="header only, no data rows"):
        read_nad_csv(p)


def test_joint_count_mismatch(tmp_path):
    p = _bad(tmp_path)
    with pytest.raises(SchemaError, match="data has 6 joints but robot 'omx' has 5"):
        read_nad_csv(p, robot="omx")
    with pytest.raises(SchemaError, match="robot 'panda' has 7"):
        read_nad_csv(p, robot="panda")


def test_unknown_layout(tmp_path):
    p = write_csv(tmp_path / "x.csv", [{"a": 1, "b": 2}], columns=["a", "b"])
    with pytest.raises(SchemaError, match="x.csv: not a NAD CSV"):
        read_nad_csv(p)


def _so101_limits(shared_robots):
    root = ET.parse(shared_robots / "so101_new_calib.xml").getroot()
    lim = {}
    for j in root.iter("joint"):
        if j.get("name") and j.get("range"):
            lim[j.get("name")] = tuple(float(x) for x in j.get("range").split())
    return lim


@pytest.mark.realdata
def test_real_nad_all_files(shared_data, shared_robots):
    trajs = list(iter_nad(shared_data / "nad"))
    assert len(trajs) == 6
    lim = _so101_limits(shared_robots)
    by = {t.meta.name: t for t in trajs}
    for tr in trajs:
        if tr.meta.robot == "so101":
            rest = np.abs(tr["qd"]).max(axis=1) < 1e-9  # samples with every joint still
            assert rest.sum() > 10
            v, temp = tr["voltage"][rest], tr["temperature"][rest]
            assert 11.0 < v.min() and v.max() < 12.8  # a 12 V supply, decivolts decoded
            assert 11.7 < np.median(v) < 12.4
            assert 30 <= np.median(temp) <= 45  # degC at rest
            for j, name in enumerate(tr.meta.joint_names):
                lo, hi = lim[name]
                assert lo - 0.05 <= tr["q"][:, j].min() and tr["q"][:, j].max() <= hi + 0.05
            # velocity register scale: servo-reported qd matches d(q)/dt on the joint that moves
            # most (a wrong scale would be off by 57x (deg) or 4096/2pi (steps))
            j = int(np.argmax(np.ptp(tr["q"], axis=0)))
            fd = np.gradient(tr["q"][:, j], tr["t"])
            slope = fd @ tr["qd"][:, j] / (tr["qd"][:, j] @ tr["qd"][:, j])
            assert 0.8 < slope < 1.2
            assert 55 < tr.meta.rate_hz < 70
        else:
            assert tr.meta.robot == "omx" and tr.n_joints == 5
            assert 11.5 < tr["voltage"].mean() < 13.5 and np.abs(tr["pwm"]).max() <= 1.0
            assert 50 < tr.meta.rate_hz < 70
    held = by["so101/go_up_and_stay_still/500g/train/001"]
    assert held["ee_force_mask"].all()
    np.testing.assert_allclose(held["ee_force"][:, 2], -0.5 * 9.80665, atol=0.01)
    assert not by["so101/go_up_and_stay_still/empty/train/001"]["ee_force_mask"].any()
    push = by["force_sensor/force_z_minus/train/001"]
    assert push["ee_force_mask"].all() and push["contact"].any() and not push["contact"].all()
    assert not by["force_sensor/force_z_minus_ref/test/001"]["contact"].any()
