"""Runs -> uniform-grid batch: resampling, dropout gaps, padding, enable, voltage, splits."""

from __future__ import annotations

import numpy as np
import pytest

from neuract.data import Trajectory, TrajectoryMeta
from neuract.errors import SchemaError
from neuract.fit.batch import batch_from_trajectories, split_runs


def _traj(t, q, goal, name, volts=None, enable=None, valid=None):
    ch = {"t": np.asarray(t, float), "q": np.asarray(q, float)[:, None],
          "qd": np.gradient(np.asarray(q, float), np.asarray(t, float))[:, None],
          "q_goal": np.asarray(goal, float)[:, None]}
    if volts is not None:
        ch["voltage"] = np.asarray(volts, float)[:, None]
    if enable is not None:
        ch["torque_enable"] = np.asarray(enable, bool)[:, None]
    if valid is not None:
        ch["valid"] = np.asarray(valid, bool)[:, None]
    meta = TrajectoryMeta(robot="pendulum", joint_names=("pendulum",), rate_hz=100.0,
                          name=name, labels={"kp": 16})
    return Trajectory(ch, meta)


def test_grid_mask_enable_and_voltage():
    t = np.arange(50) * 0.01 + 0.0003  # jittered start
    keep = np.ones(50, bool)
    keep[20] = False  # a bus dropout removed by the reader
    q = np.sin(t)
    volts = np.full(50, 12.0)
    volts[5] = 25.3  # a glitched read
    enable = np.arange(50) < 21  # switched off at the sample after the dropout
    valid = np.ones(50, bool)
    valid[40] = False  # a masked read glitch
    a = _traj(t[keep], q[keep], 2 * q[keep], "a", volts[keep], enable[keep], valid[keep])
    b = _traj(t[:30], q[:30], q[:30], "b")  # a shorter run
    batch = batch_from_trajectories([a, b], dt=0.01)
    assert batch.q.shape == (2, 50, 1)
    np.testing.assert_allclose(batch.q[0, :, 0].numpy(), np.sin(t), atol=2e-4)
    np.testing.assert_allclose(batch.command[0, :, 0].numpy(), 2 * np.sin(t), atol=4e-4)
    # qd is resampled like q (the grid instants fall on the kept samples)
    np.testing.assert_allclose(batch.qd[0, keep, 0].numpy(), a["qd"][:, 0], rtol=1e-12)
    m = batch.mask[0, :, 0].numpy()
    # the masked read glitch and the dropout (nearest kept sample a full dt away) are excluded
    assert not m[40] and not m[20] and m.sum() == 48
    assert batch.mask[1, :30].all() and not batch.mask[1, 30:].any()  # padding excluded
    assert batch.voltage[0].unique().tolist() == [12.0]  # median, glitch ignored
    en = batch.enable[0, :, 0].numpy()
    # the last value set before each instant: the dropout at 20 still reads 19's "on"
    assert en[:21].all() and not en[21:].any()
    series = batch_from_trajectories([a, b], dt=0.01, voltage="series")
    np.testing.assert_allclose(series.voltage[0, keep, 0].numpy(), volts[keep], rtol=1e-12)
    assert series.voltage[0, 5, 0] == pytest.approx(25.3)  # the glitch, as logged
    assert series.voltage[0, 20, 0] == pytest.approx(12.0)  # interpolated over the dropout
    assert (series.voltage[1] == 12.0).all()  # not logged: the default
    assert batch.label_tensor("kp").tolist() == [[16.0], [16.0]]
    with pytest.raises(SchemaError, match="mass"):
        batch.label_tensor("mass")


def test_split_runs_is_a_seeded_partition():
    tr, va = split_runs(600, 0.1, seed=0)
    assert len(va) == 60 and len(tr) == 540 and not set(tr) & set(va)
    assert split_runs(600, 0.1, seed=0) == (tr, va)
    assert split_runs(600, 0.1, seed=1) != (tr, va)
    with pytest.raises(SchemaError, match="val_fraction"):
        split_runs(10, 1.5)
    assert [len(x) for x in split_runs(5, 0.05)] == [4, 1]  # at least one validation run
    assert split_runs(5, 0.0) == ([0, 1, 2, 3, 4], [])
