"""End-to-end pipelines: twin / NAD experiments (NeuralActuator + baselines, one protocol),
the verbs built on them, and the reports they write.

The NeuralActuator itself (network, training, rollouts, exports) lives in
:mod:`neuract.neuralactuator`, its estimator mode (estimates, streaming) in :mod:`neuract.estimate`.

Library modules (the verbs import them; they import no verb):

- :mod:`.experiment`: fit everything on training episodes, score on test episodes; its
  stages: :mod:`.experiment_config` (options and their checks), :mod:`.splits`,
  :mod:`.baseline_fits`, :mod:`.na_training`, :mod:`.scoring`.
- :mod:`.baselines`: MuJoCo default servo, fitted actuator families, tau = Kt I, condition.
- :mod:`.setups`: the robots (SO-101, OpenManipulator-X arm).
- :mod:`.twin_experiment` (data: :mod:`.twin_data`, :mod:`.twin_gate`), :mod:`.nad_experiment`
  (data: :mod:`.nad_data`): the two data sources.
- :mod:`.report`: results JSON, summary tables, Markdown/HTML report; :mod:`.headline`: its
  headline (the targets, what is not scored and why, NeuralActuator against the best baseline).
- :mod:`.checkpoints`, :mod:`.streaming`, :mod:`.progress`: what the verbs share.

Verb modules, one per verb (``config`` + ``run(cfg)``): :mod:`.evaluate_verb`,
:mod:`.estimate_verb`, :mod:`.simulate_verb`, :mod:`.adapt_verb`, :mod:`.export_verb`.
"""

from neuract.neuralactuator.config import ModelSize
from neuract.pipeline.experiment import run_experiment
from neuract.pipeline.experiment_config import ExperimentConfig
from neuract.pipeline.setups import RobotSetup
from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment

__all__ = [
    "ExperimentConfig",
    "ModelSize",
    "RobotSetup",
    "TwinExperimentConfig",
    "run_experiment",
    "run_twin_experiment",
]
