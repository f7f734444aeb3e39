"""The feature channels' names and the torch-free arithmetic of the computed ones: what
:mod:`neuract.neuralactuator.features` builds for whole episodes and
:class:`~neuract.runtime.stream.StreamCore` one sample at a time (the identification's
regressors, running-sum solution and forgetting factor)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

EFFORT_CHANNELS = ("current", "load")
DERIVED = ("pos_error",)
PHYSICS_CHANNELS = ("tau_gravity", "jac_x", "jac_y", "jac_z")
CONTEXT_CHANNELS = ("move_dir", "effort_slow", "pos_error_slow")
REFERENCE_CHANNELS = ("ref_error", "ref_age")
IDENT_CHANNELS = ("id_gain", "id_friction", "id_damping", "id_offset", "id_resid",
                  "id_err_move", "id_err_still", "id_effort")
IDENT_RIDGE = 1.0
"""ridge term of the running identification's normal equations (about one sample's weight:
keeps the first samples' coefficients finite while a regressor has not varied yet)"""
MOVE_SPEED = 0.05
"""joint speed [rad/s] above which ``move_dir`` takes the sign of the velocity"""

def source_channels(channels: Sequence[str]) -> tuple:
    """The channels that must be read from data (``channels`` minus derived ones)."""
    return tuple(c for c in channels if c not in DERIVED)

def ident_regressors(tau_gravity: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """The running identification's regressors (..., n, 4): gravity torque,
    ``tanh(qd / MOVE_SPEED)``, ``qd`` and 1, from tau_gravity, qd: (..., n)."""
    return np.stack([tau_gravity, np.tanh(qd / MOVE_SPEED), qd, np.ones_like(qd)], axis=-1)

def _mean(total: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """total / weight where some weight was summed, else 0 (a weight decayed by forgetting
    stays a weight: it is never floored at one sample)."""
    total, weight = np.asarray(total, dtype=np.float64), np.asarray(weight, dtype=np.float64)
    return np.divide(total, weight, out=np.zeros(np.broadcast(total, weight).shape),
                     where=weight > 0)

def ident_from_sums(sxx: np.ndarray, sxy: np.ndarray, syy: np.ndarray, count: np.ndarray,
                    n_move: np.ndarray, err_move: np.ndarray, err_still: np.ndarray,
                    effort: np.ndarray) -> dict[str, np.ndarray]:
    """:data:`IDENT_CHANNELS` from the running sums over the samples so far (each (...)
    unless noted): sxx (..., 4, 4), sxy (..., 4) and syy of the regressors and the effort,
    ``count`` samples, ``n_move`` of them moving, and the sums of the absolute position error
    while moving / resting and of the absolute effort. The ridge fit's coefficients and RMS
    residual, and the three means."""
    b = np.linalg.solve(sxx + IDENT_RIDGE * np.eye(4), sxy[..., None])[..., 0]
    rss = syy - 2.0 * np.einsum("...i,...i", b, sxy) + np.einsum("...i,...ij,...j", b, sxx, b)
    out = {name: b[..., i] for i, name in enumerate(IDENT_CHANNELS[:4])}
    out.update({"id_resid": np.sqrt(np.maximum(rss, 0.0) / np.maximum(count, 1.0)),
                "id_err_move": _mean(err_move, n_move),
                "id_err_still": _mean(err_still, count - n_move),
                "id_effort": effort / count})
    return out

def ident_decay(memory: int) -> float:
    """The identification's forgetting factor: ``1 - 1 / memory`` (1 for memory 0: no
    forgetting)."""
    return 1.0 - 1.0 / memory if memory else 1.0



__all__ = ["CONTEXT_CHANNELS", "DERIVED", "EFFORT_CHANNELS", "IDENT_CHANNELS", "IDENT_RIDGE",
           "MOVE_SPEED", "PHYSICS_CHANNELS", "REFERENCE_CHANNELS", "ident_decay",
           "ident_from_sums", "ident_regressors", "source_channels"]
