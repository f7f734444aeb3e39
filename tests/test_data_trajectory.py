"""Trajectory validation: shapes, finiteness, time order, channel names; every error names
the source, the channel, the sample and what is accepted."""

from __future__ import annotations

import numpy as np
import pytest

from neuract.data import Trajectory, TrajectoryMeta
from neuract.errors import SchemaError


def make(T=10, n=2, **extra):
    t = np.arange(T) * 0.01
    ch = {"t": t, "q": np.zeros((T, n))}
    ch.update(extra)
    meta = TrajectoryMeta(
        robot="planar2", joint_names=tuple(f"j{i}" for i in range(n)), source="mem.csv", name="ep"
    )
    return Trajectory(ch, meta)


def test_basic_access_and_units():
    tr = make(qd=np.ones((10, 2)), ee_force=np.zeros((10, 3)), ee_force_mask=np.ones(10, bool))
    assert tr["q"].shape == (10, 2)
    assert tr.n_joints == 2 and len(tr) == 10
    assert tr.meta.units["qd"] == "rad/s" and tr.meta.units["ee_force"] == "N"
    assert tr.meta.rate_hz == pytest.approx(100.0)
    assert tr.duration == pytest.approx(0.09)
    with pytest.raises(ValueError):
        tr["q"][0, 0] = 1.0  # read-only


def test_unknown_channel_lists_accepted():
    with pytest.raises(SchemaError, match=r"mem.csv: unknown channel 'torque'.*accepted.*tau"):
        make(torque=np.zeros((10, 2)))


def test_wrong_joint_count():
    with pytest.raises(SchemaError, match=r"channel 'qd' has shape \(10, 3\); expected \(10, 2\)"):
        make(qd=np.zeros((10, 3)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_named(bad):
    qd = np.zeros((10, 2))
    qd[7, 1] = bad
    with pytest.raises(SchemaError, match=r"mem.csv: channel 'qd' column 1 \(j1\), sample 7"):
        make(qd=qd)


@pytest.mark.parametrize("kind,t", [("duplicated", [0, 1, 1, 2]), ("decreasing", [0, 2, 1, 3])])
def test_time_must_increase(kind, t):
    meta = TrajectoryMeta(robot="r", joint_names=("a",), source="x.csv")
    with pytest.raises(SchemaError, match=rf"x.csv: channel 't', sample 2: {kind}"):
        Trajectory({"t": np.array(t, float), "q": np.zeros((4, 1))}, meta)


def test_missing_required_channel():
    meta = TrajectoryMeta(robot="r", joint_names=("a",), source="x.csv")
    with pytest.raises(SchemaError, match="required channel 'q' is missing"):
        Trajectory({"t": np.arange(3.0)}, meta)


def test_labels_must_be_json_and_finite():
    meta = TrajectoryMeta(robot="r", joint_names=("a",), labels={"m": float("nan")})
    with pytest.raises(SchemaError, match="label 'labels.m' is nan"):
        Trajectory({"t": np.arange(3.0), "q": np.zeros((3, 1))}, meta)
    meta = TrajectoryMeta(robot="r", joint_names=("a",), labels={"m": np.float32(2.5), "k": (1, 2)})
    tr = Trajectory({"t": np.arange(3.0), "q": np.zeros((3, 1))}, meta)
    assert tr.meta.labels == {"m": 2.5, "k": [1, 2]}
    assert type(tr.meta.labels["m"]) is float


def test_replace_and_slice():
    tr = make(qd=np.ones((10, 2)))
    tr2 = tr.replace({"qdd": np.zeros((10, 2))}, drop=("qd",), name="other")
    assert "qdd" in tr2 and "qd" not in tr2 and tr2.meta.name == "other"
    part = tr.slice(2, 5)
    assert len(part) == 3 and part.meta == tr.meta and part.channels == tr.channels
    for ch in tr.channels:
        np.testing.assert_array_equal(part[ch], tr[ch][2:5])
    assert tr.equals(make(qd=np.ones((10, 2))))
    assert not tr.equals(tr2)
    # equality needs the same channels and values (the metadata being equal)
    assert not tr.equals(make(qd=np.ones((10, 2)), qdd=np.zeros((10, 2))))
    assert not make(qd=np.ones((10, 2)), qdd=np.zeros((10, 2))).equals(tr)
    qd = np.ones((10, 2))
    qd[9, 1] = 1.0 + 1e-12
    assert not tr.equals(make(qd=qd))


@pytest.mark.parametrize("t,where", [
    ([0.0, 1.0, 1.0, 2.0], r"sample 2: duplicated timestamp 1.0 after 1.0 \(1 such"),
    ([0.0, 2.0, 1.0, 3.0], r"sample 2: decreasing timestamp 1.0 after 2.0 \(1 such"),
    ([0.0, 1.0, np.nan, 3.0], r"sample 2: non-finite timestamp nan after 1.0 \(2 such"),
    ([[0.0, 1.0, 2.0], [0.0, 1.0, 0.5]], r"sample \(1, 2\): decreasing timestamp 0.5 after 1.0"),
])
def test_check_time_names_the_first_bad_sample(t, where):
    from neuract.data.trajectory import check_time

    with pytest.raises(SchemaError, match=rf"f.csv: channel 't', {where}"):
        check_time(np.array(t), "f.csv")
    check_time(np.arange(5.0), "f.csv")  # increasing: no error
    check_time(np.zeros(1), "f.csv")  # a single sample has no order
