"""Hand-written backward passes of the rollout's speed paths, checked against finite
differences (gradcheck) and against plain autograd through the same forward computation."""

from __future__ import annotations

import pytest
import torch

from _robot_cases import load_case
from neuract.robot.dynamics import (
    _ScrewKinematics,
    _world_params,
    accelerations_fast,
    dynamics_system,
    mass_matrix_and_bias,
    solve_symmetric,
)
from neuract.robot.kinematics import link_poses, motion_subspace
from neuract.sim import rollout

# the toy model has a branching tree, a slide joint, a non-zero reference position and welded
# bodies; so101 and panda are the serial chains the benchmark and the demos use
CASES = ["toy", "bundled:so101", "bundled:panda"]


def _plain_s_w(robot, q):
    R, p = link_poses(robot, q)
    return motion_subspace(robot, R, p), _world_params(robot, R, p)


@pytest.mark.parametrize("case", CASES)
def test_screw_kinematics_gradcheck(case, tmp_path):
    robot = load_case(case, tmp_path)
    q = torch.randn(2, robot.n_dof, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    q.requires_grad_(True)
    fn = lambda q: _ScrewKinematics.apply(q, robot)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q,))
    assert torch.autograd.gradgradcheck(fn, (q,))  # the backward itself is differentiable
    S, W = fn(q)
    S0, W0 = _plain_s_w(robot, q)
    torch.testing.assert_close(S, S0, rtol=0, atol=0)
    torch.testing.assert_close(W, W0, rtol=0, atol=0)
    # one gradient of everything against plain autograd through the 4x4 chain
    gS, gW = torch.randn_like(S), torch.randn_like(W)
    g_fast, = torch.autograd.grad((S * gS).sum() + (W * gW).sum(), q)
    g_plain, = torch.autograd.grad((S0 * gS).sum() + (W0 * gW).sum(), q)
    torch.testing.assert_close(g_fast, g_plain, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", CASES)
def test_dynamics_system_gradcheck(case, tmp_path):
    robot = load_case(case, tmp_path)
    gen = torch.Generator().manual_seed(2)
    q, qd, tau = (torch.randn(2, robot.n_dof, dtype=torch.float64, generator=gen)
                  .requires_grad_(True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda q, qd: mass_matrix_and_bias(robot, q, qd), (q, qd))
    assert torch.autograd.gradcheck(
        lambda q, qd, tau: dynamics_system(robot, q, qd, tau, implicit_dt=0.01), (q, qd, tau))


def test_fast_path_falls_back_when_parameters_need_grad(tmp_path):
    """Link inertias that require grad take the plain path (their gradient is needed too)."""
    robot = load_case("bundled:so101", tmp_path)
    pi = robot.pi_link.clone().requires_grad_(True)
    r = robot.replace(pi_link=pi)
    q = torch.zeros(1, robot.n_dof, requires_grad=True, dtype=robot.pi_link.dtype)
    M, b = mass_matrix_and_bias(r, q, torch.ones_like(q))
    g, gq = torch.autograd.grad(b.sum() + M.sum(), (pi, q))
    assert torch.isfinite(g).all() and g.abs().sum() > 0
    q2 = q.detach().requires_grad_(True)
    M2, b2 = mass_matrix_and_bias(robot, q2, torch.ones_like(q2))  # fast path, same q grad
    gq2, = torch.autograd.grad(b2.sum() + M2.sum(), q2)
    torch.testing.assert_close(gq, gq2)


def test_rollout_gradient_matches_plain_autograd(tmp_path, monkeypatch):
    """A whole differentiable rollout: the closed-form backward passes give the plain-autograd
    gradient (tree, slide joint, non-zero reference position; implicit damping too)."""
    import neuract.robot.dynamics as dyn
    import neuract.sim.integrators as integ

    robot = load_case("toy", tmp_path)
    gen = torch.Generator().manual_seed(3)
    tau = (0.1 * torch.randn(3, 15, robot.n_dof, dtype=torch.float64, generator=gen))
    q0 = 0.1 * torch.randn(3, robot.n_dof, dtype=torch.float64, generator=gen)

    def grads():
        t, q = tau.clone().requires_grad_(True), q0.clone().requires_grad_(True)
        out = rollout(robot, q, torch.zeros_like(q), t, 0.01)
        out2 = rollout(robot, q, torch.zeros_like(q), t, 0.01, implicit_damping=True)
        loss = out.q.square().sum() + out.qd.sum() + out2.q.sin().sum()
        return torch.autograd.grad(loss, (t, q))

    monkeypatch.setattr(integ, "native_accelerations", lambda *a, **k: None)  # torch paths
    fast = grads()
    monkeypatch.setattr(integ, "accelerations_fast", lambda *a, **k: None)
    monkeypatch.setattr(dyn, "_subspaces_and_params", _plain_s_w)
    plain = grads()
    for a, b in zip(fast, plain):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("implicit_dt", [0.0, 0.01])
def test_accelerations_fast_gradcheck(case, implicit_dt, tmp_path):
    """The matrix-free CRBA backward of the solve, against finite differences, and the same
    values as the plain dynamics_system + solve."""
    robot = load_case(case, tmp_path)
    gen = torch.Generator().manual_seed(4)
    q, qd, tau = (torch.randn(2, robot.n_dof, dtype=torch.float64, generator=gen)
                  .requires_grad_(True) for _ in range(3))

    def fast(q, qd, tau):
        return accelerations_fast(robot, q, qd, tau, True, 1e-2, implicit_dt)

    assert torch.autograd.gradcheck(fast, (q, qd, tau))
    plain = solve_symmetric(*dynamics_system(robot, q, qd, tau, None, True, 1e-2, implicit_dt))
    torch.testing.assert_close(fast(q, qd, tau), plain, rtol=1e-12, atol=1e-12)


def test_accelerations_fast_declines_when_parameters_need_grad(tmp_path):
    robot = load_case("bundled:so101", tmp_path)
    q = torch.zeros(1, robot.n_dof, dtype=torch.float64, requires_grad=True)
    assert accelerations_fast(robot, q, q, q) is not None
    for name in ("armature", "damping", "pi_link"):
        r = robot.replace(**{name: getattr(robot, name).clone().requires_grad_(True)})
        assert accelerations_fast(r, q, q, q) is None
    assert accelerations_fast(robot, q.detach(), q, q) is None
