"""Excitation trajectories for identification: finite Fourier series (Swevers et al. 1997)
optimised for the condition number of the stacked regressor, within joint limits.

    q_j(t) = q0_j + sum_l a_jl / (wf l) sin(wf l t) - b_jl / (wf l) cos(wf l t)

periodic with period ``2 pi / wf``; velocities and accelerations are analytic. The objective
is ``log cond(W)`` of the regressor (base columns + optional friction columns) stacked over
``n_samples`` instants of one period, plus a quadratic penalty on position and velocity
limit violations; after optimisation the amplitudes are scaled down if a limit is still
exceeded, so the returned trajectory is always feasible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import torch

from neuract.errors import ConfigError
from neuract.fit.least_squares import BaseParameters, friction_regressor

Regressor = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class FourierTrajectory:
    """wf: base angular frequency [rad/s]; a, b: (n_dof, n_harm) coefficients [rad/s];
    q0: (n_dof,) offset [rad]."""

    wf: float
    a: np.ndarray
    b: np.ndarray
    q0: np.ndarray

    @property
    def period(self) -> float:
        return 2 * np.pi / self.wf

    def evaluate(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, qd, qdd at times t (T,) -> each (T, n_dof) [rad, rad/s, rad/s^2]."""
        t = np.asarray(t, dtype=float)[:, None, None]
        harm = np.arange(1, self.a.shape[1] + 1)[None, None, :]
        w = self.wf * harm
        s, c = np.sin(w * t), np.cos(w * t)
        q = self.q0 + (self.a / w * s - self.b / w * c).sum(-1)
        qd = (self.a * c + self.b * s).sum(-1)
        qdd = (-self.a * w * s + self.b * w * c).sum(-1)
        return q, qd, qdd


def _stacked(regressor, base, friction, q, qd, qdd) -> np.ndarray:
    with torch.no_grad():
        tq, tqd, tqdd = (torch.from_numpy(x) for x in (q, qd, qdd))
        y = regressor(tq, tqd, tqdd)
        if base is not None:
            y = y[..., base.independent]
        if friction:
            y = torch.cat([y, friction_regressor(tqd)], -1)
    return y.reshape(-1, y.shape[-1]).numpy()


def regressor_condition(regressor: Regressor, traj: FourierTrajectory, n_samples: int = 200,
                        base: BaseParameters | None = None, friction: bool = True) -> float:
    """Condition number of the column-stacked regressor over one period."""
    t = np.linspace(0, traj.period, n_samples, endpoint=False)
    w = _stacked(regressor, base, friction, *traj.evaluate(t))
    sv = np.linalg.svd(w, compute_uv=False)
    return float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")


def optimize_excitation(
    regressor: Regressor,
    q_min, q_max, qd_max,
    n_harm: int = 5,
    period: float = 10.0,
    base: BaseParameters | None = None,
    friction: bool = True,
    n_samples: int = 100,
    max_iter: int = 60,
    seed: int = 0,
) -> tuple[FourierTrajectory, dict[str, float]]:
    """Optimise the Fourier coefficients; q_min, q_max, qd_max: (n_dof,) limits [rad, rad/s].

    Returns the trajectory and ``{"cond_initial", "cond", "max_q_violation"}``.
    """
    q_min, q_max, qd_max = (np.asarray(x, dtype=float) for x in (q_min, q_max, qd_max))
    if (q_max <= q_min).any() or (qd_max <= 0).any():
        raise ConfigError(f"joint limits need q_min < q_max and qd_max > 0; got {q_min}, "
                          f"{q_max}, {qd_max}")
    n = len(q_min)
    wf = 2 * np.pi / period
    q0 = 0.5 * (q_min + q_max)
    half = 0.5 * (q_max - q_min)
    rng = np.random.default_rng(seed)
    t = np.linspace(0, period, n_samples, endpoint=False)
    scale = np.minimum(0.5 * qd_max / n_harm, 0.3 * half * wf)[:, None]

    def unpack(x):
        ab = x.reshape(2, n, n_harm) * scale
        return FourierTrajectory(wf, ab[0], ab[1], q0)

    def objective(x):
        tr = unpack(x)
        q, qd, qdd = tr.evaluate(t)
        over = (np.maximum(q - q_max, 0) ** 2 + np.maximum(q_min - q, 0) ** 2).sum() \
            + (np.maximum(np.abs(qd) - qd_max, 0) ** 2).sum()
        sv = np.linalg.svd(_stacked(regressor, base, friction, q, qd, qdd), compute_uv=False)
        cond = sv[0] / max(sv[-1], 1e-300)
        return float(np.log(cond) + 1e3 * over)

    x0 = rng.uniform(-1, 1, 2 * n * n_harm)
    cond0 = regressor_condition(regressor, unpack(x0), n_samples, base, friction)
    res = scipy.optimize.minimize(objective, x0, method="L-BFGS-B",
                                  options={"maxiter": max_iter, "maxfun": max_iter * 40})
    traj = unpack(res.x)
    # make it feasible: shrink amplitudes until limits hold on a fine grid
    tf = np.linspace(0, period, 20 * n_samples, endpoint=False)
    for _ in range(50):
        q, qd, _ = traj.evaluate(tf)
        viol = max(float((q - q_max).max()), float((q_min - q).max()),
                   float((np.abs(qd) - qd_max).max()))
        if viol <= 0:
            break
        traj = FourierTrajectory(wf, traj.a * 0.95, traj.b * 0.95, q0)
    return traj, {"cond_initial": cond0,
                  "cond": regressor_condition(regressor, traj, n_samples, base, friction),
                  "max_q_violation": max(viol, 0.0)}


__all__ = ["FourierTrajectory", "optimize_excitation", "regressor_condition"]
