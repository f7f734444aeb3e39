"""Estimators of torque, external force, contact and motor condition: the classical baselines and
NeuralActuator's estimator mode.

- :mod:`.momentum_observer`: generalized momentum observer (sensorless external joint torque)
  and the J^T (damped) pseudo-inverse mapping to an end-effector force.
- :mod:`.residual_force`: model-based residual ``inverse_dynamics - tau`` through J^T.
- :mod:`.force`: both as estimators over trajectories for the evaluation protocol.
- :mod:`.condition`: threshold, SVM and random-forest motor-condition classifiers on windowed
  telemetry features (scikit-learn, the ``peers`` extra).

NeuralActuator's estimator mode (the network is :mod:`neuract.neuralactuator`):

- :mod:`.neural`: per-sample torque, external force, contact gate and motor condition for a
  trajectory (:func:`estimate`), the history windows shared by several models.
- :mod:`.stream`: the same, one telemetry sample at a time (:class:`StreamingEstimator`).
- :mod:`.filters`: the gate's and the condition's decision filters.
- :mod:`.calibrate`: their thresholds, smoothing and decision lag from labelled episodes.
- :mod:`.gate_rnn`: training of the recurrent contact gate.
"""

from neuract.estimate.calibrate import (
    calibrate_condition,
    calibrate_gate,
    select_condition_smoothing,
    select_gate_filter,
)
from neuract.estimate.condition import (
    CONDITION_BASELINES,
    RandomForestCondition,
    SVMCondition,
    ThresholdCondition,
    WindowFeatures,
    condition_estimator,
    make_condition_baseline,
    window_features,
)
from neuract.estimate.force import FORCE_METHODS, force_estimator
from neuract.estimate.momentum_observer import (
    MomentumObserver,
    momentum_observer,
    momentum_terms,
    torque_to_force,
)
from neuract.estimate.neural import EstimateInputs, estimate, estimate_inputs, estimator
from neuract.estimate.residual_force import differentiate, residual_force, residual_torques
from neuract.estimate.stream import StreamingEstimator

__all__ = [
    "EstimateInputs",
    "StreamingEstimator",
    "calibrate_condition",
    "calibrate_gate",
    "estimate",
    "estimate_inputs",
    "estimator",
    "select_condition_smoothing",
    "select_gate_filter",
    "CONDITION_BASELINES",
    "FORCE_METHODS",
    "MomentumObserver",
    "RandomForestCondition",
    "SVMCondition",
    "ThresholdCondition",
    "WindowFeatures",
    "condition_estimator",
    "differentiate",
    "force_estimator",
    "make_condition_baseline",
    "momentum_observer",
    "momentum_terms",
    "residual_force",
    "residual_torques",
    "torque_to_force",
    "window_features",
]
