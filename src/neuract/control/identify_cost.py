"""``neuract identify``'s reference points and run-time estimates.

References: every fitted model is shown beside two models that need no fit, so that a fit that
does worse than doing nothing is seen as such:

* the training mean: each joint's mean training torque, predicted for every sample;
* the nominal model: the arm description's rigid-body inverse dynamics (its masses, inertias
  and no friction), where the arm is known.

Run time: an estimate, made before the fit, from timing the fit's own operations on a few
samples on this machine and scaling them by the sample and step counts (the rigid-body
regressor per sample; for the learned models one optimiser step on a minibatch, times the
epochs and minibatches; the physically consistent fit: up to its L-BFGS iteration budget). On
a 2-core machine, 10k samples took about 10 minutes for hybrid and lagrangian and 78 s for
mlp (60 epochs each).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

BATCH = 512
"""minibatch of :func:`neuract.fit.inverse_dynamics.fit_inverse_model`"""
PROBE = 256
"""samples the regressor is timed on"""
CONSISTENT_ITERS = 500
"""L-BFGS iterations of the consistent fit, at most (its max_iter)"""
CONSISTENT_PROBE = (32, 128)
"""samples the consistent fit is timed on (its iteration cost: fixed + per sample)"""


def _timed(fn: Callable[[], Any], repeat: int = 2) -> float:
    """Fastest of ``repeat`` timed calls [s], after one untimed call (warm-up)."""
    fn()
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _consistent_iteration(robot, train: tuple[torch.Tensor, ...], n: int, iters: int = 10
                          ) -> float:
    """Seconds of one L-BFGS iteration of the consistent fit on ``n`` samples: timed on two
    small probes and extrapolated linearly in the sample count."""
    from neuract.fit.least_squares import identify_consistent

    q, qd, qdd, tau = train
    prior = robot.inertial_parameters().reshape(-1, 10)
    ks = [min(k, len(q)) for k in CONSISTENT_PROBE]
    ts = []
    for k in ks:
        y = robot.regressor(q[:k], qd[:k], qdd[:k])
        with torch.enable_grad():
            ts.append(_timed(lambda y=y, k=k: identify_consistent(
                y, tau[:k], qd[:k], prior=prior, prior_weight=1e-3, max_iter=iters), 1) / iters)
    if ks[1] == ks[0]:
        return ts[1] * max(1.0, n / ks[1])
    slope = max(ts[1] - ts[0], 0.0) / (ks[1] - ks[0])
    return max(ts[0] - slope * ks[0], 0.0) + slope * n


def _step_seconds(model: torch.nn.Module, q, qd, qdd, tau) -> float:
    """Seconds of one optimiser step (forward, backward, Adam) on a minibatch."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-12)

    def step() -> None:
        opt.zero_grad()
        loss = ((model.inverse(q, qd, qdd) - tau) ** 2).mean()
        loss.backward()
        opt.step()

    return _timed(step)


def expected_seconds(kind: str, train: tuple[torch.Tensor, ...], epochs: int,
                     max_samples: int, robot=None) -> dict[str, Any]:
    """The expected run time [s] of fitting ``kind`` (an identify model type) on ``train``
    (q, qd, qdd, tau), and how it was estimated: ``{"seconds", "basis", "upper_bound"}``.
    robot: the arm model (the rigid-body models and hybrid). Leaves the caller's random
    state and the models it fits untouched (it times throwaway copies)."""
    from neuract.models import HybridModel, LagrangianModel, MLPModel

    q, qd, qdd, tau = train
    n, dof = q.shape
    seconds, parts, upper = 0.0, [], False
    k = min(n, PROBE)
    with torch.random.fork_rng(), torch.no_grad():
        if kind in ("least_squares", "consistent", "hybrid") and robot is not None:
            t_reg = _timed(lambda: robot.regressor(q[:k], qd[:k], qdd[:k]), 1) / k
            seconds += t_reg * n
            parts.append(f"rigid-body regressor {t_reg * 1e3:.2f} ms/sample x {n}")
            if kind == "consistent":
                t_iter = _consistent_iteration(robot, (q, qd, qdd, tau), n)
                seconds += t_iter * CONSISTENT_ITERS
                upper = True
                parts.append(f"up to {CONSISTENT_ITERS} L-BFGS iterations of "
                             f"{t_iter * 1e3:.1f} ms")
    if kind in ("lagrangian", "mlp", "hybrid"):
        m = min(n, max_samples)
        b = min(BATCH, m)
        with torch.random.fork_rng():
            if kind == "mlp":
                model = MLPModel(dof)
            elif kind == "lagrangian":
                model = LagrangianModel(dof)
            else:
                model = HybridModel(_NominalBase(robot, dof))
            t_step = _step_seconds(model, q[:b], qd[:b], qdd[:b], tau[:b])
        steps = epochs * math.ceil(m / BATCH)
        seconds += t_step * steps
        parts.append(f"{steps} optimiser steps ({epochs} epochs of {m} samples) of "
                     f"{t_step * 1e3:.1f} ms")
    return {"seconds": seconds, "basis": "; ".join(parts) or "nothing to time",
            "upper_bound": upper}


class _NominalBase(torch.nn.Module):
    """A stand-in base for timing a hybrid model: the description's rigid-body torque
    through its regressor (what the fitted base computes), or zero without a robot."""

    def __init__(self, robot, dof: int):
        super().__init__()
        self.robot, self.n_dof = robot, dof
        if robot is not None:
            self.beta = robot.inertial_parameters().reshape(-1).double()

    def inverse(self, q, qd, qdd):
        if self.robot is None:
            return torch.zeros_like(q)
        return (self.robot.regressor(q, qd, qdd).double() @ self.beta).to(q)


def duration(seconds: float) -> str:
    """``45 s``, ``3.2 min``, ``1.5 h``."""
    if seconds < 90:
        return f"{max(seconds, 0.1):.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def references(train: tuple[torch.Tensor, ...], parts: dict[str, tuple[torch.Tensor, ...]],
               robot=None) -> dict[str, dict[str, Any]]:
    """nMSE per joint of the reference models on each of ``parts`` (name -> (q, qd, qdd,
    tau)): ``training mean`` and ``nominal model`` (None where ``robot`` is None)."""
    from neuract.models import nmse

    mean = train[3].mean(0)
    out: dict[str, dict[str, Any]] = {
        "training mean": {name: nmse(mean.expand_as(p[3]), p[3]).tolist()
                          for name, p in parts.items()}}
    if robot is None:
        out["nominal model"] = {name: None for name in parts}
        return out
    with torch.no_grad():
        out["nominal model"] = {
            name: nmse(torch.cat([robot.inverse_dynamics(p[0][i:i + 4000].to(robot.dtype),
                                                         p[1][i:i + 4000].to(robot.dtype),
                                                         p[2][i:i + 4000].to(robot.dtype))
                                  for i in range(0, len(p[0]), 4000)]).double(),
                       p[3]).tolist()
            for name, p in parts.items()}
    return out


__all__ = ["duration", "expected_seconds", "references"]
