"""The hand-derived (implicit-function) backward pass of forward dynamics."""

from __future__ import annotations

import pytest
import torch

from _robot_cases import (
    load_case,
)
from neuract.robot import native
from neuract.sim import rollout
from neuract.sim.integrators import accelerations


@pytest.mark.parametrize("implicit_dt", [0.0, 0.01])
def test_adjoint_gradcheck_and_equals_autograd(tmp_path, implicit_dt):
    robot = load_case("toy", tmp_path)  # tree, slide joint, welded bodies
    g = torch.Generator().manual_seed(0)
    n, nb = robot.n_dof, len(robot.body_names)

    def rnd(*shape):
        return torch.randn(*shape, dtype=torch.float64, generator=g).requires_grad_(True)

    args = (rnd(3, n), rnd(3, n), rnd(n), rnd(3, nb, 6), robot.pi_link.clone().requires_grad_(),
            robot.damping.clone().requires_grad_(), robot.armature.clone().requires_grad_(),
            (robot.frictionloss + 0.1).requires_grad_())

    def f(q, qd, tau, f_ext, pi, damping, armature, friction, adjoint=True):
        r = robot.replace(pi_link=pi, damping=damping, armature=armature, frictionloss=friction)
        return accelerations(r, q, qd, tau, f_ext=f_ext, implicit_dt=implicit_dt,
                             adjoint=adjoint)

    assert torch.autograd.gradcheck(f, args)
    ga = torch.autograd.grad(f(*args).square().sum(), args)
    gb = torch.autograd.grad(f(*args, adjoint=False).square().sum(), args)
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_adjoint_rollout_gradients_equal_autograd(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "_state", {**native._state, "enabled": False})  # torch paths
    robot = load_case("so101_new_calib.xml", tmp_path)
    q0 = torch.tensor([0.1, -0.3, 0.4, 0.2, -0.1, 0.3], dtype=torch.float64, requires_grad=True)
    tau = torch.zeros(2, 30, 6, dtype=torch.float64, requires_grad=True)
    grads = []
    for adjoint in (True, False):
        out = rollout(robot, q0, torch.zeros(6, dtype=torch.float64), tau, 0.005,
                      adjoint=adjoint, implicit_damping=True)
        grads.append(torch.autograd.grad(out.q.square().sum(), (q0, tau)))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
