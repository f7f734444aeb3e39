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

The stages live apart: the configuration and its checks (:mod:`.experiment_config`), the
episode splits (:mod:`.splits`), the fitted baselines (:mod:`.baseline_fits`), NeuralActuator's
training and calibration (:mod:`.na_training`) and the scoring (:mod:`.scoring`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from neuract.neuralactuator import simulator
from neuract.pipeline.baseline_checkpoints import save_baselines
from neuract.pipeline.baseline_fits import baseline_train_config, fit_baselines
from neuract.pipeline.experiment_config import (
    ExperimentConfig,
    check_experiment,
    needs_servo,
    train_state_path,
)
from neuract.pipeline.na_training import GateExtraFn, train_neuralactuators
from neuract.pipeline.progress import ProgressFn, no_progress
from neuract.pipeline.scoring import (
    baseline_simulators,
    estimators,
    per_motor_condition,
    plain_gate,
    score_estimators,
    score_rollouts,
)
from neuract.pipeline.setups import RobotSetup
from neuract.pipeline.splits import check_split


def run_experiment(setup: RobotSetup, train: Sequence[Any], test: Sequence[Any],
                   cfg: ExperimentConfig, out_dir: str | Path | None = None,
                   progress: ProgressFn | None = None,
                   pretrained: dict[str, Any] | None = None,
                   gate_extra: GateExtraFn | None = None,
                   baselines: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fit everything on ``train``, score on ``test``; returns the results dict (JSON-able
    apart from ``_figures``, raw arrays for the report, and ``_neuralactuator``, the models).
    Checkpoints go to ``out_dir``.
    pretrained: mode -> NeuralActuator to evaluate instead of training that mode.
    gate_extra: extra rows for the estimator's recurrent gate (``cfg.gate_rnn``), if any.
    baselines: name -> saved baseline (:func:`~neuract.pipeline.baseline_checkpoints.
    load_baselines`) used instead of fitting that baseline. With ``out_dir``, every
    simulator-mode baseline is saved under ``out_dir/checkpoints/baseline_<name>/``."""
    progress = progress or no_progress
    torch.manual_seed(cfg.seed)
    train, test = list(train), list(test)
    check_split(train, test)
    res = _new_results(setup, train, test)
    t_all = time.perf_counter()

    def timed(name, fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        res["timings_s"][name] = round(time.perf_counter() - t0, 1)
        return out

    check_experiment(cfg, tuple(pretrained or ()))
    # ---- pose-only fitted baselines: before NeuralActuator when it builds on the servo
    need_servo = needs_servo(cfg, tuple(pretrained or ()))
    fits = (fit_baselines(setup, train, cfg, timed, progress, res, baselines) if need_servo
            else ({}, {}, None))
    # ---- NeuralActuator, both modes, pose-only
    na = train_neuralactuators(setup, train, cfg, out_dir, progress, timed, res, pretrained,
                               fits, gate_extra)
    sims: dict[str, Any] = {}
    if "simulator" in na:
        sims["NeuralActuator"] = simulator(na["simulator"], setup.robot, cfg.substeps)
    # ---- simulator baselines, rollouts (simulator mode)
    if not need_servo:
        fits = fit_baselines(setup, train, cfg, timed, progress, res, baselines)
    fitted, configs, best_par = fits
    sims.update(baseline_simulators(setup, fitted, cfg, train, res, baselines))
    if out_dir is not None:  # each baseline as a checkpoint that simulate and score read
        res["baseline_checkpoints"] = save_baselines(
            out_dir, setup, fitted, configs, baseline_train_config(cfg),
            f"the training episodes of the run in {str(out_dir)!r} (results.json lists them)",
            baselines)
    full_q, fig_traj = score_rollouts(sims, test, cfg, timed, progress, res)
    # ---- estimator mode: NeuralActuator and the baselines
    ests = estimators(setup, na, fitted, best_par, train, test, cfg, timed, progress, res)
    cache = score_estimators(ests, test, timed, progress, res)
    if "NeuralActuator" in cache:
        res["condition_per_motor"] = per_motor_condition(cache["NeuralActuator"], test)
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


def _new_results(setup: RobotSetup, train: list, test: list) -> dict[str, Any]:
    """The results record of a run before anything is fitted: the data's size."""
    return {"robot": setup.name, "n_train": len(train), "n_test": len(test),
            "train_minutes": sum(float(tr["t"][-1] - tr["t"][0]) for tr in train) / 60,
            "test_minutes": sum(float(tr["t"][-1] - tr["t"][0]) for tr in test) / 60,
            "models": {}, "rollouts": [], "estimation": [], "timings_s": {}}


__all__ = ["run_experiment"]
