"""The score of learned inverse-dynamics models: per-joint normalised MSE.

The training loop (:func:`neuract.fit.inverse_dynamics.fit_inverse_model`) lives in
:mod:`neuract.fit`, above the models it trains in the package layering.
"""

from __future__ import annotations

import torch


def nmse(pred: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """Per-joint normalised MSE (n_dof,): MSE / variance of the target."""
    return ((pred - tau) ** 2).mean(0) / tau.var(0).clamp_min(1e-12)


__all__ = ["nmse"]
