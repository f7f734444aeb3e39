"""NeuralActuator: a telemetry Transformer with torque, force + contact-gate and condition heads.

>>> cfg = NeuralActuatorConfig(n_joints=6, mode="simulator")
>>> model = NeuralActuator(cfg)              # ~1.42 M parameters, ~5.4 M FLOPs per sample
>>> tau, force, gate_logit, cond = model(x)  # x: (B, 8, n_joints * n_channels) raw features

Modules: ``config`` (:class:`NeuralActuatorConfig`: architecture, mode, channels, priors),
``features`` (channels per mode, windows, statistics), ``physics`` (gravity torque and Jacobian
channels), ``model`` (the network, parameter/FLOP counts), ``gate`` (the recurrent contact gate
and its fixed-lag decisions), ``fused`` (folded inference path), ``checkpoint`` (safetensors +
JSON), ``export`` (ONNX + ONNX Runtime), ``compiled`` (AOTInductor packages, the fast torch
path), ``toolchain`` (the C++ compiler they need), ``data`` (episodes flattened for training),
``rollout`` (differentiable arm rollouts, simulator / estimator mode, the rollout-protocol
adapter), ``actuator`` (a simulator-mode model as an ``Actuator`` that
:func:`neuract.sim.simulate.simulate` drives like any other family:
:class:`TransformerActuator`), ``train`` (pose-only torque through the simulator, supervised
force / gate / condition, one schedule, fine-tuning; on :class:`neuract.fit.loop.Trainer`) and
``losses`` (its losses). The estimator's use of the model (per-trajectory and streamed
estimates, decision filters, their calibration, the recurrent gate's training) lives in
:mod:`neuract.estimate`.
"""

from neuract.neuralactuator.actuator import (
    TransformerActuator,
    TransformerActuatorConfig,
    build_transformer_actuator,
)
from neuract.neuralactuator.checkpoint import load_checkpoint, read_config, save_checkpoint
from neuract.neuralactuator.compiled import AotActuator, compile_aot
from neuract.neuralactuator.config import NeuralActuatorConfig
from neuract.neuralactuator.export import OnnxActuator, export_onnx
from neuract.neuralactuator.features import (
    MODES,
    assemble,
    channels_for,
    feature_stats,
    trajectory_channels,
    windows,
)
from neuract.neuralactuator.fused import FusedNeuralActuator
from neuract.neuralactuator.model import NeuralActuator, count_flops, count_params
from neuract.neuralactuator.rollout import est_rollout, sim_rollout, simulator
from neuract.neuralactuator.toolchain import CompilerNotFound
from neuract.neuralactuator.train import (
    NeuralActuatorTrainConfig,
    fine_tune,
    pose_error,
    train_neuralactuator,
)

__all__ = [
    "NeuralActuator",
    "NeuralActuatorConfig",
    "TransformerActuator",
    "TransformerActuatorConfig",
    "build_transformer_actuator",
    "FusedNeuralActuator",
    "count_params",
    "count_flops",
    "MODES",
    "channels_for",
    "assemble",
    "trajectory_channels",
    "windows",
    "feature_stats",
    "save_checkpoint",
    "load_checkpoint",
    "read_config",
    "export_onnx",
    "OnnxActuator",
    "compile_aot",
    "AotActuator",
    "CompilerNotFound",
    "NeuralActuatorTrainConfig",
    "train_neuralactuator",
    "fine_tune",
    "pose_error",
    "simulator",
    "sim_rollout",
    "est_rollout",
]
