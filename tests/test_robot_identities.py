"""Identities of the dynamics, batching, float32, learnable parameters (float64)."""

from __future__ import annotations

import pytest
import torch

from _robot_cases import (
    ALL_CASES,
    load_case,
)
from neuract.errors import ConfigError, NotPhysicallyConsistent
from neuract.robot import LearnableRobot
from neuract.robot.dynamics import solve_symmetric
from neuract.robot.params import inertial_to_log_cholesky, log_cholesky_to_inertial
from neuract.robot.spatial import pi_transform_matrix, pseudo_inertia, transform_pi
from neuract.robot.validate import random_states


def _states(robot, n=100, seed=0):
    return tuple(torch.as_tensor(x) for x in random_states(robot, n, seed))


@pytest.mark.parametrize("case", ALL_CASES)
def test_mass_matrix_spd_and_forward_inverse_roundtrip(case, tmp_path, shared_robots):
    robot = load_case(case, tmp_path)
    q, qd, qdd = _states(robot)
    M = robot.mass_matrix(q)
    torch.testing.assert_close(M, M.transpose(-1, -2), rtol=0, atol=1e-14)
    assert torch.linalg.eigvalsh(M).min() > 0
    f_ext = torch.randn(q.shape[0], len(robot.body_names), 6, dtype=q.dtype)
    tau = robot.inverse_dynamics(q, qd, qdd, f_ext)
    torch.testing.assert_close(robot.forward_dynamics(q, qd, tau, f_ext), qdd,
                               rtol=1e-9, atol=1e-9)
    # inverse dynamics = M qdd + b - J^T f
    torch.testing.assert_close(
        tau, (M @ qdd[..., None])[..., 0] + robot.bias_forces(q, qd)
        - robot.external_torques(q, f_ext), rtol=1e-10, atol=1e-10)
    # the regressor reproduces the rigid-body torques (armature apart)
    Y = robot.regressor(q, qd, qdd)
    torch.testing.assert_close(Y @ robot.inertial_parameters(),
                               robot.inverse_dynamics(q, qd, qdd) - robot.armature * qdd,
                               rtol=1e-10, atol=1e-10)


def test_batching_equals_loop(tmp_path):
    robot = load_case("toy", tmp_path)
    q, qd, qdd = (x.reshape(4, 5, -1) for x in _states(robot, 20))
    tau = robot.inverse_dynamics(q, qd, qdd)
    assert tau.shape == (4, 5, robot.n_dof)
    for i in range(4):
        for j in range(5):
            torch.testing.assert_close(robot.inverse_dynamics(q[i, j], qd[i, j], qdd[i, j]),
                                       tau[i, j], rtol=1e-12, atol=1e-12)
    assert robot.body_jacobian(q, "tool").shape == (4, 5, 6, robot.n_dof)
    assert robot.forward_kinematics(q)[1].shape == (4, 5, len(robot.body_names), 3, 3)


def test_jacobian_equals_autograd_of_fk(tmp_path):
    robot = load_case("toy", tmp_path)
    q = _states(robot, 1)[0][0]
    b = robot.body_names.index("tool")
    J = robot.body_jacobian(q, "tool")
    Jp = torch.autograd.functional.jacobian(lambda x: robot.forward_kinematics(x)[0][b], q)
    torch.testing.assert_close(J[:3], Jp, rtol=1e-10, atol=1e-12)


def test_float32_close_to_float64(tmp_path):
    robot = load_case("so101_new_calib.xml", tmp_path)
    r32 = robot.to(dtype=torch.float32)
    q, qd, qdd = _states(robot, 50)
    ref = robot.inverse_dynamics(q, qd, qdd)
    out = r32.inverse_dynamics(q.float(), qd.float(), qdd.float())
    assert out.dtype == torch.float32
    assert (out.double() - ref).abs().max() / ref.abs().max() < 1e-5


def test_passive_torques_smooth_and_signed(tmp_path):
    robot = load_case("so101_new_calib.xml", tmp_path)
    qd = torch.tensor([-1.0, -1e-4, 0.0, 1e-4, 1.0, 0.5], dtype=robot.dtype, requires_grad=True)
    tau = robot.passive_torques(qd)
    expect = -robot.damping * qd - robot.frictionloss * torch.tanh(qd / 1e-2)
    torch.testing.assert_close(tau, expect)
    assert tau[2] == 0 and (tau[qd.detach() > 0] < 0).all() and (tau[qd.detach() < 0] > 0).all()
    assert torch.autograd.grad(tau.sum(), qd)[0].isfinite().all()


def test_pi_transform_is_linear_and_invertible():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(3, 3, generator=g, dtype=torch.float64)
    R = torch.linalg.qr(A)[0]
    p = torch.randn(3, generator=g, dtype=torch.float64)
    pi = torch.randn(10, generator=g, dtype=torch.float64)
    T = pi_transform_matrix(R, p)
    torch.testing.assert_close(T @ pi, transform_pi(pi, R, p))
    back = transform_pi(transform_pi(pi, R, p), R.T, -R.T @ p)
    torch.testing.assert_close(back, pi)


def test_log_cholesky_roundtrip_and_consistency(tmp_path):
    robot = load_case("so101_new_calib.xml", tmp_path)
    pi = robot.inertial_parameters().reshape(-1, 10)
    theta = inertial_to_log_cholesky(pi)
    torch.testing.assert_close(log_cholesky_to_inertial(theta), pi, rtol=1e-10, atol=1e-14)
    # any raw vector maps to physically consistent parameters
    theta = torch.randn(1000, 10, dtype=torch.float64)
    J = pseudo_inertia(log_cholesky_to_inertial(theta))
    assert (torch.linalg.eigvalsh(J).min(-1).values > 0).all()
    assert (torch.linalg.cholesky_ex(J).info == 0).all()
    bad = pi[0].clone()
    bad[0] = -1.0
    with pytest.raises(NotPhysicallyConsistent, match="not physically consistent"):
        inertial_to_log_cholesky(bad)


def test_learnable_robot_starts_at_base_and_trains(tmp_path):
    robot = load_case("so101_new_calib.xml", tmp_path)
    module = LearnableRobot(robot)
    learned = module()
    q, qd, qdd = _states(robot, 8)
    torch.testing.assert_close(learned.inverse_dynamics(q, qd, qdd),
                               robot.inverse_dynamics(q, qd, qdd), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(learned.damping, robot.damping)
    loss = learned.inverse_dynamics(q, qd, qdd).square().sum() + learned.damping.sum()
    loss.backward()
    names = {n for n, p in module.named_parameters()
             if p.grad is not None and p.grad.abs().sum() > 0}
    assert names == {"inertia_theta", "armature_raw", "damping_raw"}
    with pytest.raises(ConfigError, match="valid: inertia"):
        LearnableRobot(robot, learn=("mass",))


def test_solve_symmetric_gradcheck():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(4, 5, 5, dtype=torch.float64, generator=g)
    A = (A @ A.transpose(-1, -2) + 5 * torch.eye(5, dtype=torch.float64)).requires_grad_(True)
    b = torch.randn(3, 1, 5, dtype=torch.float64, generator=g, requires_grad=True)

    def f(A, b):  # symmetrise so that finite differences stay in the symmetric set
        return solve_symmetric(0.5 * (A + A.transpose(-1, -2)), b)

    assert torch.autograd.gradcheck(f, (A, b))
    torch.testing.assert_close(f(A, b), torch.linalg.solve(A, b.expand(3, 4, 5)[..., None])[..., 0])


def test_solve_symmetric_second_derivatives():
    """Second derivatives through the solve (create_graph): gradgradcheck, symmetric and
    general perturbations of A."""
    g = torch.Generator().manual_seed(1)
    A = torch.randn(2, 5, 5, dtype=torch.float64, generator=g)
    A = (A @ A.transpose(-1, -2) + 5 * torch.eye(5, dtype=torch.float64)).requires_grad_(True)
    b = torch.randn(2, 5, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradgradcheck(solve_symmetric, (A, b))
    assert torch.autograd.gradgradcheck(
        lambda A, b: solve_symmetric(0.5 * (A + A.transpose(-1, -2)), b), (A, b))


@pytest.mark.parametrize("case", ["toy", "bundled:so101", "bundled:panda"])
def test_forward_dynamics_hessian_matches_finite_difference(case, tmp_path):
    """d/dq of the autograd gradient of |qdd(q)|^2 (double backward through the solve)
    against a central difference of that gradient."""
    from neuract.robot.dynamics import forward_dynamics

    robot = load_case(case, tmp_path)
    q, qd, _ = _states(robot, n=1, seed=3)
    tau = torch.randn(q.shape, dtype=q.dtype, generator=torch.Generator().manual_seed(4))

    def grad_of(q, create_graph=False):
        loss = forward_dynamics(robot, q, qd, tau).square().sum()
        return torch.autograd.grad(loss, q, create_graph=create_graph)[0][0]

    qv = q.detach().clone().requires_grad_(True)
    gv = grad_of(qv, create_graph=True)
    n = q.shape[-1]
    H = torch.stack([torch.autograd.grad(gv[i], qv, retain_graph=True)[0][0] for i in range(n)])
    eps = 1e-6
    H_fd = torch.stack([
        (grad_of((q + eps * e).requires_grad_(True)) - grad_of((q - eps * e).requires_grad_(True)))
        / (2 * eps) for e in torch.eye(n, dtype=q.dtype)])
    torch.testing.assert_close(H, H_fd, rtol=1e-5, atol=1e-6 * H_fd.abs().max().item())
