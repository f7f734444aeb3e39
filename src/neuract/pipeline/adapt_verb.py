"""``neuract adapt``: fine-tune a NeuralActuator checkpoint on a new unit's telemetry.

    neuract adapt --checkpoint runs/demo/checkpoints/neuralactuator_simulator \\
        --data runs/new_unit --out runs/new_unit_simulator

Online adaptation, pose-only like the original training (no torque labels): the checkpoint's
mode, channels and normalisation statistics are kept, and :func:`neuract.neuralactuator.
fine_tune` continues training on a few minutes of the new unit's episodes. The last
``--holdout`` share of the episodes is held out and scored before and after with the training
loss's rollout error (:func:`neuract.neuralactuator.pose_error`), so the run says whether
adaptation helped. The output is a checkpoint directory like the input (``neuract estimate``
and ``neuract evaluate --checkpoints`` read it); calibrated thresholds are carried over. A
killed run resumes from ``<out>.train_state.safetensors`` (removed when it completes).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import neuract.neuralactuator as na
from neuract.atomic import check_dest
from neuract.errors import ConfigError, SchemaError
from neuract.neuralactuator import NeuralActuatorTrainConfig, pose_error, save_checkpoint
from neuract.neuralactuator.checkpoint import CHECKPOINT_DEST, read_config
from neuract.pipeline.checkpoints import load_model
from neuract.pipeline.progress import reporter
from neuract.pipeline.streaming import model_episodes, resolve_robot


@dataclass
class AdaptConfig:
    """Fine-tune a NeuralActuator checkpoint on a new unit's telemetry (pose-only)."""

    checkpoint: Path
    """NeuralActuator checkpoint directory (either mode)"""
    data: Path
    """the new unit's telemetry: a neuract dataset directory, or a NAD CSV file / folder"""
    out: Path = Path("runs/adapt")
    """output checkpoint directory"""
    robot: str = ""
    """arm model (bundled name or MJCF/URDF path); empty: from the episodes (so101, omx)"""
    force_robot: bool = False
    """use a bundled --robot on episodes recorded on another arm (refused otherwise)"""
    site: str = ""
    """end-effector site where force labels act (estimator mode); empty: the robot's default"""
    steps: int = 100
    lr: float = 3e-4
    batch: int = 32
    horizon: int = 0
    """rollout length [telemetry steps]; 0: 36 (simulator mode) / 8 (estimator mode)"""
    freeze_encoder: bool = False
    """train only the head trunk, heads and servo gains (very little data)"""
    holdout: float = 0.25
    """share of the episodes held out and scored before / after (0: none)"""
    seed: int = 0
    overwrite: bool = False
    """replace --out if it exists"""
    quiet: bool = False


CHECKPOINT_EVERY = 10
"""steps between saved training states: a Ctrl-C or a kill loses at most this many"""


def run_adapt(cfg: AdaptConfig) -> dict[str, Any]:
    torch.set_num_threads(1)
    if cfg.steps < 1:
        raise ConfigError(f"--steps {cfg.steps}; expected >= 1")
    if not 0 <= cfg.holdout < 1:
        raise ConfigError(f"--holdout {cfg.holdout}; expected 0 <= share < 1")
    out = Path(cfg.out)
    # before any work: --out may not hold an input, and --overwrite replaces only a checkpoint
    check_dest(out, cfg.overwrite, inputs=(cfg.checkpoint, cfg.data, cfg.robot),
               **CHECKPOINT_DEST)
    model = load_model(Path(cfg.checkpoint))
    extra = read_config(cfg.checkpoint)[1].get("extra") or {}
    trajs = model_episodes(model, cfg.checkpoint, cfg.data)
    h = model.cfg.history
    short = [t for t in trajs if len(t) < h]  # no window fits in such an episode
    if len(short) == len(trajs):  # nothing to adapt on (estimate and simulate refuse them too)
        raise SchemaError(f"--data {str(cfg.data)!r}: episode {short[0].meta.name!r} has "
                          f"{len(short[0])} samples, fewer than the model's history of {h}"
                          + (f" ({len(short)} such episodes)" if len(short) > 1 else "")
                          + "; adapt needs episodes of at least that many samples")
    if short:
        warnings.warn(f"--data {str(cfg.data)!r}: {len(short)} episode(s) shorter than the "
                      f"model's history of {h} samples left out (e.g. "
                      f"{short[0].meta.name!r}, {len(short[0])} samples)", stacklevel=2)
        trajs = [t for t in trajs if len(t) >= h]
    # at least one episode is always trained on
    k = min(math.ceil(cfg.holdout * len(trajs)), len(trajs) - 1) if cfg.holdout > 0 else 0
    fit_eps, held = trajs[:len(trajs) - k], trajs[len(trajs) - k:]
    horizon = cfg.horizon or (36 if model.cfg.mode == "simulator" else 8)
    state = out.with_name(out.name + ".train_state.safetensors")
    tc = NeuralActuatorTrainConfig(steps=cfg.steps, lr=cfg.lr, batch=cfg.batch, horizon=horizon,
                     freeze_encoder=cfg.freeze_encoder, seed=cfg.seed,
                     checkpoint=str(state), checkpoint_every=CHECKPOINT_EVERY).validate()
    robot, site = resolve_robot(cfg.robot, model, trajs, cfg.site, force=cfg.force_robot,
                                data=f"--data {str(cfg.data)!r}")
    score = (lambda m: pose_error(m, held, robot, tc, site, seed=cfg.seed)) if held \
        else (lambda m: None)
    before = score(model)
    stage = f"adapt NeuralActuator ({model.cfg.mode} mode, pose-only)"
    with reporter(cfg.quiet) as progress:  # steps, loss, ETA; a resumed state says so
        model, rep = na.fine_tune(model, fit_eps, robot, tc, site=site,
                                  progress=lambda s, t, info: progress(stage, s, t,
                                                                       loss=info.get("loss")))
    after = score(model)
    summary = {"adapted_from": str(cfg.checkpoint), "data": str(cfg.data),
               "mode": model.cfg.mode, "steps": rep["steps"], "seconds": round(rep["seconds"], 1),
               "train_episodes": [t.meta.name for t in fit_eps],
               "heldout_episodes": [t.meta.name for t in held],
               "heldout_pose_mae_deg": {"before": before, "after": after}}
    save_checkpoint(model, out, extra={**extra, "adapt": summary}, overwrite=cfg.overwrite)
    state.unlink(missing_ok=True)
    if not cfg.quiet:
        msg = (f"held-out pose error {before:.4f} -> {after:.4f} deg ({len(held)} episodes)"
               if held else "no held-out episodes (--holdout 0 or one episode): not scored")
        print(f"neuract adapt: {model.cfg.mode} mode, {rep['steps']} steps on "
              f"{len(fit_eps)} episodes; {msg} -> {out}")
    return summary


def run(cfg: AdaptConfig) -> dict[str, Any]:
    return run_adapt(cfg)


__all__ = ["AdaptConfig", "run", "run_adapt"]
