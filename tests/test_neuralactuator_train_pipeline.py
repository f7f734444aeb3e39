"""NeuralActuator pose-only training and its protocol adapters on SO-101 twin data (tiny
model sizes, fast)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.estimate import estimate as na_estimate
from neuract.neuralactuator import NeuralActuatorConfig
from neuract.neuralactuator import simulator as na_simulator
from neuract.neuralactuator.data import flatten
from neuract.neuralactuator.rollout import est_rollout, sim_rollout
from neuract.neuralactuator.train import NeuralActuatorTrainConfig as NATrainConfig
from neuract.neuralactuator.train import init_model, train_neuralactuator

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16)


@pytest.fixture(scope="module")
def robot():
    from neuract.robot import load_robot

    return load_robot("so101", dtype=torch.float32)


@pytest.fixture(scope="module")
def trajs():
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    torch.set_num_threads(1)
    return generate(GenerateConfig(robot="so101", tasks=("push", "degraded"), minutes=0.4,
                                   units=2, seed=3, sim=SimConfig(episode_s=6.0)))


def _cfg(mode: str) -> NeuralActuatorConfig:
    return NeuralActuatorConfig(n_joints=6, mode=mode, effort="load", tau_max=(3.35,),
                                kp_init=17.8, kd_init=1.0, **TINY)


def test_sim_rollout_with_zero_residual_is_the_pd_servo(robot, trajs):
    """With the network's head zeroed the rollout is a saturated PD servo on the rigid arm:
    compare with a hand-written loop using Robot.forward_dynamics."""
    data = flatten(trajs[:1], robot, None, None, _cfg("simulator").channels)
    model = init_model(_cfg("simulator"), data)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
    t0 = torch.tensor([20, 60])
    idx = t0[:, None] + torch.arange(-7, 1)
    past = {"q_goal": data.q_goal[idx], "q": data.q[idx], "qd": data.qd[idx]}
    fut = t0[:, None] + torch.arange(6)
    goal = data.q_goal[fut[:, :-1]]
    dt = torch.full((2, 5), 0.016)
    with torch.no_grad():
        q = sim_rollout(model, robot, past, data.q[t0], data.qd[t0], goal, dt, substeps=3)
    kp, kd = model.log_kp.exp(), model.log_kd.exp()
    qs, qds = data.q[t0].clone(), data.qd[t0].clone()
    ref = []
    for k in range(5):
        for _ in range(3):
            tau = 3.35 * torch.tanh((kp * (goal[:, k] - qs) - kd * qds) / 3.35)
            qds = qds + 0.016 / 3 * robot.forward_dynamics(qs, qds, tau)
            qs = qs + 0.016 / 3 * qds
        ref.append(qs)
    torch.testing.assert_close(q, torch.stack(ref, 1), atol=1e-5, rtol=1e-5)


def test_est_rollout_reproduces_motion_from_its_inverse_dynamics(robot):
    """forward(inverse(x)) = x: torques from inverse dynamics of a smooth motion drive the
    arm back along that motion."""
    r64 = robot.to(torch.float64)
    t = torch.linspace(0, 0.5, 51, dtype=torch.float64)
    w = torch.tensor([1.0, 2.0, 1.5, 3.0, 2.5, 1.0], dtype=torch.float64)
    q = 0.3 * torch.sin(w * t[:, None])
    qd = 0.3 * w * torch.cos(w * t[:, None])
    qdd = -0.3 * w**2 * torch.sin(w * t[:, None])
    tau = r64.inverse_dynamics(q, qd, qdd)[None]
    dt = torch.full((1, 50), 0.01, dtype=torch.float64)
    out = est_rollout(r64, q[:1], qd[:1], tau, torch.zeros_like(tau), dt, substeps=20)
    assert (out[0] - q[1:]).abs().max() < 2e-3


def test_training_is_pose_only_and_lowers_the_pose_loss(robot, trajs):
    """Scrambling the true torque channel changes nothing (no torque label is read), and a
    few steps lower the pose loss."""
    cfg = NATrainConfig(steps=12, batch=8, horizon=4, lr=3e-3)
    m1, r1 = train_neuralactuator(trajs, robot, _cfg("estimator"), cfg, site="gripperframe")
    scrambled = [tr.replace(channels={"tau": np.random.default_rng(0).normal(
        size=tr["tau"].shape) * 50}) for tr in trajs]
    m2, _ = train_neuralactuator(scrambled, robot, _cfg("estimator"), cfg, site="gripperframe")
    for (k, a), b in zip(m1.state_dict().items(), m2.state_dict().values()):
        torch.testing.assert_close(a, b, msg=k)
    first = np.mean([h["pose_mae_deg"] for h in r1["history"][:3]])
    last = np.mean([h["pose_mae_deg"] for h in r1["history"][-3:]])
    assert last < first


def test_simulator_mode_outputs_and_estimator_outputs(robot, trajs):
    from neuract.eval import evaluate_estimator, evaluate_rollouts

    ms, _ = train_neuralactuator(trajs[:2], robot, _cfg("simulator"),
                                 NATrainConfig(steps=2, batch=4, horizon=3))
    recs = evaluate_rollouts(na_simulator(ms, robot), trajs[2:3], "na", horizons=(10,),
                             history=8)
    assert recs[0]["mode"] == "simulator" and recs[0]["n_windows"] > 0
    with pytest.raises(Exception, match="estimator-mode"):
        na_estimate(ms, trajs[0])
    me, _ = train_neuralactuator(trajs[:2], robot, _cfg("estimator"),
                                 NATrainConfig(steps=2, batch=4, horizon=3), site="gripperframe")
    out = na_estimate(me, trajs[2])
    T = len(trajs[2])
    assert out["tau"].shape == (T, 6) and out["ee_force"].shape == (T, 3)
    assert not out["valid"][:7].any() and out["valid"][7:].all()
    assert np.isnan(out["tau"][:7]).all() and np.isfinite(out["tau"][7:]).all()
    assert (np.abs(out["tau"][7:]) <= 3.35 + 1e-6).all()  # the torque limit always applies
    rec = evaluate_estimator(lambda tr: na_estimate(me, tr), trajs[2:3], "na")
    assert rec["mode"] == "estimator" and rec["torque_rmse_mean"] is not None
    with pytest.raises(Exception, match="simulator-mode"):
        na_simulator(me, robot)


def test_fine_tuning_starts_from_the_given_model(robot, trajs):
    cfg = NATrainConfig(steps=2, batch=4, horizon=3)
    base, _ = train_neuralactuator(trajs[:2], robot, _cfg("estimator"), cfg, site="gripperframe")
    before = {k: v.clone() for k, v in base.state_dict().items()}
    tuned, rep = train_neuralactuator(trajs[2:], robot, _cfg("estimator"), cfg,
                                      site="gripperframe", init=base)
    assert tuned is base and rep["steps"] == 2
    # normalisation statistics are the checkpoint's, weights moved
    torch.testing.assert_close(tuned.x_mean, before["x_mean"])
    assert not torch.equal(tuned.head.weight, before["head.weight"])
    with pytest.raises(Exception, match="mode"):
        train_neuralactuator(trajs[2:], robot, _cfg("simulator"), cfg, init=base)


def test_condition_threshold_shifts_log_odds_and_calibration(robot, trajs):
    from neuract.estimate import calibrate_condition

    me, _ = train_neuralactuator(trajs[:2], robot, _cfg("estimator"),
                                 NATrainConfig(steps=2, batch=4, horizon=3), site="gripperframe")
    raw = na_estimate(me, trajs[0], condition_threshold=0.5)["condition_prob_joint"][7:]
    th = 0.3
    shifted = na_estimate(me, trajs[0], condition_threshold=th)["condition_prob_joint"][7:]
    logit = lambda p: np.log(p) - np.log1p(-p)  # noqa: E731
    np.testing.assert_allclose(logit(shifted), logit(raw) - logit(th), atol=1e-6)
    assert ((shifted > 0.5) == (raw > th)).all()
    normal = [tr for tr in trajs if not np.asarray(tr["condition"]).any()]
    assert calibrate_condition(me, normal) == 0.5  # one class: nothing to calibrate
    me.condition_threshold = th
    np.testing.assert_allclose(na_estimate(me, trajs[0])["condition_prob_joint"][7:], shifted)


def test_gate_threshold_shifts_log_odds_and_calibration_maximises_f1(robot, trajs):
    from neuract.estimate import calibrate_gate

    me, _ = train_neuralactuator(trajs[:2], robot, _cfg("estimator"),
                                 NATrainConfig(steps=2, batch=4, horizon=3), site="gripperframe")
    raw = na_estimate(me, trajs[0], gate_threshold=0.5)["contact_prob"][7:]
    shifted = na_estimate(me, trajs[0], gate_threshold=0.2)["contact_prob"][7:]
    assert ((shifted > 0.5) == (raw > 0.2)).all()
    th = calibrate_gate(me, trajs)
    # no grid threshold gives a higher F1 on the same samples
    p = np.concatenate([na_estimate(me, tr, gate_threshold=0.5)["contact_prob"][7:]
                        for tr in trajs])
    y = np.concatenate([np.asarray(tr["contact"], bool)[7:] for tr in trajs])

    def f1(g):
        fire = p >= g
        return 2 * (fire & y).sum() / max(fire.sum() + y.sum(), 1)

    assert y.any() and f1(th) >= max(f1(g) for g in np.linspace(0.02, 0.98, 97)) - 1e-12
    normal = [tr.replace(channels={"contact": np.zeros(len(tr), bool)}) for tr in trajs]
    assert calibrate_gate(me, normal) == 0.5  # no contact: nothing to calibrate
