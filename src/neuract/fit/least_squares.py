"""Inertial-parameter identification by least squares on the regressor ``tau = Y pi``.

- ``base_parameters``: which regressor columns are identifiable (pivoted QR on random
  samples) and how the others fold into them: ``beta = pi[independent] + K pi[dependent]``.
- ``identify_ls``: ordinary (optionally per-joint weighted) least squares for the base
  parameters plus Coulomb and viscous friction columns.
- ``identify_consistent``: physically consistent fit. Each body's 10 parameters come from a
  log-Cholesky factor of its 4x4 pseudo-inertia ``J = U U^T`` (Rucker and Wensing 2022), so
  every ``J`` is positive definite by construction; solved by L-BFGS on the squared torque
  error plus a small pull towards a prior (resolves the unidentifiable directions).

Per-body parameter order (that of ``neuract.robot.regressor``): ``(m, m cx, m cy, m cz, Ixx,
Iyy, Izz, Ixy, Ixz, Iyz)``, inertia about the body frame origin [kg, kg m, kg m^2].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import torch

from neuract.errors import NotPhysicallyConsistent, SchemaError
from neuract.lbfgs import lbfgs
from neuract.models.rigid_body import RigidBodyModel
from neuract.robot.spatial import pi_from_pseudo_inertia, pseudo_inertia

Regressor = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class BaseParameters:
    """Identifiable combinations of the full parameters.

    independent: (n_base,) column indices kept; dependent: the others;
    K: (n_base, n_dep) with ``beta = pi[independent] + K @ pi[dependent]``.
    """

    independent: np.ndarray
    dependent: np.ndarray
    K: np.ndarray

    @property
    def n_base(self) -> int:
        return len(self.independent)

    def project(self, pi: np.ndarray) -> np.ndarray:
        """Base parameters beta (n_base,) of full parameters pi (P,)."""
        pi = np.asarray(pi, dtype=float)
        return pi[self.independent] + self.K @ pi[self.dependent]


def random_states(
    n_dof: int, n: int, q_low=-np.pi, q_high=np.pi, qd_max=2.0, qdd_max=5.0, seed=0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Uniform random (q, qd, qdd): each (n, n_dof) float64 tensors."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(q_low, q_high, (n, n_dof))
    qd = rng.uniform(-qd_max, qd_max, (n, n_dof))
    qdd = rng.uniform(-qdd_max, qdd_max, (n, n_dof))
    return tuple(torch.from_numpy(x) for x in (q, qd, qdd))  # type: ignore[return-value]


def base_parameters(
    regressor: Regressor, n_dof: int, n_samples: int = 100, tol: float = 1e-8, seed: int = 0
) -> BaseParameters:
    """Base-parameter column selection by pivoted QR of Y stacked over random states.

    The rank comes from the singular values of the column-normalised stack (``sv > tol *
    sv_max``); the pivoted QR orders the columns, the first ``rank`` are kept.
    """
    q, qd, qdd = random_states(n_dof, n_samples, seed=seed)
    with torch.no_grad():
        y = regressor(q, qd, qdd)
    w = y.reshape(-1, y.shape[-1]).numpy()
    scale = np.linalg.norm(w, axis=0)
    tiny = scale <= 1e-10 * scale.max()  # round-off columns are zero, not independent
    w[:, tiny] = 0.0
    scale[tiny] = 1.0
    ws = w / scale
    _, _, piv = scipy.linalg.qr(ws, mode="economic", pivoting=True)
    sv = np.linalg.svd(ws, compute_uv=False)
    rank = int((sv > tol * sv[0]).sum()) if sv.size and sv[0] > 0 else 0
    indep = np.sort(piv[:rank])
    dep = np.setdiff1d(np.arange(w.shape[1]), indep)
    if dep.size:
        k, *_ = np.linalg.lstsq(w[:, indep], w[:, dep], rcond=None)
        k[np.abs(k) < 1e-10] = 0.0
    else:
        k = np.zeros((rank, 0))
    return BaseParameters(indep, dep, k)


def friction_regressor(
    qd: torch.Tensor, viscous: bool = True, coulomb: bool = True, v_eps: float = 0.01
) -> torch.Tensor:
    """Friction columns (..., n_dof, k n_dof): per joint ``qd_j`` and/or ``tanh(qd_j / eps)``."""
    blocks = []
    eye = torch.eye(qd.shape[-1], dtype=qd.dtype)
    if viscous:
        blocks.append(qd.unsqueeze(-1) * eye)
    if coulomb:
        blocks.append(torch.tanh(qd / v_eps).unsqueeze(-1) * eye)
    if not blocks:
        return qd.new_zeros((*qd.shape, 0))
    return torch.cat(blocks, dim=-1)


@dataclass
class LeastSquaresResult:
    """beta: identified (base) inertial parameters; fv, fc: (n_dof,) friction; columns: the
    regressor columns ``beta`` multiplies; cond: condition number of the weighted regressor;
    rmse: (n_dof,) training torque RMSE [N m]."""

    beta: np.ndarray
    fv: np.ndarray
    fc: np.ndarray
    columns: np.ndarray
    cond: float
    rmse: np.ndarray
    extra: dict = field(default_factory=dict)

    def model(self, regressor: Regressor, v_eps: float = 0.01):
        """A ``RigidBodyModel`` with these parameters."""

        return RigidBodyModel(
            regressor, torch.from_numpy(self.beta), len(self.fv), self.columns,
            torch.from_numpy(self.fv), torch.from_numpy(self.fc), v_eps,
        )


def _check(name: str, x: torch.Tensor) -> None:
    if not torch.isfinite(x).all():
        raise SchemaError(f"{name} holds non-finite values; finite samples only")


def identify_ls(
    Y: torch.Tensor,
    tau: torch.Tensor,
    qd: torch.Tensor,
    base: BaseParameters | None = None,
    viscous: bool = True,
    coulomb: bool = True,
    weighted: bool = True,
    v_eps: float = 0.01,
) -> LeastSquaresResult:
    """Least squares ``tau = Y[:, base] beta + F(qd) phi``.

    Y: (N, n_dof, P) regressor; tau, qd: (N, n_dof). ``weighted`` scales each joint's rows
    by the inverse of that joint's torque standard deviation (a standard first step of
    weighted least squares), so that a joint with large torques does not dominate.
    """
    for name, x in (("Y", Y), ("tau", tau), ("qd", qd)):
        _check(name, x)
    n_dof = tau.shape[-1]
    cols = np.arange(Y.shape[-1]) if base is None else base.independent
    fr = friction_regressor(qd, viscous, coulomb, v_eps)
    a = torch.cat([Y[..., cols], fr], dim=-1).double()
    b = tau.double()
    w = 1.0 / b.std(dim=0).clamp_min(1e-6) if weighted else torch.ones(n_dof, dtype=b.dtype)
    aw = (a * w[:, None]).reshape(-1, a.shape[-1]).numpy()
    bw = (b * w).reshape(-1).numpy()
    x, *_ = np.linalg.lstsq(aw, bw, rcond=None)
    sv = np.linalg.svd(aw, compute_uv=False)
    cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")
    pred = (a.numpy() @ x)
    rmse = np.sqrt(((pred - b.numpy()) ** 2).mean(axis=0))
    nb = len(cols)
    fx = x[nb:]
    fv = fx[:n_dof] if viscous else np.zeros(n_dof)
    fc = fx[n_dof * viscous: n_dof * (viscous + 1)] if coulomb else np.zeros(n_dof)
    return LeastSquaresResult(x[:nb], fv, fc, np.asarray(cols), cond, rmse)


# ---------------------------------------------------------------- physical consistency


# The 4x4 pseudo-inertia map and its inverse are the core's (same parameter order).
params_from_pseudo_inertia = pi_from_pseudo_inertia


def log_cholesky_to_params(theta: torch.Tensor) -> torch.Tensor:
    """(..., 10) log-Cholesky coordinates ``(alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3)``
    -> (..., 10) inertial parameters whose pseudo-inertia is positive definite."""
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = theta.unbind(-1)
    z, one = torch.zeros_like(a), torch.ones_like(a)
    u = torch.stack(
        [torch.stack([d1.exp(), s12, s13, t1], -1), torch.stack([z, d2.exp(), s23, t2], -1),
         torch.stack([z, z, d3.exp(), t3], -1), torch.stack([z, z, z, one], -1)], -2,
    ) * a.exp()[..., None, None]
    return params_from_pseudo_inertia(u @ u.transpose(-1, -2))


def params_to_log_cholesky(pi10: torch.Tensor) -> torch.Tensor:
    """Inverse of ``log_cholesky_to_params``; raises when a pseudo-inertia is not PD."""
    J = pseudo_inertia(pi10)
    flip = torch.flip(torch.flip(J, [-1]), [-2])
    L, info = torch.linalg.cholesky_ex(flip)
    if (info != 0).any():
        raise NotPhysicallyConsistent(
            f"pseudo-inertia not positive definite for bodies {torch.nonzero(info).flatten()}"
            "; accepted: mass > 0 and inertia satisfying the triangle inequalities"
        )
    u = torch.flip(torch.flip(L, [-1]), [-2])
    a = torch.log(u[..., 3, 3])
    u = u / a.exp()[..., None, None]
    return torch.stack(
        [a, u[..., 0, 0].log(), u[..., 1, 1].log(), u[..., 2, 2].log(), u[..., 0, 1],
         u[..., 1, 2], u[..., 0, 2], u[..., 0, 3], u[..., 1, 3], u[..., 2, 3]], -1,
    )


def default_prior(n_bodies: int, mass: float = 1.0, radius: float = 0.1) -> torch.Tensor:
    """A generic prior (n_bodies, 10): solid spheres of ``mass`` [kg] and ``radius`` [m]."""
    i = 0.4 * mass * radius**2
    row = torch.tensor([mass, 0, 0, 0, i, i, i, 0, 0, 0], dtype=torch.float64)
    return row.repeat(n_bodies, 1)


def identify_consistent(
    Y: torch.Tensor,
    tau: torch.Tensor,
    qd: torch.Tensor,
    prior: torch.Tensor | None = None,
    prior_weight: float = 1e-4,
    viscous: bool = True,
    coulomb: bool = True,
    v_eps: float = 0.01,
    max_iter: int = 500,
) -> LeastSquaresResult:
    """Physically consistent fit of all 10 parameters of every body plus friction.

    Y: (N, n_dof, 10 n_bodies) full regressor; tau, qd: (N, n_dof); prior: (n_bodies, 10)
    consistent starting point and regulariser (default: generic spheres). Minimises the
    per-joint-normalised squared torque error + ``prior_weight * |pi - prior|^2``; friction
    coefficients are kept >= 0 by a softplus. Returns ``beta`` = full parameters (columns =
    all), and ``extra["pseudo_inertia_min_eig"]`` per body.
    """
    for name, x in (("Y", Y), ("tau", tau), ("qd", qd)):
        _check(name, x)
    n_dof = tau.shape[-1]
    n_bodies = Y.shape[-1] // 10
    prior = default_prior(n_bodies) if prior is None else torch.as_tensor(prior).double()
    theta = params_to_log_cholesky(prior).clone().requires_grad_(True)
    nf = int(viscous) + int(coulomb)
    phi = torch.full((nf * n_dof,), -3.0, dtype=torch.float64, requires_grad=True)
    fr = friction_regressor(qd.double(), viscous, coulomb, v_eps)
    Y, tau = Y.double(), tau.double()
    w = 1.0 / tau.std(dim=0).clamp_min(1e-6)

    def loss_fn() -> torch.Tensor:
        pi = log_cholesky_to_params(theta).reshape(-1)
        pred = Y @ pi + fr @ torch.nn.functional.softplus(phi)
        data = (((pred - tau) * w) ** 2).mean()
        return data + prior_weight * ((pi - prior.reshape(-1)) ** 2).sum()

    lbfgs([theta, phi], loss_fn, max_iter, tolerance_change=1e-14, history_size=100)
    with torch.no_grad():
        pi = log_cholesky_to_params(theta)
        f = torch.nn.functional.softplus(phi).numpy()
        pred = Y @ pi.reshape(-1) + fr @ torch.from_numpy(f)
        rmse = ((pred - tau) ** 2).mean(0).sqrt().numpy()
        eig = torch.linalg.eigvalsh(pseudo_inertia(pi)).min(-1).values.numpy()
        sv = torch.linalg.svdvals((Y * w[:, None]).reshape(-1, Y.shape[-1]))
    fv = f[:n_dof] if viscous else np.zeros(n_dof)
    fc = f[n_dof * viscous:] if coulomb else np.zeros(n_dof)
    return LeastSquaresResult(
        pi.reshape(-1).numpy(), fv, fc, np.arange(Y.shape[-1]),
        float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf"), rmse,
        {"pseudo_inertia_min_eig": eig.tolist(), "params": pi.numpy()},
    )


__all__ = [
    "BaseParameters",
    "LeastSquaresResult",
    "base_parameters",
    "default_prior",
    "friction_regressor",
    "identify_consistent",
    "identify_ls",
    "log_cholesky_to_params",
    "params_from_pseudo_inertia",
    "params_to_log_cholesky",
    "pseudo_inertia",
    "random_states",
]
