"""Gymnasium environments (neuract.envs): API, pluggable actuators, replay equality, twin
reproduction, batching and bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import neuract.envs  # noqa: F401  (registers the environments)
from neuract.actuators import ActuatorConfig, build_actuator
from neuract.config import save_resolved
from neuract.envs import ENV_IDS, ArmEnv, ArmVectorEnv
from neuract.errors import CheckpointError, ConfigError
from neuract.fit.checkpoint import save_weights
from neuract.fit.identify import build_model
from neuract.fit.verb import FitConfig
from neuract.robot import load_robot
from neuract.sim.simulate import JointParamsConfig, simulate
from neuract.twin import GenerateConfig, generate
from neuract.twin.config import SimConfig

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _servo(offset: float = 0.01):
    torch.manual_seed(0)
    act = build_actuator(ActuatorConfig(type="sts3215", friction="stribeck"), 6).double()
    from neuract.sim.simulate import JointParams

    return act, JointParams(6, JointParamsConfig(offset=offset)).double()


def _fit_dir(tmp_path, robot="so101", n=6):
    """A `neuract fit` output directory (config + weights) of an unfitted STS3215 servo."""
    cfg = FitConfig(data="unused", out=str(tmp_path), robot=robot,
                    actuator=ActuatorConfig(type="sts3215", friction="coulomb_viscous"))
    model = build_model(cfg.actuator, cfg.joints, n)
    save_resolved(cfg, tmp_path)
    save_weights(model, tmp_path / "model.safetensors")
    return tmp_path


def _replay(env, commands):
    """Step ``commands``; the backend's float64 positions before each step and after the
    last."""
    qs = [env.unwrapped.backend.q[0].detach().numpy().copy()]
    for c in commands:
        env.step(c)
        qs.append(env.unwrapped.backend.q[0].detach().numpy().copy())
    return np.array(qs)


def test_registered_ids_and_check_env():
    assert {"neuract/SO101-Track-v0", "neuract/OMX-Push-v0"} <= set(ENV_IDS)
    for env_id, act in (("neuract/SO101-PickPlace-v0", "mujoco"), ("neuract/OMX-Lift-v0",
                                                                   "twin:1")):
        env = gym.make(env_id, actuator=act, episode_s=2.0)
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=3)
        assert env.observation_space.contains(obs)
        assert "hidden" not in info and "servo" not in info


def test_parametric_replay_equals_simulate():
    act, joints = _servo()
    env = ArmEnv("so101", "free", actuator=(act, joints), episode_s=2.0)
    env.reset(seed=0)
    ref = env.backend.ref[0]
    cmds = ref[1:40] + 0.05 * np.sin(np.arange(39))[:, None]  # a recorded command sequence
    got = _replay(env, cmds)
    q0 = torch.as_tensor(got[:1])
    with torch.no_grad():
        out = simulate(load_robot("so101"), act, joints, q0, torch.zeros_like(q0),
                       torch.as_tensor(cmds)[None], 1 / 62.0, substeps=env.backend.substeps,
                       inputs={"voltage": torch.full((1, 1), env.backend.voltage,
                                                     dtype=torch.float64)})
    want = out.q[0].numpy()
    assert np.abs(got[:-1] - want).max() < 1e-6
    assert np.abs(got[-1] - got[0]).max() > 1e-3  # the arm moved


def test_fit_checkpoint_loads_and_matches_its_robot(tmp_path):
    d = _fit_dir(tmp_path / "fit")
    env = ArmEnv("so101", "lift", actuator=str(d), episode_s=1.5, privileged=True)
    obs, info = env.reset(seed=1)
    obs, r, term, trunc, info = env.step(obs[env.obs_layout["target"]])
    assert info["actuator"] == "fit" and np.isfinite(obs).all() and info["payload_kg"] >= 0
    with pytest.raises(ConfigError, match="fitted on robot 'so101'.*'omx'"):
        ArmEnv("omx", "free", actuator=str(d))
    with pytest.raises(CheckpointError, match="not a neuract fit output"):
        ArmEnv("so101", "free", actuator=str(tmp_path))


def test_twin_env_reproduces_twin_telemetry():
    cfg = GenerateConfig(robot="so101", tasks=("pick",), minutes=4.0 / 60, units=1, seed=5,
                         sim=SimConfig(episode_s=4.0))
    tr = generate(cfg)[0]
    unit, k = tr.meta.labels["unit"], tr.meta.labels["episode"]
    env = ArmEnv("so101", "pick", actuator=f"twin:{unit}", episode_s=4.0, seed=5)
    obs, _ = env.reset(options={"episode": k})
    lay = env.obs_layout
    goals = np.asarray(tr["q_goal"])
    rows = [obs]
    for g in goals[:-1]:
        obs, *_ = env.step(g)
        rows.append(obs)
    rows = np.array(rows)
    assert len(rows) == len(tr)
    for name, ch in (("q", "q"), ("qd", "qd"), ("temperature", "temperature")):
        np.testing.assert_allclose(rows[:, lay[name]], np.asarray(tr[ch]), atol=1e-5)
    np.testing.assert_allclose(rows[:, lay["effort"]], -np.asarray(tr["load"]), atol=1e-6)
    np.testing.assert_allclose(rows[:, lay["voltage"]][:, 0],
                               np.asarray(tr["voltage"]).mean(1), atol=1e-4)
    # the goals sent are what moves the arm: other goals, other telemetry
    env.reset(options={"episode": k})
    for g in goals[:60]:
        obs, *_ = env.step(g + 0.05)
    assert np.abs(obs[lay["q"]] - np.asarray(tr["q"])[60]).max() > 0.01


def test_vector_env_rows_equal_single_envs():
    act, joints = _servo()
    vec = ArmVectorEnv(3, "so101", "free", actuator=(act, joints), episode_s=1.0)
    obs, _ = vec.reset(seed=2)
    singles = []
    for e in range(3):
        a2, j2 = _servo()
        env = ArmEnv("so101", "free", actuator=(a2, j2), episode_s=1.0, seed=2)
        o, _ = env.reset(options={"episode": e})
        singles.append(env)
        np.testing.assert_allclose(obs[e], o, atol=1e-6)
    for _ in range(5):
        acts = obs[:, vec.obs_layout["target"]]
        obs, rew, term, trunc, _ = vec.step(acts)
        for e, env in enumerate(singles):
            o, r, *_ = env.step(acts[e])
            np.testing.assert_allclose(obs[e], o, atol=1e-6)
            assert abs(rew[e] - r) < 1e-6


def test_vector_env_autoresets_next_step():
    vec = ArmVectorEnv(2, "omx", "push", actuator="mujoco", episode_s=1.0)
    obs, _ = vec.reset(seed=0)
    steps = vec.backend.n_steps
    for _ in range(steps):
        obs, rew, term, trunc, _ = vec.step(obs[:, vec.obs_layout["target"]])
    assert trunc.all()
    obs, rew, term, trunc, _ = vec.step(obs[:, vec.obs_layout["target"]])
    assert not trunc.any() and (rew == 0).all() and (vec.backend.k == 0).all()


def test_bad_input_is_refused_and_state_kept():
    env = ArmEnv("so101", "free", actuator="mujoco", episode_s=1.0)
    obs, _ = env.reset(seed=0)
    before = env.backend.bm.data.qpos.copy()
    bad = obs[env.obs_layout["target"]].copy()
    bad[2] = np.nan
    with pytest.raises(ValueError, match=r"NaN/inf at \[\[2\]\].*unchanged"):
        env.step(bad)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(4))
    assert np.array_equal(env.backend.bm.data.qpos, before) and env.backend.k[0] == 0
    for kwargs, msg in (({"actuator": "twin:x"}, "integer"), ({"actuator": "bogus"}, "accepted"),
                        ({"robot": "ur5"}, "robot 'ur5'"), ({"task": "dance"}, "task 'dance'"),
                        ({"substeps": 0}, "substeps")):
        with pytest.raises(ConfigError, match=msg):
            ArmEnv(**{"actuator": "mujoco", **kwargs})
    with pytest.raises(ConfigError, match="reset options"):
        env.reset(options={"speed": 2})


def test_twin_hidden_parameters_stay_hidden():
    env = ArmEnv("so101", "free", actuator="twin:4", privileged=True, episode_s=1.0)
    obs, info = env.reset(seed=0)
    _, _, _, _, info = env.step(obs[env.obs_layout["target"]])
    assert set(info) == {"t", "episode", "actuator", "unit", "tau", "ee_force", "contact",
                         "payload_kg"}
    assert obs.shape == (5 * 6 + 1,)


def test_pushes_reach_the_learned_plant():
    act, joints = _servo(offset=0.0)
    env = ArmEnv("so101", "push", actuator=(act, joints), episode_s=8.0, privileged=True)
    env.reset(seed=0)
    plan = env._ep.plan
    assert plan.pushes, "the push task's plan has pushes"
    quiet = ArmEnv("so101", "push", actuator=_servo(offset=0.0), episode_s=8.0)
    quiet.reset(seed=0)
    quiet.backend.push[0][:] = 0.0  # the same episode without its pushes
    t_end = plan.pushes[0][0] + plan.pushes[0][1]
    n = int(t_end * 62) + 2
    forced = False
    for _ in range(n):
        a = env.backend.ref[0][int(env.backend.k[0]) + 1]
        _, _, _, _, info = env.step(a)
        quiet.step(a)
        forced |= np.linalg.norm(info["ee_force"]) > 0.1
    assert forced
    assert (env.backend.q - quiet.backend.q).abs().max() > 1e-4


def test_reset_with_seed_is_deterministic():
    env = ArmEnv("so101", "free", actuator="twin", episode_s=1.0)
    a, _ = env.reset(seed=9)
    b, _ = env.reset(seed=9)
    assert np.array_equal(a, b)
    c, _ = env.reset(seed=10)
    assert not np.array_equal(a, c)


def test_neuralactuator_checkpoint_replay_equals_simulate(tmp_path):
    from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
    from neuract.neuralactuator.actuator import TransformerActuator
    from neuract.neuralactuator.checkpoint import save_checkpoint

    torch.manual_seed(1)
    m = NeuralActuator(NeuralActuatorConfig(n_joints=6, mode="simulator", tau_max=(2.0,),
                                            d_model=16, n_layers=1, n_heads=2, d_ff=16,
                                            d_trunk=16, history=4))
    with torch.no_grad():  # a residual that matters
        m.head.weight.normal_(0, 0.05)
        m.head.bias[:6] = 0.2
    save_checkpoint(m.eval(), tmp_path / "ck")
    env = ArmEnv("so101", "free", actuator=str(tmp_path / "ck"), episode_s=2.0)
    env.reset(seed=0)
    cmds = env.backend.ref[0][1:40]
    got = _replay(env, cmds)
    act = TransformerActuator.from_checkpoint(tmp_path / "ck")
    q0 = torch.as_tensor(got[:1])
    with torch.no_grad():
        want = simulate(load_robot("so101", dtype=torch.float32), act, act.joints, q0,
                        torch.zeros_like(q0), torch.as_tensor(cmds, dtype=torch.float32)[None],
                        1 / 62.0, substeps=env.backend.substeps).q[0].numpy()
    assert np.abs(got[-1] - got[0]).max() > 1e-2
    # float32 (the network dtype) on MuJoCo float64 dynamics rounded to float32: 1.8e-7 rad
    assert np.abs(got[:-1] - want).max() < 1e-6


@pytest.mark.parametrize("robot", ["so101", "omx"])
def test_batch_model_rows_are_independent_arms(robot):
    import mujoco

    from neuract.envs.batch_model import replicate

    bm = replicate(robot, 500.0, 3, shipped=True)
    one = replicate(robot, 500.0, 1, shipped=True)
    rng = np.random.default_rng(0)
    q, qd = rng.uniform(-0.5, 0.5, (3, bm.n)), rng.uniform(-1, 1, (3, bm.n))
    M, b = bm.mass_bias(q, qd)
    for e in range(3):  # each row alone in its own model
        M1, b1 = one.mass_bias(q[e:e + 1], qd[e:e + 1])
        np.testing.assert_allclose(M[e], M1[0], atol=1e-12)
        np.testing.assert_allclose(b[e], b1[0], atol=1e-12)
    full = np.zeros((one.model.nv, one.model.nv))
    mujoco.mj_fullM(one.model, one.data, full)
    np.testing.assert_allclose(M1[0], full[np.ix_(one.dadr[0], one.dadr[0])], atol=1e-12)
    assert np.all(np.diagonal(M1[0]) > 0) and not np.allclose(M[0], M[1])


def test_example_compares_the_actuator_kinds(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "compare_actuators.py"
    spec = importlib.util.spec_from_file_location("compare_actuators", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "cmp.png"
    assert mod.main(["--episode-s", "1.5", "--out", str(out),
                     "--neuralactuator", str(tmp_path / "none")]) == 0
    text = capsys.readouterr().out
    assert "MuJoCo position servo" in text and "parametric servo" in text
    assert out.stat().st_size > 1000


def _episode_dataset(env, cmds, out):
    """The environment's own rollout of ``cmds`` as a one-episode dataset (what a robot that
    behaves as the environment would have logged)."""
    from neuract.data import Trajectory, TrajectoryMeta
    from neuract.data.dataset import write_dataset

    b = env.unwrapped.backend
    qs, qds = [b.q[0].double().numpy().copy()], [b.qd[0].double().numpy().copy()]
    for c in cmds[:-1]:
        env.step(c)
        qs.append(b.q[0].double().numpy().copy())
        qds.append(b.qd[0].double().numpy().copy())
    T = len(cmds)
    ch = {"t": np.arange(T) / 62.0, "q": np.array(qs), "qd": np.array(qds),
          "q_goal": np.asarray(cmds, dtype=np.float64),
          "voltage": np.full((T, 6), b.voltage)}
    meta = TrajectoryMeta(robot="so101", joint_names=tuple(env.unwrapped.joint_names),
                          source="test", rate_hz=62.0, name="ep0")
    write_dataset([Trajectory(ch, meta)], out)
    return np.array(qs)


@pytest.mark.parametrize("kind", ["fit", "neuralactuator"])
def test_replay_equals_the_simulate_verb(tmp_path, kind):
    from neuract.pipeline.simulate_verb import SimulateConfig, run_simulate

    if kind == "fit":
        ckpt, tol = _fit_dir(tmp_path / "fit"), 1e-6
    else:
        from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
        from neuract.neuralactuator.checkpoint import save_checkpoint

        torch.manual_seed(1)
        m = NeuralActuator(NeuralActuatorConfig(n_joints=6, mode="simulator", tau_max=(2.0,),
                                                d_model=16, n_layers=1, n_heads=2, d_ff=16,
                                                d_trunk=16, history=4))
        with torch.no_grad():
            m.head.weight.normal_(0, 0.05)
            m.head.bias[:6] = 0.2
        ckpt, tol = save_checkpoint(m.eval(), tmp_path / "ck"), 1e-6
    env = ArmEnv("so101", "free", actuator=str(ckpt), episode_s=2.0, substeps=2)
    env.reset(seed=0)
    cmds = env.unwrapped.backend.ref[0][1:60]
    q_env = _episode_dataset(env, cmds, tmp_path / "data")
    res = run_simulate(SimulateConfig(checkpoint=ckpt, data=tmp_path / "data",
                                      out=tmp_path / "sim", quiet=True))
    import pyarrow.parquet as pq

    tab = pq.read_table(tmp_path / "sim" / res["episodes"][0]["file"])
    q_sim = np.stack([tab[f"q_sim.{j}"].to_numpy() for j in env.unwrapped.joint_names], 1)
    first = res["episodes"][0]["first_simulated_sample"]
    assert np.abs(q_env[-1] - q_env[0]).max() > 1e-2
    assert np.abs(q_sim[first:] - q_env[first:]).max() < tol
