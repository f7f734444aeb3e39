"""An experiment's fitted baselines: the parametric servos and neural actuator nets,
identified pose-only on the training episodes, and the choice of the best parametric servo
(the prior and reference of NeuralActuator where the experiment builds on it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from neuract.actuators import ActuatorConfig
from neuract.actuators.neural import n_parameters
from neuract.eval import evaluate_rollouts
from neuract.fit.trainer import TrainConfig
from neuract.pipeline import baselines as bl
from neuract.pipeline.experiment_config import ExperimentConfig
from neuract.pipeline.progress import ProgressFn
from neuract.pipeline.setups import RobotSetup


def baseline_train_config(cfg: ExperimentConfig) -> TrainConfig:
    """The training options of every fitted baseline (pose-only, 2 curriculum stages of
    ``cfg.baseline_iters`` iterations in all)."""
    it = cfg.baseline_iters
    return TrainConfig(horizons=(0.3, 0.8), stage_iters=(it // 2, it - it // 2),
                       windows_per_run=4, runs_per_iter=8, label_inputs=(),
                       use_voltage=True, seed=cfg.seed, lr_net=3e-3)


def fit_baselines(setup: RobotSetup, train: Sequence[Any], cfg: ExperimentConfig, timed,
                  progress: ProgressFn, res: dict[str, Any],
                  given: dict[str, Any] | None = None
                  ) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """Fit the parametric servos and neural actuator nets pose-only on ``train`` (joint
    parameters :func:`baselines.fit_joints`), recording sizes and the choice in ``res``.
    given: name -> :class:`~neuract.fit.saved.FittedModel` of baselines saved by an earlier
    run (:func:`~neuract.pipeline.baseline_checkpoints.load_baselines`), used instead of
    fitting them. Returns (name -> SystemModel, name -> ActuatorConfig, the best parametric
    servo's name (lowest h=100 rollout error on the first training episodes) or None)."""
    hist = cfg.size.history
    fitted: dict[str, Any] = {}
    configs: dict[str, Any] = {}
    given = {k: v for k, v in (given or {}).items() if hasattr(v, "system")}
    fits = [(f"parametric {setup.servo}+{fr}",
             ActuatorConfig(type=setup.servo, friction=fr, control_dt=0.016))
            for fr in cfg.parametric_friction]
    fits += [(f"{arch.upper()} actuator net", ActuatorConfig(type=arch, control_dt=0.016))
             for arch in cfg.neural_baselines]
    names = [n for n, _ in fits]
    for name in [n for n in given if n not in names]:  # saved baselines this run would not fit
        fits.append((name, given[name].config.actuator))
    for name, acfg in fits:
        if name in given:
            fitted[name], configs[name] = given[name].system, given[name].config.actuator
            res["models"][name] = {"mode": "simulator", "params": n_parameters(fitted[name]),
                                   "flops": None, "train": "pretrained checkpoint",
                                   "checkpoint": str(given[name].path)}
            continue
        if cfg.baseline_iters <= 0:
            continue
        tc = baseline_train_config(cfg)
        done = [0]

        def log(msg, name=name, done=done):
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


__all__ = ["baseline_train_config", "fit_baselines"]
