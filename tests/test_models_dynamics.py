"""DynamicsModel implementations: identities that must hold for any correct model."""

from __future__ import annotations

import pytest
import torch

from neuract.fit.inverse_dynamics import fit_inverse_model
from neuract.fit.least_squares import random_states
from neuract.models import (
    DynamicsModel,
    HybridModel,
    LagrangianModel,
    MLPModel,
    RigidBodyModel,
    TwoLinkArm,
    TwoLinkParams,
    two_link_regressor,
)

torch.set_num_threads(1)
ARM = TwoLinkArm(TwoLinkParams(fv=(0.1, 0.2), fc=(0.05, 0.1)))


def test_two_link_regressor_times_theta_equals_inverse():
    q, qd, qdd = random_states(2, 200, seed=1)
    tau = ARM.inverse(q, qd, qdd)
    y = two_link_regressor(q, qd, qdd)
    torch.testing.assert_close(y @ ARM.theta + ARM.friction(qd), tau)


def test_two_link_forward_inverts_inverse_and_generic_forward_agrees():
    q, qd, qdd = random_states(2, 200, seed=2)
    tau = ARM.inverse(q, qd, qdd)
    torch.testing.assert_close(ARM.forward(q, qd, tau), qdd)
    torch.testing.assert_close(DynamicsModel.forward(ARM, q, qd, tau), qdd)


def test_two_link_mdot_minus_2c_is_skew_symmetric():
    q, qd, _ = random_states(2, 50, seed=3)
    q.requires_grad_(True)
    m = ARM.mass_matrix(q)
    # dM/dt = sum_k dM/dq_k qd_k, by autograd, entry by entry
    mdot = torch.zeros_like(m)
    for i in range(2):
        for j in range(2):
            g, = torch.autograd.grad(m[:, i, j].sum(), q, retain_graph=True)
            mdot[:, i, j] = (g * qd).sum(-1)
    s = mdot - 2 * ARM.coriolis_matrix(q.detach(), qd)
    torch.testing.assert_close(s, -s.transpose(-1, -2))
    torch.testing.assert_close((ARM.coriolis_matrix(q, qd) @ qd[..., None])[..., 0],
                               ARM.coriolis(q, qd))


def test_two_link_equals_core_planar2():
    robot_mod = pytest.importorskip("neuract.robot")
    if not hasattr(robot_mod, "load_robot"):
        pytest.skip("rigid-body core not available yet")
    robot = robot_mod.load_robot("planar2")
    arm = TwoLinkArm()
    q, qd, qdd = random_states(2, 100, seed=4)
    torch.testing.assert_close(robot.mass_matrix(q), arm.mass_matrix(q))
    torch.testing.assert_close(robot.inverse_dynamics(q, qd, qdd), arm.inverse(q, qd, qdd))
    torch.testing.assert_close(robot.bias_forces(q, torch.zeros_like(q)), arm.gravity(q))


def test_rigid_body_model_with_true_params_equals_arm():
    q, qd, qdd = random_states(2, 100, seed=5)
    rb = RigidBodyModel(two_link_regressor, ARM.theta, 2, fv=ARM.fv, fc=ARM.fc)
    torch.testing.assert_close(rb.inverse(q, qd, qdd), ARM.inverse(q, qd, qdd))
    torch.testing.assert_close(rb.forward(q, qd, ARM.inverse(q, qd, qdd)), qdd)


@pytest.mark.parametrize("n_dof", [2, 4])
def test_lagrangian_mass_matrix_spd_by_construction(n_dof):
    torch.manual_seed(0)
    model = LagrangianModel(n_dof)
    with torch.no_grad():  # wreck the weights: M must stay SPD anyway
        for p in model.m_net.parameters():
            p.mul_(5.0)
    q = 3 * torch.randn(300, n_dof, dtype=torch.float64)
    m = model.mass_matrix(q)
    torch.testing.assert_close(m, m.transpose(-1, -2))
    assert torch.linalg.eigvalsh(m).min() > 0


def test_lagrangian_forward_inverts_inverse_and_friction_dissipates():
    torch.manual_seed(0)
    model = LagrangianModel(3)
    q, qd, qdd = random_states(3, 50, seed=6)
    tau = model.inverse(q, qd, qdd)
    torch.testing.assert_close(model.forward(q, qd, tau), qdd)
    # every moving joint loses energy to its friction (strictly: the friction is on), and the
    # friction is part of the torque: an odd function of qd alone
    f = model.friction(qd)
    assert (f * qd).min() > 0
    torch.testing.assert_close(model.friction(-qd), -f)
    torch.testing.assert_close(tau - model.inverse(q, torch.zeros_like(qd), qdd),
                               model.coriolis(q, qd) + f)


def test_lagrangian_coriolis_satisfies_energy_identity():
    # qd^T (Mdot - 2C) qd = 0  <=>  qd . c = 1/2 qd^T Mdot qd
    torch.manual_seed(1)
    model = LagrangianModel(2)
    q, qd, _ = random_states(2, 20, seed=7)
    c = model.coriolis(q, qd)
    qq = q.clone().requires_grad_(True)
    m = model.mass_matrix(qq)
    quad = torch.einsum("bi,bij,bj->b", qd, m, qd)
    g, = torch.autograd.grad(quad.sum(), qq)
    torch.testing.assert_close((qd * c).sum(-1), 0.5 * (g * qd).sum(-1))


def test_learned_models_fit_two_link_data():
    torch.manual_seed(0)
    q, qd, qdd = random_states(2, 1500, seed=8)
    tau = ARM.inverse(q, qd, qdd)
    qt, qdt, qddt = random_states(2, 300, seed=9)
    taut = ARM.inverse(qt, qdt, qddt)
    var = taut.var(0)
    lag = LagrangianModel(2, hidden=32)
    fit_inverse_model(lag, q, qd, qdd, tau, epochs=15, batch_size=128, lr=1e-2)
    mlp = MLPModel(2, hidden=64)
    fit_inverse_model(mlp, q, qd, qdd, tau, epochs=40, batch_size=128, lr=5e-3)
    with torch.no_grad():
        e_lag = ((lag.inverse(qt, qdt, qddt) - taut) ** 2).mean(0) / var
        e_mlp = ((mlp.inverse(qt, qdt, qddt) - taut) ** 2).mean(0) / var
    assert e_lag.max() < 0.1 and e_mlp.max() < 0.2


def test_hybrid_starts_at_base_and_learns_residual():
    torch.manual_seed(0)
    q, qd, qdd = random_states(2, 1000, seed=10)
    tau = ARM.inverse(q, qd, qdd)
    wrong = RigidBodyModel(two_link_regressor, ARM.theta * 0.9, 2)
    hy = HybridModel(wrong, hidden=32)
    torch.testing.assert_close(hy.inverse(q, qd, qdd), wrong.inverse(q, qd, qdd))
    before = ((wrong.inverse(q, qd, qdd) - tau) ** 2).mean()
    fit_inverse_model(hy, q, qd, qdd, tau, epochs=30, batch_size=128, lr=5e-3)
    with torch.no_grad():
        after = ((hy.inverse(q, qd, qdd) - tau) ** 2).mean()
        # the residual reads qdd, so forward takes Newton steps: it still inverts inverse
        back = hy.forward(q, qd, hy.inverse(q, qd, qdd))
    assert after < 0.2 * before
    assert (back - qdd).abs().max() < 1e-2  # one step (no iteration): 0.9 rad/s^2 off


def test_robot_model_adapter_matches_closed_form_planar2():
    robot_mod = pytest.importorskip("neuract.robot")
    if not hasattr(robot_mod, "load_robot"):
        pytest.skip("rigid-body core not available yet")
    from neuract.models import RobotModel

    model = RobotModel(robot_mod.load_robot("planar2"), fv=ARM.fv, fc=ARM.fc)
    q, qd, qdd = random_states(2, 50, seed=11)
    torch.testing.assert_close(model.inverse(q, qd, qdd), ARM.inverse(q, qd, qdd))
    torch.testing.assert_close(model.forward(q, qd, ARM.inverse(q, qd, qdd)), qdd)
    torch.testing.assert_close(model.mass_matrix(q), ARM.mass_matrix(q))
