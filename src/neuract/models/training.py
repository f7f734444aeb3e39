"""One small supervised loop for learned inverse-dynamics models.

Loss: mean over joints of the squared torque error divided by that joint's torque variance
(the normalised MSE the benchmarks report), plus an optional model-specific extra term.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from neuract.models.base import DynamicsModel, check_finite


def fit_inverse_model(
    model: DynamicsModel,
    q: torch.Tensor,
    qd: torch.Tensor,
    qdd: torch.Tensor,
    tau: torch.Tensor,
    epochs: int = 200,
    batch_size: int = 512,
    lr: float = 3e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
    extra_loss: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    normalize: bool = True,
) -> list[float]:
    """Train ``model.inverse`` on (N, n_dof) samples with Adam + cosine decay.

    Calls ``model.set_normalization`` first when the model has one. Returns the mean loss of
    each epoch.
    """
    for name, x in (("q", q), ("qd", qd), ("qdd", qdd), ("tau", tau)):
        check_finite(name, x)
    if normalize and hasattr(model, "set_normalization"):
        model.set_normalization(q, qd, qdd, tau)
    gen = torch.Generator().manual_seed(seed)
    w = 1.0 / tau.var(0).clamp_min(1e-8)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    n = q.shape[0]
    steps = max(1, epochs * ((n + batch_size - 1) // batch_size))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, eta_min=lr * 0.02)
    history: list[float] = []
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for start in range(0, n, batch_size):
            idx = perm[start:start + batch_size]
            pred = model.inverse(q[idx], qd[idx], qdd[idx])
            loss = (((pred - tau[idx]) ** 2) * w).mean()
            if extra_loss is not None:
                loss = loss + extra_loss(q[idx], qd[idx], qdd[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        history.append(total / n)
    return history


def nmse(pred: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """Per-joint normalised MSE (n_dof,): MSE / variance of the target."""
    return ((pred - tau) ** 2).mean(0) / tau.var(0).clamp_min(1e-12)


__all__ = ["fit_inverse_model", "nmse"]
