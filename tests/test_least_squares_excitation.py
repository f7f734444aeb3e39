"""Excitation design: analytic derivatives, feasibility, better conditioning."""

from __future__ import annotations

import numpy as np

from neuract.fit.excitation import FourierTrajectory, optimize_excitation, regressor_condition
from neuract.fit.least_squares import base_parameters
from neuract.models import two_link_regressor


def test_fourier_derivatives_match_finite_differences():
    rng = np.random.default_rng(0)
    tr = FourierTrajectory(2 * np.pi / 5, rng.normal(size=(3, 4)), rng.normal(size=(3, 4)),
                           np.zeros(3))
    t = np.linspace(0, 5, 50)
    h = 1e-6
    q, qd, qdd = tr.evaluate(t)
    qp, qdp, _ = tr.evaluate(t + h)
    qm, qdm, _ = tr.evaluate(t - h)
    np.testing.assert_allclose((qp - qm) / (2 * h), qd, atol=1e-6)
    np.testing.assert_allclose((qdp - qdm) / (2 * h), qdd, atol=1e-5)
    # periodic
    np.testing.assert_allclose(tr.evaluate(t + tr.period)[0], q, atol=1e-9)


def test_optimized_excitation_is_feasible_and_better_conditioned():
    base = base_parameters(two_link_regressor, 2)
    q_min, q_max, qd_max = np.array([-1.5, -2.0]), np.array([1.5, 2.0]), np.array([2.0, 2.0])
    tr, info = optimize_excitation(two_link_regressor, q_min, q_max, qd_max, n_harm=3,
                                   base=base, n_samples=60, max_iter=15)
    q, qd, _ = tr.evaluate(np.linspace(0, tr.period, 2000))
    assert (q <= q_max + 1e-9).all() and (q >= q_min - 1e-9).all()
    assert (np.abs(qd) <= qd_max + 1e-9).all()
    assert info["cond"] < info["cond_initial"]
    assert np.isclose(info["cond"], regressor_condition(two_link_regressor, tr, 60, base))
