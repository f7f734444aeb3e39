"""``neuract record`` on the emulated bus: a recording equals the twin's telemetry of the same
commands; every injected fault gives its stated behaviour; a crash keeps finished episodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from neuract.bus import BusClient, BusEmulator, FaultSpec, ServoFault, scs, tables
from neuract.data.dataset import Dataset
from neuract.errors import ConfigError
from neuract.record import EmulatorClock, RecordConfig, SafetyStop, ServoLost, recover
from neuract.record.session import Session, record_session

SRC = Path(__file__).resolve().parents[1] / "src"


def _session(cfg: RecordConfig, faults=None, duration_s: float = 12.0, timeout_s=0.1, **kw):
    emu = BusEmulator(robot=cfg.arm, ids=cfg.resolved_ids(), clock="virtual",
                      duration_s=duration_s, faults=faults, **kw).start()
    bus = BusClient(emu.port, emu.protocol, timeout_s=timeout_s)
    return emu, Session(bus, EmulatorClock(emu), None, [emu], emu.port)


def _cfg(tmp_path, **kw) -> RecordConfig:
    kw.setdefault("quiet", True)
    kw.setdefault("emulate", True)
    return RecordConfig(out=tmp_path / "rec", **kw)


def _tick_reads(emu, n_ticks):
    """The SYNC READ exchanges of the recording's ticks (the last ``n_ticks``)."""
    reads = [ex for ex in emu.log if ex.instruction == scs.SYNC_READ]
    return reads[len(reads) - n_ticks:]


def _record(cfg, emu, sess, ticks=None):
    """record_session, collecting (tick, sample) pairs."""
    seen = [] if ticks is None else ticks
    try:
        return record_session(cfg, sess, on_tick=lambda t, s: seen.append((t, s))), seen
    finally:
        sess.bus.close()


def test_a_ten_second_recording_equals_the_twins_telemetry(tmp_path):
    cfg = _cfg(tmp_path, rate_hz=25.0, duration_s=10.0, excite_rad=0.3, task="wave",
               payload_kg=0.1, notes="bench arm 2")
    emu, sess = _session(cfg)
    with emu:
        summary, seen = _record(cfg, emu, sess)
        reads = _tick_reads(emu, len(seen))
        truth = emu.truth()
        ds = Dataset(cfg.out)
        tr = ds[0]
        assert len(ds) == 1 and len(tr) == len(seen) == 250
        assert all(set(ex.outcome.values()) == {"ok"} for ex in reads)
        for k, ex in enumerate(reads):
            expect = emu.telemetry(ex.step)
            for ch in ("q", "qd", "load", "current", "voltage", "temperature"):
                np.testing.assert_array_equal(tr[ch][k], expect[ch], err_msg=f"{ch} {k}")
        # the goals echoed are the registers' (the sine quantised to counts), and the servos
        # got them: the twin's goal from the physics step after the write (the read's step
        # is the write's: a goal reaches the servo at the next step), inside the ranges
        q0 = tr["q"][0]
        t = tr["t"]
        sine = q0 + 0.3 * np.sin(2 * np.pi * np.array([0.31, 0.23, 0.41, 0.37, 0.53, 0.29])
                                 * t[:, None])
        assert np.abs(tr["q_goal"] - sine).max() <= tables.RAD_PER_STEP / 2 + 0.02
        lo, hi = emu.tm.ranges[:, 0], emu.tm.ranges[:, 1]
        steps = np.array([ex.step for ex in reads])
        inside = (tr["q_goal"] > lo) & (tr["q_goal"] < hi)
        np.testing.assert_allclose(truth["q_goal"][steps + 1][inside], tr["q_goal"][inside],
                                   atol=1e-9)
    # monotonic timestamps at the set rate (the emulated clock), no fault counted
    np.testing.assert_allclose(np.diff(tr["t"]), 1 / 25, atol=2e-3)
    assert tr.meta.counts["dropped_reads"] == 0 and tr.meta.counts["reads"] == 250
    lab = tr.meta.labels
    assert (lab["task"], lab["payload_mass_kg"], lab["notes"], lab["end"]) == (
        "wave", 0.1, "bench arm 2", "duration")
    assert summary["episodes"][0]["rate_hz"] == pytest.approx(25.0, rel=1e-3)
    assert 500 < summary["bus_limit_hz"] < 700  # 6 STS3215 at 1 Mbps: ~1.7 ms a tick
    info = json.loads((cfg.out / "meta" / "info.json").read_text())
    assert info["recording"]["in_progress"] is None and info["recording"]["partial"] == []


def test_omx_teleoperation_into_lerobot(tmp_path):
    """The leader's positions (an unpowered emulated arm sagging) become the follower's
    goals; the LeRobot layout holds the episodes."""
    from neuract.io.lerobot import read_lerobot

    cfg = _cfg(tmp_path, arm="omx", rate_hz=30.0, duration_s=1.5, episodes=2,
               leader_port="emulate", format="lerobot")
    emu, sess = _session(cfg, duration_s=6.0)
    with emu, BusEmulator(robot="omx", ids=cfg.resolved_ids(), clock="wall", duration_s=20.0,
                          torque=False, seed=5) as lemu:
        sess.leader = BusClient(lemu.port, "dxl2", timeout_s=0.1)
        try:
            _, seen = _record(cfg, emu, sess)
        finally:
            sess.leader.close()
        lreads = [ex for ex in lemu.log if ex.instruction == scs.SYNC_READ][-len(seen):]
        lead_q = np.array([lemu.telemetry(ex.step)["q"] for ex in lreads])
        lo, hi = emu.tm.ranges[:, 0], emu.tm.ranges[:, 1]
    got = np.array([t.goal for t, _ in seen])  # the leader's angles clipped to the ranges
    np.testing.assert_allclose(got, np.clip(lead_q, lo, hi), atol=1e-12)
    assert np.ptp(lead_q[:, 1]) > 0.05  # the leader moved
    eps = read_lerobot(cfg.out)
    canon = Dataset(Path(str(cfg.out) + ".neuract"))
    assert len(eps) == len(canon) == 2
    np.testing.assert_array_equal(eps[1]["q_goal"], canon[1]["q_goal"])
    k = len(canon[0]) + 3  # the goals echoed are the registers' (counts)
    np.testing.assert_allclose(canon[1]["q_goal"][3], [tables.counts_to_position(
        tables.position_counts(q)) for q in got[k]], atol=1e-12)
    assert canon[0].meta.labels["teleop"] is True and "pwm" in canon[0]


def test_dropped_and_corrupt_reads_are_counted_never_filled(tmp_path):
    cfg = _cfg(tmp_path, rate_hz=50.0, duration_s=2.0, excite_rad=0.2)
    emu, sess = _session(cfg, faults=FaultSpec(drop=0.1, corrupt=0.03), duration_s=5.0)
    with emu:
        summary, seen = _record(cfg, emu, sess)
        reads = _tick_reads(emu, len(seen))
        tr = Dataset(cfg.out)[0]
        k_written = 0
        for (_tick, sample), ex in zip(seen, reads):
            if set(ex.outcome.values()) != {"ok"}:
                assert sample is None  # a fault is a dropped read, never a value
            if sample is not None:
                np.testing.assert_array_equal(tr["q"][k_written], emu.telemetry(ex.step)["q"])
                k_written += 1
    c = tr.meta.counts
    bad = sum(set(ex.outcome.values()) != {"ok"} for ex in reads)
    assert bad >= 5 and c["dropped_reads"] >= bad and c["samples"] == len(tr) == k_written
    assert c["reads"] == len(seen) == c["samples"] + c["dropped_reads"]
    assert c["timeouts"] >= 6 * sum(ex.outcome == {-1: "dropped"} for ex in reads)
    assert c["corrupt"] >= 1 and c["corrupt_id1"] + c["timeout_id1"] >= 1
    assert summary["episodes"][0]["dropped_reads"] == c["dropped_reads"]


def test_a_servo_that_stops_answering_ends_the_episode_naming_it(tmp_path):
    cfg = _cfg(tmp_path, rate_hz=50.0, duration_s=4.0, episodes=2, lost_after_s=0.2)
    emu, sess = _session(cfg, faults=FaultSpec(vanish={3: 1.0}), duration_s=10.0,
                         timeout_s=0.03)
    with emu, pytest.raises(ServoLost, match="servo 3 stopped answering") as err:
        _record(cfg, emu, sess)
    assert err.value.servo_id == 3
    ds = Dataset(cfg.out)
    tr = ds[0]
    assert len(ds) == 1 and tr.meta.labels["end"] == "servo_lost"
    assert "servo 3" in tr.meta.labels["stop_message"]
    assert 0.9 < tr["t"][-1] < 1.05 and tr.meta.counts["timeout_id3"] >= 3


@pytest.mark.parametrize("arm,sid,kind,word", [("so101", 2, "overload", "overload"),
                                               ("omx", 13, "overheat", "overheating")])
def test_a_servo_error_bit_is_a_safety_stop_with_torque_off(tmp_path, arm, sid, kind, word):
    cfg = _cfg(tmp_path, arm=arm, rate_hz=50.0, duration_s=3.0, excite_rad=0.2)
    emu, sess = _session(cfg, faults=FaultSpec(errors=(ServoFault(sid, 0.6, kind),)),
                         duration_s=5.0)
    with emu:
        with pytest.raises(SafetyStop, match=f"servo {sid} reports {word}"):
            _record(cfg, emu, sess)
        assert emu.wait_idle()
        assert all(emu.register(i, "torque_enable") == 0 for i in emu.ids)
    tr = Dataset(cfg.out)[0]
    assert tr.meta.labels["end"] == "safety_stop" and 0.55 < tr["t"][-1] < 0.7


def test_over_temperature_is_a_safety_stop(tmp_path):
    cfg = _cfg(tmp_path, rate_hz=50.0, duration_s=2.0, excite_rad=0.1)
    emu, sess = _session(cfg, duration_s=4.0)
    with emu:
        emu.advance(0.01)
        hot = float(emu.telemetry(0)["temperature"].max())
        cfg.temperature_limit = hot
        with pytest.raises(SafetyStop, match=f"at {hot:.0f} degC, at or above the "
                                             "temperature limit"):
            _record(cfg, emu, sess)
        assert emu.wait_idle()
        assert all(emu.register(i, "torque_enable") == 0 for i in emu.ids)


def test_ctrl_c_switches_the_torque_off_and_keeps_the_episode(tmp_path):
    cfg = _cfg(tmp_path, rate_hz=50.0, duration_s=3.0, excite_rad=0.1)
    emu, sess = _session(cfg, duration_s=5.0)

    def on_tick(tick, sample, n=[0]):  # noqa: B006 - a counter
        n[0] += 1
        if n[0] == 20:
            raise KeyboardInterrupt

    with emu:
        with pytest.raises(KeyboardInterrupt):
            record_session(cfg, sess, on_tick=on_tick)
        sess.bus.close()
        assert emu.wait_idle()
        assert all(emu.register(i, "torque_enable") == 0 for i in emu.ids)
    tr = Dataset(cfg.out)[0]
    assert len(tr) == 20 and tr.meta.labels["end"] == "interrupted"


class _Keys:
    """Enter at once, Enter after ``n`` ticks, then q."""

    def __init__(self, n):
        self.n, self.calls, self.quit, self.started = n, 0, False, 0

    def wait(self, idle):
        idle()
        self.started += 1
        self.quit = self.started > 1
        return not self.quit

    def pressed(self):
        self.calls += 1
        return self.calls > self.n


def test_keyboard_starts_and_stops_episodes(tmp_path):
    cfg = _cfg(tmp_path, rate_hz=50.0, duration_s=0.0, episodes=3)
    emu, sess = _session(cfg, duration_s=5.0)
    with emu:
        record_session(cfg, sess, keyboard=_Keys(30))
        sess.bus.close()
    ds = Dataset(cfg.out)
    assert len(ds) == 1 and len(ds[0]) == 30 and "q_goal" not in ds[0]
    assert ds[0].meta.labels["end"] == "stopped"


CRASH = """
import os, signal, sys
from neuract.bus import BusClient, BusEmulator
from neuract.record import EmulatorClock, RecordConfig
from neuract.record.session import Session, record_session
cfg = RecordConfig(out=sys.argv[1], emulate=True, rate_hz=50.0, duration_s=1.0, episodes=5,
                   excite_rad=0.1, quiet=True)
emu = BusEmulator(robot="so101", clock="virtual", duration_s=8.0).start()
bus = BusClient(emu.port, emu.protocol, timeout_s=0.1)
n = [0]
def on_tick(tick, sample):
    n[0] += 1
    if n[0] == 2 * 50 + 40:  # episode 2, tick 40
        os.kill(os.getpid(), signal.SIGKILL)
record_session(cfg, Session(bus, EmulatorClock(emu), None, [emu], emu.port), on_tick=on_tick)
"""


def test_a_crash_keeps_finished_episodes_and_marks_the_current_one_partial(tmp_path):
    out = tmp_path / "rec"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CRASH), str(out)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ds = Dataset(out)
    assert len(ds) == 2 and [len(tr) for tr in ds] == [50, 50]
    info = json.loads((out / "meta" / "info.json").read_text())
    partial = out / info["recording"]["in_progress"]
    assert info["recording"]["in_progress"] == "data/episode_000002.partial.csv"
    assert partial.is_file() and partial.read_text().startswith("# neuract partial episode")
    names = recover(out)
    ds = Dataset(out)
    assert names == ["episode_000002"] and len(ds) == 3 and not partial.exists()
    last = ds[2]
    assert last.meta.labels["partial"] is True and last.meta.labels["end"] == "crash"
    assert 0 < len(last) <= 40
    np.testing.assert_array_equal(np.diff(last["t"]) > 0, True)
    with pytest.raises(ConfigError, match="not a recording"):
        recover(tmp_path)


def test_bad_options_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="--port is missing"):
        RecordConfig(out=tmp_path / "x").validate()
    with pytest.raises(ConfigError, match="--ids"):
        RecordConfig(port="/dev/null", ids=(1, 2, 3)).validate()
    with pytest.raises(ConfigError, match="--rate-hz"):
        RecordConfig(port="/dev/null", rate_hz=0).validate()
    with pytest.raises(ConfigError, match="one or the other"):
        RecordConfig(port="/dev/null", leader_port="/dev/x", excite_rad=0.2).validate()
    cfg = _cfg(tmp_path, duration_s=0.2, rate_hz=20)
    emu, sess = _session(cfg, faults=FaultSpec(vanish={4: 0.0}), duration_s=2.0,
                         timeout_s=0.02)
    with emu, pytest.raises(ConfigError, match=r"servo\(s\) \[4\] do not answer"):
        _record(cfg, emu, sess)


def test_estimate_live_streams_the_recorded_samples(tmp_path):
    """``estimate --live``: every recorded sample goes through the streaming estimator; the
    estimates are written per episode beside the telemetry, sample for sample."""
    import pyarrow.parquet as pq
    import torch

    from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
    from neuract.neuralactuator.checkpoint import save_checkpoint
    from neuract.pipeline.estimate_verb import EstimateConfig, run_estimate

    torch.manual_seed(0)
    model = NeuralActuator(NeuralActuatorConfig(
        n_joints=6, effort="load", mode="estimator", d_model=16, n_layers=1, n_heads=2,
        d_ff=16, d_trunk=16, history=4))
    ckpt = save_checkpoint(model, tmp_path / "ckpt")
    bus = RecordConfig(out=tmp_path / "telemetry", emulate=True, excite_rad=0.2,
                       duration_s=1.0, rate_hz=30.0, episodes=2, quiet=True)
    summary = run_estimate(EstimateConfig(checkpoint=ckpt, out=tmp_path / "est", live=True,
                                          bus=bus, quiet=True))
    ds = Dataset(tmp_path / "telemetry")
    assert len(ds) == 2 and len(summary["episodes"]) == 2
    for i, tr in enumerate(ds):
        est = pq.read_table(tmp_path / "est" / f"episode_{i:06d}.parquet").to_pydict()
        np.testing.assert_array_equal(est["t"], tr["t"])
        v = np.array(est["valid"])
        assert not v[:3].any() and v[3:].all()
        tau = np.array([est[f"tau.{j}"] for j in tr.meta.joint_names]).T
        assert tau.shape == (len(tr), 6) and np.isfinite(tau[v]).all()
        assert np.isfinite(np.array(est["contact_prob"])[v]).all()
    with pytest.raises(ConfigError, match="--data is missing"):
        run_estimate(EstimateConfig(checkpoint=ckpt, out=tmp_path / "est2"))
