"""Streaming estimates from a NeuralActuator: torque, external force, contact gate, condition.

:func:`estimate` runs every history window of a trajectory (measured telemetry: estimator
mode) through the model and aligns the outputs with the trajectory's samples; the first
``history - 1`` samples have no full history and are marked ``valid = False`` (NaN outputs).
:func:`estimator` wraps it as an :data:`neuract.eval.estimation.Estimator`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from neuract.neuralactuator.features import windows
from neuract.neuralactuator.model import NeuralActuator


@torch.no_grad()
def estimate(model: NeuralActuator, traj: Any, batch_size: int = 4096) -> dict[str, np.ndarray]:
    """Per-sample outputs for a trajectory with T samples.

    Returns ``tau`` (T, J) [N m], ``ee_force`` (T, 3) [N] (raw force head), ``contact_prob``
    (T,), ``ee_force_gated`` (T, 3) [N] (force where contact_prob > 0.5, else 0),
    ``condition_prob_per_joint`` (T, J, K), ``condition_prob`` (T,) probability that any motor
    is not normal (1 - prod_j P(normal_j)), ``valid`` (T,) bool.
    """
    cfg = model.cfg
    model.eval()
    x = windows(traj, cfg.channels, cfg.n_joints, cfg.history)
    outs = [model(x[i:i + batch_size]) for i in range(0, len(x), batch_size)]
    tau, force, gate, cond = (torch.cat(o).double().numpy() for o in zip(*outs))
    T, pad = len(traj["t"]), cfg.history - 1

    def full(v: np.ndarray) -> np.ndarray:
        out = np.full((T, *v.shape[1:]), np.nan)
        out[pad:] = v
        return out

    p = 1.0 / (1.0 + np.exp(-gate))
    cp = np.exp(cond - cond.max(-1, keepdims=True))
    cp /= cp.sum(-1, keepdims=True)
    valid = np.zeros(T, bool)
    valid[pad:] = True
    return {
        "tau": full(tau),
        "ee_force": full(force),
        "contact_prob": full(p),
        "ee_force_gated": full(force * (p > 0.5)[:, None]),
        "condition_prob_per_joint": full(cp),
        "condition_prob": full(1.0 - np.prod(cp[..., 0], axis=-1)),
        "valid": valid,
    }


def estimator(model: NeuralActuator, batch_size: int = 4096):
    """``est(traj) -> dict`` for :func:`neuract.eval.estimation.evaluate_estimator`."""

    def est(traj: Any) -> dict[str, np.ndarray]:
        return estimate(model, traj, batch_size)

    return est


__all__ = ["estimate", "estimator"]
