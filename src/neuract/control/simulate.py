"""Closed-loop simulation of a plant ``DynamicsModel`` under a controller.

Classical RK4 on ``(q, qd)`` with the torque held over each control period ``dt``
(zero-order hold), optional Gaussian measurement noise on what the controller sees, and a
symmetric torque limit. Batched: every array is (B, n_dof) per step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from neuract.models.base import DynamicsModel


def rk4_step(plant: DynamicsModel, q, qd, tau, h: float):
    """One RK4 step of ``qdd = plant.forward(q, qd, tau)`` over ``h`` seconds."""

    def f(x, v):
        return v, plant.forward(x, v, tau)

    k1q, k1v = f(q, qd)
    k2q, k2v = f(q + 0.5 * h * k1q, qd + 0.5 * h * k1v)
    k3q, k3v = f(q + 0.5 * h * k2q, qd + 0.5 * h * k2v)
    k4q, k4v = f(q + h * k3q, qd + h * k3v)
    q_new = q + h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
    qd_new = qd + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
    return q_new, qd_new


def simulate(
    plant: DynamicsModel,
    controller: Callable[..., torch.Tensor],
    q_d: torch.Tensor,
    qd_d: torch.Tensor,
    qdd_d: torch.Tensor,
    q0: torch.Tensor | None = None,
    qd0: torch.Tensor | None = None,
    dt: float = 0.004,
    substeps: int = 1,
    noise_q: float = 0.0,
    noise_qd: float = 0.0,
    tau_limit: float | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Track the reference ``q_d, qd_d, qdd_d`` (T, B, n_dof) from ``q0, qd0`` (B, n_dof).

    Returns numpy arrays (T, B, n_dof): ``q, qd`` (true state at each control instant),
    ``qdd`` (true acceleration under the applied torque), ``tau`` (applied, after the limit),
    ``q_meas, qd_meas`` (what the controller saw).
    """
    gen = torch.Generator().manual_seed(seed)
    T = q_d.shape[0]
    q = q_d[0].clone() if q0 is None else q0.clone().double()
    qd = qd_d[0].clone() if qd0 is None else qd0.clone().double()
    if hasattr(controller, "reset"):
        controller.reset()
    out = {k: [] for k in ("q", "qd", "qdd", "tau", "q_meas", "qd_meas")}
    with torch.no_grad():
        for t in range(T):
            qm = q + noise_q * torch.randn(q.shape, generator=gen, dtype=q.dtype)
            qdm = qd + noise_qd * torch.randn(qd.shape, generator=gen, dtype=q.dtype)
            tau = controller(qm, qdm, q_d[t], qd_d[t], qdd_d[t], dt)
            if tau_limit is not None:
                tau = tau.clamp(-tau_limit, tau_limit)
            qdd = plant.forward(q, qd, tau)
            for key, val in (("q", q), ("qd", qd), ("qdd", qdd), ("tau", tau),
                             ("q_meas", qm), ("qd_meas", qdm)):
                out[key].append(val.numpy().copy())
            h = dt / substeps
            try:
                for _ in range(substeps):
                    q, qd = rk4_step(plant, q, qd, tau, h)
            except torch.linalg.LinAlgError:  # singular plant mass matrix: a failure, too
                q = torch.full_like(q, float("nan"))
            if not (torch.isfinite(q).all() and torch.isfinite(qd).all()):
                # diverged: pad the rest with NaN so callers can count the failure
                for key in out:
                    out[key] += [np.full_like(out[key][-1], np.nan)] * (T - t - 1)
                break
    return {k: np.stack(v) for k, v in out.items()}


__all__ = ["rk4_step", "simulate"]
