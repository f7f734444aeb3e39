"""Black-box inverse dynamics: an MLP from standardised ``(q, qd, qdd)`` to ``tau``.

Also holds the small building blocks the other learned models share: ``mlp`` and
``Standardizer`` (fixed affine input/output scaling fitted on the training data).
"""

from __future__ import annotations

import torch
from torch import nn

from neuract.models.base import MODELS, DynamicsModel


def mlp(
    n_in: int, n_out: int, hidden: int = 64, layers: int = 2, act: str = "tanh"
) -> nn.Sequential:
    """Fully connected network with ``layers`` hidden layers of width ``hidden``."""
    acts = {"tanh": nn.Tanh, "relu": nn.ReLU, "softplus": nn.Softplus, "silu": nn.SiLU}
    mods: list[nn.Module] = []
    width = n_in
    for _ in range(layers):
        mods += [nn.Linear(width, hidden), acts[act]()]
        width = hidden
    mods.append(nn.Linear(width, n_out))
    return nn.Sequential(*mods)


class Standardizer(nn.Module):
    """``(x - mean) / std`` with buffers fitted by ``fit(x)``; ``inverse`` undoes it."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(n, dtype=torch.float64))
        self.register_buffer("std", torch.ones(n, dtype=torch.float64))

    def fit(self, x: torch.Tensor) -> Standardizer:
        x = x.reshape(-1, x.shape[-1]).double()
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0).clamp_min(1e-6))
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean.to(x)) / self.std.to(x)

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        return z * self.std.to(z) + self.mean.to(z)


@MODELS.register("mlp")
class MLPModel(DynamicsModel):
    """``tau = MLP(q, qd, qdd)``: no physics; ``forward`` by 3 Newton steps on ``inverse``."""

    newton_steps = 3

    def __init__(self, n_dof: int, hidden: int = 128, layers: int = 2, act: str = "tanh") -> None:
        super().__init__()
        self.n_dof = n_dof
        self.x_norm = Standardizer(3 * n_dof)
        self.y_norm = Standardizer(n_dof)
        self.net = mlp(3 * n_dof, n_dof, hidden, layers, act).double()

    def set_normalization(self, q, qd, qdd, tau) -> None:
        """Fit the input/output scaling on training data (all (N, n_dof))."""
        self.x_norm.fit(torch.cat([q, qd, qdd], -1))
        self.y_norm.fit(tau)

    def inverse(self, q: torch.Tensor, qd: torch.Tensor, qdd: torch.Tensor) -> torch.Tensor:
        x = self.x_norm(torch.cat([q, qd, qdd], -1))
        return self.y_norm.inverse(self.net(x.to(self.net[0].weight)).to(q))


__all__ = ["MLPModel", "Standardizer", "mlp"]
