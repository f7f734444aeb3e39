"""Friction budgets (BAM family M1-M6): stiction, sliding, quadrants, smooth variant, gradcheck."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from neuract.actuators import FRICTIONS, BudgetFriction, FrictionConfig

DT, J = 0.005, 0.03


def _t(x):
    return torch.tensor(x, dtype=torch.float64).reshape(-1, 1)


def _friction(kind="coulomb_viscous", smooth=False, **values):
    f = BudgetFriction(FrictionConfig(kind, smooth=smooth)).double()
    for name, v in values.items():
        getattr(f, name).set(v)
    return f


def _apply(f, tau_m, tau_e, qd):
    with torch.no_grad():
        out = f(_t(tau_m), _t(tau_e), _t(qd), _t([J] * np.size(qd)), DT)
    return out.numpy().ravel()


# (tau_motor, tau_ext, qd): torque-speed quadrants and zero velocity, Coulomb 0.1, viscous 0.05
TABLE = [
    (0.05, 0.0, 0.0),  # at rest, drive below budget -> stuck (stiction)
    (-0.05, 0.02, 0.0),  # at rest, net below budget, other sign
    (0.3, 0.0, 0.0),  # at rest, drive above budget -> breaks away, friction = -budget
    (-0.3, 0.1, 0.0),  # at rest, net -0.2 -> friction +budget
    (0.5, 0.0, 2.0),  # quadrant I: motoring forward, sliding -> friction opposes motion
    (-0.5, 0.0, 2.0),  # quadrant II: braking forward
    (-0.5, 0.0, -2.0),  # quadrant III: motoring backward
    (0.5, 0.0, -2.0),  # quadrant IV: braking backward
    (0.0, 0.0, 1e-4),  # nearly at rest, no drive -> friction just stops it
]


@pytest.mark.parametrize("tau_m,tau_e,qd", TABLE)
def test_coulomb_viscous_budget_clips_the_stopping_torque(tau_m, tau_e, qd):
    f = _friction(friction_base=0.1, friction_viscous=0.05)
    tau_f = float(_apply(f, tau_m, tau_e, qd)[0])
    budget = 0.1 + 0.05 * abs(qd)
    tau_stop = J * qd / DT + tau_m + tau_e
    assert abs(tau_f) <= budget + 1e-6
    if abs(tau_stop) <= budget:
        # friction exactly cancels: the joint reaches rest in one step and stays there
        assert tau_f == pytest.approx(-tau_stop, abs=1e-6)
        qd_next = qd + DT * (tau_m + tau_e + tau_f) / J
        assert qd_next == pytest.approx(0.0, abs=1e-6)
    else:
        assert tau_f == pytest.approx(-math.copysign(budget, tau_stop), rel=1e-5)
        qd_next = qd + DT * (tau_m + tau_e + tau_f) / J
        # friction never reverses the motion within a step
        assert qd_next * tau_stop >= -1e-9
    if abs(qd) > 0.5:  # sliding fast: friction opposes the velocity whatever the drive sign
        assert tau_f * qd < 0


def _bam_style_budget(kind, p, tau_m, tau_e, qd):
    """Scalar reference written independently from the law in BAM's paper, one sample at a time."""
    flags = FRICTIONS.get(kind)
    F = p["friction_base"] + p["friction_viscous"] * abs(qd)
    S = math.exp(-abs(qd / p["dtheta_stribeck"]) ** p["alpha"]) if flags.get("stribeck") else 0
    if flags.get("stribeck"):
        F += p["friction_stribeck"] * S
    if flags.get("load_dependent") and not flags.get("directional"):
        F += p["load_friction_base"] * abs(tau_e - tau_m)
        if flags.get("stribeck"):
            F += p["load_friction_stribeck"] * abs(tau_e - tau_m) * S
    if flags.get("directional"):
        F += abs(tau_e * p["load_friction_external"] - tau_m * p["load_friction_motor"])
        F += S * abs(tau_e * p["load_friction_external_stribeck"]
                     - tau_m * p["load_friction_motor_stribeck"])
    if flags.get("quadratic") and (tau_e > 0) != (tau_m > 0) and tau_e != 0 and tau_m != 0:
        if abs(tau_m) > abs(tau_e):
            F += S * p["load_friction_external_quad"] * tau_e**2
        elif abs(tau_e) > abs(tau_m):
            F += S * p["load_friction_motor_quad"] * tau_m**2
    return F


PARAMS = dict(friction_base=0.05, friction_viscous=0.07, friction_stribeck=0.08,
              dtheta_stribeck=0.1, alpha=1.3, load_friction_base=0.2,
              load_friction_stribeck=0.3, load_friction_motor=0.25,
              load_friction_external=0.05, load_friction_motor_stribeck=0.3,
              load_friction_external_stribeck=0.02, load_friction_motor_quad=0.009,
              load_friction_external_quad=0.002)


@pytest.mark.parametrize("kind", ["m1", "m2", "m3", "m4", "m5", "m6"])
def test_budget_matches_scalar_reference_for_bam_families(kind):
    f = BudgetFriction(FrictionConfig(kind)).double()
    used = {n: v for n, v in PARAMS.items() if hasattr(f, n)}
    for n, v in used.items():
        getattr(f, n).set(v)
    rng = np.random.default_rng(0)
    tm, te, qd = rng.normal(0, 1, 200), rng.normal(0, 1, 200), rng.normal(0, 0.3, 200)
    with torch.no_grad():
        got = f.budget(_t(tm), _t(te), _t(qd)).numpy().ravel()
    p = {**PARAMS, **used}
    ref = [_bam_style_budget(kind, p, a, b, c) for a, b, c in zip(tm, te, qd)]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7)


def test_stribeck_budget_is_higher_at_rest():
    f = _friction("stribeck", friction_base=0.05, friction_stribeck=0.1, dtheta_stribeck=0.2,
                  friction_viscous=0.0)
    with torch.no_grad():
        b = f.budget(_t([0, 0, 0]), _t([0, 0, 0]), _t([0.0, 0.2, 2.0])).numpy().ravel()
    np.testing.assert_allclose(b[0], 0.15, rtol=1e-6)
    assert b[0] > b[1] > b[2]
    np.testing.assert_allclose(b[2], 0.05, atol=1e-6)


@pytest.mark.parametrize("kind", ["m1", "m2", "m4", "m6"])
def test_smooth_variant_agrees_far_from_switches(kind):
    hard = BudgetFriction(FrictionConfig(kind)).double()
    smooth = BudgetFriction(FrictionConfig(kind, smooth=True, eps_velocity=1e-4,
                                           eps_torque=1e-4)).double()
    for n, v in {**PARAMS, "load_friction_motor_quad": 0.3,
                 "load_friction_external_quad": 0.5}.items():
        if hasattr(hard, n):
            getattr(hard, n).set(v)
    smooth.load_state_dict(hard.state_dict())
    # loaded, far from the clip boundary and the direction switches: sliding fast, and slowly
    # enough (0.12-0.15 rad/s) that the Stribeck-weighted terms (M2, M4-M6) count
    tm, te = _t([1.0, -1.2, 0.8, 0.9, -0.7]), _t([-0.3, 0.4, 0.6, -0.4, 0.5])
    qd = _t([3.0, -2.0, 4.0, 0.15, -0.12])
    inertia = _t([J] * 5)
    if hard.stribeck:
        with torch.no_grad():
            assert (hard.stribeck_coeff(qd)[3:] > 0.1).all()
    with torch.no_grad():
        bh, bs = hard.budget(tm, te, qd), smooth.budget(tm, te, qd)
    torch.testing.assert_close(bs, bh, rtol=2e-3, atol=1e-4)
    # the smooth clip never exceeds its budget nor the stopping torque; sliding fast it lies
    # within the hard one (slowly, the smooth |qd| is smaller and S(qd), so the budget, larger)
    with torch.no_grad():
        fh, fs = hard(tm, te, qd, inertia, DT), smooth(tm, te, qd, inertia, DT)
    tau_stop = inertia * qd / DT + tm + te
    assert (fs.abs() <= torch.minimum(bs, tau_stop.abs()) + 1e-12).all()
    assert (fs[:3].abs() <= fh[:3].abs() + 1e-9).all()


@pytest.mark.parametrize("kind", ["m1", "m2", "m6"])
def test_gradcheck_smooth_friction(kind):
    f = BudgetFriction(FrictionConfig(kind, smooth=True)).double()
    tm = torch.tensor([[0.3], [-0.2], [0.05]], dtype=torch.float64, requires_grad=True)
    te = torch.tensor([[-0.1], [0.4], [0.0]], dtype=torch.float64, requires_grad=True)
    qd = torch.tensor([[0.5], [0.0], [-0.05]], dtype=torch.float64, requires_grad=True)
    inertia = torch.full((3, 1), J, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda a, b, c: f(a, b, c, inertia, DT), (tm, te, qd))
    # and w.r.t. the friction parameters (central differences)
    params = list(f.parameters())
    out = f(tm.detach(), te.detach(), qd.detach(), inertia, DT).sum()
    grads = torch.autograd.grad(out, params)
    eps = 1e-6
    for p, g in zip(params, grads):
        for i in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[i] += eps
                up = f(tm, te, qd, inertia, DT).sum()
                p.view(-1)[i] -= 2 * eps
                dn = f(tm, te, qd, inertia, DT).sum()
                p.view(-1)[i] += eps
            assert float(g.view(-1)[i]) == pytest.approx(float((up - dn) / (2 * eps)),
                                                          rel=1e-4, abs=1e-7)
    # stuck (stopping torque 0.01 N m inside the budget): the hard clip returns the stopping
    # torque whatever the budget, the smooth one still informs the budget's parameters
    stuck = f(_t(0.01), _t(0.0), _t(0.0), _t(J), DT).sum()
    (g_base,) = torch.autograd.grad(stuck, [f.friction_base.raw])
    assert abs(float(g_base)) > 1e-6  # measured 3e-5 (m2, m6), 2.6e-4 (m1); hard: 0


def test_none_family_is_zero():
    f = BudgetFriction(FrictionConfig("none")).double()
    assert float(f(_t(1.0), _t(1.0), _t(1.0), _t(J), DT).abs().sum()) == 0.0


@pytest.mark.parametrize("smooth", [False, True])
def test_stribeck_gradients_are_finite_at_exactly_zero_velocity(smooth):
    f = BudgetFriction(FrictionConfig("m6", smooth=smooth)).double()
    f.alpha.set(0.8)  # alpha < 1: d(a**alpha)/da is infinite at 0 without a floor
    out = f(_t([0.3, 0.0]), _t([-0.1, 0.0]), _t([0.0, 0.0]), _t([J, J]), DT).sum()
    out = out + f.budget(_t([0.3]), _t([-0.1]), _t([0.0])).sum()
    grads = torch.autograd.grad(out, list(f.parameters()), allow_unused=True)
    assert all(g is None or torch.isfinite(g).all() for g in grads)
