"""Evaluation: metrics, the NeuralActuator rollout/estimation protocol, run reports.

- :mod:`.metrics`: joint MAE [deg], force MAE [N] (contact / no contact), contact-gate
  precision / recall / F1 / detection latency, condition accuracy / ROC AUC, torque RMSE.
- :mod:`.protocol`: windowed open-loop rollouts at horizons 10, 50, 100, 300, 600 and the
  full trajectory (simulator mode); :mod:`.estimation`: estimator-mode scoring. Every
  result record has a ``mode``.
- :mod:`.adapters`: wrap identified models (actuator + joints + plant) as simulators.
- :mod:`.report`: Markdown + self-contained HTML run reports (tables, embedded figures);
  :mod:`.figures`: their figures (rollouts, force traces, confusion matrix).
"""

from neuract.eval.adapters import system_model_simulator
from neuract.eval.estimation import Estimator, evaluate_estimator
from neuract.eval.metrics import (
    GateCounts,
    condition_metrics,
    confusion_matrix,
    force_mae,
    gate_counts,
    gate_metrics,
    joint_mae_deg,
    joint_mae_summary,
    roc_auc,
    torque_rmse,
)
from neuract.eval.protocol import (
    HORIZONS,
    SIM_INPUTS,
    SimBatch,
    Simulator,
    evaluate_rollouts,
    goal_simulator,
    hold_simulator,
    per_window,
    simulate_full,
    window_starts,
)
from neuract.eval.report import (
    Figure,
    Report,
    Table,
    confusion_figure,
    estimator_table,
    force_figure,
    records_table,
    rollout_figure,
    rollout_table,
    write_report,
)

__all__ = [
    "HORIZONS",
    "SIM_INPUTS",
    "Estimator",
    "Figure",
    "GateCounts",
    "Report",
    "SimBatch",
    "Simulator",
    "Table",
    "condition_metrics",
    "confusion_figure",
    "confusion_matrix",
    "evaluate_estimator",
    "evaluate_rollouts",
    "estimator_table",
    "force_figure",
    "force_mae",
    "gate_counts",
    "gate_metrics",
    "goal_simulator",
    "hold_simulator",
    "joint_mae_deg",
    "joint_mae_summary",
    "per_window",
    "records_table",
    "roc_auc",
    "rollout_figure",
    "rollout_table",
    "simulate_full",
    "system_model_simulator",
    "torque_rmse",
    "window_starts",
    "write_report",
]
