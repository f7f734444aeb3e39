"""Integrators and rollouts: MuJoCo agreement, energy conservation, gradients, callbacks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _robot_cases import (
    load_case,
)
from neuract.errors import ConfigError
from neuract.robot.dynamics import kinetic_energy, potential_energy
from neuract.robot.validate import mujoco_rollout
from neuract.sim import rollout, step

DT, T = 0.002, 500  # 1 s


@pytest.mark.parametrize(("case", "integrator"), [
    ("so101_new_calib.xml", "euler"), ("bundled:so101", "euler"), ("bundled:so101", "rk4")])
def test_frictionless_rollout_matches_mujoco(case, integrator, tmp_path, shared_robots):
    """1 s, dt = 2 ms, random torques, joint damping on (MuJoCo Euler treats it implicitly, so
    we do too), friction loss and joint limits off. Tolerance: 1e-8 rad on every joint."""
    robot = load_case(case, tmp_path)
    robot = robot.replace(frictionloss=torch.zeros_like(robot.frictionloss))
    rng = np.random.default_rng(3)
    q0 = rng.uniform(-0.5, 0.5, robot.n_dof)
    qd0 = rng.normal(size=robot.n_dof)
    tau = rng.normal(size=(T, robot.n_dof)) * 0.2
    ref = mujoco_rollout(robot, q0, qd0, tau, DT, integrator)
    out = rollout(robot, torch.as_tensor(q0), torch.as_tensor(qd0), torch.as_tensor(tau), DT,
                  integrator=integrator, implicit_damping=integrator == "euler")
    assert out.q.shape == (T + 1, robot.n_dof)
    assert np.abs(ref - q0).max() > 0.1  # the arm really moved
    err = np.abs(out.q.numpy() - ref).max()
    assert err < 1e-8, f"max joint error vs MuJoCo {err:.2e} rad"


def test_energy_conserved_without_friction(tmp_path):
    """RK4, dt = 4 ms, 0.6 s free motion: total energy drifts < 1e-8 of the kinetic energy."""
    robot = load_case("toy", tmp_path)
    zero = torch.zeros_like(robot.damping)
    robot = robot.replace(damping=zero, frictionloss=zero)
    q0 = torch.tensor([0.3, -0.2, 0.05, 0.4, -1.0], dtype=robot.dtype).expand(3, 5)
    qd0 = torch.randn(3, 5, dtype=robot.dtype, generator=torch.Generator().manual_seed(0))
    out = rollout(robot, q0, qd0, torch.zeros(150, 5, dtype=robot.dtype), 4e-3,
                  integrator="rk4")
    K = kinetic_energy(robot, out.q, out.qd)
    E = K + potential_energy(robot, out.q)
    assert (K.max(-1).values - K.min(-1).values).min() > 0.01  # energy really exchanged
    drift = (E - E[..., :1]).abs().max()
    assert drift < 1e-8 * K.max(), f"energy drift {drift:.2e} J"


def test_damping_dissipates(tmp_path):
    robot = load_case("so101_new_calib.xml", tmp_path)
    robot = robot.replace(gravity=torch.zeros_like(robot.gravity))
    out = rollout(robot, torch.zeros(6, dtype=robot.dtype), torch.ones(6, dtype=robot.dtype),
                  torch.zeros(200, 6, dtype=robot.dtype), DT)
    K = kinetic_energy(robot, out.q, out.qd)
    assert (K[1:] <= K[:-1] + 1e-15).all() and K[-1] < 0.5 * K[0]


def test_gradcheck_rollout_wrt_initial_state(tmp_path):
    robot = load_case("toy", tmp_path)
    q0 = torch.tensor([0.3, -0.2, 0.05, 0.4, -1.0], dtype=torch.float64, requires_grad=True)
    qd0 = torch.tensor([0.5, 0.1, -0.2, 0.3, 0.2], dtype=torch.float64, requires_grad=True)
    tau = torch.randn(6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    def f(q0, qd0):
        out = rollout(robot, q0, qd0, tau, 0.01)
        return out.q[-1], out.qd[-1]

    assert torch.autograd.gradcheck(f, (q0, qd0))
    f_rk4 = lambda q0, qd0: rollout(robot, q0, qd0, tau[:3], 0.01, integrator="rk4").q[-1]  # noqa: E731
    assert torch.autograd.gradcheck(f_rk4, (q0, qd0))


def test_gradcheck_rollout_wrt_physical_parameters(tmp_path):
    robot = load_case("so101_new_calib.xml", tmp_path)
    pi = robot.inertial_parameters().clone().requires_grad_(True)
    damping = robot.damping.clone().requires_grad_(True)
    armature = robot.armature.clone().requires_grad_(True)
    friction = robot.frictionloss.clone().requires_grad_(True)
    q0 = torch.tensor([0.1, -0.3, 0.4, 0.2, -0.1, 0.3], dtype=torch.float64)
    qd0 = torch.tensor([0.5, -0.2, 0.3, 0.1, -0.4, 0.2], dtype=torch.float64)

    def f(pi, damping, armature, friction):
        r = robot.with_inertial_parameters(pi).replace(
            damping=damping, armature=armature, frictionloss=friction)
        return rollout(r, q0, qd0, lambda t, q, qd: -0.5 * q, 0.01, n_steps=5).q[-1]

    assert torch.autograd.gradcheck(f, (pi, damping, armature, friction))


def test_policy_callback_and_batching(tmp_path):
    robot = load_case("so101_new_calib.xml", tmp_path)
    seen = []

    def policy(t, q, qd):
        seen.append(t)
        return robot.gravity_torques(q) + 5.0 * (0.2 - q) - 0.5 * qd

    q0 = torch.zeros(4, 6, dtype=torch.float64)
    out = rollout(robot, q0, torch.zeros_like(q0), policy, DT, n_steps=20)
    assert seen == list(range(20))
    assert out.q.shape == (4, 21, 6) and out.tau.shape == (4, 20, 6)
    q1, qd1 = step(robot, q0, torch.zeros_like(q0), out.tau[:, 0], DT)
    torch.testing.assert_close(q1, out.q[:, 1])


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_step_with_a_per_row_dt_tensor_equals_a_loop(integrator, tmp_path):
    """neuract.neuralactuator rollouts step windows of different sample spacing at once:
    dt (B, 1) [s] must equal stepping each row with its own float dt."""
    robot = load_case("toy", tmp_path)
    g = torch.Generator().manual_seed(1)
    q, qd, tau = (torch.randn(3, 5, dtype=torch.float64, generator=g) for _ in range(3))
    dt = torch.tensor([[0.002], [0.004], [0.0125]], dtype=torch.float64)
    q1, qd1 = step(robot, q, qd, tau, dt, integrator=integrator)
    for i in range(3):
        qi, qdi = step(robot, q[i], qd[i], tau[i], float(dt[i, 0]), integrator=integrator)
        torch.testing.assert_close(q1[i], qi, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(qd1[i], qdi, rtol=1e-12, atol=1e-14)


def test_bad_arguments(tmp_path):
    robot = load_case("toy", tmp_path)
    z = torch.zeros(5, dtype=torch.float64)
    with pytest.raises(ConfigError, match="valid: euler, rk4"):
        step(robot, z, z, z, 0.01, integrator="leapfrog")
    with pytest.raises(ConfigError, match="n_dof = 5"):
        rollout(robot, z, z, torch.zeros(3, 4, dtype=torch.float64), 0.01)
    with pytest.raises(ConfigError, match="needs n_steps"):
        rollout(robot, z, z, lambda t, q, qd: q, 0.01)


def test_known_truth_recovery_of_damping_and_armature():
    """Positions-only identification through the differentiable rollout: data from known
    damping/armature on planar2, start 3x off, L-BFGS on the joint-position error."""
    from neuract.robot import LearnableRobot, load_robot

    f64 = torch.float64
    true = load_robot("planar2").replace(damping=torch.tensor([0.3, 0.15], dtype=f64),
                                         armature=torch.tensor([0.02, 0.01], dtype=f64))
    g = torch.Generator().manual_seed(0)
    q0 = torch.randn(4, 2, dtype=f64, generator=g) * 0.5
    qd0 = torch.zeros(4, 2, dtype=f64)
    tau = torch.randn(4, 30, 2, dtype=f64, generator=g) * 2
    with torch.no_grad():
        ref = rollout(true, q0, qd0, tau, 0.01).q
    start = true.replace(damping=torch.tensor([0.1, 0.1], dtype=f64),
                         armature=torch.tensor([0.05, 0.05], dtype=f64))
    model = LearnableRobot(start, learn=("armature", "damping"))
    opt = torch.optim.LBFGS(model.parameters(), max_iter=40, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = (rollout(model(), q0, qd0, tau, 0.01).q - ref).square().mean()
        loss.backward()
        return loss

    opt.step(closure)
    fitted = model()
    torch.testing.assert_close(fitted.damping.detach(), true.damping, rtol=0.03, atol=0)
    torch.testing.assert_close(fitted.armature.detach(), true.armature, rtol=0.03, atol=0)
