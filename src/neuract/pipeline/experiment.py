"""One experiment: fit NeuralActuator (both modes) and every baseline on training episodes,
then score all of them on test episodes with the same protocol.

Simulator mode (open-loop rollouts at horizons 10/50/100/300/600 and full, every model
given the same measured 8-step past so that windows coincide): NeuralActuator (simulator
mode), MuJoCo's default position servo, the parametric servo fitted pose-only, the MLP
(Hwangbo) and GRU actuator nets fitted pose-only.

Estimator mode (whole test episodes, real telemetry): NeuralActuator (estimator mode) for
torque, force, gate and condition; tau = Kt I; the fitted parametric/neural actuators' torque;
momentum observer and model-based residual (J^T) on the Kt I torque; threshold / SVM /
random-forest condition classifiers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neuract.errors import ConfigError

ProgressFn = Callable[[str, int, int], None]
"""``progress(stage, done, total)``."""


@dataclass
class ModelSize:
    """NeuralActuator architecture (defaults: the shipped 1.43 M-parameter size)."""

    history: int = 8
    d_model: int = 96
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    d_trunk: int = 1576


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
    ``TrainConfig.gate_weight``)"""
    gate_focal_gamma: float = 0.0
    """NeuralActuator contact-gate loss: focal exponent (``TrainConfig.gate_focal_gamma``;
    0: plain binary cross-entropy)"""
    aux_batch: int = 0
    """NeuralActuator estimator mode: extra windows per step for the labelled heads only
    (force, gate, condition; no simulation; see ``TrainConfig.aux_batch``)"""
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
    (hysteresis; :func:`neuract.estimate.calibrate.select_gate_filter`); empty: one
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


@dataclass
class RobotSetup:
    """Everything robot-specific an experiment needs."""

    name: str
    robot: Any
    """rigid-body model (float32) whose joints are the trajectories' joints"""
    robot64: Any
    site: str
    """end-effector site for forces"""
    mujoco_xml: str | None
    """MJCF with a position actuator per joint (MuJoCo default-servo baseline)"""
    servo: str = "sts3215"
    """parametric servo family"""
    effort: str = "load"
    """NeuralActuator estimator effort channel"""
    tau_max: tuple[float, ...] = (3.35,)
    force_joints: tuple[str, ...] | None = None
    """joints used by the J^T force mapping (None: all)"""
    model_path: str = ""
    """the arm model as a loadable name or file (physics channels); empty: ``name``"""


def so101_setup() -> RobotSetup:
    from neuract.robot import load_robot
    from neuract.robot.bundled import bundled_path

    return RobotSetup("so101", load_robot("so101", dtype=torch.float32),
                      load_robot("so101", dtype=torch.float64), "gripperframe",
                      str(bundled_path("so101")), "sts3215", "load", (3.35,),
                      ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"))


def na_config(setup: RobotSetup, mode: str, size: ModelSize, n_joints: int,
              physics: bool = False, context_s: float = 0.0, servo: str = "",
              reference_steps: int = 0, ident: bool = False, condition_head: str = "trunk",
              ident_memory: int = 0, gate_rnn: int = 0, gate_conv: int = 0,
              gate_lag: int = 0, gate_decide: int = -1):
    """NeuralActuator config of an experiment; servo: the fitted servo's JSON, the
    ``prior='servo'`` of simulator mode (empty: the PD prior) or, with ``reference_steps``,
    the estimator's reference-channel servo."""
    from neuract.neuralactuator import NeuralActuatorConfig

    phys = physics and mode == "estimator"
    return NeuralActuatorConfig(n_joints=n_joints, mode=mode, effort=setup.effort,
                                physics_robot=(setup.model_path or setup.name) if phys else "",
                                physics_site=setup.site if phys else "",
                                context_s=context_s if mode == "estimator" else 0.0,
                                history=size.history, d_model=size.d_model,
                                n_layers=size.n_layers, n_heads=size.n_heads, d_ff=size.d_ff,
                                d_trunk=size.d_trunk, tau_max=setup.tau_max, kp_init=17.8,
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


def split_by_task(trajs: Sequence[Any], test_fraction: float) -> tuple[list, list]:
    """Hold out the last ``ceil(test_fraction * n)`` episodes of every task, and of its
    degraded-motor episodes apart (episodes are whole: no window of a test episode is ever
    seen in training)."""
    if not 0 < test_fraction < 1:
        raise ConfigError(f"test_fraction = {test_fraction}; expected 0 < f < 1")
    by_task: dict[tuple, list] = {}
    for tr in trajs:  # degraded-motor episodes are held out apart, so both classes are tested
        bad = bool(np.asarray(tr.get("condition", [0])).any())
        by_task.setdefault((str(tr.meta.labels.get("task", "?")), bad), []).append(tr)
    train, test = [], []
    for _task, eps in by_task.items():
        k = max(1, math.ceil(test_fraction * len(eps))) if len(eps) > 1 else 0
        train += eps[:len(eps) - k]
        test += eps[len(eps) - k:]
    return train, test


def check_split(train: Sequence[Any], test: Sequence[Any]) -> None:
    """Refuse an experiment without training or test episodes, saying what to change (the
    verbs call it once the data is split, before they write anything)."""
    if not train or not test:
        raise ConfigError(
            f"need training and test episodes; got {len(train)} and {len(test)}: a task's last "
            "episodes are held out for testing only where it has at least two (its "
            "degraded-motor episodes apart), and at least one is kept for training; give more "
            "episodes of each task (more minutes of data, or fewer tasks), a smaller test "
            "fraction where one is set, or label a dataset's test episodes split=test")


def check_calibration_fraction(fraction: float) -> None:
    if not 0 <= fraction < 1:
        raise ConfigError(f"ExperimentConfig.calibration_fraction = {fraction} "
                          "(--experiment.calibration-fraction); expected 0 <= f < 1")


def calibration_split(train: Sequence[Any], fraction: float) -> tuple[Sequence, Sequence]:
    """(episodes the estimator trains on, episodes its thresholds are calibrated on): the
    last ``fraction`` of each task's training episodes held out (0, or nothing to hold out:
    both are ``train`` itself)."""
    check_calibration_fraction(fraction)
    if fraction == 0:
        return train, train
    fit, held = split_by_task(train, fraction)
    return fit, held or train


def has_contact(tr: Any) -> bool:
    """Whether an episode has a contact label with some contact."""
    return "contact" in tr and bool(np.asarray(tr["contact"]).any())


def plain_gate(model: Any, test: Sequence[Any], threshold: float) -> dict[str, Any]:
    """Gate metrics of an estimator-mode model on ``test`` with one plain contact threshold
    (no smoothing, no release threshold)."""
    from neuract.estimate import estimate
    from neuract.eval import evaluate_estimator

    rec = evaluate_estimator(lambda tr: estimate(model, tr, gate_threshold=threshold), test,
                             "NeuralActuator (plain gate threshold)")["gate"]
    return {"threshold": float(threshold), **(rec or {})}


def _calibration_set(calib: Sequence[Any], train: Sequence[Any], positive, min_each: int = 2
                     ) -> Sequence[Any] | None:
    """``calib`` if it holds at least ``min_each`` positive and negative episodes, else
    ``train`` if it does, else None (a decision threshold cannot be set from one episode of a
    class: the default threshold is kept)."""
    for eps in (calib, train):
        pos = sum(1 for tr in eps if positive(tr))
        if min(pos, len(eps) - pos) >= min_each:
            return eps
    return None


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
    from neuract.neuralactuator.features import check_ident_memory
    from neuract.neuralactuator.train import check_loss_weight

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
    from neuract.estimate.gate_rnn import GateTrainConfig
    from neuract.neuralactuator.config import MAX_GATE_CONV, MAX_GATE_LAG, check_gate_decide

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
    from neuract.actuators import ACTUATORS
    from neuract.actuators.friction import FRICTIONS

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
    """The NeuralActuator TrainConfig of an experiment's ``mode`` (``simulator`` or
    ``estimator``: its horizon, batch, substeps, seed and loss options) with ``steps``
    optimiser steps at ``lr`` (default: the experiment's)."""
    from neuract.neuralactuator import TrainConfig

    return TrainConfig(steps=steps, batch=cfg.batch,
                       horizon=cfg.sim_horizon if mode == "simulator" else cfg.est_horizon,
                       substeps=cfg.substeps, lr=cfg.lr if lr is None else lr, seed=cfg.seed,
                       force_huber_delta=cfg.force_huber_delta, aux_batch=cfg.aux_batch,
                       gate_weight=cfg.gate_weight, gate_focal_gamma=cfg.gate_focal_gamma,
                       checkpoint=checkpoint, checkpoint_every=cfg.checkpoint_every)


def train_state_path(out_dir: str | Path, mode: str) -> Path:
    """NeuralActuator training-state file of a run writing into ``out_dir`` (mode:
    ``simulator``, ``estimator`` or ``gate_rnn``, the estimator's recurrent gate)."""
    return Path(out_dir) / "checkpoints" / f"train_neuralactuator_{mode}.safetensors"


def _fit_baselines(setup: RobotSetup, train: Sequence[Any], cfg: ExperimentConfig, timed,
                   progress: ProgressFn, res: dict[str, Any]
                   ) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """Fit the parametric servos and neural actuator nets pose-only on ``train`` (joint
    parameters :func:`baselines.fit_joints`), recording sizes and the choice in ``res``.
    Returns (name -> SystemModel, name -> ActuatorConfig, the best parametric servo's name
    (lowest h=100 rollout error on the first training episodes) or None)."""
    from neuract.actuators import ActuatorConfig
    from neuract.actuators.neural import n_parameters
    from neuract.eval import evaluate_rollouts
    from neuract.fit.trainer import TrainConfig
    from neuract.pipeline import baselines as bl

    hist = cfg.size.history
    fitted: dict[str, Any] = {}
    configs: dict[str, Any] = {}
    fits = [(f"parametric {setup.servo}+{fr}",
             ActuatorConfig(type=setup.servo, friction=fr, control_dt=0.016))
            for fr in cfg.parametric_friction]
    fits += [(f"{arch.upper()} actuator net", ActuatorConfig(type=arch, control_dt=0.016))
             for arch in cfg.neural_baselines]
    for name, acfg in fits:
        if cfg.baseline_iters <= 0:
            break
        it = cfg.baseline_iters
        tc = TrainConfig(horizons=(0.3, 0.8), stage_iters=(it // 2, it - it // 2),
                         windows_per_run=4, runs_per_iter=8, label_inputs=(),
                         use_voltage=True, seed=cfg.seed, lr_net=3e-3)
        done = [0]

        def log(msg, name=name, done=done, it=it):
            done[0] += 1

        progress(f"fit {name} (pose-only)", 0, 1)
        model, rep = timed(f"fit_{name}", bl.fit_actuator, train, setup.robot64, acfg, tc,
                           log=log)
        progress(f"fit {name} (pose-only)", 1, 1)
        fitted[name], configs[name] = model, acfg
        res["models"][name] = {"mode": "simulator", "params": n_parameters(model),
                               "flops": None, "train_loss": rep["history"][-1]["train_loss"]
                               if rep.get("history") else None}
    # the best parametric servo: lowest rollout error on the training episodes (h = 100)
    par = [k for k in fitted if k.startswith("parametric")]
    best_par = None
    if par:
        scores = {}
        for k in par:
            r = evaluate_rollouts(bl.system_simulator(fitted[k], setup.robot64, cfg.substeps),
                                  train[:4], k, horizons=(100,), history=hist,
                                  inputs=("q_goal", "voltage") if "voltage" in train[0]
                                  else ("q_goal",))
            scores[k] = r[0]["arm_mean_deg"] if r[0]["arm_mean_deg"] is not None else np.inf
        best_par = min(scores, key=scores.get)
        res["best_parametric"] = {"name": best_par, "train_h100_arm_mean_deg": scores}
    return fitted, configs, best_par


def _noop(stage: str, done: int, total: int) -> None:
    pass


def _train_recurrent_gate(model: Any, fit_eps: Sequence[Any], g_eps: Sequence[Any] | None,
                          cfg: ExperimentConfig, out_dir: str | Path | None,
                          progress: ProgressFn, gate_extra: GateExtraFn | None
                          ) -> dict[str, Any]:
    """Train the estimator's recurrent gate (``cfg.gate_rnn``) on the training episodes'
    rows and ``gate_extra``'s, keeping the best iteration on ``g_eps`` (the gate's
    calibration episodes); without labelled calibration episodes the recurrent gate is
    removed from the model (the gate head decides) and the report says so."""
    from neuract.estimate.gate_rnn import gate_rows, train_gate_rnn

    if g_eps is None or not any(has_contact(tr) for tr in fit_eps):
        model.gate_rnn = None
        model.cfg = model.cfg.replace(gate_rnn=0, gate_conv=0, gate_lag=0, gate_decide=-1)
        return {"trained": False, "why": "no calibration episodes (fewer than two with and "
                "two without contact, held out or in training), or no training episode with "
                "contact: the gate head decides"}
    stage = "recurrent contact gate"
    progress(f"{stage}: feature rows", 0, 1)
    fit_rows, calib_rows = gate_rows(model, fit_eps), gate_rows(model, g_eps)
    extra = gate_extra(model, progress) if gate_extra is not None else []
    state = str(train_state_path(out_dir, "gate_rnn")) if out_dir else ""
    rep = train_gate_rnn(model, fit_rows + extra, calib_rows, gate_train_config(cfg, state),
                         progress=lambda i, n, info: progress(stage, i, n))
    return {"trained": True, "hidden": model.cfg.gate_rnn,
            **({"conv": model.cfg.gate_conv} if model.cfg.gate_conv else {}),
            **({"lag": model.cfg.gate_lag} if model.cfg.gate_lag else {}),
            **({"decide": model.cfg.gate_decision_lag} if model.cfg.gate_decide != -1
               else {}),
            "extra_episodes": len(extra),
            "extra_minutes": round(sum(len(e) for e in extra) * _sample_s(fit_eps) / 60, 1),
            **{k: v for k, v in rep.items() if k != "history"},
            "calib_history": rep["history"]}


def _sample_s(eps: Sequence[Any]) -> float:
    """The median sample spacing [s] of the episodes."""
    return float(np.median(np.concatenate([np.diff(np.asarray(tr["t"], float))
                                           for tr in eps[:8]])))


GateExtraFn = Callable[[Any, ProgressFn], list]
"""``gate_extra(model, progress)``: extra :class:`~neuract.estimate.gate_rnn.GateRows`
the recurrent gate trains on, computed with the trained estimator (its normalisation)"""


def run_experiment(setup: RobotSetup, train: Sequence[Any], test: Sequence[Any],
                   cfg: ExperimentConfig, out_dir: str | Path | None = None,
                   progress: ProgressFn | None = None,
                   pretrained: dict[str, Any] | None = None,
                   gate_extra: GateExtraFn | None = None) -> dict[str, Any]:
    """Fit everything on ``train``, score on ``test``; returns the results dict (JSON-able
    apart from ``_figures``, raw arrays for the report, and ``_neuralactuator``, the models).
    Checkpoints go to ``out_dir``.
    pretrained: mode -> NeuralActuator to evaluate instead of training that mode.
    gate_extra: extra rows for the estimator's recurrent gate (``cfg.gate_rnn``), if any."""
    from neuract.estimate import (
        calibrate_gate,
        estimate,
        force_estimator,
        select_condition_smoothing,
        select_gate_filter,
    )
    from neuract.estimate.calibrate import gate_samples
    from neuract.estimate.filters import DEFAULT_CONDITION_TAU_S
    from neuract.eval import evaluate_estimator, evaluate_rollouts
    from neuract.neuralactuator import (
        count_flops,
        count_params,
        save_checkpoint,
        simulator,
        train_neuralactuator,
    )
    from neuract.neuralactuator.data import per_joint_condition
    from neuract.pipeline import baselines as bl

    progress = progress or _noop
    torch.manual_seed(cfg.seed)
    train, test = list(train), list(test)
    check_split(train, test)
    n = len(train[0].meta.joint_names)
    horizons: list[Any] = [h for h in cfg.horizons]
    if cfg.full:
        horizons.append("full")
    hist = cfg.size.history
    res: dict[str, Any] = {"robot": setup.name, "n_train": len(train), "n_test": len(test),
                           "train_minutes": sum(float(tr["t"][-1] - tr["t"][0]) for tr in train)
                           / 60, "test_minutes": sum(float(tr["t"][-1] - tr["t"][0])
                                                     for tr in test) / 60,
                           "models": {}, "rollouts": [], "estimation": [], "timings_s": {}}
    sims: dict[str, Any] = {}
    ests: dict[str, Any] = {}
    t_all = time.perf_counter()

    def timed(name, fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        res["timings_s"][name] = round(time.perf_counter() - t0, 1)
        return out

    check_experiment(cfg, tuple(pretrained or ()))
    # ---- pose-only fitted baselines: before NeuralActuator when it builds on the servo
    need_servo = needs_servo(cfg, tuple(pretrained or ()))
    fitted, fit_configs, best_par = (_fit_baselines(setup, train, cfg, timed, progress, res)
                                     if need_servo else ({}, {}, None))
    # ---- NeuralActuator, both modes, pose-only
    na = {}
    for mode, steps in (("simulator", cfg.sim_steps), ("estimator", cfg.est_steps)):
        if pretrained and mode in pretrained:
            model = pretrained[mode]
            na[mode] = model
            res["models"][f"NeuralActuator[{mode}]"] = {
                "mode": mode, "params": count_params(model), "flops": count_flops(model.cfg),
                "train": "pretrained checkpoint"}
            continue
        if steps <= 0:
            continue
        servo = ""
        if ((mode == "simulator" and cfg.sim_prior == "servo")
                or (mode == "estimator" and cfg.reference_steps)):
            from neuract.neuralactuator.config import servo_json

            servo = servo_json(fit_configs[best_par], bl.fit_joints())
        ncfg = na_config(setup, mode, cfg.size, n, cfg.physics, cfg.context_s, servo,
                         cfg.reference_steps, cfg.ident, cfg.condition_head,
                         cfg.ident_memory, int(cfg.gate_rnn), int(cfg.gate_conv),
                         int(cfg.gate_lag), int(cfg.gate_decide))
        tc = train_config(cfg, mode, steps,
                          checkpoint=str(train_state_path(out_dir, mode)) if out_dir else "")
        stage = f"NeuralActuator ({mode} mode, pose-only)"
        fit_eps, calib = (calibration_split(train, cfg.calibration_fraction)
                          if mode == "estimator" else (train, train))
        model, rep = timed(f"train_na_{mode}", train_neuralactuator, fit_eps, setup.robot,
                           ncfg, tc, site=setup.site,
                           progress=lambda s, t, info, st=stage: progress(st, s, t),
                           servo=fitted.get(best_par) if servo else None)
        na[mode] = model
        name = f"NeuralActuator[{mode}]"
        res["models"][name] = {"mode": mode, "params": count_params(model),
                               "flops": count_flops(model.cfg), "train": rep}
        extra = {"robot": setup.name, "train": {k: v for k, v in rep.items() if k != "history"}}
        if servo:  # the frozen servo (prior or reference; its parameters are not counted)
            role = "prior" if mode == "simulator" else "reference"
            res["models"][name][role] = extra[role] = best_par
        if mode == "estimator":
            # a threshold is calibrated on the held-out episodes only when they hold at least
            # two episodes of each class; otherwise on the training episodes if they do;
            # otherwise the default threshold (0.5) and smoothing are kept
            c_eps = _calibration_set(calib, train, lambda tr: bool(
                per_joint_condition(tr, n).any()))
            g_eps = _calibration_set(calib, train, has_contact)
            if model.gate_rnn is not None:
                res["models"][name]["gate_rnn"] = timed(
                    "train_gate_rnn", _train_recurrent_gate, model, fit_eps, g_eps, cfg,
                    out_dir, progress, gate_extra)
                res["models"][name]["gate_rnn"]["selected_on"] = (
                    None if g_eps is None else "training episodes" if g_eps is train
                    else "held-out calibration episodes")
                # the counts of the model as it is kept (the gate removed if untrainable)
                res["models"][name].update(params=count_params(model),
                                           flops=count_flops(model.cfg))
            # without a grid: the default smoothing, one threshold, nothing chosen to record
            grid = cfg.condition_tau_grid if c_eps is not None else ()
            keys = []
            if c_eps is not None:
                tau, model.condition_threshold, scores = select_condition_smoothing(
                    model, c_eps, grid or (DEFAULT_CONDITION_TAU_S,),
                    per_motor=cfg.condition_per_motor_threshold and bool(grid))
                keys.append("condition_threshold")
                if grid:
                    model.condition_tau_s = tau
                    res["models"][name]["condition_tau_scores"] = scores
                    keys.append("condition_tau_s")
            if g_eps is not None and cfg.gate_tau_grid:
                raw = gate_samples(model, g_eps)  # one pass of the model for both choices
                (model.gate_tau_s, model.gate_threshold, model.gate_release,
                 res["models"][name]["gate_tau_scores"]) = select_gate_filter(
                    model, g_eps, cfg.gate_tau_grid, raw=raw)
                keys += ["gate_threshold", "gate_tau_s", "gate_release"]
                # the plain threshold on the same episodes, scored beside the filter below
                res["models"][name]["gate_plain_threshold"] = calibrate_gate(model, g_eps,
                                                                             raw=raw)
            elif g_eps is not None:
                model.gate_threshold = calibrate_gate(model, g_eps)
                keys.append("gate_threshold")
            for k in keys:
                res["models"][name][k] = extra[k] = getattr(model, k)
            res["models"][name]["calibration_episodes"] = {
                k: ("none: fewer than two episodes of a class, default threshold" if eps is None
                    else "training episodes" if eps is train else "held out of training")
                for k, eps in (("condition", c_eps), ("gate", g_eps))}
        if out_dir is not None:
            save_checkpoint(model, Path(out_dir) / "checkpoints" / f"neuralactuator_{mode}",
                            extra=extra, overwrite=True)
    if "simulator" in na:
        sims["NeuralActuator"] = simulator(na["simulator"], setup.robot, cfg.substeps)
    if "estimator" in na:
        ests["NeuralActuator"] = lambda tr: estimate(na["estimator"], tr)

    # ---- simulator baselines
    if not need_servo:
        fitted, fit_configs, best_par = _fit_baselines(setup, train, cfg, timed, progress, res)
    if setup.mujoco_xml:
        sims["MuJoCo default servo"] = bl.mujoco_servo_simulator(setup.mujoco_xml,
                                                                 train[0].meta.joint_names)
        res["models"]["MuJoCo default servo"] = {"mode": "simulator", "params": 0, "flops": None}
    for k, m in fitted.items():
        sims[k] = bl.system_simulator(m, setup.robot64, cfg.substeps)

    # ---- rollouts (simulator mode)
    inputs = ("q_goal", "voltage") if all("voltage" in tr for tr in test) else ("q_goal",)
    full_q: dict[str, np.ndarray] = {}
    from neuract.eval.protocol import simulate_full

    fig_traj = test[0].slice(0, min(len(test[0]), cfg.figure_samples))
    for i, (name, sim) in enumerate(sims.items()):
        progress("open-loop rollouts (simulator mode)", i, len(sims))
        recs = timed(f"rollouts_{name}", evaluate_rollouts, sim, test, name,
                     horizons=horizons, history=hist, inputs=inputs)
        res["rollouts"] += recs
        full_q[name] = simulate_full(sim, fig_traj, name, inputs=inputs, history=hist)
    progress("open-loop rollouts (simulator mode)", len(sims), len(sims))

    # ---- estimator-mode baselines
    kt = bl.fit_linear_kt(setup.robot64, train) if all("current" in tr for tr in train) else None
    if kt is not None:
        res["linear_kt"] = dict(zip(train[0].meta.joint_names, kt.tolist()))
        ests["tau = Kt I"] = bl.linear_kt_estimator(kt)
        ktf = lambda tr: bl.signed_current(tr) * kt  # noqa: E731
        for method, label in (("observer", "momentum observer (Kt I)"),
                              ("residual", "model residual J^T (Kt I)")):
            ests[label] = force_estimator(setup.robot64, setup.site, method, torque=ktf,
                                          passive=True, joints=setup.force_joints)
    pre: dict[str, dict[str, np.ndarray]] = {}
    for k, m in fitted.items():  # one batched pass over all test episodes per fitted model
        progress(f"torque of {k} at the measured states", 0, 1)
        taus = timed(f"torques_{k}", bl.system_torques, m, setup.robot64, test)
        progress(f"torque of {k} at the measured states", 1, 1)
        pre[k] = {tr.meta.name: tau for tr, tau in zip(test, taus)}
        ests[k] = lambda tr, k=k: {"tau": pre[k][tr.meta.name]}
    if "NeuralActuator" in ests:  # the learned torque in the classic observer (estimator mode)
        tna = lambda tr: np.nan_to_num(ests["NeuralActuator"](tr)["tau"])  # noqa: E731
        ests["momentum observer (NeuralActuator torque)"] = force_estimator(
            setup.robot64, setup.site, "observer", torque=tna, joints=setup.force_joints)
    if best_par is not None:
        tf = lambda tr: pre[best_par][tr.meta.name]  # noqa: E731
        ests[f"momentum observer ({best_par})"] = force_estimator(
            setup.robot64, setup.site, "observer", torque=tf, joints=setup.force_joints)
    conds = all("condition" in tr for tr in train)
    if conds and len(np.unique(np.concatenate([np.asarray(tr["condition"]) for tr in train]))) > 1:
        for name in ("threshold", "svm", "random_forest"):
            progress(f"fit condition baseline {name}", 0, 1)
            est, _ = timed(f"fit_cond_{name}", bl.condition_baseline, name, train)
            progress(f"fit condition baseline {name}", 1, 1)
            ests[f"condition {name}"] = est
        if cfg.ident:  # the peer that reads the same identification channels
            progress("fit condition baseline random_forest (identification channels)", 0, 1)
            est, _ = timed("fit_cond_random_forest_ident", bl.ident_condition_baseline, train,
                           (setup.model_path or setup.name, setup.site), setup.effort,
                           skip=cfg.size.history - 1, ident_memory=cfg.ident_memory)
            progress("fit condition baseline random_forest (identification channels)", 1, 1)
            ests["condition random_forest (identification channels)"] = est
    cache: dict[str, dict[str, dict]] = {}
    for i, (name, est) in enumerate(ests.items()):
        progress("estimation (estimator mode)", i, len(ests))

        def cached(tr, est=est, name=name):
            out = est(tr)
            cache.setdefault(name, {})[tr.meta.name] = out
            return out

        res["estimation"].append(timed(f"estimate_{name}", evaluate_estimator, cached, test,
                                       name))
    progress("estimation (estimator mode)", len(ests), len(ests))
    if "NeuralActuator" in cache:
        res["condition_per_motor"] = _per_motor_condition(cache["NeuralActuator"], test)
    plain = res["models"].get("NeuralActuator[estimator]", {}).get("gate_plain_threshold")
    if plain is not None:  # the same model with one plain gate threshold, for comparison
        res["gate_plain"] = plain_gate(na["estimator"], test, plain)
    res["timings_s"]["total"] = round(time.perf_counter() - t_all, 1)
    if out_dir is not None:  # done: nothing left to resume
        for mode in ("simulator", "estimator", "gate_rnn"):
            train_state_path(out_dir, mode).unlink(missing_ok=True)
    res["_figures"] = {"full_q": full_q, "fig_traj": fig_traj, "est": cache, "test": test}
    res["_neuralactuator"] = na  # mode -> trained (or given) model, for callers' extra scores
    return res


def _per_motor_condition(outs: dict[str, dict], test: Sequence[Any]) -> dict[str, Any] | None:
    from neuract.neuralactuator.data import per_joint_condition

    pred, true = [], []
    for tr in test:
        o = outs.get(tr.meta.name)
        if o is None or "condition_prob_joint" not in o:
            continue
        v = o["valid"]
        pred.append(o["condition_prob_joint"][v] > 0.5)
        true.append(per_joint_condition(tr, len(tr.meta.joint_names))[v] > 0)
    if not pred:
        return None
    p, t = np.concatenate(pred), np.concatenate(true)
    return {"accuracy": float((p == t).mean()), "n_samples": int(p.shape[0]),
            "n_motors": int(p.shape[1]), "degraded_share": float(t.mean())}


__all__ = ["ExperimentConfig", "GateExtraFn", "ModelSize", "RobotSetup", "calibration_split",
           "check_split", "gate_train_config", "has_contact", "na_config", "plain_gate",
           "run_experiment", "so101_setup", "split_by_task", "train_config",
           "train_state_path"]
