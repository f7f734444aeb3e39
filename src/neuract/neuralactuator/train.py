"""Pose-only training of NeuralActuator through the differentiable rigid-body simulation.

No torque label is used anywhere. Two modes, trained separately:

* **simulator** mode: a window starts from a measured state (with its measured 8-step past);
  for ``horizon`` telemetry steps the model reads the *simulated* history (commands, simulated
  q and qd), its torque drives the arm (``M qdd + b = tau``, semi-implicit Euler with
  ``substeps`` physics steps per telemetry step; the servo prior ``kp (goal - q) - kd qd`` is
  refreshed every substep, the learned residual is held), and the loss compares simulated with
  measured positions. This is the model the open-loop rollout metrics score.
* **estimator** mode: torque, force, gate and condition from the real telemetry. The torque of
  every step of a window comes from the measured telemetry history; these torques (linearly
  interpolated between samples) and the labelled external force (``J^T f``, where a label
  exists) drive the simulated arm from the measured initial state, and the loss compares
  simulated with measured positions. Force (masked Huber), gate (BCE) and condition
  (cross-entropy) heads are supervised where labels exist; one schedule, one optimiser.

Fine-tuning (:func:`fine_tune`) is the same loop started from a trained model, whose
normalisation statistics are kept (e.g. a few minutes of a new unit's data); the rollouts live
in :mod:`neuract.neuralactuator.rollout`, the losses in :mod:`neuract.neuralactuator.losses`;
the loop is :class:`neuract.fit.loop.Trainer`.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from neuract.errors import ConfigError
from neuract.fit.checkpoint import normalise_key
from neuract.fit.loop import StateFile, Trainer
from neuract.neuralactuator.config import NeuralActuatorConfig
from neuract.neuralactuator.data import FlatData, flatten
from neuract.neuralactuator.features import feature_stats
from neuract.neuralactuator.losses import aux_loss as _aux_loss
from neuract.neuralactuator.losses import est_loss as _est_loss
from neuract.neuralactuator.losses import gate_loss
from neuract.neuralactuator.losses import sim_loss as _sim_loss
from neuract.neuralactuator.model import NeuralActuator, servo_module
from neuract.scale import ddp


@dataclass
class NeuralActuatorTrainConfig:
    """Optimisation schedule of :func:`train_neuralactuator`."""

    steps: int = 300
    """optimiser steps"""
    batch: int = 32
    """windows per step"""
    horizon: int = 12
    """telemetry steps simulated per window (simulator mode: final value of a curriculum
    that starts at ``horizon // 3``)"""
    substeps: int = 2
    """physics steps per telemetry step"""
    lr: float = 1e-3
    prior_lr_scale: float = 1.0
    """learning-rate multiplier of the physical servo prior (log kp, log kd; no weight decay)"""
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    pose_scale: float = 0.002
    """position error scale of the pose loss [rad]"""
    force_weight: float = 1.0
    force_huber_delta: float = 1.0
    """force loss: smooth-L1 transition [N] (quadratic below, |error| above, unit slope; small
    values make it the absolute error that the force MAE reports, whose minimiser is the
    median where the telemetry leaves the force ambiguous)"""
    gate_weight: float = 0.5
    gate_focal_gamma: float = 0.0
    """contact-gate loss: focal binary cross-entropy, each sample's term scaled by
    ``(1 - p_true) ** gamma`` (p_true: the probability given to its label), so confidently
    right samples weigh less than ambiguous ones; 0: plain binary cross-entropy"""
    condition_weight: float = 0.5
    aux_batch: int = 0
    """estimator mode: extra windows per step, drawn uniformly from the training samples, that
    train only the labelled heads (force, gate, condition): one forward pass each, no
    simulation, so these heads see many more samples than the pose-only rollout can afford
    (the rollout's windows still train them too); 0: none. Ignored in simulator mode."""
    augment_temperature: float = 3.0
    """estimator mode: random per-window offset of the temperature channel, +- [degC] (so a
    small training set cannot tell episodes apart by their temperature)"""
    augment_voltage: float = 0.2
    """estimator mode: random per-window offset of the voltage channel, +- [V]"""
    freeze_encoder: bool = False
    """train only the head trunk, heads and servo prior (fine-tuning on little data)"""
    seed: int = 0
    max_seconds: float = 0.0
    """stop after this much wall time of this call (0 = no limit; the training state, if
    any, is written at the step reached)"""
    checkpoint: str = ""
    """training-state file (safetensors): written atomically every ``checkpoint_every`` steps
    and at the end; if it exists when training starts, training resumes from it (same
    result as an uninterrupted run; the report's ``seconds`` counts the training time before
    the interruption too). Empty: no checkpoints."""
    checkpoint_every: int = 50

    def validate(self) -> NeuralActuatorTrainConfig:
        if not (math.isfinite(self.force_huber_delta) and self.force_huber_delta > 0):
            raise ConfigError(f"NeuralActuatorTrainConfig.force_huber_delta = "
                              f"{self.force_huber_delta}; expected a transition > 0 N")
        for k in ("force_weight", "gate_weight", "condition_weight", "gate_focal_gamma"):
            check_loss_weight(getattr(self, k), f"NeuralActuatorTrainConfig.{k}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"NeuralActuatorTrainConfig.lr = {self.lr!r} (the learning rate: "
                              "--lr, --experiment.lr); expected a finite value > 0, e.g. 1e-3")
        for k in ("steps", "batch", "horizon", "substeps", "checkpoint_every"):
            if getattr(self, k) < 1:
                raise ConfigError(f"NeuralActuatorTrainConfig.{k} = {getattr(self, k)}; "
                                  "expected >= 1")
        if not isinstance(self.aux_batch, int) or self.aux_batch < 0:
            raise ConfigError(f"NeuralActuatorTrainConfig.aux_batch = {self.aux_batch!r}; expected "
                              "an integer >= 0 (0: no extra labelled-head windows)")
        return self


def check_loss_weight(w: Any, field: str) -> None:
    """A loss weight is a finite real number >= 0 (not a bool); else a ConfigError naming
    ``field``."""
    if isinstance(w, bool) or not (isinstance(w, numbers.Real) and math.isfinite(w) and w >= 0):
        raise ConfigError(f"{field} = {w!r}; expected a finite loss weight >= 0")


def _flat(trajs: Sequence[Any] | FlatData, robot, cfg: NeuralActuatorConfig,
          site: str | None, servo: torch.nn.Module | None = None) -> FlatData:
    """The episodes flattened with the channels of ``cfg``'s mode (FlatData passes through);
    servo: the fitted servo of the reference channels (``cfg.reference_steps``)."""
    if isinstance(trajs, FlatData):
        return trajs
    est = cfg.channels if cfg.mode == "estimator" else None
    sim = cfg.channels if cfg.mode == "simulator" else None
    ref = None
    if cfg.reference_steps:
        if servo is None:
            raise ConfigError("reference_steps > 0 needs the fitted servo model: "
                              "train_neuralactuator(..., servo=SystemModel)")
        # the float32 copy the checkpoint stores, so training sees what estimate() computes
        ref = (servo_module(cfg, servo), cfg.physics_robot, cfg.reference_steps)
    return flatten(trajs, robot, site, est, sim, cfg.physics, cfg.context_s, ref,
                   cfg.ident_memory)


def init_model(cfg: NeuralActuatorConfig, data: FlatData, seed: int = 0) -> NeuralActuator:
    """A fresh model with feature statistics (and force scale) from the training data."""
    torch.manual_seed(seed)
    model = NeuralActuator(cfg)
    tok = data.tok_sim if cfg.mode == "simulator" else data.tok_est
    step = max(1, tok.shape[0] // 20000)
    mean, std = feature_stats(tok[::step].unsqueeze(1))
    fs = None
    if bool(data.fmask.any()):
        fs = data.force[data.fmask].std(0).clamp_min(0.5)
    model.set_stats(mean, std, fs)
    return model


def train_neuralactuator(trajs: Sequence[Any] | FlatData, robot, cfg: NeuralActuatorConfig,
                         train: NeuralActuatorTrainConfig | None = None, site: str | None = None,
                         init: NeuralActuator | None = None,
                         progress: Callable[[int, int, dict], None] | None = None,
                         servo: torch.nn.Module | None = None
                         ) -> tuple[NeuralActuator, dict[str, Any]]:
    """Train (or fine-tune ``init``) a NeuralActuator pose-only; returns (model, report).

    trajs: training episodes (or their :class:`FlatData`); robot: the rigid-body model
    (float32) whose joints match; site: end-effector site (needed for force labels in the
    estimator-mode simulation); progress(step, total, info) is called after each step;
    servo: with ``cfg.prior='servo'`` or ``cfg.reference_steps`` and no ``init``, the fitted
    servo model (:class:`neuract.fit.trainer.SystemModel`) loaded as the frozen prior or as
    the reference channels' model. The loop is :class:`neuract.fit.loop.Trainer`.
    """
    train = (train or NeuralActuatorTrainConfig()).validate()
    cfg = cfg.validate()
    data, model = _prepare(trajs, robot, cfg, train, site, init, servo)
    model.train()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad  # (servo: frozen)
             and not (train.freeze_encoder and n.startswith(("inp.", "pos", "layers.")))]
    params = [p for _, p in named]
    prior = [p for n, p in named if n in ("log_kp", "log_kd")]
    net = [p for n, p in named if n not in ("log_kp", "log_kd")]
    lrs = [train.lr, train.lr * train.prior_lr_scale]
    opt = torch.optim.AdamW([{"params": net}, {"params": prior, "weight_decay": 0.0}],
                            lr=train.lr, weight_decay=train.weight_decay)
    gen = np.random.default_rng(train.seed)
    history: list[dict] = []
    state = None
    if train.checkpoint:
        state = StateFile(train.checkpoint, _state_key(train, cfg, data, model, init is not None),
                          "neuralactuator_train", train.checkpoint_every,
                          resume_hint="rerun with that run's options",
                          restart_hint="delete the file (or use another output directory)",
                          wording="then-now", what="the training state")
    # torch's OneCycleLR divides by zero when pct_start * total_steps == 1 (10 steps)
    pct = 0.1 if train.steps != 10 else 0.2
    trainer = Trainer(
        model, opt, train.steps, grad_clip=train.grad_clip, clip=params,
        schedule=lambda o, start: torch.optim.lr_scheduler.OneCycleLR(
            o, max_lr=lrs, total_steps=train.steps, pct_start=pct, last_epoch=start - 1),
        torch_rng=torch.default_generator, numpy_rng=gen, state=state,
        max_seconds=train.max_seconds, clock=_clock,
        nonfinite=lambda step: (f"non-finite NeuralActuator loss at step {step}; lower lr or "
                                "raise substeps"),
        loop_state=lambda: {"history": history[-_HISTORY_KEPT:]},
        restore=lambda st: history.extend(st["history"]),
        split_batch=True)  # under torchrun: _step_loss gives this rank's part
    out = trainer.run(_step_loss(model, robot, data, train, gen),
                      record=lambda step, info: history.append(info),
                      progress=(lambda step, info: progress(step, train.steps, info))
                      if progress is not None else None)
    model.eval()
    # the step reached (a resumed run's state keeps only the recent history); the training
    # time up to it, before an interruption included
    report = {"mode": cfg.mode, "steps": out.step, "seconds": out.seconds,
              "final": history[-1] if history else None,
              "n_train_samples": data.n_samples, "n_train_episodes": len(data.starts),
              "history": history[-20:]}
    return model, report


def _clock() -> float:
    return time.perf_counter()  # (this module's clock: tests replace it)


def _prepare(trajs, robot, cfg: NeuralActuatorConfig, train: NeuralActuatorTrainConfig,
             site: str | None,
             init: NeuralActuator | None, servo: torch.nn.Module | None
             ) -> tuple[FlatData, NeuralActuator]:
    """The flattened training data and the model to train (``init`` or a fresh one), with
    its servo (prior or reference) loaded; ConfigError for what does not fit together."""
    if robot.n_dof != cfg.n_joints:
        raise ConfigError(f"robot {getattr(robot, 'name', '')!r} has {robot.n_dof} joints; the "
                          f"model has n_joints={cfg.n_joints}")
    torch.manual_seed(train.seed)
    if cfg.servo and init is None and servo is None:
        raise ConfigError(f"prior={cfg.prior!r} / reference_steps={cfg.reference_steps} needs "
                          "the fitted servo model: train_neuralactuator(..., servo=SystemModel)")
    if init is not None and servo is None and init.servo_loaded:
        servo = init.servo_model
    data = _flat(trajs, robot, cfg, site, servo)
    model = init if init is not None else init_model(cfg, data, train.seed)
    if cfg.servo:
        if servo is not None and servo is not model.servo_model:
            model.set_servo(servo)
        if not model.servo_loaded:
            raise ConfigError("the init model's servo (prior or reference) was never fitted: "
                              "load it from a checkpoint or pass servo=SystemModel")
    if model.cfg.mode != cfg.mode:
        raise ConfigError(f"init model is in {model.cfg.mode} mode; training {cfg.mode}")
    return data, model


def _step_loss(model: NeuralActuator, robot, data: FlatData, train: NeuralActuatorTrainConfig,
               gen: np.random.Generator):
    """The loss of step ``step``: ``train.batch`` windows drawn from ``gen`` (simulator mode:
    on the horizon curriculum; estimator mode: plus the labelled-head windows)."""
    h = model.cfg.history
    anchors = data.anchors(h, train.horizon + 1)
    aux_anchors = data.anchors(h, 1)  # any sample with a full history
    hist_off = torch.arange(-h + 1, 1)

    def loss(step: int) -> tuple[torch.Tensor, dict[str, Any]]:
        t0 = torch.as_tensor(gen.choice(anchors, train.batch))
        if model.cfg.mode == "simulator":
            H = max(2, int(round(train.horizon * min(1.0, 1 / 3 + step / (0.6 * train.steps)))))
            # under torchrun: this rank's windows (the pose loss is a mean over windows)
            part = ddp.shard(len(t0))
            value, info = _sim_loss(model, robot, data, t0[part.rows], H, hist_off, train)
            if part.share != 1.0:
                value = value * part.share
        else:
            value, info = _est_loss(model, robot, data, t0, train.horizon, hist_off, train)
            if train.aux_batch:
                a = torch.as_tensor(gen.choice(aux_anchors, train.aux_batch))
                aux, aux_info = _aux_loss(model, data, a, hist_off, train)
                value = value + aux
                info.update(aux_info)
            # (masked head losses: every rank computes the whole batch, its share counted)
            value = value / ddp.world().size
        info["step"] = step + 1
        info["loss"] = ddp.total(value)
        return value, info

    return loss


_HISTORY_KEPT = 200
"""history records a training state keeps (the report's recent history and final record)"""
_NOT_KEYED = ("checkpoint", "checkpoint_every", "max_seconds")
"""NeuralActuatorTrainConfig fields that do not change what the steps compute (a resumed run
may differ)"""
_ESTIMATOR_ONLY = ("force_weight", "force_huber_delta", "gate_weight", "gate_focal_gamma",
                   "condition_weight", "aux_batch", "augment_temperature", "augment_voltage")
"""NeuralActuatorTrainConfig fields that simulator-mode training does not read"""


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for k, v in sorted(tensors.items()):
        h.update(k.encode() + v.detach().double().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def _state_key(train: NeuralActuatorTrainConfig, cfg: NeuralActuatorConfig, data: FlatData,
               model: NeuralActuator | None = None, tuned: bool = False) -> dict[str, Any]:
    """What a resumed run must share with the run that wrote the checkpoint: every training
    option that changes the result (all but ``_NOT_KEYED``; in simulator mode all but
    ``_ESTIMATOR_ONLY`` too), the model's configuration, the training data (episode and sample
    counts and a checksum of the measured positions, so a state written on other data is
    refused, not resumed), the fitted values of a servo prior and, when ``tuned`` (fine-tuning
    ``model``), the weights training starts from; as JSON reads it back (tuples are lists)."""
    import dataclasses

    digest = hashlib.sha256(data.q.detach().contiguous().numpy().tobytes()).hexdigest()
    init = _digest(model.state_dict()) if tuned and model is not None else ""
    servo = ""
    if model is not None and model.servo_model is not None:
        servo = _digest(model.servo_model.state_dict())
    skip = _NOT_KEYED + (_ESTIMATOR_ONLY if cfg.mode == "simulator" else ())
    opts = {k: v for k, v in dataclasses.asdict(train).items() if k not in skip}
    return normalise_key({
        "mode": cfg.mode, "channels": list(cfg.channels), "prior": cfg.prior,
        "servo": cfg.servo, "servo_sha256": servo, **opts,
        "data": {"episodes": len(data.starts), "samples": data.n_samples,
                 "q_sha256": digest[:16]},
        "model": dataclasses.asdict(cfg), "initial_weights_sha256": init})


def fine_tune(model: NeuralActuator, trajs: Sequence[Any] | FlatData, robot,
              train: NeuralActuatorTrainConfig | None = None, site: str | None = None,
              progress: Callable[[int, int, dict], None] | None = None
              ) -> tuple[NeuralActuator, dict[str, Any]]:
    """Adapt a trained model (e.g. from :func:`load_checkpoint`) in place to a few minutes of
    a new unit's data: the same losses, the checkpoint's normalisation statistics kept.
    Default schedule: 100 steps at lr 3e-4."""
    train = train or NeuralActuatorTrainConfig(steps=100, lr=3e-4)
    return train_neuralactuator(trajs, robot, model.cfg, train, site=site, init=model,
                                progress=progress)


@torch.no_grad()
def pose_error(model: NeuralActuator, trajs: Sequence[Any] | FlatData, robot,
               train: NeuralActuatorTrainConfig | None = None, site: str | None = None,
               n_windows: int = 256, seed: int = 0) -> float:
    """Mean |q_sim - q| [deg] of the training loss's rollouts in the model's mode (horizon
    ``train.horizon``, no augmentation) over ``n_windows`` windows drawn with ``seed``: the
    number that :func:`fine_tune` lowers, scored on held-out episodes before and after."""
    import dataclasses

    train = dataclasses.replace(train or NeuralActuatorTrainConfig(), augment_temperature=0.0,
                                augment_voltage=0.0).validate()
    cfg = model.cfg
    data = _flat(trajs, robot, cfg, site, model.servo_model)
    h = cfg.history
    anchors = data.anchors(h, train.horizon + 1)
    t0 = torch.as_tensor(np.random.default_rng(seed).choice(anchors, n_windows))
    hist_off = torch.arange(-h + 1, 1)
    loss_fn = _sim_loss if cfg.mode == "simulator" else _est_loss
    was = model.training
    model.eval()
    total = 0.0
    for s in range(0, n_windows, 64):
        part = t0[s:s + 64]
        _, info = loss_fn(model, robot, data, part, train.horizon, hist_off, train)
        total += info["pose_mae_deg"] * len(part)
    model.train(was)
    return total / n_windows


__all__ = ["NeuralActuatorTrainConfig", "fine_tune", "gate_loss", "init_model", "pose_error",
           "train_neuralactuator"]
