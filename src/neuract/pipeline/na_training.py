"""An experiment's NeuralActuator stage: each mode trained pose-only on the training
episodes (or taken from a given checkpoint), the estimator's recurrent contact gate, its
calibrated gate and condition decisions, and the checkpoints written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neuract.estimate import calibrate_gate, select_condition_smoothing, select_gate_filter
from neuract.estimate.calibrate import gate_samples
from neuract.estimate.filters import DEFAULT_CONDITION_TAU_S
from neuract.estimate.gate_rnn import gate_rows, train_gate_rnn
from neuract.neuralactuator import count_flops, count_params, save_checkpoint, train_neuralactuator
from neuract.neuralactuator.config import servo_json
from neuract.neuralactuator.data import per_joint_condition
from neuract.pipeline import baselines as bl
from neuract.pipeline.experiment_config import (
    ExperimentConfig,
    gate_train_config,
    na_config,
    train_config,
    train_state_path,
)
from neuract.pipeline.progress import ProgressFn, with_loss
from neuract.pipeline.setups import RobotSetup
from neuract.pipeline.splits import calibration_set, calibration_split, has_contact

GateExtraFn = Callable[[Any, ProgressFn], list]
"""``gate_extra(model, progress)``: extra :class:`~neuract.estimate.gate_rnn.GateRows`
the recurrent gate trains on, computed with the trained estimator (its normalisation)"""


def train_neuralactuators(setup: RobotSetup, train: Sequence[Any], cfg: ExperimentConfig,
                          out_dir: str | Path | None, progress: ProgressFn, timed,
                          res: dict[str, Any], pretrained: dict[str, Any] | None,
                          baselines: tuple[dict[str, Any], dict[str, Any], str | None],
                          gate_extra: GateExtraFn | None) -> dict[str, Any]:
    """NeuralActuator of both modes, pose-only: ``pretrained``'s model of a mode where given,
    else trained for that mode's steps (none at 0 steps), recorded in ``res["models"]``.
    baselines: the fitted baselines (:func:`~neuract.pipeline.baseline_fits.fit_baselines`)
    a servo prior or reference channels build on. Returns mode -> model."""
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
        na[mode] = _train_mode(setup, train, cfg, mode, steps, out_dir, progress, timed, res,
                               baselines, gate_extra)
    return na


def _train_mode(setup: RobotSetup, train: Sequence[Any], cfg: ExperimentConfig, mode: str,
                steps: int, out_dir: str | Path | None, progress: ProgressFn, timed,
                res: dict[str, Any], baselines: tuple[dict[str, Any], dict[str, Any], str | None],
                gate_extra: GateExtraFn | None) -> Any:
    """Train one mode's NeuralActuator (the estimator also calibrated), record it in
    ``res["models"]``, write its checkpoint into ``out_dir``; returns the model."""
    fitted, fit_configs, best_par = baselines
    n = len(train[0].meta.joint_names)
    servo = ""
    if ((mode == "simulator" and cfg.sim_prior == "servo")
            or (mode == "estimator" and cfg.reference_steps)):
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
                       progress=lambda s, t, info, st=stage: with_loss(
                           progress, st, s, t, info.get("loss")),
                       servo=fitted.get(best_par) if servo else None)
    name = f"NeuralActuator[{mode}]"
    res["models"][name] = {"mode": mode, "params": count_params(model),
                           "flops": count_flops(model.cfg), "train": rep}
    extra = {"robot": setup.name, "train": {k: v for k, v in rep.items() if k != "history"}}
    if servo:  # the frozen servo (prior or reference; its parameters are not counted)
        role = "prior" if mode == "simulator" else "reference"
        res["models"][name][role] = extra[role] = best_par
    if mode == "estimator":
        calibrate_estimator(model, fit_eps, calib, train, cfg, out_dir, progress, timed,
                            gate_extra, res["models"][name], extra)
    if out_dir is not None:
        save_checkpoint(model, Path(out_dir) / "checkpoints" / f"neuralactuator_{mode}",
                        extra=extra, overwrite=True)
    return model


def calibrate_estimator(model: Any, fit_eps: Sequence[Any], calib: Sequence[Any],
                        train: Sequence[Any], cfg: ExperimentConfig,
                        out_dir: str | Path | None, progress: ProgressFn, timed,
                        gate_extra: GateExtraFn | None, rec: dict[str, Any],
                        extra: dict[str, Any]) -> None:
    """The trained estimator's recurrent gate (``cfg.gate_rnn``) and its calibrated condition
    and gate decisions, set on the model and recorded in ``rec`` (its results entry) and
    ``extra`` (its checkpoint's)."""
    n = len(train[0].meta.joint_names)
    # a threshold is calibrated on the held-out episodes only when they hold at least
    # two episodes of each class; otherwise on the training episodes if they do;
    # otherwise the default threshold (0.5) and smoothing are kept
    c_eps = calibration_set(calib, train, lambda tr: bool(per_joint_condition(tr, n).any()))
    g_eps = calibration_set(calib, train, has_contact)
    if model.gate_rnn is not None:
        rec["gate_rnn"] = timed("train_gate_rnn", train_recurrent_gate, model, fit_eps, g_eps,
                                cfg, out_dir, progress, gate_extra)
        rec["gate_rnn"]["selected_on"] = (
            None if g_eps is None else "training episodes" if g_eps is train
            else "held-out calibration episodes")
        # the counts of the model as it is kept (the gate removed if untrainable)
        rec.update(params=count_params(model), flops=count_flops(model.cfg))
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
            rec["condition_tau_scores"] = scores
            keys.append("condition_tau_s")
    if g_eps is not None and cfg.gate_tau_grid:
        raw = gate_samples(model, g_eps)  # one pass of the model for both choices
        (model.gate_tau_s, model.gate_threshold, model.gate_release,
         rec["gate_tau_scores"]) = select_gate_filter(model, g_eps, cfg.gate_tau_grid, raw=raw)
        keys += ["gate_threshold", "gate_tau_s", "gate_release"]
        # the plain threshold on the same episodes, scored beside the filter
        rec["gate_plain_threshold"] = calibrate_gate(model, g_eps, raw=raw)
    elif g_eps is not None:
        model.gate_threshold = calibrate_gate(model, g_eps)
        keys.append("gate_threshold")
    for k in keys:
        rec[k] = extra[k] = getattr(model, k)
    rec["calibration_episodes"] = {
        k: ("none: fewer than two episodes of a class, default threshold" if eps is None
            else "training episodes" if eps is train else "held out of training")
        for k, eps in (("condition", c_eps), ("gate", g_eps))}


def train_recurrent_gate(model: Any, fit_eps: Sequence[Any], g_eps: Sequence[Any] | None,
                         cfg: ExperimentConfig, out_dir: str | Path | None,
                         progress: ProgressFn, gate_extra: GateExtraFn | None
                         ) -> dict[str, Any]:
    """Train the estimator's recurrent gate (``cfg.gate_rnn``) on the training episodes'
    rows and ``gate_extra``'s, keeping the best iteration on ``g_eps`` (the gate's
    calibration episodes); without labelled calibration episodes the recurrent gate is
    removed from the model (the gate head decides) and the report says so."""
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


__all__ = ["GateExtraFn", "calibrate_estimator", "train_neuralactuators",
           "train_recurrent_gate"]
