"""An experiment's scoring, one protocol for every model: open-loop rollouts of the
simulators on the test episodes (simulator mode), and the estimators' torque, force, gate
and condition on them (estimator mode), with the baselines each mode is scored beside."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neuract.estimate import estimate, force_estimator
from neuract.eval import evaluate_estimator, evaluate_rollouts
from neuract.eval.protocol import simulate_full
from neuract.neuralactuator.data import per_joint_condition
from neuract.pipeline import baselines as bl
from neuract.pipeline.experiment_config import ExperimentConfig
from neuract.pipeline.progress import ProgressFn
from neuract.pipeline.setups import RobotSetup


def baseline_simulators(setup: RobotSetup, fitted: dict[str, Any], cfg: ExperimentConfig,
                        train: Sequence[Any], res: dict[str, Any],
                        given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The simulator-mode baselines: MuJoCo's default position servo (where the setup has
    one, recorded in ``res["models"]``; a saved one among ``given`` instead, with its
    parameters) and every fitted model."""
    sims: dict[str, Any] = {}
    name = "MuJoCo default servo"
    saved = (given or {}).get(name)
    if saved is not None and hasattr(saved, "simulator"):
        sims[name] = saved.simulator()
        res["models"][name] = {"mode": "simulator", "params": 0, "flops": None,
                               "train": "pretrained checkpoint", "checkpoint": str(saved.path)}
    elif setup.mujoco_xml:
        sims[name] = bl.mujoco_servo_simulator(setup.mujoco_xml, train[0].meta.joint_names)
        res["models"][name] = {"mode": "simulator", "params": 0, "flops": None}
    for k, m in fitted.items():
        sims[k] = bl.system_simulator(m, setup.robot64, cfg.substeps)
    return sims


def score_rollouts(sims: dict[str, Any], test: Sequence[Any], cfg: ExperimentConfig, timed,
                   progress: ProgressFn, res: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Every simulator's open-loop rollouts at the protocol's horizons (``res["rollouts"]``);
    returns (name -> its full-trajectory rollout of the figure's episode, that episode)."""
    horizons: list[Any] = [h for h in cfg.horizons]
    if cfg.full:
        horizons.append("full")
    hist = cfg.size.history
    inputs = ("q_goal", "voltage") if all("voltage" in tr for tr in test) else ("q_goal",)
    full_q: dict[str, np.ndarray] = {}
    fig_traj = test[0].slice(0, min(len(test[0]), cfg.figure_samples))
    for i, (name, sim) in enumerate(sims.items()):
        progress("open-loop rollouts (simulator mode)", i, len(sims))
        recs = timed(f"rollouts_{name}", evaluate_rollouts, sim, test, name,
                     horizons=horizons, history=hist, inputs=inputs)
        res["rollouts"] += recs
        full_q[name] = simulate_full(sim, fig_traj, name, inputs=inputs, history=hist)
    progress("open-loop rollouts (simulator mode)", len(sims), len(sims))
    return full_q, fig_traj


def estimators(setup: RobotSetup, na: dict[str, Any], fitted: dict[str, Any],
               best_par: str | None, train: Sequence[Any], test: Sequence[Any],
               cfg: ExperimentConfig, timed, progress: ProgressFn, res: dict[str, Any]
               ) -> dict[str, Any]:
    """Name -> estimator of everything scored in estimator mode: NeuralActuator (``na``'s
    estimator), tau = Kt I with the force observers on it, the fitted models' torque (one
    batched pass over the test episodes each), the observer on the learned and the best
    parametric torque, and the condition classifiers (fitted here on ``train``)."""
    ests: dict[str, Any] = {}
    if "estimator" in na:
        ests["NeuralActuator"] = lambda tr: estimate(na["estimator"], tr)
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
    ests.update(condition_baselines(setup, train, cfg, timed, progress))
    return ests


def condition_baselines(setup: RobotSetup, train: Sequence[Any], cfg: ExperimentConfig, timed,
                        progress: ProgressFn) -> dict[str, Any]:
    """The condition classifiers fitted on ``train`` (where it has both classes): threshold,
    SVM, random forest, and with ``cfg.ident`` the random forest on the identification
    channels NeuralActuator reads."""
    ests: dict[str, Any] = {}
    conds = all("condition" in tr for tr in train)
    if not (conds and len(np.unique(np.concatenate([np.asarray(tr["condition"])
                                                     for tr in train]))) > 1):
        return ests
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
    return ests


def score_estimators(ests: dict[str, Any], test: Sequence[Any], timed, progress: ProgressFn,
                     res: dict[str, Any]) -> dict[str, dict[str, dict]]:
    """Every estimator scored on the test episodes (``res["estimation"]``); returns name ->
    episode -> its outputs (for the report's figures)."""
    cache: dict[str, dict[str, dict]] = {}
    for i, (name, est) in enumerate(ests.items()):
        progress("estimation (estimator mode)", i, len(ests))

        def cached(tr, est=est, name=name):
            out = est(tr)
            cache.setdefault(name, {})[tr.meta.name] = out
            return out

        res["estimation"].append(mark_unscored(timed(f"estimate_{name}", evaluate_estimator,
                                                     cached, test, name)))
    progress("estimation (estimator mode)", len(ests), len(ests))
    return cache


NO_CONTACT = "no contact samples"
NO_FREE = "no samples without contact"
NO_FORCE_LABEL = "no force-labelled samples"
NO_DEGRADED = "no degraded samples"
NO_NORMAL = "no normal samples"
NO_SAMPLES = "no scored samples"


def force_unscored(f: Mapping[str, Any] | None) -> dict[str, str]:
    """Metric -> why it is not scored, of a force record (:func:`neuract.eval.metrics.force_mae`):
    the MAE in contact without a contact sample, and so on. From the sample counts (or, in
    results written before they were stored, from which MAE is missing)."""
    if not f:
        return {}
    n_all, n_on, n_off = f.get("n_all"), f.get("n_contact"), f.get("n_no_contact")
    if n_all is None:  # older records: the MAE is None exactly where its samples are none
        n_all = 0 if f.get("all") is None else 1
        n_on = 0 if f.get("contact") is None else 1
        n_off = 0 if f.get("no_contact") is None else 1
    if not n_all:
        return dict.fromkeys(("all", "contact", "no_contact", "per_axis"), NO_FORCE_LABEL)
    out = {}
    if not n_on:
        out["contact"] = NO_CONTACT
    if not n_off:
        out["no_contact"] = NO_FREE
    return out


def gate_unscored(g: Mapping[str, Any] | None) -> dict[str, str]:
    """Metric -> why it is not scored, of a gate record (:class:`neuract.eval.gate.GateCounts`
    metrics): recall and F1 without a contact sample."""
    if not g:
        return {}
    if g.get("n_samples") == 0:
        return dict.fromkeys(("precision", "recall", "f1", "accuracy"), NO_SAMPLES)
    contact = g.get("recall") is not None  # tp + fn > 0
    return {} if contact else {"recall": NO_CONTACT, "f1": NO_CONTACT}


def condition_unscored(c: Mapping[str, Any] | None) -> dict[str, str]:
    """Metric -> why it is not scored, of a condition record
    (:func:`neuract.eval.metrics.condition_metrics`): balanced accuracy and AUC need a sample
    of both classes (over one class the balanced accuracy is that class's recall, 1.0 for a
    classifier that never says degraded on data with no degraded sample)."""
    if not c or not c.get("confusion"):
        return {}
    per_class = np.asarray(c["confusion"]).sum(1)
    if not per_class.sum():
        return dict.fromkeys(("accuracy", "balanced_accuracy", "auc"), NO_SAMPLES)
    if per_class.shape[0] >= 2 and not per_class[1:].sum():
        return dict.fromkeys(("balanced_accuracy", "auc"), NO_DEGRADED)
    if not per_class[0]:
        return dict.fromkeys(("balanced_accuracy", "auc"), NO_NORMAL)
    return {}


def _mark(rec: dict[str, Any] | None, reasons: dict[str, str]) -> None:
    """Set the metrics ``reasons`` names to None in ``rec`` and record why (``not_scored``)."""
    if rec is None or not reasons:
        return
    for k in reasons:
        if k in rec:
            rec[k] = None
    rec["not_scored"] = dict(reasons)


def mark_unscored(rec: dict[str, Any]) -> dict[str, Any]:
    """An estimation record (:func:`neuract.eval.evaluate_estimator`) with every metric that
    its test samples cannot score set to None and the reason beside it: ``not_scored``
    (metric -> reason, e.g. ``{"contact": "no contact samples"}``) in its ``force``,
    ``gate`` (and each ``gate_by_task`` entry) and ``condition`` (and ``episode_end``)
    records. Returns ``rec``, changed in place."""
    _mark(rec.get("force"), force_unscored(rec.get("force")))
    _mark(rec.get("gate"), gate_unscored(rec.get("gate")))
    for g in (rec.get("gate_by_task") or {}).values():
        _mark(g, gate_unscored(g))
    c = rec.get("condition")
    _mark(c, condition_unscored(c))
    if c and c.get("episode_end"):
        _mark(c["episode_end"], condition_unscored(c["episode_end"]))
    return rec


def plain_gate(model: Any, test: Sequence[Any], threshold: float) -> dict[str, Any]:
    """Gate metrics of an estimator-mode model on ``test`` with one plain contact threshold
    (no smoothing, no release threshold)."""
    rec = mark_unscored(evaluate_estimator(
        lambda tr: estimate(model, tr, gate_threshold=threshold), test,
        "NeuralActuator (plain gate threshold)"))["gate"]
    return {"threshold": float(threshold), **(rec or {})}


def per_motor_condition(outs: dict[str, dict], test: Sequence[Any]) -> dict[str, Any] | None:
    """NeuralActuator's per-motor condition decisions (probability > 0.5) scored on the test
    episodes' valid samples; None without per-motor outputs."""
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


__all__ = ["NO_CONTACT", "NO_DEGRADED", "NO_FORCE_LABEL", "NO_FREE", "NO_NORMAL", "NO_SAMPLES",
           "baseline_simulators", "condition_baselines", "condition_unscored", "estimators",
           "force_unscored", "gate_unscored", "mark_unscored", "per_motor_condition",
           "plain_gate", "score_estimators", "score_rollouts"]
