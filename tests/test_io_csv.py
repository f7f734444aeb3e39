"""Generic CSV/Parquet reader with a column mapping: units, errors, property-based round trip."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuract.data import Trajectory, TrajectoryMeta
from neuract.errors import ConfigError, SchemaError, UnitsError
from neuract.io.csv import ColumnMapping, canonical_mapping, load_mapping, read_mapped, write_csv
from neuract.io.units import UNITS, lookup, to_si

MAPPING = {
    "robot": "planar2",
    "joints": ["j1", "j2"],
    "time": {"column": "ms", "unit": "ms"},
    "columns": [
        {"column": "a", "channel": "q", "joint": "j1", "unit": "deg"},
        {"column": "b", "channel": "q", "joint": "j2", "unit": "rad"},
        {"column": "ia", "channel": "current", "joint": "j1", "unit": "mA"},
        {"column": "ib", "channel": "current", "joint": "j2", "unit": "A"},
        {"column": "fz", "channel": "ee_force", "joint": "z", "unit": "N"},
        {"column": "on", "channel": "contact", "unit": "bool"},
    ],
    "force_sentinel": -999,
}


def write(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join(map(str, r)) for r in rows]) + "\n")
    return path


ROWS = [
    [0, 90, 0.5, 1500, 1.5, -999, "false"],
    [10, 180, 0.6, 0, -0.2, 2.5, "true"],
    [20, -45, 0.7, 250, 0, 3.0, "1"],
]
HEADER = ["ms", "a", "b", "ia", "ib", "fz", "on"]


def test_units_converted(tmp_path):
    m = ColumnMapping.from_dict(MAPPING)
    tr = read_mapped(write(tmp_path / "log.csv", HEADER, ROWS), m)
    np.testing.assert_allclose(tr["t"], [0, 0.01, 0.02])
    np.testing.assert_allclose(tr["q"][:, 0], [math.pi / 2, math.pi, -math.pi / 4])
    np.testing.assert_allclose(tr["current"][:, 0], [1.5, 0, 0.25])
    assert tr["ee_force_mask"].tolist() == [False, True, True]
    np.testing.assert_array_equal(tr["ee_force"][:, 2], [0, 2.5, 3.0])
    assert tr["contact"].tolist() == [False, True, True]
    assert tr.meta.robot == "planar2"


def test_parquet_input(tmp_path):
    m = ColumnMapping.from_dict(MAPPING)
    cols = list(zip(*ROWS))
    data = {
        h: pa.array([float(x) if h != "on" else x in ("true", "1") for x in c])
        for h, c in zip(HEADER, cols)
    }
    pq.write_table(pa.table(data), tmp_path / "log.parquet")
    a = read_mapped(tmp_path / "log.parquet", m)
    b = read_mapped(write(tmp_path / "log.csv", HEADER, ROWS), m)
    for ch in a.channels:
        np.testing.assert_array_equal(a[ch], b[ch])


def test_unknown_unit_lists_accepted(tmp_path):
    d = json.loads(json.dumps(MAPPING))
    d["columns"][2]["unit"] = "milliamp"
    with pytest.raises(
        UnitsError,
        match=r"column 'ia'.*unknown unit 'milliamp'; accepted "
        r"units: s, ms.*mA",
    ):
        ColumnMapping.from_dict(d)
    d["columns"][2]["unit"] = "deg"
    with pytest.raises(
        UnitsError,
        match=r"unit 'deg' measures angle, but channel 'current' "
        r"holds current; accepted units for 'current': A, mA",
    ):
        ColumnMapping.from_dict(d)


def test_mapping_errors(tmp_path):
    d = json.loads(json.dumps(MAPPING))
    d["columns"] = d["columns"][:3]  # current maps only j1
    with pytest.raises(
        ConfigError,
        match=r"channel 'current' maps joints \['j1'\] but not "
        r"\['j2'\]",
    ):
        ColumnMapping.from_dict(d)
    d = json.loads(json.dumps(MAPPING))
    d["columns"][0]["channel"] = "position"
    with pytest.raises(SchemaError, match="unknown channel 'position'; accepted: q, qd"):
        ColumnMapping.from_dict(d)
    p = tmp_path / "m.json"
    p.write_text(json.dumps({**MAPPING, "colums": []}))
    with pytest.raises(ConfigError, match=r"m.json: unknown key\(s\) \['colums'\]"):
        load_mapping(p)
    for bad, match in (({**MAPPING, "joints": "abc"}, "joints = 'abc'; expected a list"),
                       ([MAPPING], "expected a JSON object"),
                       ({**MAPPING, "time": "t"}, "time = 't'; expected a JSON object")):
        p.write_text(json.dumps(bad))
        with pytest.raises(ConfigError, match=match):
            load_mapping(p)


def test_bad_tables(tmp_path):
    m = ColumnMapping.from_dict(MAPPING)
    with pytest.raises(
        SchemaError,
        match=r"log.csv: missing column\(s\) \['ib'\] \(named in "
        r"the column mapping\); columns found",
    ):
        read_mapped(
            write(
                tmp_path / "log.csv",
                [h for h in HEADER if h != "ib"],
                [r[:4] + r[5:] for r in ROWS],
            ),
            m,
        )
    rows = [list(r) for r in ROWS]
    rows[2][0] = 5
    with pytest.raises(SchemaError, match=r"line 4 \(data row 3\), column 'ms': non-monotonic"):
        read_mapped(write(tmp_path / "log.csv", HEADER, rows), m)
    rows = [list(r) for r in ROWS]
    rows[1][2] = "nan"
    with pytest.raises(SchemaError, match=r"line 3 \(data row 2\), column 'b': value nan"):
        read_mapped(write(tmp_path / "log.csv", HEADER, rows), m)
    rows = [list(r) for r in ROWS]
    rows[1][6] = "2"
    with pytest.raises(
        SchemaError, match=r"line 3 \(data row 2\), column 'on': value '2'; expected 0/1"
    ):
        read_mapped(write(tmp_path / "log.csv", HEADER, rows), m)
    with pytest.raises(SchemaError, match="data has 2 joints but robot 'so101' has 6"):
        read_mapped(write(tmp_path / "log.csv", HEADER, ROWS), m, robot="so101")
    (tmp_path / "e.parquet").write_bytes(b"")
    with pytest.raises(SchemaError, match="e.parquet: empty file"):
        read_mapped(tmp_path / "e.parquet", m)


def test_unit_table_consistent():
    assert lookup("Nm") is UNITS["N m"] and lookup("C") is UNITS["degC"]
    assert to_si(np.array([300.0]), "K", "temperature")[0] == pytest.approx(26.85)
    assert to_si(np.array([121.0]), "dV", "voltage")[0] == pytest.approx(12.1)
    assert to_si(np.array([4096.0]), "step4096/s", "qd")[0] == pytest.approx(2 * math.pi)


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
plausible = st.floats(-100, 100, allow_nan=False, allow_infinity=False)
"""values inside every channel's hard bounds (neuract.data.plausibility) where no robot model
gives a joint range"""


@st.composite
def trajectories(draw):
    T = draw(st.integers(1, 12))
    n = draw(st.integers(1, 3))
    dts = draw(st.lists(st.floats(1e-4, 0.4), min_size=T, max_size=T))  # 2.5 Hz..10 kHz
    t = np.cumsum(dts) + draw(st.floats(-10, 10))
    if T > 1 and not (np.diff(t) > 0).all():
        t = np.arange(T, dtype=float)

    def arr(shape):
        return np.array(
            draw(
                st.lists(
                    plausible,
                    min_size=int(np.prod(shape)),
                    max_size=int(np.prod(shape)),
                )
            )
        ).reshape(shape)

    ch = {"t": t, "q": arr((T, n))}
    if draw(st.booleans()):
        ch["current"] = arr((T, n))
    if draw(st.booleans()):
        ch["torque_enable"] = np.array(
            draw(st.lists(st.booleans(), min_size=T * n, max_size=T * n))
        ).reshape(T, n)
    if draw(st.booleans()):
        ch["ee_force"] = arr((T, 3))
        ch["condition"] = np.array(draw(st.lists(st.integers(0, 1), min_size=T, max_size=T)))
    meta = TrajectoryMeta(
        robot="toy",
        joint_names=tuple(f"j{i}" for i in range(n)),
        name="x",
        labels={"k": draw(st.integers(0, 9))},
    )
    return Trajectory(ch, meta)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tr=trajectories())
def test_csv_round_trip_property(tmp_path, tr):
    p = tmp_path / "rt.csv"
    write_csv(tr, p)
    back = read_mapped(p, canonical_mapping(tr), name="x")
    assert back.channels == tr.channels
    for ch in tr.channels:
        assert back[ch].dtype == tr[ch].dtype
        np.testing.assert_array_equal(back[ch], tr[ch])
    assert back.meta.labels == tr.meta.labels


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    vals=st.lists(plausible, min_size=1, max_size=20),
    unit=st.sampled_from(["deg", "rad", "rev", "step4096"]),
)
def test_angle_units_property(tmp_path, vals, unit):
    rows = [[0.01 * i, v] for i, v in enumerate(vals)]
    p = write(tmp_path / "a.csv", ["t", "pos"], [[r[0], repr(float(r[1]))] for r in rows])
    m = ColumnMapping.from_dict(
        {
            "joints": ["j"],
            "columns": [{"column": "pos", "channel": "q", "joint": "j", "unit": unit}],
        }
    )
    tr = read_mapped(p, m)
    scale = {"deg": math.pi / 180, "rad": 1.0, "rev": 2 * math.pi, "step4096": 2 * math.pi / 4096}[
        unit
    ]
    np.testing.assert_allclose(tr["q"][:, 0], np.array(vals) * scale, rtol=1e-15, atol=0)
