"""Evaluation metrics (numpy): joint error, force error, contact gate, condition, torque.

Joint, force and torque errors live here; the contact gate in :mod:`neuract.eval.gate`, the
condition metrics in :mod:`neuract.eval.classification`, the input checks in
:mod:`neuract.eval.checks`; every metric is importable from this module.

Conventions
-----------
- Shapes: batch/time dimensions first, the quantity last: ``q (..., n_joints)`` [rad],
  ``f (..., 3)`` [N], ``tau (..., n_joints)`` [N m]; per-sample masks have the leading shape
  ``(...)`` (or ``(..., n_joints)`` for per-joint masks).
- A mask is True where a sample counts. Values under a False mask may be NaN (e.g. missing
  force labels); a NaN or inf anywhere a mask is True raises :class:`SchemaError`. Without a
  mask every value must be finite.
- Shape mismatches raise :class:`SchemaError` naming both arrays and their shapes.
- Empty segments (e.g. no contact samples) give ``None`` in the result dictionaries together
  with their sample count 0, never a silent NaN.

Definitions
-----------
- Joint MAE [deg]: mean over samples of ``|q_pred - q_true|`` per joint, in degrees.
- Force MAE [N]: mean over labelled samples of the Euclidean norm ``||f_pred - f_true||_2``,
  reported over all labelled samples and separately on contact and no-contact samples; the
  per-axis mean absolute errors are reported beside it.
- Contact gate: the gate fires where ``p_contact >= threshold``. Precision, recall and F1 are
  per sample. A *contact event* is a maximal run of consecutive (valid) contact samples
  ``[i0, i1]``; its *detection latency* is ``t[k] - t[i0]`` where ``k`` is the first sample
  in ``[i0, i1]`` at which the gate fires (0 when the gate is already on at onset; for a gate
  that decides sample k only later, e.g. a fixed-lag gate, ``decided_t[k] - t[i0]``). An event
  during which the gate never fires is *missed* and has no latency; latency statistics are
  over detected events and the miss count is reported beside them.
- Gate errors at label changes: a *label change* is the midpoint in time between two
  consecutive valid samples whose contact labels differ. For each band ``b`` of
  :data:`GATE_CHANGE_BANDS_S` the gate result reports the share of false alarms and of misses
  that lie within ``b`` seconds of a label change, and the F1 over only the samples farther
  than ``b`` from every label change (the gate's errors away from onsets and releases).
- Condition: accuracy of the arg-max class; ROC AUC from the rank (Mann-Whitney) statistic
  with tied scores counted one half; multi-class AUC is the macro one-vs-rest mean.
- Torque RMSE [N m]: root mean square of ``tau_pred - tau_true`` per joint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from neuract.errors import SchemaError
from neuract.eval.checks import (
    _finite_where,
    _float,
    _mask,
    _mean_or_none,
    _per_joint_mean,
    _same_shape,
)
from neuract.eval.classification import (
    balanced_accuracy,  # noqa: F401  (importable from here, as before)
    condition_metrics,
    confusion_matrix,
    roc_auc,
)
from neuract.eval.gate import (
    GATE_CHANGE_BANDS_S,  # noqa: F401  (importable from here, as before)
    GateCounts,
    decision_f1,
    gate_counts,
    gate_metrics,
    true_runs,
)

__all__ = [
    "GateCounts",
    "condition_metrics",
    "confusion_matrix",
    "decision_f1",
    "force_mae",
    "gate_counts",
    "gate_metrics",
    "joint_mae_deg",
    "joint_mae_summary",
    "roc_auc",
    "torque_rmse",
    "true_runs",
]


# ---------------------------------------------------------------------------- joints
def joint_mae_deg(q_pred: Any, q_true: Any, mask: Any = None) -> np.ndarray:
    """Per-joint mean absolute error [deg], shape (n_joints,).

    q_pred, q_true: (..., n_joints) joint positions [rad]; mask: (...) or (..., n_joints).
    Raises :class:`SchemaError` if a joint has no sample under the mask.
    """
    return np.degrees(_per_joint_mean(q_pred, q_true, mask, ("q_pred", "q_true"), np.abs))


def joint_mae_summary(q_pred: Any, q_true: Any, joint_names: Sequence[str], mask: Any = None,
                      gripper: str | None = "gripper") -> dict[str, Any]:
    """Joint MAE [deg] per joint plus arm mean/worst and the gripper on its own.

    Returns ``{"per_joint": {name: deg}, "arm_mean": deg, "arm_max": deg, "gripper": deg or
    None}``; the arm joints are all joints except ``gripper`` (if present).
    """
    mae = joint_mae_deg(q_pred, q_true, mask)
    names = list(joint_names)
    if len(names) != mae.shape[0]:
        raise SchemaError(f"joint_names has {len(names)} names {names} but the arrays have "
                          f"{mae.shape[0]} joints")
    arm = [i for i, n in enumerate(names) if n != gripper]
    grip = [i for i, n in enumerate(names) if n == gripper]
    return {
        "per_joint": {n: float(v) for n, v in zip(names, mae)},
        "arm_mean": float(mae[arm].mean()) if arm else None,
        "arm_max": float(mae[arm].max()) if arm else None,
        "gripper": float(mae[grip[0]]) if grip else None,
    }


# ----------------------------------------------------------------------------- force
def force_mae(f_pred: Any, f_true: Any, contact: Any, mask: Any = None) -> dict[str, Any]:
    """Force MAE [N] on all labelled, contact and no-contact samples.

    f_pred, f_true: (..., 3) end-effector force [N]; contact: (...) bool; mask: (...) bool,
    True where ``f_true`` is a real label (``ee_force_mask``); unlabelled samples may be NaN.
    Returns ``{"all", "contact", "no_contact"}`` (norm MAE [N] or None when empty),
    ``"per_axis"`` (3 MAEs [N] over all labelled samples) and sample counts.
    """
    p, t = _float(f_pred, "f_pred"), _float(f_true, "f_true")
    _same_shape(p, t, "f_pred", "f_true")
    if p.ndim < 1 or p.shape[-1] != 3:
        raise SchemaError(f"f_pred has shape {p.shape}; expected (..., 3)")
    lead = p.shape[:-1]
    c = _mask(contact, lead, "contact", per_last=False)
    m = _mask(mask, lead, "mask", per_last=False)
    m3 = np.broadcast_to(m[..., None], p.shape)
    _finite_where(p, m3, "f_pred")
    _finite_where(t, m3, "f_true")
    diff = np.where(m3, p - t, 0.0)
    err = np.linalg.norm(diff, axis=-1)
    on, off = m & c, m & ~c
    return {
        "all": _mean_or_none(err[m]),
        "contact": _mean_or_none(err[on]),
        "no_contact": _mean_or_none(err[off]),
        "per_axis": np.abs(diff[m]).mean(0).tolist() if m.any() else None,
        "n_all": int(m.sum()),
        "n_contact": int(on.sum()),
        "n_no_contact": int(off.sum()),
    }


# ---------------------------------------------------------------------------- torque
def torque_rmse(tau_pred: Any, tau_true: Any, mask: Any = None) -> np.ndarray:
    """Per-joint torque RMSE [N m], shape (n_joints,); tau: (..., n_joints), mask (...)."""
    return np.sqrt(_per_joint_mean(tau_pred, tau_true, mask, ("tau_pred", "tau_true"),
                                   np.square))
