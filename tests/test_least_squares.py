"""Least-squares identification: known-truth recovery on synthetic data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.errors import NotPhysicallyConsistent, SchemaError
from neuract.fit.least_squares import (
    base_parameters,
    identify_consistent,
    identify_ls,
    log_cholesky_to_params,
    params_to_log_cholesky,
    pseudo_inertia,
    random_states,
)
from neuract.models import TwoLinkArm, TwoLinkParams, two_link_regressor

torch.set_num_threads(1)


def _core_robot(name):
    mod = pytest.importorskip("neuract.robot")
    if not hasattr(mod, "load_robot"):
        pytest.skip("rigid-body core not available yet")
    robot = mod.load_robot(name)
    if not hasattr(robot, "regressor"):
        pytest.skip("core has no regressor yet")
    return robot


def test_two_link_base_parameters_and_friction_recovered_exactly():
    arm = TwoLinkArm(TwoLinkParams(fv=(0.3, 0.1), fc=(0.2, 0.05)))
    q, qd, qdd = random_states(2, 400, seed=0)
    tau = arm.inverse(q, qd, qdd)
    bp = base_parameters(two_link_regressor, 2)
    assert bp.n_base == 5
    res = identify_ls(two_link_regressor(q, qd, qdd), tau, qd, bp)
    np.testing.assert_allclose(res.beta, arm.theta.numpy(), rtol=1e-9)
    np.testing.assert_allclose(res.fv, [0.3, 0.1], atol=1e-9)
    np.testing.assert_allclose(res.fc, [0.2, 0.05], atol=1e-9)
    assert res.rmse.max() < 1e-9


def test_base_parameters_fold_duplicated_columns():
    # a regressor with a duplicated and a zero column: base keeps 5 of 7 and K maps them back
    def reg(q, qd, qdd):
        y = two_link_regressor(q, qd, qdd)
        return torch.cat([y, 2 * y[..., 2:3], 0 * y[..., :1]], -1)

    bp = base_parameters(reg, 2)
    assert bp.n_base == 5 and len(bp.dependent) == 2
    pi = np.array([1.0, 0.5, 0.3, 10.0, 5.0, 0.7, 0.9])
    q, qd, qdd = random_states(2, 50, seed=1)
    y = reg(q, qd, qdd).numpy()
    np.testing.assert_allclose(y[..., bp.independent] @ bp.project(pi), y @ pi, atol=1e-10)


def test_non_finite_input_raises():
    q, qd, qdd = random_states(2, 20)
    y = two_link_regressor(q, qd, qdd)
    tau = torch.zeros(20, 2, dtype=torch.float64)
    tau[3, 1] = float("nan")
    with pytest.raises(SchemaError, match="tau"):
        identify_ls(y, tau, qd)


def test_log_cholesky_round_trip_and_pd():
    pi = torch.tensor([[2.0, 0.2, -0.1, 0.3, 0.3, 0.25, 0.2, 0.01, -0.02, 0.03]],
                      dtype=torch.float64)
    theta = params_to_log_cholesky(pi)
    torch.testing.assert_close(log_cholesky_to_params(theta), pi)
    rand = torch.randn(100, 10, dtype=torch.float64) * 2
    assert torch.linalg.eigvalsh(pseudo_inertia(log_cholesky_to_params(rand))).min() > 0


def test_log_cholesky_gradcheck():
    theta = torch.randn(2, 10, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(log_cholesky_to_params, (theta,))


def test_params_to_log_cholesky_rejects_inconsistent_body():
    bad = torch.tensor([[1.0, 0, 0, 0, 0.1, 0.1, 0.5, 0, 0, 0]], dtype=torch.float64)
    with pytest.raises(NotPhysicallyConsistent):
        params_to_log_cholesky(bad)  # violates the triangle inequality Izz <= Ixx + Iyy


@pytest.mark.parametrize("name,n,seed,rtol,atol", [("planar2", 200, 2, 1e-7, 1e-9),
                                                    ("panda", 300, 3, 1e-6, 1e-8)])
def test_core_regressor_identity_and_base_recovery(name, n, seed, rtol, atol):
    robot = _core_robot(name)
    q, qd, qdd = random_states(robot.n_dof, n, seed=seed)
    y = robot.regressor(q, qd, qdd)
    pi = torch.as_tensor(robot.inertial_parameters(), dtype=torch.float64).reshape(-1)
    tau = robot.inverse_dynamics(q, qd, qdd)
    torch.testing.assert_close(y @ pi, tau)
    bp = base_parameters(robot.regressor, robot.n_dof)
    res = identify_ls(y, tau, qd, bp, viscous=False, coulomb=False)
    np.testing.assert_allclose(res.beta, bp.project(pi.numpy()), rtol=rtol, atol=atol)
    if name == "panda":  # and a physically consistent fit on a third of the samples
        cons = identify_consistent(y[:100], tau[:100], qd[:100], max_iter=100)
        assert min(cons.extra["pseudo_inertia_min_eig"]) > 0
        # (positive definite by construction): and it fits every joint's torque, to 2-11 % of
        # its spread (the generic sphere prior it starts from: 35 % and more)
        assert (cons.rmse < 0.2 * tau[:100].std(0).numpy()).all(), cons.rmse


def test_consistent_fit_two_link_full_regressor_is_pd_and_fits():
    # a full 10-parameter regressor for the planar two-link arm, built from the closed form:
    # body k's (m, m cx, Izz-about-origin) map onto the base parameters linearly.
    arm = TwoLinkArm()
    l1, g = 1.0, 9.81

    def full_reg(q, qd, qdd):
        yb = two_link_regressor(q, qd, qdd)  # columns t1..t5
        z = torch.zeros_like(yb[..., :1])
        # t1 = Izz1 + m2 l1^2; t2 = l1 mcx2; t3 = Izz2; t4 = g (mcx1 + m2 l1); t5 = g mcx2
        b1 = [z, g * yb[..., 3:4], z, z, z, z, yb[..., 0:1], z, z, z]
        b2 = [l1**2 * yb[..., 0:1] + g * l1 * yb[..., 3:4],
              l1 * yb[..., 1:2] + g * yb[..., 4:5], z, z, z, z, yb[..., 2:3], z, z, z]
        return torch.cat(b1 + b2, -1)

    q, qd, qdd = random_states(2, 300, seed=4)
    tau = arm.inverse(q, qd, qdd)
    pi_true = torch.tensor([1.0, 0.5, 0, 0, 0.001, 0.35, 0.35, 0, 0, 0,
                            1.0, 0.5, 0, 0, 0.001, 0.35, 0.35, 0, 0, 0], dtype=torch.float64)
    torch.testing.assert_close(full_reg(q, qd, qdd) @ pi_true, tau)
    res = identify_consistent(full_reg(q, qd, qdd), tau, qd, prior_weight=1e-6)
    assert min(res.extra["pseudo_inertia_min_eig"]) > 0
    assert res.rmse.max() < 1e-2 * tau.std(0).min()
