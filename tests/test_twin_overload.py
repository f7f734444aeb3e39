"""Opt-in servo overload protection of the twin (issue 43): off by default and bit-identical,
STS3215 / XM430 trips of a stalled servo, none in free motion, reported by the environments."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import neuract.envs.arm as arm_mod
from neuract.data.schema import numpy_dtype
from neuract.envs import ArmEnv, ArmVectorEnv
from neuract.envs.tasks import draw_episode, twin_config
from neuract.errors import ConfigError
from neuract.twin.generate import ROBOT_SPECS, GenerateConfig, generate
from neuract.twin.model import build_model
from neuract.twin.sim import RECORD_CHANNELS, Lockstep
from neuract.twin.telemetry import to_trajectory

HEAVY_KG = 5.0  # far more than either arm lifts: the loaded joints stall at full output
# STS3215 factory registers: Overload_Torque 80 %, Protection_Time 200 x 10 ms, Protective_Torque
# 20 %; XM430: the assumed Overload Error detection (1.2 A for 3 s, torque off)
STS_LOAD, STS_TIME, STS_OUTPUT = 0.80, 2.0, 0.20
XM_TIME = 3.0


def _run(robot: str, task: str, protection: bool, heavy: bool = False, episode_s: float = 8.0):
    cfg = twin_config(robot, task, 0, episode_s, 500.0, protection)
    tm = build_model(robot, 500.0)
    ep = draw_episode(cfg, tm, 0, 0)
    if heavy:
        ep.plan.payload_kg, ep.plan.attach_t, ep.plan.release_t = HEAVY_KG, 1.0, np.inf
    spec = ROBOT_SPECS[robot]()
    run = Lockstep(tm, spec, cfg.sim, [ep.job])
    run.advance(run.n_steps - 1)
    return run.records()[0], spec, cfg, tm


@pytest.mark.parametrize("robot", ["so101", "omx"])
def test_default_off_and_untripped_on_are_bit_identical(robot):
    off, spec, cfg, tm = _run(robot, "free", False)
    on, *_ = _run(robot, "free", True)
    assert "overload" not in off.channels
    assert set(off.channels) == set(RECORD_CHANNELS)
    assert not on.channels["overload"].any()  # free motion never trips
    for c in RECORD_CHANNELS:  # protection armed but never tripped changes nothing
        assert np.array_equal(off.channels[c], on.channels[c]), c
    tr = to_trajectory(off, spec, cfg.sim.nonideal, list(tm.joint_names), "x", {}, None)
    assert "overload" not in tr


def test_generate_default_has_no_overload_channel_and_on_adds_it():
    base = GenerateConfig(robot="so101", minutes=0.5, seed=3)
    off = generate(dataclasses.replace(base, sim=dataclasses.replace(base.sim, episode_s=5.0)))
    on = generate(dataclasses.replace(base, sim=dataclasses.replace(
        base.sim, episode_s=5.0, overload_protection=True)))
    assert "overload" not in off[0]
    ov = on[0]["overload"]
    assert ov.dtype == numpy_dtype("overload") and ov.shape == on[0]["q"].shape
    for c in off[0].channels:
        assert np.array_equal(off[0][c], on[0][c]), c


def test_sts3215_stall_limits_output_to_protective_torque():
    rec, spec, *_ = _run("so101", "lift", True, heavy=True)
    ov, duty = rec.channels["overload"] > 0.5, np.abs(rec.channels["duty"])
    tripped = np.flatnonzero(ov.any(0))
    assert tripped.size >= 1
    for j in tripped:
        i = int(np.argmax(ov[:, j]))
        assert ov[i:, j].all()  # latched for the rest of the episode
        # the load was above Overload_Torque without a break for Protection_Time before
        over = duty[:i, j] >= STS_LOAD
        start = i - int(np.argmin(over[::-1])) if not over.all() else 0
        assert rec.t[i] - rec.t[start] == pytest.approx(STS_TIME, abs=0.05)
        assert duty[i + 1:, j].max() == pytest.approx(STS_OUTPUT)  # Protective_Torque 20 %
        assert duty[:i, j].max() > 0.95
    assert not ov[: int(np.searchsorted(rec.t, 1.0 + STS_TIME - 0.05))].any()


def test_xm430_stall_cuts_torque():
    rec, spec, *_ = _run("omx", "lift", True, heavy=True)
    ov = rec.channels["overload"] > 0.5
    tripped = np.flatnonzero(ov.any(0))
    assert tripped.size >= 1
    for j in tripped:
        i = int(np.argmax(ov[:, j]))
        assert ov[i:, j].all()
        assert rec.t[i] >= 1.0 + XM_TIME - 0.05  # payload at 1 s, then >= 3 s above
        assert np.all(rec.channels["duty"][i + 1:, j] == 0.0)  # torque off
        assert np.all(rec.channels["current"][i + 1:, j] == 0.0)
    untripped = np.flatnonzero(~ov.any(0))
    assert np.abs(rec.channels["duty"][:, untripped]).max() < 0.5


def _heavy_draw(cfg, tm, unit, episode):
    ep = draw_episode(cfg, tm, unit, episode)
    ep.plan.payload_kg, ep.plan.attach_t, ep.plan.release_t = HEAVY_KG, 1.0, np.inf
    return ep


def _play(env, steps):
    obs, info = env.reset()
    target = env.unwrapped.obs_layout["target"]
    infos = [info]
    for _ in range(steps):
        obs, _, term, trunc, info = env.step(obs[target])
        assert not term
        infos.append(info)
    return infos


def test_env_reports_overload_without_terminating(monkeypatch):
    monkeypatch.setattr(arm_mod, "draw_episode", _heavy_draw)
    env = ArmEnv("so101", "lift", actuator="twin:0", episode_s=6.0, overload_protection=True)
    infos = _play(env, 300)
    assert infos[0]["overload"].dtype == bool and infos[0]["overload"].shape == (env.tm.n,)
    stops = [i["overload_stop"] for i in infos]
    assert not stops[0] and stops[-1]
    first = stops.index(True)
    assert all(stops[first:])  # latched
    assert infos[first]["t"] >= 3.0 - 0.05
    assert infos[-1]["overload"].any()


def test_env_free_motion_no_overload_and_default_has_no_key():
    env = ArmEnv("omx", "free", actuator="twin", episode_s=4.0, overload_protection=True)
    infos = _play(env, 200)
    assert not any(i["overload_stop"] for i in infos)
    plain = ArmEnv("omx", "free", actuator="twin", episode_s=4.0)
    _, info = plain.reset()
    assert "overload" not in info and "overload_stop" not in info


def test_vector_env_overload_info():
    env = ArmVectorEnv(2, "so101", "free", actuator="twin", episode_s=2.0,
                       overload_protection=True)
    _, info = env.reset()
    assert info["overload"].shape == (2, env.tm.n) and info["overload"].dtype == bool
    _, _, term, _, info = env.step(np.stack([env.tm.ranges.mean(1)] * 2))
    assert info["overload_stop"].shape == (2,) and not info["overload_stop"].any()
    assert not term.any()


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_bad_option_values_refused(bad):
    with pytest.raises(ConfigError, match="overload_protection"):
        ArmEnv("so101", "free", actuator="twin", overload_protection=bad)


def test_option_refused_for_actuators_without_protection():
    with pytest.raises(ConfigError, match="only the twin"):
        ArmEnv("so101", "free", actuator="mujoco", overload_protection=True)
    with pytest.raises(ConfigError, match="only the twin"):
        ArmVectorEnv(2, "so101", "free", actuator="mujoco", overload_protection=True)


def test_sim_config_field_checked():
    cfg = twin_config("so101", "free", 0, 2.0, 500.0)
    sim = dataclasses.replace(cfg.sim, overload_protection="on")
    tm = build_model("so101", 500.0)
    ep = draw_episode(cfg, tm, 0, 0)
    with pytest.raises(ConfigError, match="SimConfig.overload_protection"):
        Lockstep(tm, ROBOT_SPECS["so101"](), sim, [ep.job])
