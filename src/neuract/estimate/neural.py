"""Streaming estimates from an estimator-mode NeuralActuator: torque, force, gate, condition.

:func:`estimate` / :func:`estimator` (estimator mode): every step's torque, force, contact gate
and per-motor condition from the real telemetry history (the simulator-mode adapter is
:func:`neuract.neuralactuator.rollout.simulator`). The condition output
  is smoothed causally (exponential moving average of the per-motor probabilities, time
  constant ``condition_tau_s``, start-up bias removed: :func:`smooth_causal`) -- a motor's
  condition does not change within seconds; the
  episode-level ``condition_prob`` is the largest per-motor degraded probability. The
  decision threshold is calibrated on the training episodes (:func:`calibrate_condition`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from neuract.errors import ConfigError, SchemaError
from neuract.estimate.filters import (
    gate_filter,
    resolve_filters,
    shift_threshold,
    smooth_causal,
)
from neuract.estimate.stream import StreamingEstimator
from neuract.neuralactuator.features import windows
from neuract.neuralactuator.gate import decision_delay, lagged_probability
from neuract.neuralactuator.model import NeuralActuator, check_gate_trained


@dataclasses.dataclass(frozen=True)
class EstimateInputs:
    """The history windows :func:`estimate` feeds a model for one trajectory, computed once by
    :func:`estimate_inputs` to estimate with several models that read the same inputs (one
    estimator with different contact gates, say). With servo-reference channels the windows
    are most of :func:`estimate`'s time (the reference servo is simulated over the episode).

    x: (samples - history + 1, history, features); n_samples: the trajectory's length;
    signature: :func:`input_signature` of the model they were computed for."""

    x: torch.Tensor
    n_samples: int
    signature: tuple


def input_signature(model: NeuralActuator) -> tuple:
    """Everything of ``model`` that its history windows depend on: the channels, joints,
    history, physics and context channels, the identification memory and the reference
    channels' servo (its fitted values) and arm. Two models with equal signatures read the
    same :class:`EstimateInputs` of a trajectory."""
    cfg = model.cfg
    ref = model.reference
    if ref is not None:
        servo = tuple((k, tuple(v.detach().double().reshape(-1).tolist()))
                      for k, v in ref[0].state_dict().items())
        ref = (servo, ref[1], ref[2])
    return (tuple(cfg.channels), cfg.n_joints, cfg.history, cfg.physics, cfg.context_s,
            cfg.ident_memory, ref)


@torch.no_grad()
def estimate_inputs(model: NeuralActuator, traj: Any) -> EstimateInputs:
    """The history windows of ``traj`` that :func:`estimate` feeds ``model``: pass them as
    ``estimate(other, traj, inputs=...)`` to any model with the same :func:`input_signature`
    (e.g. the same estimator with another contact gate) to compute them once."""
    cfg = model.cfg
    x = windows(traj, cfg.channels, cfg.n_joints, cfg.history, physics=cfg.physics,
                context_s=cfg.context_s, reference=model.reference,
                ident_memory=cfg.ident_memory)
    return EstimateInputs(x, len(traj), input_signature(model))


def _inputs_for(model: NeuralActuator, traj: Any, inputs: EstimateInputs | None
                ) -> torch.Tensor:
    """``inputs.x`` checked against ``model`` and ``traj``, or the windows computed here."""
    if inputs is None:
        return estimate_inputs(model, traj).x
    if not isinstance(inputs, EstimateInputs):
        raise ConfigError(f"estimate(inputs=...) takes the EstimateInputs of "
                          f"estimate_inputs(); got {type(inputs).__name__}")
    if inputs.n_samples != len(traj):
        raise ConfigError(f"estimate(inputs=...) were computed for a trajectory of "
                          f"{inputs.n_samples} samples; this one has {len(traj)}")
    if inputs.signature != input_signature(model):
        raise ConfigError("estimate(inputs=...) were computed for a model that reads other "
                          "inputs (channels, history, physics, context, identification "
                          "memory or reference servo differ); compute them with "
                          "estimate_inputs(model, traj) for this model")
    return inputs.x


@torch.no_grad()
def estimate(model: NeuralActuator, traj: Any, chunk: int = 4096,
             condition_tau_s: float | None = None,
             condition_threshold: float | Sequence[float] | None = None,
             gate_threshold: float | None = None, gate_tau_s: float | None = None,
             gate_release: float | None = None,
             inputs: EstimateInputs | None = None) -> dict[str, np.ndarray]:
    """Estimator-mode outputs for every sample of ``traj`` (the first ``history - 1`` samples
    have no full history: ``valid`` False there and NaN outputs).

    condition_threshold: the smoothed per-motor degraded probability that counts as 0.5 (the
    probabilities are shifted in log-odds so that 0.5 is the decision point); default: the
    model's ``condition_threshold`` attribute (calibrated on training episodes by
    :func:`calibrate_condition`), else 0.5. gate_threshold: the same for the contact
    probability (model attribute ``gate_threshold``, :func:`calibrate_gate`), else 0.5.
    condition_tau_s: time constant of the condition smoothing [s]; default: the model's
    ``condition_tau_s`` attribute (chosen by :func:`select_condition_smoothing`), else 5 s.
    gate_tau_s, gate_release: the contact decision's causal filter (:func:`gate_filter`):
    smoothing time constant [s] (0: none) and the probability below which a detected contact
    ends (hysteresis; at most ``gate_threshold``); defaults: the model's attributes (chosen
    by :func:`select_gate_filter`) when ``gate_threshold`` is the model's too, else 0 s and
    ``gate_threshold`` (a plain threshold).

    A model with a recurrent gate (``cfg.gate_rnn``) takes its contact probability from it,
    run over the episode from its first valid sample; a fixed-lag gate (``cfg.gate_lag``)
    decides each sample from the samples up to ``cfg.gate_decision_lag`` after it
    (``gate_lag`` unless ``cfg.gate_decide`` sets a shorter wait;
    :func:`~neuract.neuralactuator.gate.lagged_probability`).

    Returns tau (T, n) [N m], ee_force (T, 3) [N], contact_prob (T,), condition_prob_joint
    (T, n) (smoothed degraded probability per motor), condition_prob (T,), valid (T,), and
    contact_decided_t (T,) [s]: when each sample's contact decision is available (the
    sample's own time; with a fixed-lag gate, the time of the last sample it read).
    ``contact_prob`` is shifted so that ``>= 0.5`` is the gate's decision; with a release
    threshold the shift depends on the gate's state, so other cut-offs on it are not
    decisions of any threshold.

    inputs: the trajectory's windows from :func:`estimate_inputs` (of this model or one with
    the same :func:`input_signature`), to skip computing them again; refused, naming what
    differs, where they belong to another trajectory length or other inputs.
    """
    (condition_tau_s, condition_threshold, gate_threshold, gate_tau_s,
     gate_release) = resolve_filters(model, condition_tau_s, condition_threshold,
                                     gate_threshold, gate_tau_s, gate_release)
    if model.cfg.mode != "estimator":
        raise ConfigError(f"estimate() needs an estimator-mode model; got {model.cfg.mode!r}")
    check_gate_trained(model)
    cfg = model.cfg
    n, h, T = cfg.n_joints, cfg.history, len(traj)
    x = _inputs_for(model, traj, inputs)
    taus, forces, gates, conds = [], [], [], []
    for s in range(0, x.shape[0], chunk):
        tau, force, gate, cond = model(x[s:s + chunk])
        taus.append(tau)
        forces.append(force)
        gates.append(torch.sigmoid(gate))
        conds.append(torch.softmax(cond, -1)[..., 1:].sum(-1))
    if model.gate_rnn is not None:  # the recurrent gate, causal over the whole episode
        gates = [lagged_probability(model.recurrent_gate(x[:, -1])[0], cfg.gate_decision_lag)]
    pad = lambda a, shape: np.concatenate([np.full((h - 1, *shape), np.nan), a])  # noqa: E731
    tau = pad(torch.cat(taus).double().numpy(), (n,))
    force = pad(torch.cat(forces).double().numpy(), (3,))
    p = torch.cat(conds).double().numpy()
    t = np.asarray(traj["t"], dtype=np.float64)[h - 1:]
    sm = smooth_causal(p, t, condition_tau_s)
    sm = shift_threshold(sm, condition_threshold)
    gate = pad(gate_filter(torch.cat(gates).double().numpy(), t, gate_tau_s, gate_threshold,
                           gate_release), ())
    cj = pad(sm, (n,))
    valid = np.zeros(T, bool)
    valid[h - 1:] = True
    t_all = np.asarray(traj["t"], dtype=np.float64)
    decided = t_all.copy()
    decided[h - 1:] = t[np.arange(len(t)) + decision_delay(len(t), cfg.gate_decision_lag)]
    return {"tau": tau, "ee_force": force, "contact_prob": gate, "condition_prob_joint": cj,
            "condition_prob": np.nanmax(np.where(valid[:, None], cj, 0.0), axis=1),
            "valid": valid, "contact_decided_t": decided}


def estimator(model: NeuralActuator, condition_tau_s: float | None = None):
    """``est(traj) -> dict`` for :func:`neuract.eval.evaluate_estimator` (condition_tau_s:
    see :func:`estimate`)."""
    return lambda traj: estimate(model, traj, condition_tau_s=condition_tau_s)


def stream_trajectory(model: NeuralActuator, traj: Any, **kwargs: Any) -> dict[str, np.ndarray]:
    """A recorded episode fed to a :class:`StreamingEstimator` one sample at a time, its
    outputs stacked like :func:`~neuract.estimate.neural.estimate`'s, each contact
    decision at the sample it decides and ``contact_decided_t`` when it was made (kwargs: the
    estimator's thresholds, filters and backends; the servo-reference channels, if the model
    reads them, are simulated on the episode's median sample spacing, as ``estimate`` does).
    An episode shorter than the model's history is refused, as ``estimate`` refuses it."""
    t = np.asarray(traj["t"], dtype=np.float64)
    if len(t) < model.cfg.history:  # as estimate() refuses it: no sample would be valid
        name = getattr(getattr(traj, "meta", None), "name", "") or "a trajectory"
        raise SchemaError(f"episode {name!r} has {len(t)} samples, fewer than the model's "
                          f"history of {model.cfg.history}")
    if model.cfg.reference_steps and "reference_dt" not in kwargs and len(t) > 1:
        kwargs["reference_dt"] = float(np.median(np.diff(t)))
    return stream_samples(StreamingEstimator(model, **kwargs), traj,
                          ("torque_enable",) if model.cfg.reference_steps else ())


def stream_samples(est: Any, traj: Any, extra: tuple = ()) -> dict[str, np.ndarray]:
    """:func:`stream_trajectory` with the streaming estimator ``est`` (a
    :class:`StreamingEstimator`, or a :class:`neuract.runtime.Runtime`): each sample carries
    ``est.inputs`` and the ``extra`` channels the episode has."""
    t = np.asarray(traj["t"], dtype=np.float64)
    cols = {c: np.asarray(traj[c]) for c in (*est.inputs, *extra) if c in traj}
    outs = [est.step({"t": t[k], **{c: v[k] for c, v in cols.items()}}) for k in range(len(t))]
    keys = ("tau", "ee_force", "condition_prob_joint", "condition_prob", "valid")
    res = {k: np.array([o[k] for o in outs]) for k in keys}
    # each contact decision at the sample it decides, made at the step that gave it
    made = [(o["contact_t"], o["contact_prob"], t[k]) for k, o in enumerate(outs)
            if np.isfinite(o["contact_t"])]
    made += [(o["contact_t"], o["contact_prob"], t[-1]) for o in est.finish()]
    res["contact_prob"], res["contact_decided_t"] = np.full(len(t), np.nan), t.copy()
    if made:
        at, p, when = map(np.array, zip(*made))
        idx = np.searchsorted(t, at)
        res["contact_prob"][idx], res["contact_decided_t"][idx] = p, when
    return res


__all__ = ["EstimateInputs", "estimate", "estimate_inputs", "estimator", "input_signature",
           "stream_samples", "stream_trajectory"]
