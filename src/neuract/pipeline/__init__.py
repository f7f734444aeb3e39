"""End-to-end pipelines: twin / NAD experiments (NeuralActuator + baselines, one protocol),
the ``evaluate`` and ``estimate`` verbs, and the reports they write.

The NeuralActuator itself (training, rollouts, estimates) lives in :mod:`neuract.neuralactuator`.

- :mod:`.baselines`: MuJoCo default servo, fitted actuator families, tau = Kt I, condition.
- :mod:`.experiment`: fit everything on training episodes, score on test episodes.
- :mod:`.twin_experiment`, :mod:`.nad_experiment`: the two data sources.
- :mod:`.report`: results JSON, summary tables, Markdown/HTML report.
- :mod:`.verbs`: ``neuract evaluate`` and ``neuract estimate``.
"""

from neuract.pipeline.experiment import ExperimentConfig, ModelSize, RobotSetup, run_experiment
from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment

__all__ = [
    "ExperimentConfig",
    "ModelSize",
    "RobotSetup",
    "TwinExperimentConfig",
    "run_experiment",
    "run_twin_experiment",
]
