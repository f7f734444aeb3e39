"""The losses of NeuralActuator training
(:func:`~neuract.neuralactuator.train.train_neuralactuator`).

* :func:`sim_loss`: simulator mode, the model's torque drives the simulated arm from a measured
  state, reading its own simulated history; pose error against the measured positions.
* :func:`est_loss`: estimator mode, torques from the measured telemetry (and the labelled
  external force) drive the simulated arm; pose error plus the supervised force (smooth L1),
  gate (focal BCE, :func:`gate_loss`) and condition (cross-entropy) heads.
* :func:`aux_loss`: the labelled heads alone on extra windows (no simulation).

Each returns (loss, info) for one batch of windows starting at samples ``t0``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from neuract.neuralactuator.data import FlatData
from neuract.neuralactuator.rollout import est_rollout, sim_rollout


def pose_loss(q_sim, q_ref, scale):
    return F.huber_loss(q_sim / scale, q_ref / scale, delta=1.0)


def sim_loss(model, robot, data: FlatData, t0, H, hist_off, train):
    idx = t0[:, None] + hist_off[None, :]
    past = {"q_goal": data.q_goal[idx], "q": data.q[idx], "qd": data.qd[idx]}
    fut = t0[:, None] + torch.arange(H + 1)[None, :]
    tt = data.t[fut]
    dt = (tt[:, 1:] - tt[:, :-1]).float()
    volt = data.voltage[fut[:, :-1]] if data.voltage is not None else None
    q_sim = sim_rollout(model, robot, past, data.q[t0], data.qd[t0], data.q_goal[fut[:, :-1]],
                        dt, train.substeps, volt)
    q_ref = data.q[fut[:, 1:]]
    loss = pose_loss(q_sim, q_ref, train.pose_scale)
    mae = (q_sim - q_ref).abs().mean().item()
    return loss, {"horizon": H, "pose_mae_deg": math.degrees(mae)}


def est_inputs(model, data: FlatData, idx, train):
    """Estimator-mode windows data.tok_est[idx] (idx: (..., h) sample indices) -> (M, h, F),
    with one random temperature / voltage offset per leading index (augmentation)."""
    x = data.tok_est[idx]  # (..., h, F)
    ch = model.cfg.channels
    J = model.cfg.n_joints
    amp = torch.tensor([train.augment_temperature if c == "temperature" else
                        train.augment_voltage if c == "voltage" else 0.0 for c in ch])
    if bool(amp.any()):
        lead = idx.shape[0]
        mid = (1,) * (idx.dim() - 1)  # the same offset along the window and its history
        off = (torch.rand(lead, *mid, 1, len(ch)) * 2 - 1) * amp
        x = (x.reshape(*idx.shape, J, len(ch)) + off).reshape(x.shape)
    return x.reshape(-1, idx.shape[-1], x.shape[-1])


def head_losses(force, gate, cond, flat, data: FlatData, train):
    """Weighted force (smooth L1 over labelled samples), gate (BCE) and condition (CE)
    losses of samples ``flat``; (loss, info)."""
    loss = force.new_zeros(())
    info = {}
    fm = data.fmask[flat]
    if bool(fm.any()):
        fl = F.smooth_l1_loss(force[fm], data.force[flat][fm], beta=train.force_huber_delta)
        loss = loss + train.force_weight * fl
        info["force_mae"] = (force[fm] - data.force[flat][fm]).abs().mean().item()
    gl = gate_loss(gate, data.contact[flat], train.gate_focal_gamma)
    cl = F.cross_entropy(cond.reshape(-1, cond.shape[-1]), data.cond[flat].reshape(-1))
    loss = loss + train.gate_weight * gl + train.condition_weight * cl
    info.update(gate_bce=gl.item(), cond_ce=cl.item())
    return loss, info


def gate_loss(logit: torch.Tensor, contact: torch.Tensor, gamma: float = 0.0) -> torch.Tensor:
    """Mean (focal) binary cross-entropy of gate logits against contact labels: each
    sample's cross-entropy ``ce`` scaled by ``(1 - exp(-ce)) ** gamma`` (``exp(-ce)`` is the
    probability the logit gives the label); gamma 0: plain binary cross-entropy."""
    y = contact.to(logit.dtype)
    if gamma == 0:  # torch's own mean reduction: the same bits as before the focal option
        return F.binary_cross_entropy_with_logits(logit, y)
    ce = F.binary_cross_entropy_with_logits(logit, y, reduction="none")
    # 1 - p_true, kept off 0: pow's derivative there is infinite for gamma < 1 (a saturated
    # logit would give NaN gradients); the clamp passes no gradient where it binds
    w = (-torch.expm1(-ce)).clamp_min(torch.finfo(ce.dtype).tiny)
    return (w.pow(gamma) * ce).mean()


def est_loss(model, robot, data: FlatData, t0, H, hist_off, train):
    fut = t0[:, None] + torch.arange(H + 1)[None, :]  # (B, H+1) samples whose torque we need
    x = est_inputs(model, data, fut[..., None] + hist_off, train)  # (B (H+1), h, F)
    res, force, gate, cond = model.heads(x)
    # the prior reads the measured error and velocity of each sample
    tau = model.saturate(model.servo_prior(x) + res).reshape(*fut.shape, -1)
    tt = data.t[fut]
    dt = (tt[:, 1:] - tt[:, :-1]).float()
    q_sim = est_rollout(robot, data.q[t0], data.qd_s[t0], tau, data.tau_ext[fut], dt,
                        train.substeps)
    q_ref = data.q[fut[:, 1:]]
    loss = pose_loss(q_sim, q_ref, train.pose_scale)
    info = {"pose_mae_deg": math.degrees((q_sim - q_ref).abs().mean().item())}
    head, head_info = head_losses(force, gate, cond, fut.reshape(-1), data, train)
    info.update(head_info)
    return loss + head, info


def aux_loss(model, data: FlatData, a, hist_off, train):
    """Labelled-head losses on extra windows ending at samples ``a`` (no simulation)."""
    x = est_inputs(model, data, a[:, None] + hist_off, train)
    _, force, gate, cond = model.heads(x)
    loss, info = head_losses(force, gate, cond, a, data, train)
    return loss, {"aux_" + k: v for k, v in info.items()}


__all__ = ["aux_loss", "est_inputs", "est_loss", "gate_loss", "head_losses", "pose_loss",
           "sim_loss"]
