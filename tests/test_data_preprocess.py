"""Resampling, Savitzky-Golay derivatives, windows (property-based) and episode splits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuract.data import Trajectory, TrajectoryMeta
from neuract.data.derivatives import add_derivatives
from neuract.data.resample import is_uniform, resample
from neuract.data.splits import split_episodes, split_metas
from neuract.data.windows import (
    WindowSpec,
    make_windows,
    window_anchors,
    window_indices,
    window_spec,
)
from neuract.errors import ConfigError, SchemaError


def traj(t, q, **extra):
    q = np.asarray(q, float).reshape(len(t), -1)
    meta = TrajectoryMeta(
        robot="r", joint_names=tuple(f"j{i}" for i in range(q.shape[1])), name="e", source="e.csv"
    )
    return Trajectory({"t": np.asarray(t, float), "q": q, **extra}, meta)


def test_resample_linear_exact_and_jitter():
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.009, 0.024, 300))  # NAD-like jitter
    q = np.stack([2.0 * t - 1.0, -0.5 * t], 1)  # linear: interpolation is exact
    valid = np.ones((300, 2), bool)
    valid[100] = False
    cond = (np.arange(300) % 2).astype(np.int8)  # changes at every sample
    tr = traj(t, q, valid=valid, contact=np.arange(300) >= 150, condition=cond)
    r = resample(tr, rate_hz=60.0)
    assert is_uniform(r["t"]) and r.meta.rate_hz == 60.0
    np.testing.assert_allclose(np.diff(r["t"]), 1 / 60, rtol=1e-9)
    np.testing.assert_allclose(r["q"][:, 0], 2.0 * r["t"] - 1.0, atol=1e-12)
    # grid points next to the invalid sample are invalid, others valid
    bad = np.flatnonzero(~r["valid"][:, 0])
    assert bad.size >= 1 and np.all(np.abs(r["t"][bad] - t[100]) < 0.025)
    assert r["contact"][0] == False and r["contact"][-1] == True  # noqa: E712
    # non-float channels take the value of the nearest original sample
    nearest = np.abs(r["t"][:, None] - t[None, :]).argmin(1)
    np.testing.assert_array_equal(r["contact"], nearest >= 150)
    np.testing.assert_array_equal(r["condition"], cond[nearest])
    assert r.meta.counts["gap_samples"] == 0


def test_resample_marks_gaps():
    t = np.r_[np.arange(0, 1, 0.01), np.arange(1.5, 2, 0.01)]
    r = resample(traj(t, np.sin(t)), dt=0.01)
    gap = ~r["valid"][:, 0]
    assert r.meta.counts["gap_samples"] == gap.sum() > 40
    assert np.all((r["t"][gap] > 0.99) & (r["t"][gap] < 1.5 - 1e-9))


def test_resample_bad_args():
    tr = traj(np.arange(5.0), np.zeros(5))
    with pytest.raises(ConfigError, match="exactly one of rate_hz"):
        resample(tr)
    with pytest.raises(ConfigError, match="expected a positive step"):
        resample(tr, dt=-1.0)


def test_savgol_exact_on_cubic_and_close_on_sine():
    t = np.arange(200) * 0.01
    q = np.stack([1 + 2 * t - 3 * t**2 + 0.5 * t**3, np.sin(3 * t)], 1)
    tr = add_derivatives(traj(t, q), window_s=0.09, polyorder=3)
    np.testing.assert_allclose(tr["qd"][:, 0], 2 - 6 * t + 1.5 * t**2, atol=1e-9)
    np.testing.assert_allclose(tr["qdd"][:, 0], -6 + 3 * t, atol=1e-8)
    np.testing.assert_allclose(tr["qd"][:, 1], 3 * np.cos(3 * t), atol=1e-3)
    np.testing.assert_allclose(tr["qdd"][4:-4, 1], -9 * np.sin(3 * t[4:-4]), atol=1.5e-2)
    np.testing.assert_allclose(tr["qdd"][:, 1], -9 * np.sin(3 * t), atol=5e-2)  # edge fits
    assert tr.meta.labels["derivatives"]["window_samples"] == 9


def test_derivatives_keep_servo_qd_and_need_uniform():
    t = np.arange(50) * 0.01
    tr = traj(t, t**2, qd=np.full((50, 1), 7.0))
    assert (add_derivatives(tr)["qd"] == 7.0).all()
    assert not (add_derivatives(tr, replace_qd=True)["qd"] == 7.0).all()
    t2 = t.copy()
    t2[10] += 0.003
    with pytest.raises(SchemaError, match="not uniform.*resample first"):
        add_derivatives(traj(t2, t2))
    with pytest.raises(SchemaError, match="fewer than the"):
        add_derivatives(traj(t[:5], t[:5]), window_s=0.2)


def test_window_spec_validated_against_rate():
    assert window_spec(100.0, 0.08, 0.5) == WindowSpec(8, 50, 1)
    with pytest.raises(
        ConfigError,
        match=r"history 0.1 s at 62.5 Hz is 6.25 samples; expected "
        r"a whole number >= 1, e.g. 0.096 s \(6 samples\)",
    ):
        window_spec(62.5, 0.1)
    with pytest.raises(ConfigError, match="history 0.0 s"):
        window_spec(100.0, 0.0)
    tr = traj(np.arange(100) * 0.01, np.zeros(100))
    spec, anchors = make_windows(tr, 0.05, 0.1, stride_s=0.02)
    assert spec == WindowSpec(5, 10, 2) and anchors[0] == 4 and anchors[-1] <= 89


@settings(max_examples=200, deadline=None)
@given(
    T=st.integers(0, 200),
    h=st.integers(1, 30),
    H=st.integers(0, 30),
    s=st.integers(1, 7),
    bad=st.lists(st.integers(0, 199), max_size=5),
)
def test_window_invariants(T, h, H, s, bad):
    spec = WindowSpec(h, H, s)
    valid = np.ones(T, bool)
    valid[[b for b in bad if b < T]] = False
    all_a = window_anchors(T, spec)
    # count: every window that fits, stepping by stride
    assert len(all_a) == (max(0, (T - h - H) // s + 1) if T - h - H >= 0 else 0)
    a = window_anchors(T, spec, valid)
    hist, fut = window_indices(a, spec)
    assert hist.shape == (len(a), h) and fut.shape == (len(a), H)
    if len(a):
        assert hist.min() >= 0 and (fut.max() if H else hist.max()) < T
        assert (hist[:, -1] == a).all() and (np.diff(hist, axis=1) == 1).all()
        if H:
            assert (fut[:, 0] == a + 1).all()
        assert valid[hist].all() and valid[fut].all()
        assert set(a) <= set(all_a) and ((a - (h - 1)) % s == 0).all()
    # a skipped window really touched an invalid sample
    for x in set(all_a) - set(a):
        assert not valid[x - h + 1 : x + H + 1].all()


def test_splits_partition_seeded_and_grouped():
    sp = split_episodes(10, seed=3)
    assert sorted(sum(sp.values(), [])) == list(range(10))
    assert [len(sp[k]) for k in ("train", "val", "test")] == [8, 1, 1]
    assert sp == split_episodes(10, seed=3) and sp != split_episodes(10, seed=4)
    assert all(len(v) == 1 for v in split_episodes(3, seed=0).values())
    groups = ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"]
    sg = split_episodes(10, {"train": 0.6, "test": 0.4}, seed=1, groups=groups)
    for part in sg.values():  # no group crosses splits
        assert {groups[i] for i in part}.isdisjoint(
            {groups[i] for k, p in sg.items() if p is not part for i in p}
        )
    metas = [
        TrajectoryMeta(robot="r", joint_names=("a",), name=str(i), labels={"split": s})
        for i, s in enumerate(["train", "validation", "test", "train"])
    ]
    assert split_metas(metas, from_labels=True) == {"train": [0, 3], "val": [1], "test": [2]}
    with pytest.raises(ConfigError, match="fractions"):
        split_episodes(4, {"train": -1.0})


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(0, 60),
    seed=st.integers(0, 2**32 - 1),
    f=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=4),
)
def test_split_property(n, seed, f):
    fr = {f"s{i}": x for i, x in enumerate(f)}
    sp = split_episodes(n, fr, seed)
    items = sum(sp.values(), [])
    assert sorted(items) == list(range(n))
    if n >= len(f):
        assert all(len(v) >= 1 for v in sp.values())
    for k, v in sp.items():
        assert abs(len(v) - n * fr[k] / sum(f)) <= 1 + len(f)


def test_window_gather_example():
    t = np.arange(20) * 0.05
    tr = traj(t, np.arange(20.0))
    spec, a = make_windows(tr, history_s=0.15, horizon_s=0.1)
    hist, fut = window_indices(a, spec)
    q = tr["q"][:, 0]
    assert q[hist][0].tolist() == [0, 1, 2] and q[fut][0].tolist() == [3, 4]
    assert math.isclose(tr.meta.rate_hz, 20.0)
