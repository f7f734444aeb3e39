"""Data-generation protocols of the Sensors 2025 study, on any plant ``DynamicsModel``.

- ``pd_steady_states``: rest points of ``tau = Kp (q_d - q) - Kd qd`` (where
  ``Kp (q_d - q) = g(q)``), solved by Newton's method, or simulated to convergence.
- ``constant_velocity_data``: PID + learned-gravity control of ``q_d(t) = q0 + v t``;
  samples kept where the velocity error is below ``tol``; target ``tau - g_hat(q)``.
- ``multisine``: the persistently exciting reference (5 frequencies, joint 2 a cosine with
  a phase shift), with analytic derivatives.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from neuract.control.computed_torque import PIDController
from neuract.control.simulate import simulate
from neuract.errors import NeuractError
from neuract.models.base import DynamicsModel

FREQS = (0.3, 0.8, 1.2, 1.8, 2.5)  # [rad/s]
AMPS = (1.0, 0.7, 0.5, 0.3, 0.2)  # [rad]


def pd_steady_states(
    plant: DynamicsModel, n: int, kp: float = 100.0, low: float = -np.pi / 2,
    high: float = np.pi / 2, seed: int = 0, iters: int = 30,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n random PD targets -> (q_target, q_rest, tau_rest), each (n, n_dof) float64.

    Newton on ``F(q) = Kp (q_d - q) - g(q) = 0`` with the Jacobian by autograd; raises if
    it has not converged to 1e-10 N m.
    """
    n_dof = plant.n_dof
    rng = np.random.default_rng(seed)
    q_d = torch.from_numpy(rng.uniform(low, high, (n, n_dof)))
    q = q_d.clone()
    for _ in range(iters):
        qv = q.clone().requires_grad_(True)
        with torch.enable_grad():
            res = kp * (q_d - qv) - plant.gravity(qv)
            jac = torch.stack([torch.autograd.grad(res[:, i].sum(), qv, retain_graph=True)[0]
                               for i in range(n_dof)], dim=-2)
        q = (q - torch.linalg.solve(jac, res.detach().unsqueeze(-1)).squeeze(-1)).detach()
    resid = (kp * (q_d - q) - plant.gravity(q)).abs().max()
    if not resid < 1e-8:

        raise NeuractError(f"PD steady states did not converge: residual {float(resid):.3g} N m")
    return q_d, q, kp * (q_d - q)


def pd_steady_states_by_simulation(
    plant: DynamicsModel, q_d: torch.Tensor, kp=100.0, kd=20.0, dt=0.004, duration=6.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Simulate PD from rest at zero to each target (B, n_dof); returns final (q, tau)."""
    T = int(duration / dt)
    ref = q_d.unsqueeze(0).expand(T, *q_d.shape)
    zero = torch.zeros_like(ref)
    out = simulate(plant, PIDController(kp, kd), ref, zero, zero,
                   q0=torch.zeros_like(q_d), qd0=torch.zeros_like(q_d), dt=dt)
    return torch.from_numpy(out["q"][-1]), torch.from_numpy(out["tau"][-1])


def constant_velocity_data(
    plant: DynamicsModel, gravity_hat: Callable[[torch.Tensor], torch.Tensor], n_runs: int,
    v_low=0.3, v_high=0.7, random_sign: bool = True, duration=6.0, dt=0.004, kp=20.0,
    kd=5.0, ki=5.0, tol=1e-3, seed: int = 0, q_low=-np.pi / 2, q_high=np.pi / 2,
    qdd_tol: float | None = None,
) -> dict[str, torch.Tensor]:
    """Constant-velocity runs under ``g_hat(q) + PID``; returns samples (N, n_dof) with
    ``q, qd, tau, target = tau - g_hat(q)`` and the true ``qdd`` where
    ``|qd - v| < tol`` (max over joints) and, with ``qdd_tol``, ``|qdd| < qdd_tol`` (the
    target then really is ``C qd + f`` plus the gravity error). ``random_sign`` draws the
    direction of each joint's velocity at random (else all positive, as in the paper)."""
    rng = np.random.default_rng(seed)
    n_dof = plant.n_dof
    v = rng.uniform(v_low, v_high, (n_runs, n_dof))
    if random_sign:
        v *= rng.choice([-1.0, 1.0], (n_runs, n_dof))
    q0 = rng.uniform(q_low, q_high, (n_runs, n_dof))
    T = int(duration / dt)
    t = np.arange(T)[:, None, None] * dt
    q_d = torch.from_numpy(q0[None] + v[None] * t)
    qd_d = torch.from_numpy(np.broadcast_to(v[None], q_d.shape).copy())
    zero = torch.zeros_like(q_d)
    ctrl = PIDController(kp, kd, ki, lambda q, qd: gravity_hat(q))
    out = simulate(plant, ctrl, q_d, qd_d, zero, q0=q_d[0], qd0=qd_d[0], dt=dt)
    keep = np.abs(out["qd"] - qd_d.numpy()).max(-1) < tol
    if qdd_tol is not None:  # also require (nearly) zero acceleration: tau - g = C qd + f
        keep &= np.abs(out["qdd"]).max(-1) < qdd_tol
    keep[: int(0.5 / dt)] = False  # skip the first half second (integral still building)
    q = torch.from_numpy(out["q"][keep])
    qd = torch.from_numpy(out["qd"][keep])
    tau = torch.from_numpy(out["tau"][keep])
    with torch.no_grad():
        target = tau - gravity_hat(q)
    return {"q": q, "qd": qd, "tau": tau, "target": target,
            "qdd": torch.from_numpy(out["qdd"][keep])}


def multisine(t: np.ndarray, phase1: float = 0.0, phase2: float = 0.2, freqs=FREQS,
              amps=AMPS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q_d1 = sum a sin(w t + phase1), q_d2 = sum a cos(w t + phase2); (T, 2) each."""
    w = np.asarray(freqs)[None]
    a = np.asarray(amps)[None]
    tt = np.asarray(t)[:, None]
    s1, c1 = np.sin(w * tt + phase1), np.cos(w * tt + phase1)
    s2, c2 = np.sin(w * tt + phase2), np.cos(w * tt + phase2)
    q = np.stack([(a * s1).sum(1), (a * c2).sum(1)], -1)
    qd = np.stack([(a * w * c1).sum(1), -(a * w * s2).sum(1)], -1)
    qdd = np.stack([-(a * w**2 * s1).sum(1), -(a * w**2 * c2).sum(1)], -1)
    return tuple(torch.from_numpy(x) for x in (q, qd, qdd))  # type: ignore[return-value]


__all__ = ["AMPS", "FREQS", "constant_velocity_data", "multisine", "pd_steady_states",
           "pd_steady_states_by_simulation"]
