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
    errs = []
    for model in (PLANT, wrong):
        out = simulate(PLANT, ComputedTorque(model, 100, 20), q_d, qd_d, qdd_d, dt=DT)
        errs.append(np.abs(out["q"] - q_d.numpy()).max())
    assert errs[1] > 10 * errs[0]  # measured 0.048 vs 0.001 rad


def test_gravity_compensation_holds_pose_without_error():
    q_d = torch.tensor([[0.4, -0.7]], dtype=torch.float64).expand(300, 1, 2)
    zero = torch.zeros_like(q_d)
    out = simulate(PLANT, gravity_compensation(PLANT, 50, 10), q_d, zero, zero, dt=DT)
    assert np.abs(out["q"][-1] - q_d[-1].numpy()).max() < 1e-9
    # plain PD sags under gravity: steady-state offset Kp e = g(q)
    out = simulate(PLANT, PIDController(50, 10), q_d, zero, zero, dt=DT)
    assert np.abs(out["q"][-1] - q_d[-1].numpy()).max() > 0.05


def test_pid_integral_accumulates_resets_and_limits_clip():
    """tau = Kp e + Kd ed + Ki sum(e dt) on a constant error, the sum cleared by reset(); a
    torque limit clips the controller's output and the simulated applied torque."""
    e = torch.tensor([[0.2, -0.1]], dtype=torch.float64)
    zero = torch.zeros_like(e)
    pid = PIDController(kp=[10.0, 20.0], kd=1.0, ki=[5.0, 50.0])
    for n in range(1, 4):
        tau = pid(zero, zero, e, zero, zero, DT)
        torch.testing.assert_close(tau, torch.tensor([[10.0, 20.0]]).double() * e
                                   + torch.tensor([[5.0, 50.0]]).double() * n * DT * e)
    pid.reset()
    torch.testing.assert_close(pid(zero, zero, e, zero, zero, DT),
                               torch.tensor([[10.0, 20.0]]).double() * e
                               + torch.tensor([[5.0, 50.0]]).double() * DT * e)
    clipped = PIDController(100.0, 0.0, tau_limit=[5.0, 1.0])
    torch.testing.assert_close(clipped(zero, zero, e, zero, zero, DT),
                               torch.tensor([[5.0, -1.0]], dtype=torch.float64))
    q_d, qd_d, qdd_d = _reference(T=50)
    for ctrl, kw in ((ComputedTorque(PLANT, 100, 20, tau_limit=2.0), {}),
                     (ComputedTorque(PLANT, 100, 20), {"tau_limit": 2.0})):
        out = simulate(PLANT, ctrl, q_d, qd_d, qdd_d, q0=q_d[0] + 0.3, dt=DT, **kw)
        assert np.abs(out["tau"]).max() == pytest.approx(2.0)  # the limit binds, and holds


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
    # on="measured" feeds the measured state (and the desired acceleration) to the residual
    seen = []
    spy = lambda q, qd, qdd: seen.append((q, qd, qdd)) or torch.zeros_like(q)  # noqa: E731
    q, qd = q_d[0] + 0.1, qd_d[0] - 0.2
    for on, want in (("reference", (q_d[0], qd_d[0])), ("measured", (q, qd))):
        ResidualController(base, spy, clamp, on=on)(q, qd, q_d[0], qd_d[0], qdd_d[0], DT)
        torch.testing.assert_close(seen[-1][:2], want)
        torch.testing.assert_close(seen[-1][2], qdd_d[0])


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
    # every episode's metrics, recomputed from its own closed-loop run
    for ep, row in zip(eps, rep.episodes):
        ref = [torch.as_tensor(x)[:, None] for x in (ep.q_d, ep.qd_d, ep.qdd_d)]
        run = simulate(ep.plant or PLANT, ComputedTorque(PLANT, 100, 20), *ref, dt=DT)
        e, tau = run["q"][:, 0] - ep.q_d, run["tau"][:, 0]
        worst = np.abs(e).max(1)
        assert row["rms"] == pytest.approx(np.sqrt(np.mean(e**2)), rel=1e-12)
        assert row["max"] == pytest.approx(worst.max(), rel=1e-12)
        assert row["effort"] == pytest.approx(np.sqrt(np.mean(tau**2)), rel=1e-12)
        late = np.flatnonzero(worst > 0.01)  # default settle_tol
        settle = (0.0 if late.size == 0 else np.nan if late[-1] == len(worst) - 1
                  else (late[-1] + 1) * DT)
        assert row["settling_time"] == pytest.approx(settle, rel=1e-12, nan_ok=True)
        assert row["failed"] == (worst.max() > 0.02)
    none = [r for r in rep.episodes if r["context"]["payload"] == "none"]
    assert by_payload["none"]["rms"] == pytest.approx(np.mean([r["rms"] for r in none]))
    assert by_payload["none"]["n"] == 2
    assert np.isnan(by_payload["heavy"]["rms"])  # failed episodes are left out of the means


def test_episode_metrics_hand_counted():
    """Settling: after the last sample outside settle_tol; failure: the worst error, not the
    mean, above fail_tol; a run that ends outside the band never settled."""
    from neuract.control.replay import episode_metrics

    q_d = np.zeros((6, 2))
    err = np.array([0.05, 0.02, 0.005, 0.03, 0.001, 0.0])  # worst joint per sample
    q = np.stack([err, -0.5 * err], 1)
    tau = np.full((6, 2), [3.0, -4.0])
    m = episode_metrics(q, q_d, tau, dt=0.1, settle_tol=0.01, fail_tol=0.04)
    assert m["settling_time"] == pytest.approx(0.4)  # sample 3 is the last one outside
    assert m["max"] == pytest.approx(0.05) and m["failed"]  # mean error 0.018 < 0.04
    assert m["rms"] == pytest.approx(np.sqrt(np.mean(1.25 * err**2 / 2)))
    assert m["effort"] == pytest.approx(np.sqrt(12.5))
    assert not episode_metrics(q, q_d, tau, 0.1, 0.01, 0.06)["failed"]
    assert episode_metrics(q, q_d, tau, 0.1, 0.1, 0.06)["settling_time"] == 0.0
    assert np.isnan(episode_metrics(q[::-1], q_d, tau, 0.1, 0.01, 0.06)["settling_time"])
    diverged = episode_metrics(np.full((6, 2), np.nan), q_d, tau, 0.1, 0.01, 0.06)
    assert diverged["failed"] and np.isnan(diverged["rms"])


def test_drift_monitor_flags_shift_not_noise():
    rng = np.random.default_rng(0)
    mon = DriftMonitor(rng.normal(0.0, 1.0, 2000), alpha=0.01, patience=2)
    same = mon.scan(rng.normal(0.0, 1.0, 4000), window=500)
    assert not any(r.drift for r in same) and not mon.retrain_due
    one = mon.check(rng.normal(0.8, 1.0, 500))
    assert one.drift and not mon.retrain_due  # patience 2: one drifting window is not enough
    shifted = mon.scan(rng.normal(0.8, 1.0, 1000), window=500)
    assert all(r.drift for r in shifted) and mon.retrain_due
    # a shift the KS test detects but too small to matter (0.15 sd < min_shift 0.25): no drift
    small = DriftMonitor(rng.normal(0.0, 1.0, 2000)).check(rng.normal(0.15, 1.0, 20000))
    assert small.p_value < 0.01 and abs(small.mean_shift) < 0.25 and not small.drift
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
