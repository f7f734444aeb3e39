"""Baselines of the NeuralActuator evaluation: MuJoCo default servo, tau = Kt I, fitted
actuators, condition classifiers (cross-checked against simple references)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.data import Trajectory, TrajectoryMeta
from neuract.eval import evaluate_rollouts
from neuract.pipeline import baselines as bl

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


def _traj(T=200, seed=0, **extra):
    rng = np.random.default_rng(seed)
    t = np.arange(T) * 0.016
    goal = 0.3 * np.sin(np.outer(t, rng.uniform(0.5, 2.0, 6)) + rng.uniform(0, 3, 6))
    ch = {"t": t, "q": goal + 0.01, "qd": np.gradient(goal, t, axis=0), "q_goal": goal, **extra}
    return Trajectory(ch, TrajectoryMeta("so101", JOINTS, rate_hz=62.5, name=f"e{seed}"))


def test_mujoco_servo_equals_a_plain_mujoco_loop():
    import mujoco

    from neuract.robot.bundled import bundled_path

    tr = _traj()
    sim = bl.mujoco_servo_simulator(str(bundled_path("so101")), JOINTS)
    recs = evaluate_rollouts(sim, [tr], "mj", horizons=(10,), stride=50)
    assert recs[0]["n_windows"] == 4
    # reference: one window by hand (t0 = 50), 8 physics steps of 2 ms per 16 ms sample
    m = mujoco.MjModel.from_xml_path(str(bundled_path("so101")))
    m.opt.timestep = 0.002
    d = mujoco.MjData(m)
    d.qpos[:] = tr["q"][50]
    d.qvel[:] = tr["qd"][50]
    ref = []
    for k in range(10):
        d.ctrl[:] = tr["q_goal"][50 + k]
        for _ in range(8):
            mujoco.mj_step(m, d)
        ref.append(d.qpos.copy())
    from neuract.eval.protocol import _batch

    batch = _batch(tr, np.array([50]), 10, ("q_goal",), np.asarray(tr["qd"]))
    np.testing.assert_allclose(sim(batch)[0], np.array(ref), atol=1e-9)


def test_linear_kt_recovers_the_torque_constant():
    from neuract.robot import load_robot

    robot = load_robot("so101")
    kt = np.array([2.0, 2.5, 3.0, 1.5, 1.0, 0.8])
    tr = _traj(300)
    tau = bl.inverse_dynamics_torque(robot, tr)
    load = np.sign(tau) * 0.5
    tr2 = _traj(300, current=np.abs(tau / kt), load=load)  # STS3215: |I| + signed load
    np.testing.assert_allclose(bl.fit_linear_kt(robot, [tr2]), kt, rtol=1e-6)
    np.testing.assert_allclose(bl.signed_current(tr2) * kt, tau, atol=1e-9)
    with pytest.raises(Exception, match="current"):
        bl.signed_current(_traj())


def test_fitted_servo_simulator_and_torques_are_consistent():
    """The torque estimator of a fitted actuator equals its torque inside a rollout started
    at the same state (first step, no history effects)."""
    from neuract.actuators import ActuatorConfig
    from neuract.fit.identify import build_model
    from neuract.robot import load_robot
    from neuract.sim.simulate import JointParamsConfig

    robot = load_robot("so101")
    model = build_model(ActuatorConfig(type="sts3215", friction="none"),
                        JointParamsConfig(armature=0.0, fit_armature=False, fit_offset=False), 6)
    tr = _traj(50)
    tau = bl.system_torques(model, robot, [tr], use_voltage=False)[0]
    assert tau.shape == (50, 6) and np.isfinite(tau).all()
    # sts3215 without friction: kt * (duty V - kt qd) / R with duty = kp * gain * e clipped
    c = model.actuator.cfg
    e = tr["q_goal"] - tr["q"]
    duty = np.clip(c.kp * c.error_gain * e, -1, 1)
    ref = c.kt * (duty * c.voltage - c.kt * tr["qd"]) / c.R
    np.testing.assert_allclose(tau, ref, rtol=1e-6, atol=1e-6)
    # the rollout's first step (one substep) applies exactly that torque from the measured
    # state: one semi-implicit Euler step of M qdd = tau - b(q, qd)
    from neuract.eval.protocol import _batch

    starts = np.array([5, 20, 33])
    batch = _batch(tr, starts, 10, ("q_goal",), np.asarray(tr["qd"]))
    q0, qd0 = (torch.as_tensor(np.asarray(tr[k])[starts]) for k in ("q", "qd"))
    qdd = torch.linalg.solve(robot.mass_matrix(q0),
                             torch.as_tensor(tau[starts]) - robot.bias_forces(q0, qd0))
    q1 = (q0 + 0.016 * (qd0 + 0.016 * qdd)).numpy()
    got = bl.system_simulator(model, robot, substeps=1)(batch)
    assert got.shape == (3, 10, 6) and np.abs(q1 - q0.numpy()).max() > 1e-3  # it moved
    np.testing.assert_allclose(got[:, 0], q1, rtol=0, atol=1e-9)
    sim = bl.system_simulator(model, robot)
    recs = evaluate_rollouts(sim, [tr], "servo", horizons=(10,))
    assert recs[0]["n_windows"] > 0 and recs[0]["arm_mean_deg"] < 30


def test_condition_baseline_is_causal_and_separates_classes():
    rng = np.random.default_rng(0)

    def ep(cond, seed):
        tr = _traj(200, seed)
        cur = np.abs(rng.normal(0.3 + 0.5 * cond, 0.05, (200, 6)))
        return tr.replace(channels={"current": cur, "condition": np.full(200, cond, np.int8)})

    train = [ep(c, s) for s, c in enumerate([0, 1, 0, 1, 0, 1])]
    est, _ = bl.condition_baseline("random_forest", train, window=32, stride=8)
    worn, healthy = ep(1, 9), ep(0, 10)
    out = est(worn)
    assert not out["valid"][:31].any() and out["valid"][31:].all()
    assert (out["condition_prob"][31:, 1] > 0.5).mean() > 0.9
    ref = est(healthy)["condition_prob"]
    assert (ref[31:, 1] < 0.5).mean() > 0.9
    # causal: a sample's probability reads no later sample (currents ten times as large from
    # sample 120 on, which read as a worn motor at once, leave the earlier ones as they were)
    cur = np.asarray(healthy["current"]).copy()
    cur[120:] *= 10.0
    got = est(healthy.replace(channels={"current": cur}))["condition_prob"]
    np.testing.assert_array_equal(got[31:120], ref[31:120])
    assert (got[120:, 1] > 0.5).mean() > 0.9
