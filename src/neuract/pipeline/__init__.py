"""End-to-end pipelines: twin / NAD experiments (NeuralActuator + baselines, one protocol),
the ``evaluate`` and ``estimate`` verbs, and the reports they write.

- :mod:`.na_data`, :mod:`.na_train`: pose-only NeuralActuator training through the
  differentiable simulator (simulator and estimator mode), fine-tuning.
- :mod:`.na_eval`: NeuralActuator as a protocol simulator (simulator mode) and estimator.
- :mod:`.baselines`: MuJoCo default servo, fitted actuator families, tau = Kt I, condition.
- :mod:`.experiment`: fit everything on training episodes, score on test episodes.
- :mod:`.twin_experiment`, :mod:`.nad_experiment`: the two data sources.
- :mod:`.report`: results JSON, summary tables, Markdown/HTML report.
- :mod:`.verbs`: ``neuract evaluate`` and ``neuract estimate``.
"""

from neuract.pipeline.experiment import ExperimentConfig, ModelSize, RobotSetup, run_experiment
from neuract.pipeline.na_eval import na_estimate, na_estimator, na_simulator
from neuract.pipeline.na_train import NATrainConfig, train_neuralactuator
from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment

__all__ = [
    "ExperimentConfig",
    "ModelSize",
    "NATrainConfig",
    "RobotSetup",
    "TwinExperimentConfig",
    "na_estimate",
    "na_estimator",
    "na_simulator",
    "run_experiment",
    "run_twin_experiment",
    "train_neuralactuator",
]
