"""The Sensors 2025 pipeline (Kallel and Iqbal, "Online estimation of manipulator dynamics
for computed torque control"), written for neuract: learn the dynamics term by term.

1. ``GravityNet``: ``g(q)`` from PD steady states (``tau_PD = g(q)`` at rest).
2. ``CoriolisFrictionNet``: ``C(q, qd) qd + f(qd)`` from constant-velocity runs
   (``tau - g_hat(q)`` at ``qdd ~ 0``). Structured regressor: the Coriolis part is a
   quadratic form in ``qd`` with ``q``-dependent coefficients (exactly the physics:
   ``c_i = sum_jk Gamma_ijk(q) qd_j qd_k``), friction is viscous + smoothed Coulomb. The paper
   used a random forest; the structure lets the model extrapolate to speeds it never saw.
3. ``InertiaNet``: ``M(q)`` from excited motion, ``tau - c_hat - g_hat = M(q) qdd``, with
   an exponential diagonal, trained with the data loss plus the physics loss
   ``(qd^T Mdot qd - 2 qd^T c_hat)^2`` (the skew-symmetry of ``Mdot - 2C`` along ``qd``).
   ``param="cholesky"`` (default): ``M = L L^T``, ``L`` lower triangular with ``exp``
   diagonal (positive definite by construction); ``"exp_diag"``: the paper's form, ``exp`` on
   the diagonal of ``M`` itself (symmetric, but positive definite only if the off-diagonal
   terms stay small). ``drop_first_joint=True`` uses the physical fact that ``M`` of a serial
   arm does not depend on the first joint's angle.

``Sensors2025Model`` assembles them behind the ``DynamicsModel`` interface, with the
Coriolis torque either from the regressor (the paper) or from the Christoffel symbols of the
learned ``M`` (``coriolis="christoffel"``: then ``Mdot - 2C`` is skew-symmetric exactly, the
property the paper's stability argument assumes).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.func import jacfwd, vmap

from neuract.errors import ConfigError
from neuract.lbfgs import lbfgs
from neuract.models.base import MODELS, DynamicsModel, check_finite
from neuract.models.mlp import Standardizer, mlp


def _features(q: torch.Tensor) -> torch.Tensor:
    return torch.cat([torch.sin(q), torch.cos(q)], -1)


class GravityNet(nn.Module):
    """``g(q)``: (..., n) [N m] from an MLP on ``(sin q, cos q)``."""

    def __init__(self, n_dof: int, hidden: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.n_dof = n_dof
        self.y_norm = Standardizer(n_dof)
        self.net = mlp(2 * n_dof, n_dof, hidden, layers, "tanh").double()

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return self.y_norm.inverse(self.net(_features(q.double()))).to(q)

    def fit(self, q: torch.Tensor, tau: torch.Tensor, max_iter: int = 1500) -> float:
        """Fit to steady-state torques; q, tau: (N, n). Returns the final scaled MSE."""
        check_finite("q", q), check_finite("tau", tau)
        self.y_norm.fit(tau)
        z = self.y_norm(tau.double())
        return lbfgs(list(self.net.parameters()),
                     lambda: ((self.net(_features(q.double())) - z) ** 2).mean(), max_iter)


class CoriolisFrictionNet(nn.Module):
    """``C(q, qd) qd + f(qd)``: quadratic in ``qd`` with learned ``q``-dependent coefficients,
    plus viscous and tanh-smoothed Coulomb friction (signs free: learned from data)."""

    def __init__(self, n_dof: int, hidden: int = 32, layers: int = 2,
                 v_eps: float = 0.01) -> None:
        super().__init__()
        self.n_dof = n_dof
        self.v_eps = v_eps
        idx = torch.triu_indices(n_dof, n_dof)
        self.register_buffer("pairs", idx)
        self.net = mlp(2 * n_dof, n_dof * idx.shape[1], hidden, layers, "tanh").double()
        self.fv = nn.Parameter(torch.zeros(n_dof, dtype=torch.float64))
        self.fc = nn.Parameter(torch.zeros(n_dof, dtype=torch.float64))

    def coriolis(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """Velocity-product (Coriolis and centrifugal) torque (..., n) [N m]."""
        coef = self.net(_features(q.double())).reshape(*q.shape[:-1], self.n_dof, -1)
        qd = qd.double()
        prods = qd[..., self.pairs[0]] * qd[..., self.pairs[1]]
        return (coef @ prods.unsqueeze(-1)).squeeze(-1).to(q)

    def friction(self, qd: torch.Tensor) -> torch.Tensor:
        """Joint friction (..., n) [N m]."""
        return self.fv.to(qd) * qd + self.fc.to(qd) * torch.tanh(qd / self.v_eps)

    def forward(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        return self.coriolis(q, qd) + self.friction(qd)

    def fit(self, q, qd, target, max_iter: int = 1000) -> float:
        """Fit to ``tau - g_hat(q)`` at constant velocity; all (N, n). Returns the final MSE."""
        for name, x in (("q", q), ("qd", qd), ("target", target)):
            check_finite(name, x)
        s = target.double().std(0).clamp_min(1e-6)
        return lbfgs(list(self.parameters()),
                     lambda: (((self(q, qd) - target) / s) ** 2).mean(), max_iter)


class InertiaNet(nn.Module):
    """``M(q)``: (..., n, n) [kg m^2], symmetric, exponential diagonal (see module doc)."""

    def __init__(self, n_dof: int, hidden: int = 32, layers: int = 2,
                 param: str = "cholesky", drop_first_joint: bool = True) -> None:
        super().__init__()
        if param not in ("cholesky", "exp_diag"):

            raise ConfigError(f"inertia param={param!r}; accepted: 'cholesky', 'exp_diag'")
        self.n_dof, self.param, self.drop = n_dof, param, drop_first_joint
        n_in = 2 * (n_dof - 1) if drop_first_joint else 2 * n_dof
        self.net = mlp(max(n_in, 1), n_dof * (n_dof + 1) // 2, hidden, layers, "tanh").double()
        self.register_buffer("tril", torch.tril_indices(n_dof, n_dof, -1))

    def _single(self, q: torch.Tensor) -> torch.Tensor:
        n = self.n_dof
        x = _features(q[1:] if self.drop else q)
        if x.numel() == 0:
            x = torch.zeros(1, dtype=q.dtype)
        out = self.net(x)
        diag = torch.diag(torch.exp(out[:n]))
        off = torch.zeros(n, n, dtype=out.dtype).index_put((self.tril[0], self.tril[1]), out[n:])
        if self.param == "cholesky":
            low = diag + off
            return low @ low.T
        return diag + off + off.T

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        flat = q.reshape(-1, self.n_dof).double()
        return vmap(self._single)(flat).reshape(*q.shape, self.n_dof).to(q)

    def mdot(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """dM/dt = sum_k dM/dq_k qd_k: (N, n, n), by forward-mode autodiff."""
        dm = vmap(jacfwd(self._single))(q.double())
        return torch.einsum("bijk,bk->bij", dm, qd.double())

    def coriolis(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """Coriolis and centrifugal torque of this M (Christoffel symbols): (..., n) [N m],
        ``c = Mdot qd - 1/2 d(qd^T M qd)/dq``."""
        n = self.n_dof
        fq, fqd = q.reshape(-1, n).double(), qd.reshape(-1, n).double()
        dm = vmap(jacfwd(self._single))(fq)
        c = torch.einsum("bijk,bk,bj->bi", dm, fqd, fqd) \
            - 0.5 * torch.einsum("bj,bjki,bk->bi", fqd, dm, fqd)
        return c.reshape(q.shape).to(q)

    def fit(self, q, qd, qdd, tau_res, coriolis: Callable | None = None,
            lambda_phys: float = 1.0, max_iter: int = 800,
            christoffel: bool = False) -> dict[str, float]:
        """Fit ``M(q) qdd = tau_res`` (+ ``lambda_phys`` x the skew-symmetry loss with the
        learned Coriolis torque ``coriolis(q, qd)``); all (N, n). Returns final losses.

        ``christoffel=True``: ``tau_res`` still contains the Coriolis torque (pass ``tau -
        g_hat - f_hat``) and the data loss is ``|M qdd + c_M(q, qd) - tau_res|^2`` with ``c_M``
        from this network's own Christoffel symbols: the Coriolis effects then also inform M.
        """
        for name, x in (("q", q), ("qd", qd), ("qdd", qdd), ("tau_res", tau_res)):
            check_finite(name, x)
        s = tau_res.double().std(0).clamp_min(1e-6)
        with torch.no_grad():
            c = None if coriolis is None else coriolis(q, qd).double()
            e_scale = float((qd * tau_res).sum(-1).std().clamp_min(1e-6))

        def parts():
            m = self(q)
            pred = (m @ qdd.double().unsqueeze(-1)).squeeze(-1)
            if christoffel:
                pred = pred + self.coriolis(q, qd)
            data = (((pred - tau_res) / s) ** 2).mean()
            if c is None or lambda_phys == 0:
                return data, torch.zeros((), dtype=data.dtype)
            quad = torch.einsum("bi,bij,bj->b", qd.double(), self.mdot(q, qd), qd.double())
            phys = (((quad - 2 * (qd.double() * c).sum(-1)) / e_scale) ** 2).mean()
            return data, phys

        def total():
            data, phys = parts()
            return data + lambda_phys * phys

        lbfgs(list(self.parameters()), total, max_iter)
        with torch.no_grad():
            data, phys = parts()
        return {"data": float(data), "phys": float(phys)}


@MODELS.register("sensors2025")
class Sensors2025Model(DynamicsModel):
    """``tau = M_hat(q) qdd + (C qd + f)_hat(q, qd) + g_hat(q)`` from the three networks."""

    def __init__(self, gravity: GravityNet, coriolis_friction: CoriolisFrictionNet,
                 inertia: InertiaNet, coriolis: str = "regressor") -> None:
        super().__init__()
        if coriolis not in ("regressor", "christoffel"):

            raise ConfigError(f"coriolis={coriolis!r}; accepted: 'regressor', 'christoffel'")
        self.n_dof = gravity.n_dof
        self.g_net, self.cf_net, self.m_net = gravity, coriolis_friction, inertia
        self.coriolis_source = coriolis

    def mass_matrix(self, q: torch.Tensor, qd: torch.Tensor | None = None) -> torch.Tensor:
        return self.m_net(q)

    def gravity(self, q: torch.Tensor) -> torch.Tensor:
        return self.g_net(q)

    def bias(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        if self.coriolis_source == "christoffel":
            c = self.m_net.coriolis(q, qd)
        else:
            c = self.cf_net.coriolis(q, qd)
        return c + self.cf_net.friction(qd) + self.g_net(q)

    def inverse(self, q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
        return (self.m_net(q) @ qdd.unsqueeze(-1)).squeeze(-1) + self.bias(q, qd)

    def forward(self, q: torch.Tensor, qd: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        rhs = (tau - self.bias(q, qd)).unsqueeze(-1)
        return torch.linalg.solve(self.m_net(q), rhs).squeeze(-1)


__all__ = ["CoriolisFrictionNet", "GravityNet", "InertiaNet", "Sensors2025Model"]
