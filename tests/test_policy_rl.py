"""PPO on the arm environments (neuract.policy.rl) and system identification inside the RL
loop (neuract.policy.sysid_loop): the stable-baselines3 adapter, its episode ends, the
step-response metrics on constructed responses, one loop iteration end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.vec_env import VecCheckNan  # noqa: E402

from neuract.errors import ConfigError  # noqa: E402
from neuract.policy.rl import (  # noqa: E402
    ArmSB3VecEnv,
    EnvSpec,
    PPOConfig,
    evaluate,
    make_ppo,
    rollout,
    step_metrics,
    train,
)
from neuract.policy.sysid_loop import (  # noqa: E402
    LoopConfig,
    gap_closed,
    identify_servo,
    initial_servo,
    loop_iteration,
    quick_config,
    to_trajectories,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TINY = PPOConfig(n_envs=2, n_steps=64, batch_size=64, n_epochs=2, total_timesteps=256)


def test_adapter_runs_ppo_and_checks_nan():
    env = VecCheckNan(ArmSB3VecEnv(EnvSpec(episode_s=1.0), 2), raise_exception=True)
    assert env.observation_space.shape == (30,) and env.action_space.shape == (6,)
    obs = env.reset()
    assert obs.shape == (2, 30) and obs.dtype == np.float32
    model = make_ppo(env, TINY)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(256)
    assert model.num_timesteps >= 256
    assert any((p.detach() - b).abs().max() > 0 for p, b in zip(model.policy.parameters(),
                                                                 before))


def test_episode_end_is_same_step_reset():
    env = ArmSB3VecEnv(EnvSpec(episode_s=1.0, units=(0, 3)), 2)
    vec = env.vecs[0]
    horizon = vec.backend.horizon(0)
    env.reset()
    zero = np.zeros((2, 6))
    ends = []
    for i in range(2 * horizon + 1):
        obs, rew, dones, infos = env.step(zero)
        if dones.any():
            assert dones.all(), "rows of a fixed-rate backend end together"
            ends.append(i)
            for row in range(2):
                term = infos[row]["terminal_observation"]
                assert infos[row]["TimeLimit.truncated"] is True
                assert np.abs(term[6:12]).max() > 0, "the final observation, mid-motion"
                np.testing.assert_array_equal(obs[row, 6:12], 0.0)  # new episode, at rest
                assert not np.array_equal(term, obs[row])
            assert int(vec.backend.k[0]) == 0
            # the returned target is the new episode's reference for the next step
            np.testing.assert_allclose(obs[0, 18:24], vec.backend.ref[0][1], atol=1e-6)
        else:
            assert all("terminal_observation" not in inf for inf in infos)
            assert (rew < 0).all(), "no hidden zero-reward restart step"
    assert ends == [horizon - 1, 2 * horizon - 1], "an episode is horizon steps, no more"
    assert len(env.episode_returns) == 4


def test_residual_zero_sends_the_reference_and_rollout_records():
    spec = EnvSpec(episode_s=1.0, units=(2,))
    env = ArmSB3VecEnv(spec, 1)
    env.reset()
    np.testing.assert_array_equal(env.goals(np.zeros((1, 6))), env._target)
    np.testing.assert_allclose(env.goals(np.ones((1, 6))) - env._target, spec.residual_scale)
    ep = rollout(None, spec, 1)[0]
    T = len(ep["t"])
    assert T == env.vecs[0].backend.horizon(0) + 1
    assert ep["q"].shape == ep["goal"].shape == ep["ref"].shape == (T, 6)
    np.testing.assert_allclose(ep["goal"][:-1], ep["ref"][1:])  # the reference was sent
    # step reference: held for hold_s, so it jumps at most once a second
    jumps = np.flatnonzero(np.abs(np.diff(ep["ref"], axis=0)).max(1) > 0)
    assert len(jumps) <= 1


def _step_episode():
    """A constructed step: joint 0 jumps 0 -> 0.2 rad at sample 10; the response rises
    linearly to 0.25 (25 % overshoot) at sample 15, falls back to 0.2 + 0.003 at sample 20
    and stays there (3 mrad final drift); joint 1 never moves."""
    dt = 0.01
    t = np.arange(100) * dt
    ref = np.zeros((100, 2))
    ref[10:, 0] = 0.2
    q = np.zeros((100, 2))
    q[10:16, 0] = np.linspace(0.0, 0.25, 6)
    q[16:21, 0] = np.linspace(0.25, 0.203, 6)[1:]
    q[21:, 0] = 0.203
    return t, q, ref


def test_step_metrics_on_a_constructed_step():
    t, q, ref = _step_episode()
    m = step_metrics(t, q, ref)
    assert m["n_steps"] == 1
    assert m["overshoot_pct"] == pytest.approx(25.0)
    assert m["drift_mrad"] == pytest.approx(3.0)
    # band max(5 % of 0.2, 10 mrad) = 10 mrad: |q - ref| <= 0.01 from the first sample at
    # or below 0.21 on the way down; the goal went out at sample 9
    first_in = 10 + np.flatnonzero(np.abs(q[10:, 0] - 0.2) > 0.01)[-1] + 1
    assert m["settle_s"] == pytest.approx(t[first_in] - t[9])
    assert 0.05 < m["settle_s"] < 0.2
    assert m["tracking_rms_mrad"] == pytest.approx(np.sqrt(np.mean((q - ref) ** 2)) * 1e3)
    # no overshoot, never settles: settle = the segment's length
    q2 = np.where(ref > 0, 0.1, 0.0)
    m2 = step_metrics(t, q2, ref)
    assert m2["overshoot_pct"] == 0.0 and m2["settle_s"] == pytest.approx(t[-1] - t[9])
    assert m2["drift_mrad"] == pytest.approx(100.0)


def test_step_metrics_underdamped_second_order():
    zeta, wn = 0.3, 30.0
    t = np.arange(0, 2, 0.001)
    ref = np.where(t >= t[100], 1.0, 0.0)[:, None]
    s = np.clip(t - t[99], 0, None)
    wd = wn * np.sqrt(1 - zeta ** 2)
    q = 1 - np.exp(-zeta * wn * s) * (np.cos(wd * s) + zeta / np.sqrt(1 - zeta ** 2)
                                       * np.sin(wd * s))
    m = step_metrics(t, q[:, None], ref)
    expected = 100 * np.exp(-np.pi * zeta / np.sqrt(1 - zeta ** 2))
    assert m["overshoot_pct"] == pytest.approx(expected, rel=1e-3)
    # 5 % band: where the decay envelope enters it bounds the settle time from above
    bound = -np.log(0.05 * np.sqrt(1 - zeta ** 2)) / (zeta * wn)
    assert 0.5 * bound < m["settle_s"] <= bound + 0.002


def test_configs_refuse_bad_values():
    with pytest.raises(ConfigError, match="reference = 'ramp'.*accepted"):
        EnvSpec(reference="ramp").validate()
    with pytest.raises(ConfigError, match="n_steps = 0"):
        PPOConfig(n_steps=0).validate()
    with pytest.raises(ConfigError, match="identifications = \\('bayes',\\).*accepted"):
        LoopConfig(identifications=("bayes",)).validate()
    with pytest.raises(ConfigError, match="distinct"):
        LoopConfig(identifications=("neural", "neural")).validate()
    with pytest.raises(ConfigError, match="eval_units"):
        LoopConfig(train_units=(0, 1), eval_units=(1, 2)).validate()
    with pytest.raises(ConfigError, match="n_envs = 1"):
        ArmSB3VecEnv(EnvSpec(units=(0, 1), episode_s=1.0), 1)
    assert gap_closed(60.0, 45.0, 40.0) == pytest.approx(0.75)


def test_one_loop_iteration_end_to_end():
    cfg = quick_config()
    policy = train(cfg.spec("mujoco", cfg.train_units), cfg.ppo, timesteps=128)
    start = [p.detach().clone() for p in policy.policy.parameters()]
    eps = rollout(policy, cfg.spec("twin", cfg.train_units), 1)
    trajs = to_trajectories(eps, cfg.robot, [f"j{i}" for i in range(6)])
    assert len(trajs) == 2 and {tr.meta.labels["unit"] for tr in trajs} == {0, 1}
    np.testing.assert_array_equal(np.asarray(trajs[0]["q_goal"]), eps[0]["goal"])
    init = initial_servo(cfg, 6).physical_parameters()
    servo, report = identify_servo(trajs, cfg)
    fitted = servo.physical_parameters()
    moved = max(np.max(np.abs(np.asarray(fitted[k]) - np.asarray(init[k]))) for k in init)
    assert moved > 1e-3, "identification moved the servo's parameters"
    assert np.isfinite(report["train_mae_rad"])
    # the whole turn: deploy -> record -> identify (warm start) -> continue training
    n0 = policy.num_timesteps
    policy2, servo2, rep = loop_iteration(policy, cfg, servo, log=lambda s: None)
    assert policy2.num_timesteps >= n0 + cfg.continue_timesteps
    assert rep["recorded_episodes"] == 2 and rep["fit_s"] > 0
    assert any((p.detach() - b).abs().max() > 0 for p, b in zip(policy2.policy.parameters(),
                                                                 start))
    m = evaluate(policy2, cfg.spec("twin", cfg.eval_units), 1)
    assert np.isfinite(m["tracking_rms_mrad"]) and m["n_steps"] >= 0


def test_neural_loop_iteration_trains_a_network_on_the_identified_servo():
    """The neural loop: the NeuralActuator is trained on that iteration's parametric servo
    (its frozen prior), PPO continues in the network's simulator, and the next iteration
    fine-tunes the same network with the new servo as its prior."""
    from neuract.neuralactuator import TransformerActuator

    cfg = quick_config()
    policy = train(cfg.spec("mujoco", cfg.train_units), cfg.ppo, timesteps=128)
    n0 = policy.num_timesteps
    policy2, servo, rep = loop_iteration(policy, cfg, None, log=lambda s: None, kind="neural")
    act = rep.pop("_actuator")
    assert isinstance(act, TransformerActuator) and act.servo is not None
    assert rep["na_s"] > 0 and np.isfinite(rep["na_final_loss"])
    assert policy2.num_timesteps >= n0 + cfg.continue_timesteps
    # the prior is this iteration's identified servo, frozen
    for (name, p), q in zip(act.servo.named_parameters(), servo.actuator.parameters()):
        np.testing.assert_allclose(p.detach().double().numpy(), q.detach().double().numpy(),
                                   rtol=1e-6, err_msg=name)
        assert not p.requires_grad
    w0 = [p.detach().clone() for p in act.model.parameters()]
    _, servo2, rep2 = loop_iteration(policy2, cfg, servo, log=lambda s: None, neural=act,
                                     kind="neural")
    act2 = rep2.pop("_actuator")
    assert act2 is not act
    moved = max((p.detach() - b).abs().max().item()
                for p, b in zip(act2.model.parameters(), w0) if p.shape == b.shape)
    assert moved > 0, "the second iteration fine-tuned the network"
    # the first iteration's network is left as it was (a copy was fine-tuned)
    assert all(torch.equal(p.detach(), b) for p, b in zip(act.model.parameters(), w0))
