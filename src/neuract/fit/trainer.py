"""Identify an actuator + joint parameters from positions only, through the simulation.

Each training window starts from a recorded state and is simulated open loop from the
recorded commands (multiple shooting: many windows per run, truncated backpropagation through
each); the horizon grows along a curriculum up to full runs. Validation always simulates
whole validation runs open loop, which is the score that matters; the best validation model
is kept (early stopping). The loop is :class:`neuract.fit.loop.Trainer`: its training state
makes a killed fit resumable, and a seed makes it deterministic. A checkpoint stores the run's
key (the training options and a fingerprint of the data, see :func:`fit`): a rerun with another
key is refused, not resumed from the other run's weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from neuract.actuators.base import Actuator
from neuract.actuators.neural import ActuatorNet
from neuract.actuators.param import Param, finite, option, refuse
from neuract.errors import ConfigError
from neuract.fit.batch import RunBatch
from neuract.fit.loop import Evaluation, StateFile, Trainer
from neuract.scale import ddp
from neuract.sim.simulate import JointParams, Plant, simulate

PlantFactory = Callable[[list[dict[str, Any]]], Plant]


@dataclass
class TrainConfig:
    """Optimisation, curriculum, early stopping and checkpointing."""

    seed: int = 0
    horizons: tuple[float, ...] = (1.0, 2.0, 6.0)  # window length per stage [s]
    stage_iters: tuple[int, ...] = (60, 60, 80)  # iterations per stage
    windows_per_run: int = 2  # windows drawn per run per iteration (short horizons)
    runs_per_iter: int = 0  # runs drawn per iteration; 0 = all training runs
    substeps: int = 2  # physics steps per control step
    lr: float = 0.03  # Adam step for physical parameters (unconstrained coordinates)
    lr_net: float = 2e-3  # Adam step for network weights
    grad_clip: float = 1.0
    loss: str = "mae"  # mae | mse | huber
    velocity_weight: float = 0.0  # weight of the velocity error (rad/s) in the loss
    val_every: int = 10
    patience: int = 6  # validations without improvement before stopping (last stage only)
    checkpoint_every: int = 10
    label_inputs: tuple[str, ...] = ("kp",)
    """run labels passed to the actuator as known inputs, where a run carries them"""
    use_voltage: bool = True  # pass the measured supply voltage series

    def validate(self, prefix: str = "train.") -> None:
        """Raise :class:`ConfigError` for a value training cannot run with, naming the field
        after ``prefix`` (``--train.`` names it as ``neuract fit``'s option), the value and
        what is accepted."""
        def bad(name: str, accepted: str) -> None:
            refuse(prefix, name, getattr(self, name), accepted)

        if not (isinstance(self.seed, int) and self.seed >= 0):
            bad("seed", "an integer >= 0")
        if not self.horizons or not all(finite(h) and h > 0 for h in self.horizons):
            bad("horizons", "one window length [s] > 0 per curriculum stage")
        if len(self.stage_iters) != len(self.horizons):
            bad("stage_iters", f"one iteration count per stage of {option(prefix, 'horizons')} "
                f"({len(self.horizons)})")
        if not (all(isinstance(n, int) and n >= 0 for n in self.stage_iters)
                and sum(self.stage_iters) >= 1):
            bad("stage_iters", "iteration counts >= 0 per stage, at least 1 in all")
        for name, least in (("windows_per_run", 1), ("runs_per_iter", 0), ("substeps", 1),
                            ("val_every", 1), ("patience", 1), ("checkpoint_every", 1)):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= least):
                bad(name, f"an integer >= {least}"
                    + (" (0: all training runs)" if name == "runs_per_iter" else ""))
        for name in ("lr", "lr_net"):
            if not (finite(getattr(self, name)) and getattr(self, name) > 0):
                bad(name, "a learning rate > 0")
        if not self.grad_clip > 0:  # NaN fails too; inf: no clipping
            bad("grad_clip", "a gradient-norm bound > 0")
        if self.loss not in ("mae", "mse", "huber"):
            bad("loss", "mae, mse, huber")
        if not (finite(self.velocity_weight) and self.velocity_weight >= 0):
            bad("velocity_weight", "a loss weight >= 0")


def train_key(cfg: TrainConfig) -> dict[str, Any]:
    """The options of ``cfg`` that change what training computes (all but checkpoint_every)."""
    d = dataclasses.asdict(cfg)
    d.pop("checkpoint_every")
    return d


def data_fingerprint(batch: RunBatch | None) -> dict[str, Any] | None:
    """Run count, grid length and step, measured-sample count, a checksum of the measured
    positions and one of everything else the fit reads (commands, velocities, voltage,
    enable, mask and the runs' labels, e.g. a pendulum's mass and length): equal for the
    same data, different (in practice) otherwise."""
    if batch is None:
        return None
    q = batch.q.detach().cpu().contiguous()
    rest = hashlib.sha256()
    for t in (batch.qd, batch.command, batch.voltage, batch.enable, batch.mask):
        rest.update(t.detach().cpu().contiguous().numpy().tobytes())
    rest.update(json.dumps(batch.labels, sort_keys=True, default=str).encode())
    return {"episodes": len(batch), "steps": int(q.shape[1]), "dt": float(batch.dt),
            "samples": int(batch.mask.sum()),
            "q_sha256": hashlib.sha256(q.numpy().tobytes()).hexdigest()[:16],
            "inputs_sha256": rest.hexdigest()[:16]}


class SystemModel(nn.Module):
    """The fitted unknowns: one actuator (shared by every run) and the joint parameters."""

    def __init__(self, actuator: Actuator, joints: JointParams) -> None:
        super().__init__()
        self.actuator = actuator
        self.joints = joints

    def rollout(self, plant: Plant, batch: RunBatch, substeps: int = 2,
                label_inputs: tuple[str, ...] = ("kp",), use_voltage: bool = True,
                start: Tensor | None = None, horizon: int | None = None) -> Tensor:
        """q_sim: (B, T', n) simulated positions, open loop from the recorded initial states.

        start: (B,) first grid index of each window (default 0); horizon: window length in
        steps (default to the end of the runs). Only the state at ``start`` is measured.
        """
        q, qd, cmd, volt, en = batch.q, batch.qd, batch.command, batch.voltage, batch.enable
        if start is not None:
            h = horizon or (q.shape[1] - int(start.max()))
            idx = start[:, None] + torch.arange(h)[None, :]
            g = lambda x: torch.gather(x, 1, idx[..., None].expand(-1, -1, x.shape[-1]))  # noqa
            q, qd, cmd, volt, en = g(q), g(qd), g(cmd), g(volt), g(en)
        elif horizon is not None:
            q, qd, cmd, volt, en = (x[:, :horizon] for x in (q, qd, cmd, volt, en))
        # a label no run carries is skipped (the actuator then uses its configured value,
        # e.g. the servo's kp); one that only some runs carry is an error
        inputs = {k: batch.label_tensor(k, q.dtype) for k in label_inputs
                  if any(k in lab for lab in batch.labels)}
        series = {"torque_enable": en}
        if use_voltage:
            series["voltage"] = volt
        out = simulate(plant, self.actuator, self.joints, q[:, 0], qd[:, 0], cmd, batch.dt,
                       substeps, inputs, series)
        return out.q

    def forward(self, plant: Plant, batch: RunBatch, **kwargs: Any) -> Tensor:
        """Same as :meth:`rollout` (lets ``torch.func.functional_call`` swap parameters)."""
        return self.rollout(plant, batch, **kwargs)

    def warm_start_from(self, other: SystemModel) -> None:
        """Copy a fitted physical model into this one; if this actuator is a neural residual
        on a physical base, ``other``'s actuator becomes that base (the net keeps its init)."""

        sd = other.state_dict()
        if (isinstance(self.actuator, ActuatorNet) and self.actuator.base is not None
                and not isinstance(other.actuator, ActuatorNet)):
            sd = {(k.replace("actuator.", "actuator.base.", 1) if k.startswith("actuator.")
                   else k): v for k, v in sd.items()}
        missing, unexpected = self.load_state_dict(sd, strict=False)
        if unexpected or any(".net." not in k for k in missing):
            raise ConfigError(
                f"warm start does not match: missing {sorted(missing)}, unexpected "
                f"{sorted(unexpected)}"
            )

    def physical_parameters(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, sub in self.named_modules():
            if isinstance(sub, Param):
                with torch.no_grad():
                    v = sub()
                out[name] = float(v) if v.numel() == 1 else v.tolist()
        return out


def masked_error(q_sim: Tensor, q_ref: Tensor, mask: Tensor, kind: str = "mae") -> Tensor:
    """Mean error over masked samples: mae |e|, mse e^2, huber (delta 0.05 rad)."""
    e = (q_sim - q_ref) * mask
    n = mask.sum().clamp_min(1)
    if kind == "mse":
        return (e * e).sum() / n
    if kind == "huber":
        return torch.nn.functional.huber_loss(e, torch.zeros_like(e), reduction="sum",
                                              delta=0.05) / n
    return e.abs().sum() / n


@torch.no_grad()
def evaluate(model: SystemModel, plant_fn: PlantFactory, batch: RunBatch, cfg: TrainConfig,
             chunk: int = 512) -> tuple[float, Tensor]:
    """Full-run open-loop MAE [rad] over masked samples, and per-run MAE (B,)."""
    per_run = []
    for s in range(0, len(batch), chunk):
        sub = batch.select(range(s, min(s + chunk, len(batch))))
        q_sim = model.rollout(plant_fn(sub.labels), sub, cfg.substeps, cfg.label_inputs,
                              cfg.use_voltage)
        m = sub.mask.to(q_sim.dtype)
        per_run.append(((q_sim - sub.q).abs() * m).sum((1, 2)) / m.sum((1, 2)).clamp_min(1))
    runs = torch.cat(per_run)
    return float(runs.mean()), runs


def _param_groups(model: SystemModel, cfg: TrainConfig) -> list[dict[str, Any]]:
    phys, net = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:  # a fixed part (neuract fit --base.freeze) is left out
            (phys if name.endswith(".raw") else net).append(p)
    groups = []
    if phys:
        groups.append({"params": phys, "lr": cfg.lr})
    if net:
        groups.append({"params": net, "lr": cfg.lr_net})
    if not groups:
        raise ConfigError("the model has no free parameters to fit")
    return groups


def _stage(it: int, cfg: TrainConfig) -> int:
    acc = 0
    for s, n in enumerate(cfg.stage_iters):
        acc += n
        if it < acc:
            return s
    return len(cfg.stage_iters) - 1


def _window_mask(mask: Tensor, start: Tensor, h: int) -> Tensor:
    """The windows' sample masks (the first sample given, not predicted, is left out)."""
    idx = start[:, None] + torch.arange(h)[None, :]
    m = torch.gather(mask, 1, idx[..., None].expand(-1, -1, mask.shape[-1])).clone()
    m[:, 0] = 0
    return m


def _window_loss(model: SystemModel, plant_fn: PlantFactory, train: RunBatch, cfg: TrainConfig,
                 gen: torch.Generator) -> Callable[[int], tuple[Tensor, dict[str, Any]]]:
    """The loss of iteration ``i``: windows of the curriculum stage's horizon drawn from
    ``gen`` (resumable, deterministic), simulated open loop from their measured start."""
    T = train.q.shape[1]

    def loss(it: int) -> tuple[Tensor, dict[str, Any]]:
        stage = _stage(it, cfg)
        h = min(T, max(2, int(round(cfg.horizons[stage] / train.dt)) + 1))
        n_runs = len(train) if cfg.runs_per_iter <= 0 else min(cfg.runs_per_iter, len(train))
        runs = torch.randperm(len(train), generator=gen)[:n_runs]
        if h < T:
            runs = runs.repeat_interleave(cfg.windows_per_run)
            start = torch.randint(0, T - h + 1, (len(runs),), generator=gen)
        else:
            start = torch.zeros(len(runs), dtype=torch.long)
        part = ddp.shard(len(runs))  # under torchrun: this rank's windows of the batch
        if part.split:  # the masked mean's count is the whole batch's
            every = _window_mask(train.select(runs).mask, start, h)
            runs, start = runs[part.rows], start[part.rows]
        sub = train.select(runs)
        q_sim = model.rollout(plant_fn(sub.labels), sub, cfg.substeps, cfg.label_inputs,
                              cfg.use_voltage, start=start, horizon=h)
        idx = start[:, None] + torch.arange(h)[None, :]
        gather = lambda x: torch.gather(x, 1, idx[..., None].expand(-1, -1, x.shape[-1]))  # noqa
        q_ref = gather(sub.q)
        mask = _window_mask(sub.mask, start, h).to(q_sim.dtype)
        value = masked_error(q_sim, q_ref, mask, cfg.loss)
        if part.split:
            value = value * (mask.sum().clamp_min(1) / every.sum().clamp_min(1))
        elif part.share != 1.0:  # every rank computes the whole batch
            value = value * part.share
        return value, {"iteration": it + 1, "stage": stage, "horizon_s": (h - 1) * train.dt,
                       "train_loss": ddp.total(value)}

    return loss


def fit(model: SystemModel, plant_fn: PlantFactory, train: RunBatch, val: RunBatch | None,
        cfg: TrainConfig, ckpt_dir: str | Path | None = None,
        log: Callable[[str], None] | None = None, stop_after: int | None = None,
        run_key: dict[str, Any] | None = None, resume_hint: str | None = None,
        restart_hint: str | None = None,
        progress: Callable[[int, int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Fit ``model`` on ``train``; returns a report. Resumes from ``ckpt_dir/last.safetensors``
    (the training state of :class:`neuract.fit.loop.Trainer`, the best weights so far in it).

    stop_after: stop (as if killed) after this many iterations in this call (for tests).
    The model ends holding the best-validation weights.
    run_key: what a resumed run must share with the run that wrote the checkpoint (JSON-ready;
    default: :func:`train_key` of ``cfg`` and :func:`data_fingerprint` of ``train`` and
    ``val``). It is stored with every checkpoint; a checkpoint with another key (or none) is
    refused with a :class:`~neuract.errors.CheckpointError` naming the differing fields,
    before any weight is loaded. resume_hint / restart_hint: how the caller's user reruns the
    original run / starts afresh (completes that error).
    progress: ``progress(iteration, total, info)`` after each iteration (``info["train_loss"]``:
    its loss).
    """
    cfg.validate()
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.Adam(_param_groups(model, cfg))
    say = log or (lambda s: None)
    state = None
    if ckpt_dir is not None:
        key = run_key if run_key is not None else {
            "train": train_key(cfg),
            "data": {"train": data_fingerprint(train), "val": data_fingerprint(val)}}
        hints = {k: v for k, v in (("resume_hint", resume_hint), ("restart_hint", restart_hint))
                 if v}
        state = StateFile(Path(ckpt_dir) / "last.safetensors", key, "actuator_fit",
                          cfg.checkpoint_every, **hints)
    evaluation = None
    if val is not None:
        last_stage = len(cfg.stage_iters) - 1
        evaluation = Evaluation(
            cfg.val_every, lambda step: _val_score(model, plant_fn, val, cfg),
            patience=cfg.patience, keep=model,
            counts=lambda step: _stage(step - 1, cfg) == last_stage)  # last stage only
    history: list[dict[str, Any]] = []
    trainer = Trainer(
        model, opt, sum(cfg.stage_iters), grad_clip=cfg.grad_clip, torch_rng=gen, state=state,
        evaluation=evaluation, skip_nonfinite_grads=True, log=say,
        nonfinite=lambda it: (f"non-finite training loss at iteration {it}; lower train.lr or "
                              "raise train.substeps"),
        loop_state=lambda: {"history": history}, restore=lambda st: history.extend(st["history"]),
        split_batch=True)  # under torchrun: _window_loss gives this rank's part
    trainer.resume()  # a resume is announced by the run's progress reporter

    def record(step: int, rec: dict[str, Any]) -> None:
        if "val_mae" in rec:
            say(f"it {step:4d} stage {rec['stage']} h={rec['horizon_s']:.2f}s "
                f"loss {rec['train_loss']:.5f} val {rec['val_mae']:.5f}")
        history.append(rec)

    out = trainer.run(_window_loss(model, plant_fn, train, cfg, gen), record=record,
                      stop_after=stop_after,
                      progress=(lambda step, info: progress(step, trainer.steps, info))
                      if progress is not None else None)
    report: dict[str, Any] = {
        "iteration": out.step, "best_val": out.best["score"],
        "best_iteration": out.best["step"], "bad_evals": out.best["bad_evals"],
        "history": history, "done": out.early_stop, "seconds": out.seconds}
    if out.skipped:
        report["skipped_steps"] = out.skipped
    if out.interrupted:
        return {"interrupted": True, **report}
    if val is not None and out.best["step"] >= 0:
        trainer.restore_best()
    return {"interrupted": False, "fit_seconds": out.seconds, **report}


def _val_score(model: SystemModel, plant_fn: PlantFactory, val: RunBatch,
               cfg: TrainConfig) -> tuple[float, dict[str, Any]]:
    v, _ = evaluate(model, plant_fn, val, cfg)
    return v, {"val_mae": v}
