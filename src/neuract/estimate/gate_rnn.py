"""Training of the recurrent contact gate (:class:`~neuract.neuralactuator.gate.RecurrentGate`).

An estimator-mode NeuralActuator decides contact from one window (``history`` samples, 0.13 s
at 60 Hz). A light push that the servo holds against reads, sample by sample, much like a
joint parked a few encoder steps off its goal by gear friction; what tells them apart is often
further back: how the arm got there, whether the effort rose without the command changing. The
recurrent gate carries that evidence over the episode: a GRU reads each sample's normalised
feature row (the last step of the model's window, every channel of the model: telemetry,
physics, context, servo-reference and identification) and its state from the sample before.

It is trained after the rest of the model, which it leaves unchanged:

* :func:`gate_rows` computes the feature rows and contact labels of labelled episodes once
  (the model's normalisation and reference servo; episodes without a contact label are left
  out);
* :func:`train_gate_rnn` trains the GRU with binary cross-entropy on random crops of the
  training episodes (``crop`` samples, starting from a zero state), and every ``eval_every``
  iterations runs it over the calibration episodes from their start, as the estimator does;
  the weights with the best calibration F1 (at their own best threshold) are kept. The
  thresholds and the gate filter are calibrated afterwards as for the gate head
  (:func:`~neuract.estimate.calibrate.select_gate_filter`).

A fixed-lag gate (``NeuralActuatorConfig.gate_lag`` = D) is trained the same way with one
logit per lag k = 0 .. D, each against the label k samples back (the loss averages them all);
its calibration passes score the lag-D decision of each sample (the largest lag available near
an episode's end), as :func:`~neuract.estimate.neural.estimate` decides; with a shorter
decision lag (``NeuralActuatorConfig.gate_decide``), that lag's decision.

The GRU can be trained on more episodes than the rest of the model (e.g. twin episodes of
other units, :mod:`neuract.pipeline.twin_experiment`): the rows are computed chunk by chunk
and only they are kept (``4 * F`` bytes per sample: 576 for the 144 channels of the twin
estimator). Training is resumable: with ``checkpoint`` set, the state is written every
``eval_every`` iterations and a rerun continues from it to the same result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from neuract.errors import ConfigError
from neuract.estimate.calibrate import _GRID
from neuract.eval.gate import decision_f1
from neuract.fit.checkpoint import normalise_key
from neuract.fit.loop import Evaluation, StateFile, Trainer
from neuract.neuralactuator.features import assemble, reference_inputs, trajectory_channels
from neuract.neuralactuator.gate import RecurrentGate, lagged_probability
from neuract.neuralactuator.model import NeuralActuator
from neuract.neuralactuator.physics import arm_model
from neuract.neuralactuator.reference import reference_channels_many
from neuract.neuralactuator.train import _digest


@dataclass
class GateTrainConfig:
    """Schedule of :func:`train_gate_rnn`."""

    iters: int = 3000
    """optimiser steps"""
    batch: int = 16
    """episode crops per step"""
    crop: int = 800
    """samples per crop (a shorter episode is used whole)"""
    lr: float = 1e-3
    """Adam learning rate (cosine decay to 0 over ``iters``)"""
    grad_clip: float = 1.0
    eval_every: int = 250
    """iterations between calibration passes (the kept weights are the best of these)"""
    seed: int = 0
    """initialisation and crop sampling"""
    checkpoint: str = ""
    """training-state file (safetensors), written every ``eval_every`` iterations; if it
    exists when training starts, training resumes from it. Empty: none."""
    max_seconds: float = 0.0
    """stop after this much wall time of this call (0: no limit); the best weights so far
    are kept (a run stopped this way scores and saves an extra calibration pass there, so
    resuming it does not reproduce an uninterrupted run exactly)"""

    def validate(self) -> GateTrainConfig:
        for k in ("iters", "batch", "crop", "eval_every"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"GateTrainConfig.{k} = {v!r}; expected an integer >= 1")
        if self.crop < 2:
            raise ConfigError(f"GateTrainConfig.crop = {self.crop}; expected >= 2 samples")
        for k in ("lr", "grad_clip"):
            v = getattr(self, k)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v)
                                           and v > 0):
                raise ConfigError(f"GateTrainConfig.{k} = {v!r}; expected a finite value > 0")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"GateTrainConfig.seed = {self.seed!r}; expected an integer >= 0")
        ms = self.max_seconds
        if isinstance(ms, bool) or not (isinstance(ms, (int, float)) and math.isfinite(ms)
                                        and ms >= 0):
            raise ConfigError(f"GateTrainConfig.max_seconds = {self.max_seconds!r}; expected "
                              ">= 0 (0: no limit)")
        return self


@dataclass
class GateRows:
    """One episode's recurrent-gate inputs: ``rows`` (T, F) float32 normalised feature rows of
    its valid samples (from sample ``history - 1`` on) and ``contact`` (T,) bool labels."""

    name: str
    rows: np.ndarray
    contact: np.ndarray

    def __len__(self) -> int:
        return len(self.contact)


def gate_rows(model: NeuralActuator, trajs: Sequence[Any], group: int = 32,
              progress: Callable[[int, int], None] | None = None) -> list[GateRows]:
    """The :class:`GateRows` of every episode of ``trajs`` with a contact label (others are
    left out) and at least ``history`` samples. The servo-reference channels, if the model
    reads them, are simulated ``group`` episodes at a time. progress(done, total) after each
    group."""

    cfg = model.cfg
    n, h = cfg.n_joints, cfg.history
    use = [tr for tr in trajs if "contact" in tr and len(tr["t"]) >= h]
    out: list[GateRows] = []
    for g in range(0, len(use), group):
        chunk = use[g:g + group]
        refs: list[Any] = [None] * len(chunk)
        if model.reference is not None:

            servo, robot, steps = model.reference
            refs = reference_channels_many([reference_inputs(tr, n) for tr in chunk], servo,
                                           arm_model(str(robot)), steps)
        for tr, ref in zip(chunk, refs):
            parts = trajectory_channels(tr, cfg.channels, n, cfg.physics, cfg.context_s, ref,
                                        cfg.ident_memory)
            x = assemble({k: torch.tensor(v, dtype=torch.float32) for k, v in parts.items()},
                         cfg.channels)
            with torch.no_grad():
                rows = model.gate_rows(x[h - 1:]).numpy().astype(np.float32)
            name = getattr(getattr(tr, "meta", None), "name", "") or f"episode {len(out)}"
            out.append(GateRows(name, rows, np.asarray(tr["contact"], bool)[h - 1:]))
        if progress is not None:
            progress(min(g + group, len(use)), len(use))
    return out


@torch.no_grad()
def gate_probabilities(gate: RecurrentGate, eps: Sequence[GateRows],
                       lag: int | None = None) -> list[np.ndarray]:
    """The recurrent gate's contact probability over each episode, from its start (a
    fixed-lag gate's decided at ``lag``, default its largest:
    :func:`~neuract.neuralactuator.gate.lagged_probability`)."""
    lag = gate.lag if lag is None else lag
    return [lagged_probability(gate(torch.from_numpy(e.rows)[None])[0][0], lag).numpy()
            for e in eps]


def best_f1(probs: Sequence[np.ndarray], eps: Sequence[GateRows]) -> tuple[float, float]:
    """(F1, threshold) of the grid threshold with the best pooled F1 (ties: the lowest)."""
    p = np.concatenate(probs)
    y = np.concatenate([e.contact for e in eps])
    scores = [decision_f1(p >= g, y) for g in _GRID]
    i = int(np.argmax(scores))
    return float(scores[i]), float(_GRID[i])


def _check_rows(eps: Sequence[GateRows], n_in: int, what: str) -> None:
    if not eps:
        raise ConfigError(f"train_gate_rnn: no {what} episodes with a contact label")
    for e in eps:
        if e.rows.ndim != 2 or e.rows.shape[1] != n_in or len(e.rows) != len(e.contact):
            raise ConfigError(f"train_gate_rnn: {what} episode {e.name!r} has rows "
                              f"{e.rows.shape} and {len(e.contact)} labels; expected (T, "
                              f"{n_in}) and T")
    y = np.concatenate([e.contact for e in eps])
    if not y.any() or y.all():
        raise ConfigError(f"train_gate_rnn: the {what} episodes hold only "
                          f"{'contact' if y.all() else 'no-contact'} samples; the gate needs "
                          "both")


def _data_digest(eps: Sequence[GateRows]) -> str:
    """A checksum of the rows and labels (the lengths, labels and each episode's row sums)."""
    h = hashlib.sha256()
    for e in eps:
        h.update(np.int64(len(e)).tobytes() + np.packbits(e.contact).tobytes()
                 + e.rows.sum(0, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


def _run_key(model: NeuralActuator, cfg: GateTrainConfig, train: Sequence[GateRows],
             calib: Sequence[GateRows]) -> dict[str, Any]:

    opts = {k: v for k, v in dataclasses.asdict(cfg).items()
            if k not in ("checkpoint", "max_seconds")}
    weights = {k: v for k, v in model.state_dict().items() if not k.startswith("gate_rnn.")}
    # keys before these options: none
    lag = {"lag": model.cfg.gate_lag} if model.cfg.gate_lag else {}
    if model.cfg.gate_decide != -1:
        lag["decide"] = model.cfg.gate_decision_lag
    return normalise_key({"hidden": model.cfg.gate_rnn, "conv": model.cfg.gate_conv, **lag,
                          **opts,
                          "model_sha256": _digest(weights),
                          "train": {"episodes": len(train), "sha256": _data_digest(train)},
                          "calib": {"episodes": len(calib), "sha256": _data_digest(calib)}})


def train_gate_rnn(model: NeuralActuator, train: Sequence[GateRows],
                   calib: Sequence[GateRows], cfg: GateTrainConfig | None = None,
                   progress: Callable[[int, int, dict], None] | None = None
                   ) -> dict[str, Any]:
    """Train ``model``'s recurrent gate (``model.cfg.gate_rnn`` hidden units) on the
    :class:`GateRows` of the training episodes, keeping the weights with the best F1 on the
    calibration episodes (see the module); the rest of the model is not changed. Returns a
    report: iterations, seconds, the kept iteration, its calibration F1 and threshold, and
    the history of calibration passes. progress(iteration, total, info) after each
    calibration pass. The loop is :class:`neuract.fit.loop.Trainer`."""
    cfg = (cfg or GateTrainConfig()).validate()
    if model.gate_rnn is None:
        raise ConfigError("train_gate_rnn: the model has no recurrent gate (NeuralActuatorConfig"
                          ".gate_rnn = 0)")
    n_in = model.cfg.n_features
    _check_rows(train, n_in, "training")
    _check_rows(calib, n_in, "calibration")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        gate = RecurrentGate(n_in, model.cfg.gate_rnn, model.cfg.gate_conv, model.cfg.gate_lag)
    decide = model.cfg.gate_decision_lag
    gen = np.random.default_rng(cfg.seed)
    state = None
    if cfg.checkpoint:
        state = StateFile(cfg.checkpoint, _run_key(model, cfg, train, calib), "gate_rnn_train",
                          cfg.eval_every, resume_hint="rerun with that run's options",
                          restart_hint="delete the file", wording="then-now",
                          what="the gate training state")
    history: list[dict] = []
    seen = {"threshold": 0.5, "best": 0.5}  # the last pass's threshold, the best pass's

    def score(step: int) -> tuple[float, dict[str, Any]]:
        f1, thr = best_f1(gate_probabilities(gate, calib, decide), calib)
        seen["threshold"] = thr
        return f1, {"calib_f1": round(f1, 5), "threshold": thr}

    def restore(st: dict[str, Any]) -> None:
        history.extend(st["history"])
        seen["best"] = st["threshold"]

    trainer = Trainer(
        gate, torch.optim.Adam(gate.parameters(), lr=cfg.lr), cfg.iters,
        grad_clip=cfg.grad_clip,
        schedule=lambda o, start: torch.optim.lr_scheduler.CosineAnnealingLR(
            o, cfg.iters, last_epoch=start - 1),
        numpy_rng=gen, state=state, max_seconds=cfg.max_seconds,
        evaluation=Evaluation(cfg.eval_every, score, higher_is_better=True, keep=gate,
                              on_best=lambda step, f1: seen.update(best=seen["threshold"])),
        nonfinite=lambda i: f"non-finite recurrent-gate loss at iteration {i + 1}; lower lr",
        loop_state=lambda: {"history": history, "threshold": seen["best"]}, restore=restore)
    out = trainer.run(
        _crop_loss(gate, train, cfg, model.cfg.gate_lag, gen),
        record=lambda it, info: history.append(info) if "calib_f1" in info else None,
        progress=(lambda it, info: progress(it, cfg.iters, info) if "calib_f1" in info
                  else None) if progress is not None else None)
    best = out.best
    if not trainer.restore_best():  # resumed at the end, or stopped before a pass
        f1, seen["best"] = best_f1(gate_probabilities(gate, calib, decide), calib)
        best = {"score": f1, "step": out.step}
    model.gate_rnn.load_state_dict(gate.state_dict())
    model.gate_rnn.trained.fill_(True)
    return {"iterations": out.step, "seconds": round(out.seconds, 1),
            "kept_iteration": best["step"], "calib_f1": round(best["score"], 5),
            "calib_threshold": seen["best"], "n_train_episodes": len(train),
            "n_train_samples": int(sum(len(e) for e in train)),
            "n_calib_episodes": len(calib), "history": history}


def _crop_loss(gate: RecurrentGate, train: Sequence[GateRows], cfg: GateTrainConfig, lag: int,
               gen: np.random.Generator):
    """The loss of step ``i``: binary cross-entropy of ``cfg.batch`` random crops of the
    training episodes (drawn from ``gen``), a fixed-lag gate's every lag against its label."""
    X = [torch.from_numpy(e.rows) for e in train]
    Y = [torch.from_numpy(e.contact.astype(np.float32)) for e in train]
    n_in = X[0].shape[1]
    # target of lag k at crop sample i: the label of sample i - k (none for i < k)
    back = torch.arange(cfg.crop)[:, None] - torch.arange(lag + 1)[None, :]  # (crop, K)

    def loss(i: int) -> tuple[torch.Tensor, dict[str, Any]]:
        idx = gen.integers(0, len(X), cfg.batch)
        lens = [min(cfg.crop, len(X[j])) for j in idx]
        L = max(lens)
        xb = torch.zeros(cfg.batch, L, n_in)
        yb = torch.zeros(cfg.batch, L)
        mb = torch.zeros(cfg.batch, L)
        for b, (j, m) in enumerate(zip(idx, lens)):
            s = int(gen.integers(0, len(X[j]) - m + 1))
            xb[b, :m], yb[b, :m], mb[b, :m] = X[j][s:s + m], Y[j][s:s + m], 1.0
        logit, _ = gate(xb)  # causal: padding after a crop does not change its outputs
        if lag:  # (B, L, K) targets and masks: sample i - k's label at sample i
            bk = back[:L]
            yb = yb[:, bk.clamp(min=0)]
            mb = mb[:, :, None] * (bk >= 0)
        value = (F.binary_cross_entropy_with_logits(logit, yb, reduction="none") * mb).sum() \
            / mb.sum()
        return value, {"iteration": i + 1, "loss": round(value.item(), 5)}

    return loss


__all__ = ["GateRows", "GateTrainConfig", "best_f1", "gate_probabilities", "gate_rows",
           "train_gate_rnn"]
