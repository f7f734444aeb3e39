"""The table of ``neuract`` verbs: name -> (module, config class, one-line help).

Kept apart from :mod:`neuract.cli` so that :mod:`neuract.cli_help` (the stored help) can read
it without importing the entry point. Each module defines ``run(cfg)``.
"""

from __future__ import annotations

VERBS: dict[str, tuple[str, str, str]] = {
    "adapt": ("neuract.pipeline.adapt_verb", "AdaptConfig", "fine-tune a checkpoint on a new unit"),
    "control": ("neuract.control.cli_control", "ControlConfig", "replay-test model-based control"),
    "demo": ("neuract.demo", "DemoConfig", "twin SO-101 -> NeuralActuator + baselines -> report"),
    "estimate": ("neuract.pipeline.estimate_verb", "EstimateConfig",
                 "stream telemetry through a model"),
    "evaluate": ("neuract.pipeline.evaluate_verb", "EvaluateConfig",
                 "NeuralActuator vs baselines, report"),
    "export": ("neuract.pipeline.export_verb", "ExportConfig",
               "a checkpoint to ONNX / AOTInductor, a fitted servo to MJCF / BAM / TorchScript"),
    "identify": ("neuract.control.cli_identify", "IdentifyConfig", "fit arm dynamics to torques"),
    "fit": ("neuract.fit.verb", "FitConfig", "identify an actuator model from positions only"),
    "ingest": ("neuract.io.ingest", "IngestConfig", "convert telemetry logs into a dataset"),
    "policy": ("neuract.pipeline.policy_verb", "PolicyConfig",
               "train or evaluate a policy on the arm environments (BC, PPO)"),
    "record": ("neuract.record.session", "RecordConfig",
               "record a servo arm live into a dataset (teleoperation, emulated arm)"),
    "score": ("neuract.pipeline.score_verb", "ScoreConfig",
              "score any saved model open loop on episodes: MAE per episode and label"),
    "selfcheck": ("neuract.sim.selfcheck", "SelfCheckConfig", "validate dynamics vs MuJoCo"),
    "sweep": ("neuract.sweep", "SweepConfig",
              "run a verb over a grid or search of its options and seeds (Ray Tune)"),
    "simulate": ("neuract.pipeline.simulate_verb", "SimulateConfig",
                 "replay commands open loop through a learned simulator"),
    "twin": ("neuract.twin.verb", "TwinConfig", "simulate servo arms with hidden physics"),
}

__all__ = ["VERBS"]
