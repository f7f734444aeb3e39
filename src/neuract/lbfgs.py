"""Full-batch L-BFGS with a strong-Wolfe line search, shared by the linear/learned fits."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


def lbfgs(params: Iterable[torch.Tensor], loss_fn: Callable[[], torch.Tensor],
          max_iter: int = 500, tolerance_change: float = 1e-16,
          history_size: int = 50) -> float:
    """Minimise ``loss_fn()`` over ``params`` in one L-BFGS call; returns the final loss."""
    opt = torch.optim.LBFGS(list(params), max_iter=max_iter, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-12, tolerance_change=tolerance_change,
                            history_size=history_size)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float(loss_fn())
