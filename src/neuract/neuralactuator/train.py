"""Training NeuralActuator: torque pose-only through the differentiable simulator, force / gate /
condition supervised where labels exist, one schedule; fine-tuning from a checkpoint.

Windows cover ``history + horizon`` samples. For each window the model sees the ``horizon``
histories ending at ``t0 .. t0 + horizon - 1`` (``t0`` = last history sample):

* torque (no torque labels anywhere): the model's torques drive
  :func:`neuract.sim.step` from the measured state at ``t0``; the loss is the mean squared
  difference [deg^2] between simulated and measured joint positions at ``t0 + 1 ..``.
  ``estimator`` mode reads the measured telemetry, so its torque sequence is computed once and
  held over each sample; ``simulator`` mode reads only the commands and its *own simulated*
  state (autoregressive rollout, nothing measured after ``t0``), and the PD servo prior is
  re-evaluated at every physics substep while the learned residual is held.
* force: masked MSE on ``ee_force`` (where ``ee_force_mask``), in units of the force scale;
  gate: BCE on ``contact``; condition: cross-entropy per motor from the episode labels
  ``condition_per_joint`` (or all-normal when ``condition`` is 0; unknown otherwise).
* one AdamW schedule (linear warm-up, cosine decay) over the weighted sum.

Known external forces (``ee_force`` labels) can be applied in the simulation through the
end-effector site Jacobian, so a hanging payload is not learned as actuator torque.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from neuract.errors import ConfigError, SchemaError
from neuract.neuralactuator.features import assemble, feature_stats, source_channels
from neuract.neuralactuator.model import NeuralActuator
from neuract.neuralactuator.rollout import rollout_estimator, rollout_simulator

RAD2DEG = 180.0 / math.pi
IGNORE = -100


@dataclass
class TrainConfig:
    """One training (or fine-tuning) run."""

    steps: int = 300
    batch_size: int = 16
    horizon: int = 16
    """rollout length of the pose loss [samples]"""
    stride: int = 4
    """spacing of window starts [samples]"""
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup: float = 0.05
    """share of the steps spent in the linear warm-up"""
    grad_clip: float = 1.0
    prior_lr_scale: float = 10.0
    """learning-rate multiplier of the physical servo prior (log kp, log kd)"""
    w_pose: float = 1.0
    w_force: float = 0.2
    w_gate: float = 0.2
    w_cond: float = 0.2
    substeps: int = 4
    """physics substeps per telemetry sample"""
    integrator: str = "euler"
    passive: bool = True
    """add the robot model's joint damping + friction in the simulation; False when the
    learned torque should be the net joint torque (as the twin's ``tau`` label is)"""
    external_force: str = "label"
    """``label``: apply known ee_force labels in the simulation; ``none``"""
    ee_site: str = ""
    """robot site where external forces act; empty: the robot's last site"""
    freeze_encoder: bool = False
    """fine-tuning: train only the head trunk, heads and servo prior"""
    seed: int = 0
    log_every: int = 25

    def validate(self) -> TrainConfig:
        for name in ("steps", "batch_size", "horizon", "stride", "substeps", "log_every"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"TrainConfig.{name}={v!r}; expected an integer >= 1")
        if self.external_force not in ("label", "none"):
            raise ConfigError(f"external_force={self.external_force!r}; accepted: "
                              "['label', 'none']")
        if not (0.0 <= self.warmup < 1.0):
            raise ConfigError(f"warmup={self.warmup}; expected a fraction in [0, 1)")
        return self


class Windows:
    """Training windows of ``L = history + horizon`` samples, as float32 tensors.

    channels: source channel -> (N, L, J); dt: (N, L - 1) [s]; ee_force: (N, L, 3) [N];
    force_mask, contact: (N, L) bool (mask False / contact 0 where absent);
    condition: (N, J) int64 per-motor class or -100 (unknown).
    """

    def __init__(self, trajs: Sequence, model_channels: Sequence[str], n_joints: int,
                 history: int, horizon: int, stride: int):
        L = history + horizon
        src = source_channels(model_channels)
        for need in ("q", "qd", "q_goal"):
            if need not in src:
                src = (*src, need)
        parts: dict[str, list] = {k: [] for k in src}
        dts, forces, masks, contacts, conds, has_c = [], [], [], [], [], []
        for traj in trajs:
            T = len(traj["t"])
            if T < L:
                continue
            starts = np.arange(0, T - L + 1, stride)
            idx = starts[:, None] + np.arange(L)[None, :]
            for k in src:
                if k not in traj:
                    raise SchemaError(f"trajectory {_name(traj)!r} has no channel {k!r}, needed "
                                      f"by the model channels {list(model_channels)}")
                v = np.asarray(traj[k], dtype=np.float64)
                if v.ndim != 2 or v.shape[1] != n_joints:
                    raise SchemaError(f"trajectory {_name(traj)!r} channel {k!r} has shape "
                                      f"{v.shape}; expected (T, {n_joints})")
                parts[k].append(v[idx])
            t = np.asarray(traj["t"], dtype=np.float64)
            dts.append(np.diff(t[idx], axis=1))
            f = np.asarray(traj["ee_force"]) if "ee_force" in traj else np.zeros((T, 3))
            m = (np.asarray(traj["ee_force_mask"], bool) if "ee_force_mask" in traj
                 else np.full(T, "ee_force" in traj))
            c = np.asarray(traj["contact"], bool) if "contact" in traj else np.zeros(T, bool)
            forces.append(f[idx])
            masks.append(m[idx])
            contacts.append(c[idx])
            has_c.append(np.full(len(starts), "contact" in traj))
            conds.append(np.repeat(_condition_labels(traj, n_joints)[None], len(starts), 0))
        if not dts:
            raise SchemaError(f"no trajectory has the {L} samples one window needs "
                              f"(history {history} + horizon {horizon})")
        self.history, self.horizon = history, horizon
        self.channels = {k: torch.tensor(np.concatenate(v), dtype=torch.float32)
                         for k, v in parts.items()}
        self.dt = torch.tensor(np.concatenate(dts), dtype=torch.float32)
        self.ee_force = torch.tensor(np.concatenate(forces), dtype=torch.float32)
        self.force_mask = torch.tensor(np.concatenate(masks))
        self.contact = torch.tensor(np.concatenate(contacts))
        self.has_contact = torch.tensor(np.concatenate(has_c))
        self.condition = torch.tensor(np.concatenate(conds), dtype=torch.int64)
        if not (self.dt > 0).all():
            raise SchemaError("sample times must be strictly increasing")

    def __len__(self) -> int:
        return int(self.dt.shape[0])


def _name(traj) -> str:
    meta = getattr(traj, "meta", None)
    return getattr(meta, "name", "") or "<trajectory>"


def _condition_labels(traj, n_joints: int) -> np.ndarray:
    """Per-motor condition class (J,), -100 where unknown."""
    labels = getattr(getattr(traj, "meta", None), "labels", {}) or {}
    per = labels.get("condition_per_joint")
    if per is not None and len(per) == n_joints:
        return np.asarray(per, dtype=np.int64)
    if "condition" in traj:
        c = np.asarray(traj["condition"])
        if (c == 0).all():
            return np.zeros(n_joints, dtype=np.int64)
    return np.full(n_joints, IGNORE, dtype=np.int64)


# -- statistics ------------------------------------------------------------------------------
def init_stats(model: NeuralActuator, data: Windows) -> None:
    """Feature normalisation (per channel and joint) and the force scale from the data."""
    x = assemble({k: v for k, v in data.channels.items()}, model.cfg.channels)
    mean, std = feature_stats(x)
    m = data.force_mask
    fs = data.ee_force[m].std(0) if m.sum() > 1 else torch.ones(3)
    model.set_stats(mean, std, fs.clamp_min(0.1))


# -- losses ----------------------------------------------------------------------------------
def losses(model: NeuralActuator, robot, data: Windows, idx: torch.Tensor,
           cfg: TrainConfig) -> dict[str, torch.Tensor]:
    """Every loss term for the windows ``idx`` (see the module docstring)."""
    mc = model.cfg
    h, K = data.history, data.horizon
    B = len(idx)
    ch = {k: v[idx] for k, v in data.channels.items()}
    x = assemble(ch, mc.channels)  # (B, L, F)
    xs = x.unfold(1, h, 1)[:, :K].permute(0, 1, 3, 2)  # (B, K, h, F): windows ending t0 + k
    res, force, gate, cond = model.heads(xs.reshape(B * K, h, -1))
    site = cfg.ee_site or robot.site_names[-1]
    f_ext = None
    if cfg.external_force == "label":
        f = data.ee_force[idx, h - 1:h - 1 + K] * data.force_mask[idx, h - 1:h - 1 + K, None]
        f_ext = f if bool(f.abs().sum() > 0) else None
    q, qd, goal, dt = ch["q"], ch["qd"], ch["q_goal"], data.dt[idx, h - 1:h - 1 + K]
    if mc.mode == "estimator":
        tau = model.saturate(model.servo_prior(xs.reshape(B * K, h, -1)) + res).reshape(B, K, -1)
        q_sim = rollout_estimator(model, robot, tau, q[:, h - 1], qd[:, h - 1], dt,
                                  cfg.substeps, f_ext, site, cfg.integrator, cfg.passive)
    else:
        extra = {k: v for k, v in ch.items() if k in mc.channels and k not in ("q", "qd",
                                                                                 "q_goal")}
        q_sim = rollout_simulator(model, robot, q[:, :h], qd[:, :h], goal[:, :h],
                                  goal[:, h - 1:h - 1 + K], dt, cfg.substeps, f_ext, site,
                                  cfg.integrator, extra, cfg.passive)
    out = {"pose": ((q_sim - q[:, h:h + K]) * RAD2DEG).pow(2).mean()}
    # supervised heads on the teacher-forced windows (labels at each window's last sample)
    lab = slice(h - 1, h - 1 + K)
    m = data.force_mask[idx, lab].reshape(-1)
    if m.any():
        err = (force - data.ee_force[idx, lab].reshape(-1, 3)) / model.force_scale
        out["force"] = err[m].pow(2).mean()
    has_c = data.has_contact[idx].repeat_interleave(K)
    if has_c.any():
        out["gate"] = F.binary_cross_entropy_with_logits(
            gate[has_c], data.contact[idx, lab].reshape(-1)[has_c].float())
    tgt = data.condition[idx].repeat_interleave(K, 0).reshape(-1)
    if (tgt != IGNORE).any():
        out["cond"] = F.cross_entropy(cond.reshape(-1, mc.n_conditions), tgt,
                                      ignore_index=IGNORE)
    return out


def _schedule(cfg: TrainConfig) -> Callable[[int], float]:
    warm = max(1, int(cfg.warmup * cfg.steps))

    def f(i: int) -> float:
        if i < warm:
            return (i + 1) / warm
        p = (i - warm) / max(1, cfg.steps - warm)
        return 0.5 * (1.0 + math.cos(math.pi * p))

    return f


def train(model: NeuralActuator, robot, trajs: Sequence, cfg: TrainConfig | None = None,
          fresh_stats: bool = True, log: Callable[[str], None] | None = None) -> list[dict]:
    """Train ``model`` in place on trajectories of ``robot``; returns the loss history.

    fresh_stats: compute normalisation statistics from ``trajs`` (True for a new model; a
    fine-tune keeps the checkpoint's statistics). The robot's joints must be the model's.
    """
    cfg = (cfg or TrainConfig()).validate()
    mc = model.cfg
    if robot.n_dof != mc.n_joints:
        raise ConfigError(f"robot {getattr(robot, 'name', '')!r} has {robot.n_dof} joints; the "
                          f"model has n_joints={mc.n_joints}")
    data = Windows(trajs, mc.channels, mc.n_joints, mc.history, cfg.horizon, cfg.stride)
    if fresh_stats:
        init_stats(model, data)
    params = [p for n, p in model.named_parameters()
              if not (cfg.freeze_encoder and n.startswith(("inp.", "pos", "layers.")))]
    prior = [p for n, p in model.named_parameters() if n in ("log_kp", "log_kd")]
    net = [p for p in params if all(p is not q for q in prior)]
    opt = torch.optim.AdamW([{"params": net},
                             {"params": prior, "lr": cfg.lr * cfg.prior_lr_scale,
                              "weight_decay": 0.0}], lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(cfg))
    weights = {"pose": cfg.w_pose, "force": cfg.w_force, "gate": cfg.w_gate, "cond": cfg.w_cond}
    gen = torch.Generator().manual_seed(cfg.seed)
    history: list[dict] = []
    model.train()
    t_start = time.perf_counter()
    for it in range(cfg.steps):
        idx = torch.randint(len(data), (min(cfg.batch_size, len(data)),), generator=gen)
        terms = losses(model, robot, data, idx, cfg)
        total = sum(weights[k] * v for k, v in terms.items())
        if not torch.isfinite(total):
            raise FloatingPointError(f"non-finite loss at step {it}: "
                                     f"{ {k: float(v) for k, v in terms.items()} }")
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        sched.step()
        rec = {"step": it, "total": float(total.detach()),
               **{k: float(v.detach()) for k, v in terms.items()},
               "lr": sched.get_last_lr()[0], "time_s": time.perf_counter() - t_start}
        history.append(rec)
        if log is not None and (it % cfg.log_every == 0 or it == cfg.steps - 1):
            log(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in rec.items()))
    model.eval()
    return history


def fine_tune(model: NeuralActuator, robot, trajs: Sequence, cfg: TrainConfig | None = None,
              log: Callable[[str], None] | None = None) -> list[dict]:
    """Adapt a trained model (e.g. from :func:`load_checkpoint`) to a few minutes of a new
    unit's data: same losses, the checkpoint's normalisation statistics kept."""
    cfg = cfg or TrainConfig(steps=100, lr=3e-4, warmup=0.0)
    return train(model, robot, trajs, cfg, fresh_stats=False, log=log)


__all__ = ["TrainConfig", "Windows", "init_stats", "losses", "train", "fine_tune"]
