"""An experiment's configuration: the models' sizes and training schedules, the evaluation
protocol (:class:`ExperimentConfig`), the checks that refuse bad options before anything
runs, and the NeuralActuator / recurrent-gate configs derived from it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neuract.actuators import ACTUATORS
from neuract.actuators.friction import FRICTIONS
from neuract.errors import ConfigError
from neuract.estimate.gate_rnn import GateTrainConfig
from neuract.neuralactuator import NeuralActuatorConfig, NeuralActuatorTrainConfig
from neuract.neuralactuator.config import (
    MAX_GATE_CONV,
    MAX_GATE_LAG,
    ModelSize,
    check_gate_decide,
)
from neuract.neuralactuator.features import check_ident_memory
from neuract.neuralactuator.train import check_loss_weight
from neuract.pipeline.setups import RobotSetup
from neuract.pipeline.splits import check_calibration_fraction


@dataclass
class ExperimentConfig:
    """Training sizes of every model and the evaluation protocol."""

    size: ModelSize = field(default_factory=ModelSize)
    sim_steps: int = 150
    """NeuralActuator simulator-mode optimiser steps (0: no simulator-mode NeuralActuator is
    trained or scored, unless given as a checkpoint)"""
    est_steps: int = 200
    """NeuralActuator estimator-mode optimiser steps (0: no estimator-mode NeuralActuator is
    trained or scored, unless given as a checkpoint)"""
    batch: int = 32
    sim_horizon: int = 36
    """simulator-mode training rollout length [telemetry steps] (final value of a curriculum
    from a third of it; 36 chosen on twin seed 7 over 12: rollouts after 50-600 steps 2-15 %
    closer with the servo prior)"""
    sim_prior: str = "servo"
    """physical prior of the simulator-mode NeuralActuator: ``servo`` (the best parametric
    servo of this run, fitted pose-only first, frozen; the Transformer learns a residual
    joint torque on top of it; needs ``baseline_iters > 0``) or ``pd`` (a saturated PD servo
    with learned kp, kd)"""
    est_horizon: int = 8
    substeps: int = 2
    """physics steps per telemetry step (training and NeuralActuator rollouts)"""
    lr: float = 1e-3
    force_huber_delta: float = 1.0
    """NeuralActuator force loss transition [N] (small: close to the absolute error)"""
    gate_weight: float = 0.5
    """NeuralActuator contact-gate loss weight (binary cross-entropy;
    ``NeuralActuatorTrainConfig.gate_weight``)"""
    gate_focal_gamma: float = 0.0
    """NeuralActuator contact-gate loss: focal exponent
    (``NeuralActuatorTrainConfig.gate_focal_gamma``; 0: plain binary cross-entropy)"""
    aux_batch: int = 0
    """NeuralActuator estimator mode: extra windows per step for the labelled heads only
    (force, gate, condition; no simulation; see ``NeuralActuatorTrainConfig.aux_batch``)"""
    parametric_friction: tuple[str, ...] = ("coulomb_viscous", "stribeck")
    """friction models tried for the parametric servo; the best on the training episodes is
    the 'best parametric' baseline"""
    baseline_iters: int = 40
    """identification iterations per fitted baseline (parametric, MLP, GRU)"""
    neural_baselines: tuple[str, ...] = ("mlp", "gru")
    checkpoint_every: int = 50
    """with an output directory: NeuralActuator training state written every this many steps
    (``checkpoints/train_neuralactuator_<mode>.safetensors``); a run killed during training
    resumes from it when started again with the same config and data (same result as an
    uninterrupted run); the files are removed once the run completes"""
    calibration_fraction: float = 0.0
    """share of each task's training episodes held out of the estimator's training to
    calibrate its gate and condition thresholds (0: calibrate on the training episodes)"""
    condition_tau_grid: tuple[float, ...] = ()
    """candidate time constants [s] of the estimator's condition smoothing, chosen with its
    threshold on the calibration episodes (empty: 5 s)"""
    condition_per_motor_threshold: bool = False
    """with ``condition_tau_grid``: calibrate one condition threshold per motor"""
    gate_tau_grid: tuple[float, ...] = ()
    """candidate time constants [s] (0: none) of the estimator's contact-gate smoothing,
    chosen on the calibration episodes with a detection and a release threshold
    (hysteresis; :func:`neuract.estimate.neural.select_gate_filter`); empty: one
    plain threshold"""
    physics: bool = False
    """NeuralActuator estimator also reads the arm model's gravity torque and end-effector
    Jacobian at the measured pose (:mod:`neuract.neuralactuator.physics`)"""
    context_s: float = 0.0
    """NeuralActuator estimator also reads context channels with this time constant [s]
    (direction of each joint's last motion, slow effort and position-error averages;
    :mod:`neuract.neuralactuator.features`); 0: none"""
    ident: bool = False
    """NeuralActuator estimator also reads identification channels (a running least-squares
    identification of each motor over the episode so far; needs ``physics``;
    :mod:`neuract.neuralactuator.features`)"""
    ident_memory: int = 0
    """memory [samples] of those identification channels (exponential forgetting;
    ``NeuralActuatorConfig.ident_memory``); 0: the whole episode"""
    condition_head: str = "trunk"
    """NeuralActuator estimator's condition head: ``trunk``, ``motor`` (a small MLP shared by
    the motors over each motor's own last-sample channels) or ``both`` (their logits added;
    :class:`NeuralActuatorConfig`)"""
    reference_steps: int = 0
    """NeuralActuator estimator also reads servo-reference channels with segments of this many
    samples (the measured position against the best parametric servo of this run driven open
    loop by the commands; :mod:`neuract.neuralactuator.reference`; needs ``physics`` and the
    parametric fit, ``baseline_iters > 0``); 0: none"""
    gate_rnn: int = 0
    """NeuralActuator estimator's recurrent contact gate: hidden units of a GRU over each
    sample's feature row, carried over the episode (``NeuralActuatorConfig.gate_rnn``),
    trained after the estimator on its training episodes (and on extra gate episodes where
    the experiment has them: ``TwinDataConfig.gate_train_minutes``), keeping the iteration
    with the best F1 on the calibration episodes
    (:func:`neuract.estimate.gate_rnn.train_gate_rnn`); 0: the gate head"""
    gate_conv: int = 0
    """recurrent gate: causal dilated convolution layers before its GRU
    (``NeuralActuatorConfig.gate_conv``; needs ``gate_rnn``); 0: none"""
    gate_lag: int = 0
    """recurrent gate: a fixed-lag gate that decides each sample after reading this many
    samples more (``NeuralActuatorConfig.gate_lag``; needs ``gate_rnn``; the reported
    detection latency includes the wait; streamed, each decision comes that many samples
    after its sample). 0: the causal gate"""
    gate_decide: int = -1
    """recurrent gate with ``gate_lag``: decide at this shorter lag (0 .. gate_lag samples;
    ``NeuralActuatorConfig.gate_decide``): the gate still learns every lag's target, its
    calibration passes and filter score this lag's decision. -1: at ``gate_lag``"""
    gate_rnn_iters: int = 3000
    """recurrent gate: optimiser steps (``GateTrainConfig.iters``)"""
    gate_rnn_lr: float = 1e-3
    """recurrent gate: learning rate (``GateTrainConfig.lr``)"""
    horizons: tuple[int, ...] = (10, 50, 100, 300, 600)
    """open-loop rollout horizons scored [telemetry steps], each >= 1"""
    full: bool = True
    """also score the full-trajectory rollout"""
    figure_samples: int = 600
    """samples of the first test episode simulated open loop for the rollout figure"""
    seed: int = 0
    """random seed of the models' initial weights and training batches (an integer >= 0)"""


def na_config(setup: RobotSetup, mode: str, size: ModelSize, n_joints: int,
              physics: bool = False, context_s: float = 0.0, servo: str = "",
              reference_steps: int = 0, ident: bool = False, condition_head: str = "trunk",
              ident_memory: int = 0, gate_rnn: int = 0, gate_conv: int = 0,
              gate_lag: int = 0, gate_decide: int = -1):
    """NeuralActuator config of an experiment; servo: the fitted servo's JSON, the
    ``prior='servo'`` of simulator mode (empty: the PD prior) or, with ``reference_steps``,
    the estimator's reference-channel servo."""
    phys = physics and mode == "estimator"
    return NeuralActuatorConfig(n_joints=n_joints, mode=mode, effort=setup.effort,
                                physics_robot=(setup.model_path or setup.name) if phys else "",
                                physics_site=setup.site if phys else "",
                                context_s=context_s if mode == "estimator" else 0.0,
                                **dataclasses.asdict(size), tau_max=setup.tau_max, kp_init=17.8,
                                kd_init=1.0,
                                prior="servo" if servo and mode == "simulator" else "pd",
                                servo=servo,
                                reference_steps=reference_steps if mode == "estimator" else 0,
                                ident=ident and mode == "estimator",
                                ident_memory=ident_memory if ident and mode == "estimator"
                                else 0,
                                condition_head=condition_head if mode == "estimator"
                                else "trunk",
                                gate_rnn=gate_rnn if mode == "estimator" else 0,
                                gate_conv=gate_conv if mode == "estimator" else 0,
                                gate_lag=gate_lag if mode == "estimator" else 0,
                                gate_decide=gate_decide if mode == "estimator" else -1)


def needs_servo(cfg: ExperimentConfig, pretrained_modes: Sequence[str] = ()) -> bool:
    """Whether the experiment builds NeuralActuator on the best parametric servo fit (a servo
    prior in simulator mode, reference channels in estimator mode) for a mode it trains."""
    return ((cfg.sim_prior == "servo" and cfg.sim_steps > 0
             and "simulator" not in pretrained_modes)
            or (cfg.reference_steps > 0 and cfg.est_steps > 0
                and "estimator" not in pretrained_modes))


def check_experiment(cfg: ExperimentConfig, pretrained_modes: Sequence[str] = ()) -> None:
    """Refuse inconsistent experiment options; the verbs call it before they write anything
    (``run_experiment`` calls it too). pretrained_modes: the modes given as checkpoints
    (not trained)."""
    if cfg.sim_prior not in ("pd", "servo"):
        raise ConfigError(f"ExperimentConfig.sim_prior={cfg.sim_prior!r}; accepted: "
                          "['pd', 'servo']")
    _check_sizes(cfg)
    check_loss_weight(cfg.gate_weight, "ExperimentConfig.gate_weight")
    check_loss_weight(cfg.gate_focal_gamma, "ExperimentConfig.gate_focal_gamma")
    train_config(cfg, "estimator", 1).validate()  # lr, batch, ...: before any training
    check_calibration_fraction(cfg.calibration_fraction)
    if cfg.reference_steps and not cfg.physics:
        raise ConfigError(f"ExperimentConfig.reference_steps={cfg.reference_steps} simulates "
                          "the arm model: set physics=True")
    check_ident_memory(cfg.ident_memory, "ExperimentConfig.ident_memory")
    if cfg.ident_memory and not cfg.ident:
        raise ConfigError(f"ExperimentConfig.ident_memory={cfg.ident_memory} applies to the "
                          "identification channels: set ident=True")
    if cfg.ident and not cfg.physics:
        raise ConfigError("ExperimentConfig.ident=True regresses the effort on the arm model's "
                          "gravity torque: set physics=True")
    if not (_is_int(cfg.reference_steps, 0) and cfg.reference_steps != 1):
        raise ConfigError(f"ExperimentConfig.reference_steps = {cfg.reference_steps!r}; "
                          "expected an integer >= 2 samples (0: no reference channels)")
    # the rest of the NeuralActuator config of each mode trained (a stand-in arm: the robot
    # is checked by the verbs; the servo prior and reference channels above)
    gate_train_config(cfg).validate()  # first: its fields named as the experiment's
    if cfg.gate_rnn and (cfg.est_steps == 0 or "estimator" in pretrained_modes):
        why = ("the estimator is a given checkpoint, whose own gate is kept"
               if "estimator" in pretrained_modes else "est_steps = 0 trains no estimator")
        raise ConfigError(f"ExperimentConfig.gate_rnn = {cfg.gate_rnn} trains a recurrent "
                          f"contact gate on the estimator this run trains, but {why}: set "
                          "gate_rnn = 0")
    stand_in = RobotSetup("so101", None, None, "gripperframe", None)
    for mode, steps in (("simulator", cfg.sim_steps), ("estimator", cfg.est_steps)):
        if steps > 0 and mode not in pretrained_modes:
            na_config(stand_in, mode, cfg.size, 6, cfg.physics, cfg.context_s, "", 0, cfg.ident,
                      cfg.condition_head, cfg.ident_memory, int(cfg.gate_rnn),
                      int(cfg.gate_conv), int(cfg.gate_lag),
                      int(cfg.gate_decide)).validate()
    if needs_servo(cfg, pretrained_modes) and not (cfg.parametric_friction
                                                   and cfg.baseline_iters > 0):
        raise ConfigError("ExperimentConfig.sim_prior='servo' and reference_steps build on the "
                          "best parametric servo fit: set parametric_friction and "
                          f"baseline_iters > 0 (got {cfg.parametric_friction}, "
                          f"{cfg.baseline_iters}), or sim_prior='pd' and reference_steps=0")


def gate_train_config(cfg: ExperimentConfig, checkpoint: str = ""):
    """The recurrent gate's training schedule of an experiment (its options named as
    ``ExperimentConfig`` fields when refused)."""
    if not _is_int(cfg.gate_rnn, 0):
        raise ConfigError(f"ExperimentConfig.gate_rnn = {cfg.gate_rnn!r}; expected an integer "
                          ">= 0 hidden units (0: no recurrent gate)")
    if not (_is_int(cfg.gate_conv, 0) and cfg.gate_conv <= MAX_GATE_CONV):
        raise ConfigError(f"ExperimentConfig.gate_conv = {cfg.gate_conv!r}; expected an integer "
                          f"from 0 to {MAX_GATE_CONV} convolution layers")
    if cfg.gate_conv and not cfg.gate_rnn:
        raise ConfigError(f"ExperimentConfig.gate_conv = {cfg.gate_conv} adds convolutions to "
                          "the recurrent gate: set gate_rnn > 0 (hidden units), or gate_conv = 0")
    if not (_is_int(cfg.gate_lag, 0) and cfg.gate_lag <= MAX_GATE_LAG):
        raise ConfigError(f"ExperimentConfig.gate_lag = {cfg.gate_lag!r}; expected an integer "
                          f"from 0 to {MAX_GATE_LAG} samples")
    if cfg.gate_lag and not cfg.gate_rnn:
        raise ConfigError(f"ExperimentConfig.gate_lag = {cfg.gate_lag} is a lag of the "
                          "recurrent gate: set gate_rnn > 0 (hidden units), or gate_lag = 0")
    check_gate_decide(cfg.gate_decide, cfg.gate_lag, "ExperimentConfig.gate_decide")
    if not _is_int(cfg.gate_rnn_iters, 1):
        raise ConfigError(f"ExperimentConfig.gate_rnn_iters = {cfg.gate_rnn_iters!r}; expected "
                          "an integer >= 1")
    lr = cfg.gate_rnn_lr
    if isinstance(lr, bool) or not (isinstance(lr, (int, float)) and math.isfinite(lr)
                                    and lr > 0):
        raise ConfigError(f"ExperimentConfig.gate_rnn_lr = {lr!r}; expected a finite learning "
                          "rate > 0, e.g. 1e-3")
    return GateTrainConfig(iters=int(cfg.gate_rnn_iters), lr=float(lr), seed=int(cfg.seed),
                           checkpoint=checkpoint)


def _is_int(v: Any, lo: int) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= lo


def _check_sizes(cfg: ExperimentConfig) -> None:
    """Refuse model sizes, step counts, horizons and baseline names that would fail only
    once something is trained (ConfigError naming ``ExperimentConfig.<field>``)."""
    for k in ("history", "d_model", "n_layers", "n_heads", "d_ff", "d_trunk"):
        v = getattr(cfg.size, k)
        if not _is_int(v, 1):
            raise ConfigError(f"ExperimentConfig.size.{k} = {v!r}; expected an integer >= 1")
    if cfg.size.d_model % cfg.size.n_heads:
        raise ConfigError(f"ExperimentConfig.size.d_model = {cfg.size.d_model} is not divisible "
                          f"by ExperimentConfig.size.n_heads = {cfg.size.n_heads}; expected a "
                          "model width that is a multiple of the number of attention heads")
    for k, what in (("sim_steps", "no simulator-mode NeuralActuator"),
                    ("est_steps", "no estimator-mode NeuralActuator"),
                    ("baseline_iters", "the fitted baselines left unfitted"),
                    ("seed", "")):
        v = getattr(cfg, k)
        if not _is_int(v, 0):
            raise ConfigError(f"ExperimentConfig.{k} = {v!r}; expected an integer >= 0"
                              + (f" (0: {what})" if what else ""))
    for k in ("batch", "sim_horizon", "est_horizon", "substeps", "figure_samples"):
        v = getattr(cfg, k)
        if not _is_int(v, 1):
            raise ConfigError(f"ExperimentConfig.{k} = {v!r}; expected an integer >= 1")
    if isinstance(cfg.horizons, (str, bytes)) or not all(_is_int(h, 1) for h in cfg.horizons):
        raise ConfigError(f"ExperimentConfig.horizons = {tuple(cfg.horizons)!r}; expected "
                          "rollout horizons, each an integer >= 1 telemetry step")
    for fr in cfg.parametric_friction:
        if fr not in FRICTIONS:
            raise ConfigError(f"ExperimentConfig.parametric_friction: {fr!r} unknown; accepted: "
                              f"{', '.join(FRICTIONS.names())}")
    nets = [a for a in ACTUATORS.names() if a in ("mlp", "gru", "transformer")]
    for arch in cfg.neural_baselines:
        if arch not in nets:
            raise ConfigError(f"ExperimentConfig.neural_baselines: {arch!r} unknown; accepted: "
                              f"{', '.join(nets)} (or none)")


def train_config(cfg: ExperimentConfig, mode: str, steps: int, lr: float | None = None,
                 checkpoint: str = ""):
    """The NeuralActuator NeuralActuatorTrainConfig of an experiment's ``mode`` (``simulator`` or
    ``estimator``: its horizon, batch, substeps, seed and loss options) with ``steps``
    optimiser steps at ``lr`` (default: the experiment's)."""
    return NeuralActuatorTrainConfig(steps=steps, batch=cfg.batch,
                       horizon=cfg.sim_horizon if mode == "simulator" else cfg.est_horizon,
                       substeps=cfg.substeps, lr=cfg.lr if lr is None else lr, seed=cfg.seed,
                       force_huber_delta=cfg.force_huber_delta, aux_batch=cfg.aux_batch,
                       gate_weight=cfg.gate_weight, gate_focal_gamma=cfg.gate_focal_gamma,
                       checkpoint=checkpoint, checkpoint_every=cfg.checkpoint_every)


def train_state_path(out_dir: str | Path, mode: str) -> Path:
    """NeuralActuator training-state file of a run writing into ``out_dir`` (mode:
    ``simulator``, ``estimator`` or ``gate_rnn``, the estimator's recurrent gate)."""
    return Path(out_dir) / "checkpoints" / f"train_neuralactuator_{mode}.safetensors"


__all__ = ["ExperimentConfig", "ModelSize", "check_experiment", "gate_train_config",
           "na_config", "needs_servo", "train_config", "train_state_path"]
