"""Controllers, residual clamp, replay and drift monitor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.control import (
    ComputedTorque,
    DriftMonitor,
    Episode,
    PIDController,
    ResidualController,
    gravity_compensation,
    replay,
    simulate,
)
from neuract.errors import ConfigError, SchemaError
from neuract.models import RigidBodyModel, TwoLinkArm, TwoLinkParams, two_link_regressor

torch.set_num_threads(1)
PLANT = TwoLinkArm(TwoLinkParams(fv=(0.1, 0.1)))
DT = 0.004


def _reference(T=200, dt=DT, scale=1.0):
    t = torch.arange(T, dtype=torch.float64) * dt
    w = torch.tensor([1.3, 2.1], dtype=torch.float64)
    q = scale * torch.sin(w * t[:, None])[:, None, :]
    qd = scale * w * torch.cos(w * t[:, None])[:, None, :]
    qdd = -scale * w**2 * torch.sin(w * t[:, None])[:, None, :]
    return q, qd, qdd


def test_computed_torque_with_true_model_tracks_to_zero():
    # the only error left is the zero-order hold of the torque: O(dt), it vanishes as dt -> 0
    for in_m in (True, False):
        errs = []
        for dt in (0.004, 0.002):
            q_d, qd_d, qdd_d = _reference(T=int(0.5 / dt), dt=dt)
            ctrl = ComputedTorque(PLANT, kp=100, kd=20, gains_in_inertia=in_m)
            out = simulate(PLANT, ctrl, q_d, qd_d, qdd_d, dt=dt)
            errs.append(np.abs(out["q"] - q_d.numpy()).max())
        assert errs[0] < 2e-3 and errs[1] < 0.6 * errs[0]


def test_computed_torque_with_wrong_model_tracks_worse_than_true():
    q_d, qd_d, qdd_d = _reference()
    wrong = RigidBodyModel(two_link_regressor, PLANT.theta * 0.8, 2)
    out = simulate(PLANT, ComputedTorque(wrong, 100, 20), q_d, qd_d, qdd_d, dt=DT)
    assert np.abs(out["q"] - q_d.numpy()).max() > 1e-3


def test_gravity_compensation_holds_pose_without_error():
    q_d = torch.tensor([[0.4, -0.7]], dtype=torch.float64).expand(300, 1, 2)
    zero = torch.zeros_like(q_d)
    out = simulate(PLANT, gravity_compensation(PLANT, 50, 10), q_d, zero, zero, dt=DT)
    assert np.abs(out["q"][-1] - q_d[-1].numpy()).max() < 1e-9
    # plain PD sags under gravity: steady-state offset Kp e = g(q)
    out = simulate(PLANT, PIDController(50, 10), q_d, zero, zero, dt=DT)
    assert np.abs(out["q"][-1] - q_d[-1].numpy()).max() > 0.05


def test_residual_clamp_respected():
    q_d, qd_d, qdd_d = _reference(T=100)
    clamp = torch.tensor([0.5, 0.2], dtype=torch.float64)

    def wild(q, qd, qdd):  # a residual gone wrong
        return 100.0 + q

    base = PIDController(100, 20)
    ctrl = ResidualController(base, wild, clamp)
    taus = []
    for t in range(100):
        taus.append(ctrl(q_d[t], qd_d[t], q_d[t], qd_d[t], qdd_d[t], DT))
        assert (ctrl.last_residual.abs() <= clamp + 1e-12).all()
    assert ctrl.n_clamped == 200
    with pytest.raises(ConfigError):
        ResidualController(base, wild, -1.0)


def test_residual_feedforward_with_true_inverse_dynamics_tracks_pd():
    q_d, qd_d, qdd_d = _reference()
    pd_only = simulate(PLANT, PIDController(100, 20), q_d, qd_d, qdd_d, dt=DT)
    ctrl = ResidualController(PIDController(100, 20), PLANT.inverse, clamp=100.0)
    with_res = simulate(PLANT, ctrl, q_d, qd_d, qdd_d, dt=DT)
    e0 = np.abs(pd_only["q"] - q_d.numpy()).max()
    e1 = np.abs(with_res["q"] - q_d.numpy()).max()
    assert e1 < 0.02 * e0


def test_replay_groups_by_context_and_counts_failures():
    eps = []
    for payload, scale in (("none", 0.2), ("heavy", 0.2), ("none", 1.5)):
        q, qd, qdd = (x[:, 0].numpy() for x in _reference(scale=scale))
        plant = TwoLinkArm(TwoLinkParams(m2=3.0)) if payload == "heavy" else None
        eps.append(Episode(q, qd, qdd, {"payload": payload}, plant))
    rep = replay(eps, lambda: ComputedTorque(PLANT, 100, 20), PLANT, DT, fail_tol=0.02)
    by_payload = rep.by_context("payload")
    assert by_payload["none"]["failure_rate"] == 0
    assert by_payload["heavy"]["failure_rate"] == 1.0  # model ignores the payload
    by_speed = rep.by_context("speed")
    assert set(by_speed) == {"slow", "fast"}
    assert all(r["effort"] > 0 for r in rep.episodes)


def test_drift_monitor_flags_shift_not_noise():
    rng = np.random.default_rng(0)
    mon = DriftMonitor(rng.normal(0.0, 1.0, 2000), alpha=0.01, patience=2)
    same = mon.scan(rng.normal(0.0, 1.0, 4000), window=500)
    assert not any(r.drift for r in same) and not mon.retrain_due
    shifted = mon.scan(rng.normal(0.8, 1.0, 1000), window=500)
    assert all(r.drift for r in shifted) and mon.retrain_due
    wider = DriftMonitor(rng.normal(0.0, 1.0, 2000)).check(rng.normal(0.0, 2.0, 500))
    assert wider.drift and wider.std_ratio > 1.5
    with pytest.raises(SchemaError):
        mon.check([np.nan] * 10)


def test_control_rk4_step_matches_mujoco_rk4():
    """control.simulate's RK4 step on the core's rigid-body SO-101 (RobotModel: damping on,
    friction loss off) equals MuJoCo's RK4 integrator under the same torques, 1e-8 rad."""
    from neuract.control.simulate import rk4_step
    from neuract.models import RobotModel
    from neuract.robot import load_robot
    from neuract.robot.validate import mujoco_rollout

    robot = load_robot("so101", dtype=torch.float64)
    robot = robot.replace(frictionloss=torch.zeros_like(robot.frictionloss))
    rng = np.random.default_rng(5)
    q0, qd0 = rng.uniform(-0.5, 0.5, robot.n_dof), rng.normal(size=robot.n_dof)
    dt, steps = 0.002, 300
    tau = rng.normal(size=(steps, robot.n_dof)) * 0.2
    ref = mujoco_rollout(robot, q0, qd0, tau, dt, "rk4")
    plant = RobotModel(robot)
    q, qd = torch.as_tensor(q0), torch.as_tensor(qd0)
    ours = [q]
    for k in range(steps):
        q, qd = rk4_step(plant, q, qd, torch.as_tensor(tau[k]), dt)
        ours.append(q)
    ours = torch.stack(ours).numpy()
    assert np.abs(ref - q0).max() > 0.1  # the arm really moved
    assert np.abs(ours - ref).max() < 1e-8
