"""Learned inverse-dynamics residual on top of a classical controller, with a clamp.

``tau = baseline(q, qd, q_d, qd_d, qdd_d, dt) + clip(r(q_d, qd_d, qdd_d), -clamp, clamp)``.
The residual ``r`` is a feedforward term: it maps the desired motion to the torque the
baseline's model misses (trained on logged data as ``tau - base.inverse(q, qd, qdd)``, or on
the full torque for a model-free PD baseline). The clamp bounds what a wrong network can do:
the classical loop stays in charge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from neuract.control.computed_torque import _gain
from neuract.errors import ConfigError
from neuract.fit.inverse_dynamics import fit_inverse_model
from neuract.models.base import DynamicsModel
from neuract.models.mlp import MLPModel


class ResidualController:
    """baseline: any controller; residual: ``(q, qd, qdd) -> tau`` [N m]; clamp: (n_dof,) or
    scalar bound [N m] on the residual. ``on="reference"`` feeds the desired motion to the
    residual, ``"measured"`` the measured state with the desired acceleration.
    Counters: ``n_calls``, ``n_clamped`` (joint-samples at the bound), ``last_residual``."""

    def __init__(
        self,
        baseline: Callable[..., torch.Tensor],
        residual: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
        clamp: float | Sequence[float],
        on: str = "reference",
    ) -> None:
        if on not in ("reference", "measured"):

            raise ConfigError(f"on={on!r}; accepted: 'reference', 'measured'")
        self.baseline = baseline
        self.residual = residual
        self.clamp = _gain(clamp, "clamp")
        self.on = on
        self.n_calls = 0
        self.n_clamped = 0
        self.last_residual: torch.Tensor | None = None

    def reset(self) -> None:
        if hasattr(self.baseline, "reset"):
            self.baseline.reset()

    def __call__(self, q, qd, q_d, qd_d, qdd_d, dt) -> torch.Tensor:
        with torch.no_grad():
            r = self.residual(q_d, qd_d, qdd_d) if self.on == "reference" else \
                self.residual(q, qd, qdd_d)
        c = self.clamp.to(r)
        clipped = torch.maximum(torch.minimum(r, c), -c)
        self.n_calls += 1
        self.n_clamped += int((clipped != r).sum())
        self.last_residual = clipped
        return self.baseline(q, qd, q_d, qd_d, qdd_d, dt) + clipped


def fit_residual(
    base: DynamicsModel | None,
    q: torch.Tensor,
    qd: torch.Tensor,
    qdd: torch.Tensor,
    tau: torch.Tensor,
    hidden: int = 64,
    epochs: int = 100,
    seed: int = 0,
) -> MLPModel:
    """Fit an MLP to ``tau - base.inverse(q, qd, qdd)`` (``base=None``: to ``tau``)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        target = tau if base is None else tau - base.inverse(q, qd, qdd)
    net = MLPModel(q.shape[-1], hidden=hidden)
    fit_inverse_model(net, q, qd, qdd, target, epochs=epochs, seed=seed)
    return net


__all__ = ["ResidualController", "fit_residual"]
