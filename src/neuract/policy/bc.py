"""Behaviour cloning of the scripted expert: a small MLP policy, its demonstrations, training,
save and load.

Inputs (:func:`input_layout`): the joint positions and velocities, the task's reference goal
for this tick, the last goal sent and, for a force policy, the frozen estimator's external
end-effector force estimate f̂ (3,) [N]; positions and goals enter relative to the reference
(scaled by :data:`OFFSET_SCALE`), f̂ divided by :data:`FORCE_SCALE`. Output: the goal's
offset from the reference (scaled by :data:`OFFSET_SCALE`). Both policies of an experiment
have the same hidden layers, data and training budget; they differ only in the three f̂
inputs.

A saved policy is a directory: ``model.safetensors`` and ``config.json`` (robot, task, the
input layout, whether f̂ is an input, the training configuration); loading it for another
robot or task is refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from neuract import progress as _progress
from neuract.atomic import atomic_dir, write_json
from neuract.config import from_dict
from neuract.errors import CheckpointError, ConfigError
from neuract.fit.checkpoint import load_training, load_weights, save_training, save_weights
from neuract.policy.expert import TASKS
from neuract.policy.rollout import Step, Trace

OFFSET_SCALE = 0.1
"""[rad] goal and position offsets from the reference are divided by this"""
VELOCITY_SCALE = 2.0
"""[rad/s]"""
FORCE_SCALE = 10.0
"""[N]"""
KIND = "neuract-bc-policy"


@dataclass
class BCConfig:
    """A behaviour-cloning policy and its training (seeded; resumable with ``checkpoint``)."""

    robot: str = "so101"
    task: str = "lift"
    n_joints: int = 6
    use_force: bool = False
    """the frozen estimator's f̂ (3,) is an input"""
    hidden: tuple[int, ...] = (128, 128)
    steps: int = 2000
    batch: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-5
    seed: int = 0
    checkpoint: str = ""
    """training state file to resume from and write to (empty: none)"""
    checkpoint_every: int = 500

    def validate(self) -> BCConfig:
        if self.task not in TASKS:
            raise ConfigError(f"BCConfig.task = {self.task!r}; accepted: {list(TASKS)}")
        if self.robot not in ("so101", "omx"):
            raise ConfigError(f"BCConfig.robot = {self.robot!r}; accepted: ['omx', 'so101']")
        for name in ("n_joints", "steps", "batch", "checkpoint_every"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise ConfigError(f"BCConfig.{name} = {v!r}; accepted: an integer >= 1")
        if not self.hidden or any(not (isinstance(h, int) and h >= 1) for h in self.hidden):
            raise ConfigError(f"BCConfig.hidden = {self.hidden!r}; accepted: layer widths >= 1")
        if not (np.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"BCConfig.lr = {self.lr!r}; accepted: > 0")
        return self


def input_layout(n: int, use_force: bool) -> dict[str, list[int]]:
    """Input name -> [start, stop) of the policy's feature vector."""
    names = [("q_rel", n), ("qd", n), ("target", n), ("a_prev_rel", n)]
    if use_force:
        names.append(("fhat", 3))
    out, i = {}, 0
    for name, size in names:
        out[name] = [i, i + size]
        i += size
    return out


def features(s: Step, use_force: bool) -> np.ndarray:
    """The policy's input vector of one step (see :func:`input_layout`)."""
    parts = [(s.q - s.target) / OFFSET_SCALE, s.qd / VELOCITY_SCALE, s.target,
             (s.a_prev - s.target) / OFFSET_SCALE]
    if use_force:
        parts.append(np.asarray(s.fhat) / FORCE_SCALE)
    return np.concatenate(parts).astype(np.float32)


def demo_arrays(traces: Sequence[Trace], use_force: bool) -> tuple[np.ndarray, np.ndarray]:
    """(inputs (N, F), targets (N, n)) of expert episodes run with ``keep_steps``."""
    xs, ys = [], []
    for tr in traces:
        if len(tr.feats) != len(tr.goal):
            raise ConfigError("demonstrations need run_episode(..., keep_steps=True)")
        for s, a in zip(tr.feats, tr.goal):
            xs.append(features(s, use_force))
            ys.append(((a - s.target) / OFFSET_SCALE).astype(np.float32))
    if not xs:
        raise ConfigError("no demonstration steps to train on")
    return np.stack(xs), np.stack(ys)


class BCPolicy(nn.Module):
    """The MLP: features -> goal offset from the reference."""

    def __init__(self, cfg: BCConfig):
        super().__init__()
        self.cfg = cfg.validate()
        self.layout = input_layout(cfg.n_joints, cfg.use_force)
        dims = [max(v[1] for v in self.layout.values()), *cfg.hidden]
        layers: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [nn.Linear(a, b), nn.Tanh()]
        layers.append(nn.Linear(dims[-1], cfg.n_joints))
        self.net = nn.Sequential(*layers)
        self.register_buffer("x_mean", torch.zeros(dims[0]))
        self.register_buffer("x_std", torch.ones(dims[0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.x_mean) / self.x_std)

    def act(self, s: Step) -> np.ndarray:
        """The goal (n,) [rad] for one step."""
        x = torch.from_numpy(features(s, self.cfg.use_force))[None]
        with torch.no_grad():
            off = self(x)[0].double().numpy()
        return s.target + OFFSET_SCALE * off


def _state_key(cfg: BCConfig, x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """What a resumed run must match: the configuration and the data's fingerprint."""
    keep = {k: v for k, v in dataclasses.asdict(cfg).items()
            if k not in ("checkpoint", "checkpoint_every", "steps")}
    return {"config": json.loads(json.dumps(keep)), "rows": int(len(x)),
            "x_sum": round(float(np.float64(x).sum()), 3),
            "y_sum": round(float(np.float64(y).sum()), 3)}


def train_bc(x: np.ndarray, y: np.ndarray, cfg: BCConfig,
             progress: Callable[[int, int, float], None] | None = None
             ) -> tuple[BCPolicy, list[float]]:
    """Fit a policy to demonstrations (inputs ``x``, scaled goal offsets ``y``); returns it
    and the loss of every step (mean squared error of the scaled offsets). With
    ``cfg.checkpoint`` the run resumes from that file when it matches and saves to it (the
    run's progress reporter says so). progress: ``progress(step, steps, loss)`` after each
    step."""
    cfg = cfg.validate()
    torch.manual_seed(cfg.seed)
    model = BCPolicy(cfg)
    if x.shape[1] != model.x_mean.numel() or y.shape[1] != cfg.n_joints:
        raise ConfigError(f"demonstrations of shape {x.shape}, {y.shape}; the policy takes "
                          f"{model.x_mean.numel()} inputs and gives {cfg.n_joints} goals")
    X, Y = torch.from_numpy(x).float(), torch.from_numpy(y).float()
    with torch.no_grad():
        model.x_mean.copy_(X.mean(0))
        model.x_std.copy_(X.std(0).clamp_min(1e-3))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    key, start, losses = _state_key(cfg, x, y), 0, []
    if cfg.checkpoint and Path(cfg.checkpoint).is_file():
        state = load_training(cfg.checkpoint, model, opt, gen)
        if state.get("key") != key:
            raise ConfigError(f"training checkpoint {cfg.checkpoint!r} is of another run "
                              "(configuration or demonstrations differ): delete it or use "
                              "another path")
        start, losses = int(state["step"]), list(state["losses"])
        _progress.resumed(cfg.checkpoint, start, cfg.steps)
    for step in range(start, cfg.steps):
        idx = torch.randint(0, len(X), (min(cfg.batch, len(X)),), generator=gen)
        loss = torch.mean((model(X[idx]) - Y[idx]) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        done = step + 1
        if cfg.checkpoint and (done % cfg.checkpoint_every == 0 or done == cfg.steps):
            save_training(cfg.checkpoint, model, opt, gen,
                          {"key": key, "step": done, "losses": losses})
        if progress is not None:
            progress(done, cfg.steps, losses[-1])
    return model.eval(), losses


def save_policy(model: BCPolicy, out_dir: str | os.PathLike, extra: dict[str, Any] | None = None,
                overwrite: bool = False) -> Path:
    """Write ``model.safetensors`` and ``config.json`` to ``out_dir`` atomically."""
    cfg = model.cfg
    info = {"kind": KIND, "robot": cfg.robot, "task": cfg.task, "uses_force": cfg.use_force,
            "input_layout": model.layout, "output": "goal offset from the reference / "
            f"{OFFSET_SCALE} rad", "config": dataclasses.asdict(cfg), "extra": extra or {}}
    with atomic_dir(out_dir, overwrite=overwrite) as tmp:
        save_weights(model, tmp / "model.safetensors", meta={"kind": KIND})
        write_json(tmp / "config.json", info)
    return Path(out_dir)


def load_policy(path: str | os.PathLike, robot: str | None = None, task: str | None = None
                ) -> BCPolicy:
    """A saved policy; ConfigError if it was trained for another ``robot`` or ``task``."""
    path = Path(path)
    try:
        info = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"policy {str(path)!r}: no readable config.json ({exc})") from None
    if info.get("kind") != KIND:
        raise CheckpointError(f"{str(path)!r} is not a behaviour-cloning policy (kind "
                              f"{info.get('kind')!r}; accepted: {KIND!r})")
    for name, want in (("robot", robot), ("task", task)):
        if want is not None and info.get(name) != want:
            raise ConfigError(f"policy {str(path)!r} was trained for {name} "
                              f"{info.get(name)!r}, not {want!r}; accepted: {info.get(name)!r}")
    cfg = dataclasses.replace(from_dict(BCConfig, info["config"]),
                              hidden=tuple(info["config"]["hidden"]))
    model = BCPolicy(cfg)
    load_weights(model, path / "model.safetensors")
    return model.eval()


__all__ = ["BCConfig", "BCPolicy", "FORCE_SCALE", "OFFSET_SCALE", "demo_arrays", "features",
           "input_layout", "load_policy", "save_policy", "train_bc"]
