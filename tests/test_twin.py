"""Digital twin: determinism, unit randomisation, ideal-servo identity, labels, statics."""

from __future__ import annotations

import dataclasses
import hashlib

import mujoco
import numpy as np
import pytest

from neuract.data.dataset import write_dataset
from neuract.errors import ConfigError
from neuract.twin.config import ROBOT_SPECS, Nonidealities, SimConfig
from neuract.twin.generate import GenerateConfig, episode_rng, generate, run_chunk, unit_rng
from neuract.twin.model import build_model
from neuract.twin.servo import sample_unit
from neuract.twin.sim import Job, simulate
from neuract.twin.tasks import make_plan


def _small(seed=0, n_envs=3, workers=1, robot="so101", tasks=("free", "pick", "push")):
    return GenerateConfig(robot=robot, tasks=tasks, minutes=4 * 2.0 / 60, units=2, seed=seed,
                          workers=workers, sim=SimConfig(episode_s=2.0, n_envs=n_envs))


def _hashes(path):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((path / "data").glob("*.parquet"))}


def test_same_seed_same_bytes_whatever_the_batching(tmp_path):
    a = write_dataset(generate(_small(n_envs=3)), tmp_path / "a")
    b = write_dataset(generate(_small(n_envs=3)), tmp_path / "b")
    c = write_dataset(generate(_small(n_envs=1)), tmp_path / "c")
    ha, hb, hc = _hashes(a), _hashes(b), _hashes(c)
    assert len(ha) == 4
    assert ha == hb
    assert ha == hc  # lockstep batch size does not change any episode
    d = write_dataset(generate(_small(seed=1)), tmp_path / "d")
    assert set(_hashes(d).values()).isdisjoint(ha.values())


@pytest.mark.slow
def test_same_bytes_across_processes(tmp_path):
    a = write_dataset(generate(_small(n_envs=1, workers=1)), tmp_path / "a")
    b = write_dataset(generate(_small(n_envs=1, workers=2)), tmp_path / "b")
    assert _hashes(a) == _hashes(b)


def test_units_differ_within_and_across_seeds():
    spec = ROBOT_SPECS["so101"]()
    p00, _ = sample_unit(spec, 6, unit_rng(0, 0))
    p00b, _ = sample_unit(spec, 6, unit_rng(0, 0))
    p01, _ = sample_unit(spec, 6, unit_rng(0, 1))
    p10, _ = sample_unit(spec, 6, unit_rng(1, 0))
    for name in ("ke", "resistance", "stribeck", "backlash", "armature"):
        assert np.array_equal(getattr(p00, name), getattr(p00b, name))
        assert not np.allclose(getattr(p00, name), getattr(p01, name))
        assert not np.allclose(getattr(p00, name), getattr(p10, name))
    # every sampled value lies inside its stated range
    s = spec.servo
    for name in ("ke", "resistance", "current_limit", "viscous", "armature", "backlash"):
        lo, hi = getattr(s, name)
        v = getattr(p01, name)
        assert np.all((v >= lo) & (v <= hi)), name


@pytest.mark.parametrize("robot", ["so101", "omx"])
def test_ideal_twin_equals_mujoco_position_actuator(robot):
    """All non-idealities off: the twin is MuJoCo's own position actuator, to ~1e-10."""
    kp = 6.0
    cfg = SimConfig(episode_s=2.0, nonideal=Nonidealities.ideal(), kp_ideal=kp)
    spec = ROBOT_SPECS[robot]()
    tm = build_model(robot, cfg.physics_hz)
    rng = episode_rng(3, 0, 0)
    params, bus = sample_unit(spec, tm.n, unit_rng(3, 0))
    plan = make_plan("free", robot, cfg.episode_s, tm.ranges[:, 0] + 0.05,
                     tm.ranges[:, 1] - 0.05, rng)
    rec = simulate(tm, spec, cfg, [Job(0, 0, params, bus, plan, rng)], record_physics=True)[0]
    ref = build_model(robot, cfg.physics_hz, position_kp=kp)
    m = ref.model
    m.dof_armature[ref.motor_dof] = params.armature[0]  # same rotor inertia as the twin
    assert m.nu == tm.n and np.all(m.actuator_gainprm[:, 0] == kp)
    d = mujoco.MjData(m)
    d.qpos[ref.motor_qpos] = rec.physics_qpos[0, tm.motor_qpos]
    out = np.zeros_like(rec.physics_qpos)
    for s in range(len(out)):
        out[s] = d.qpos
        d.ctrl[:] = rec.physics_goal[s]
        mujoco.mj_step(m, d)
    moved = np.abs(out - out[0]).max()
    assert moved > 0.05  # the arm really moved
    assert np.abs(out - rec.physics_qpos).max() < 1e-10
    # and the telemetry is the unquantised physics sampled at the ticks
    assert np.all(np.diff(rec.t) > 0)
    phys = rec.physics_qpos[:, tm.motor_qpos]
    hit = np.isclose(rec.channels["q_enc"][:, None], phys[None], rtol=0, atol=1e-12).all(-1)
    at = hit.argmax(1)  # physics step each telemetry sample equals
    assert hit.any(1).all() and np.all(np.diff(at) > 0)
    assert np.abs(at / cfg.physics_hz - rec.t).max() <= 1.0 / cfg.physics_hz


# each default plan's worn motors and the episode generator's next draw after the plan
# (pins how many draws every task's plan takes: the twin data of every benchmark depends on it;
# recorded from the code before SimConfig.degraded_tasks existed)
_PLAN_DRAWS = {
    "free": [("", 0.90900394283), ("", 0.2574083845), ("", 0.458189674639),
             ("", 0.803732013102)],
    "lift": [("", 0.540405102218), ("", 0.897449372419), ("", 0.037805839351),
             ("", 0.515577513753)],
    "pick": [("", 0.529040655145), ("", 0.604553582173), ("", 0.323281224708),
             ("", 0.950674214243)],
    "push": [("", 0.522274230734), ("", 0.242592143843), ("", 0.729243605402),
             ("", 0.873842003985)],
    "degraded": [("000000", 0.501415878303), ("010000", 0.830873073936),
                 ("000000", 0.048211266802), ("011000", 0.421352679153)],
}


@pytest.mark.parametrize("task", list(_PLAN_DRAWS))
def test_default_plans_take_the_same_draws_as_before(task):
    from neuract.twin.tasks import make_plan

    lo, hi = np.full(6, -1.0), np.full(6, 1.0)
    for seed, (worn, nxt) in enumerate(_PLAN_DRAWS[task]):
        rng = np.random.default_rng(seed)
        plan = make_plan(task, "so101", 30.0, lo, hi, rng, degraded_fraction=0.5)
        got = "" if plan.degraded is None else "".join("1" if x else "0" for x in plan.degraded)
        assert got == worn
        assert round(float(rng.random()), 12) == nxt


def test_degraded_tasks_put_worn_motors_into_other_tasks_after_the_same_plan():
    from neuract.twin.tasks import make_plan

    lo, hi = np.full(6, -1.0), np.full(6, 1.0)
    base = make_plan("push", "so101", 10.0, lo, hi, np.random.default_rng(3),
                     degraded_fraction=1.0)
    worn = make_plan("push", "so101", 10.0, lo, hi, np.random.default_rng(3),
                     degraded_fraction=1.0, degraded_tasks=("push", "degraded"))
    assert base.degraded is None and worn.degraded.sum() in (1, 2)
    assert not worn.degraded[4:].any()  # the four arm motors only, as task 'degraded'
    assert len(base.pushes) == len(worn.pushes) > 0
    for p, q in zip(base.pushes, worn.pushes):
        assert p[:2] == q[:2] and np.array_equal(p[2], q[2])
    np.testing.assert_array_equal(base.via_q, worn.via_q)
    # generated: the worn motors are applied and labelled
    cfg = GenerateConfig(robot="so101", tasks=("push",), minutes=2 * 3 / 60, units=1, seed=5,
                         sim=SimConfig(episode_s=3.0, n_envs=2, degraded_fraction=1.0,
                                       degraded_tasks=("push",)))
    for tr in generate(cfg):
        assert tr.meta.labels["degraded_joints"] and np.asarray(tr["condition"]).any()
    for bad in ("push", ("swim",), None, ("free",), ("lift",)):  # free/lift: no worn motors
        with pytest.raises(ConfigError, match="degraded_tasks"):
            generate(dataclasses.replace(cfg, sim=dataclasses.replace(cfg.sim,
                                                                      degraded_tasks=bad)))


def test_labels_pushes_payloads_and_conditions():
    cfg = GenerateConfig(robot="so101", tasks=("push", "lift", "degraded"), minutes=6 * 3 / 60,
                         units=1, seed=5, sim=SimConfig(episode_s=3.0, n_envs=6,
                                                        degraded_fraction=1.0))
    trajs = generate(cfg)
    for tr in trajs:
        lab = tr.meta.labels
        f, contact = tr["ee_force"], tr["contact"]
        assert tr["ee_force_mask"].all()
        assert np.array_equal(contact, np.linalg.norm(f, axis=1) > 1e-6)
        if lab["task"] == "push":
            assert lab["pushes"] and contact.any() and not contact.all()
            peak = max(np.linalg.norm(p["force_n"]) for p in lab["pushes"]
                       if p["t0_s"] + p["duration_s"] < 2.9)
            assert np.linalg.norm(f, axis=1).max() <= peak + 1e-9
        if lab["task"] == "lift" and lab["payload_mass_kg"] > 0:
            assert np.allclose(f[:, 2], -9.81 * lab["payload_mass_kg"]) and contact.all()
        if lab["task"] == "degraded":
            assert tr["condition"].all() and lab["degraded_joints"]
            assert sum(lab["condition_per_joint"]) == len(lab["degraded_joints"])
        else:
            assert not tr["condition"].any()
        hidden = lab["hidden"]["servo"]
        assert len(hidden["ke"]) == tr.n_joints


def test_tau_label_balances_gravity_at_rest():
    """Quasi-static samples: the true servo torque equals MuJoCo's gravity torque
    (payload included) at the measured pose, up to encoder/backlash offsets."""
    cfg = GenerateConfig(robot="so101", tasks=("lift",), minutes=2 * 8 / 60, units=2, seed=2,
                         sim=SimConfig(episode_s=8.0, n_envs=2))
    tm = build_model("so101", cfg.sim.physics_hz)
    m = tm.model
    d = mujoco.MjData(m)
    checked = 0
    for tr in generate(cfg):
        mass = tr.meta.labels["payload_mass_kg"]
        m.body_mass[tm.ee_body] = mass
        m.body_inertia[tm.ee_body] = 0.4 * mass * 0.03**2
        rest = np.flatnonzero(tr["t"] > 6.0)
        for k in rest[::10]:
            d.qpos[tm.motor_qpos] = tr["q"][k]
            d.qvel[:] = 0
            mujoco.mj_forward(m, d)
            grav = d.qfrc_bias[tm.motor_dof]
            assert np.abs(tr["tau"][k] - grav).max() < 0.03 + 0.02 * np.abs(grav).max()
            checked += 1
    assert checked > 5


def test_degraded_motor_needs_more_effort():
    """Same unit, same plan: a degraded motor (friction up, kt down) draws more duty."""
    cfg = SimConfig(episode_s=4.0, n_envs=2)
    spec = ROBOT_SPECS["so101"]()
    tm = build_model("so101", cfg.physics_hz)
    lo, hi = tm.ranges[:, 0] + 0.05, tm.ranges[:, 1] - 0.05
    from neuract.twin.servo import degrade

    jobs = []
    for deg in (False, True):
        params, bus = sample_unit(spec, tm.n, unit_rng(0, 0))
        rng = episode_rng(0, 0, 0)
        plan = make_plan("free", "so101", cfg.episode_s, lo, hi, rng)
        if deg:
            params = degrade(params, np.array([0, 1, 0, 0, 0, 0], bool), spec,
                             np.random.default_rng(1))
        jobs.append(Job(0, 0, params, bus, plan, rng))
    a, b = simulate(tm, spec, cfg, jobs)
    assert np.abs(b.channels["duty"][:, 1]).mean() > 1.1 * np.abs(a.channels["duty"][:, 1]).mean()


def test_healthy_motors_counterfactual_changes_only_the_worn_motors():
    """The same worn-motor episode with a worn motor left healthy: same plan and noise, the
    healthy unit's constants on that motor, the other worn motor as drawn, labels to match."""
    sim = SimConfig(episode_s=3.0, n_envs=1, degraded_fraction=1.0)
    cfg = GenerateConfig(tasks=("degraded",), minutes=3.0 / 60, units=1, seed=4, sim=sim)
    rows = [(0, 0, k, "degraded") for k in range(12)]
    worn = next(tr for tr in (run_chunk(cfg, [r])[0] for r in rows)
                if len(tr.meta.labels["degraded_joints"]) == 2)
    row = [(0, 0, worn.meta.labels["episode"], "degraded")]
    idx = list(np.flatnonzero(worn.meta.labels["condition_per_joint"]))
    half = run_chunk(dataclasses.replace(cfg, sim=dataclasses.replace(
        sim, healthy_motors=(int(idx[0]),))), row)[0]
    none = run_chunk(dataclasses.replace(cfg, sim=dataclasses.replace(
        sim, healthy_motors=tuple(int(i) for i in idx))), row)[0]
    healthy_kt = sample_unit(ROBOT_SPECS["so101"](), 6, unit_rng(4, 0))[0].kt[0]
    kt = {k: np.asarray(tr.meta.labels["hidden"]["servo"]["kt"])
          for k, tr in (("worn", worn), ("half", half), ("none", none))}
    np.testing.assert_allclose(kt["none"], healthy_kt)
    assert kt["worn"][idx[0]] < healthy_kt[idx[0]] and kt["worn"][idx[1]] < healthy_kt[idx[1]]
    assert kt["half"][idx[0]] == healthy_kt[idx[0]] and kt["half"][idx[1]] == kt["worn"][idx[1]]
    for tr in (half, none):
        np.testing.assert_array_equal(tr["q_goal"], worn["q_goal"])
        np.testing.assert_array_equal(tr["ee_force"], worn["ee_force"])
    assert np.abs(none["q"] - worn["q"]).max() > 0  # the worn motors move the arm differently
    assert half.meta.labels["condition_per_joint"][idx[0]] == 0
    assert np.asarray(none["condition"]).sum() == 0 and not none.meta.labels["degraded_joints"]
    for bad in ((6,), (-1,), ("1",), (True,), 3, "0"):
        with pytest.raises(ConfigError, match="healthy_motors"):
            run_chunk(dataclasses.replace(cfg, sim=dataclasses.replace(sim,
                                                                       healthy_motors=bad)),
                      row)


def test_current_register_noise_changes_the_current_register_only():
    """SimConfig.current_noise_lsb: drawn after the simulation from the episode's stream, so
    every other channel is the same; the register then changes more often at rest, stays a
    whole number of LSBs and (SO-101, supply side) >= 0."""
    from neuract.twin.realism import rest_mask

    sim = SimConfig(episode_s=4.0, n_envs=2)
    cfg = GenerateConfig(tasks=("free", "lift"), minutes=4 * 4.0 / 60, units=2, seed=3,
                         sim=sim)
    rows = [(i, u, k, t) for i, (u, k, t) in enumerate([(0, 0, "free"), (1, 0, "lift")])]
    plain = run_chunk(cfg, rows)
    noisy = run_chunk(dataclasses.replace(cfg, sim=dataclasses.replace(
        sim, current_noise_lsb=0.7)), rows)
    lsb = ROBOT_SPECS["so101"]().registers.current_lsb
    changed_rest = {}
    for a, b in zip(plain, noisy):
        for ch in a.channels:
            if ch != "current":
                np.testing.assert_array_equal(a[ch], b[ch], err_msg=ch)
        assert not np.array_equal(a["current"], b["current"])
        assert (b["current"] >= 0).all()
        np.testing.assert_allclose(b["current"] / lsb, np.round(b["current"] / lsb), atol=1e-6)
        rest = rest_mask(a)
        both = rest[1:] & rest[:-1]
        if both.sum() < 50:  # too little rest in this episode (the free task moves on)
            continue
        for name, tr in (("plain", a), ("noisy", b)):
            c = tr["current"][:, :4]
            changed_rest.setdefault(name, []).append((c[1:][both] != c[:-1][both]).mean())
    # the lift episode holds still: its register changed on 5 % of rest samples, 61 % noisy
    assert len(changed_rest["plain"]) >= 1
    assert np.mean(changed_rest["noisy"]) > np.mean(changed_rest["plain"]) + 0.2, changed_rest
    # the same draws again: deterministic
    again = run_chunk(dataclasses.replace(cfg, sim=dataclasses.replace(
        sim, current_noise_lsb=0.7)), rows)
    np.testing.assert_array_equal(again[1]["current"], noisy[1]["current"])
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="current_noise_lsb"):
            dataclasses.replace(cfg, sim=dataclasses.replace(
                sim, current_noise_lsb=bad)).validate()
    # the experiments' twin data take it too (neuract evaluate --twin.current-noise-lsb)
    from neuract.pipeline.twin_data import TwinDataConfig, generate_config, worn_config

    data = TwinDataConfig(current_noise_lsb=0.7, worn_train_minutes=1.0)
    assert generate_config(data).sim.current_noise_lsb == 0.7
    assert worn_config(data).sim.current_noise_lsb == 0.7
    with pytest.raises(ConfigError, match="current_noise_lsb = -1"):
        generate_config(TwinDataConfig(current_noise_lsb=-1.0))


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="unknown"):
        GenerateConfig(tasks=("dance",)).validate()
    with pytest.raises(ConfigError, match="physics_hz"):
        GenerateConfig(sim=SimConfig(physics_hz=100.0)).validate()
    with pytest.raises(ConfigError, match="robot"):
        GenerateConfig(robot="panda").validate()
    for bad in (1.5, 2.0, True, -1):
        with pytest.raises(ConfigError, match="episode_offset"):
            GenerateConfig(episode_offset=bad).validate()


def test_register_quantisation_of_telemetry():
    cfg = _small(tasks=("free",))
    cfg = dataclasses.replace(cfg, minutes=2.0 / 60, units=1)
    tr = run_chunk(cfg, [(0, 0, 0, "free")])[0]
    lsb = 2 * np.pi / 4096
    for ch in ("q", "q_goal"):
        assert np.allclose(tr[ch] / lsb, np.round(tr[ch] / lsb), atol=1e-9)
    vel_steps = tr["qd"] / lsb
    assert np.allclose(vel_steps / 50.0, np.round(vel_steps / 50.0), atol=1e-6)
    load_counts = tr["load"] * 1000
    assert np.allclose(load_counts / 4, np.round(load_counts / 4), atol=1e-6)
    assert np.allclose(tr["voltage"] * 10, np.round(tr["voltage"] * 10), atol=1e-9)
    assert np.all(tr["current"] >= 0)
    dt = np.diff(tr["t"])
    assert 0.8 / 62.3 <= dt.min() and dt.max() <= 1.4 / 62.3 and dt.std() > 1e-4


def test_cli_config_defaults_are_the_library_defaults():
    """TwinConfig flattens GenerateConfig + SimConfig for the CLI; their defaults must agree."""
    from neuract.twin.verb import TwinConfig

    cli, gen, sim = TwinConfig(out="x"), GenerateConfig(), SimConfig()
    for name in ("robot", "tasks", "minutes", "units", "seed", "workers"):
        assert getattr(cli, name) == getattr(gen, name), name
    for name in ("episode_s", "n_envs", "physics_hz", "current_noise_lsb"):
        assert getattr(cli, name) == getattr(sim, name), name
