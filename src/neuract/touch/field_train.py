"""Training the descriptor field on single-view clouds, and its checkpoints.

:func:`train_field`: every step draws ``batch`` objects (default: random analytic shapes of
:mod:`neuract.touch.training_shapes`; any ``objects(rng)`` callable returning something with
``sample``/``contains``, such as a trimesh mesh, can replace them), a single-view cloud of each
from a random direction (:func:`neuract.touch.views.partial_cloud`) and occupancy queries near
the surface and in the bounding box; the loss is the binary cross-entropy of the occupancy
logits. Fresh data every step, from one seeded numpy stream: an interrupted run resumes from
its training state (:class:`neuract.fit.loop.StateFile`, written atomically every
``checkpoint_every`` steps) to the same weights as an uninterrupted one, and a finished run
can be continued to more ``steps``; a state of other options is refused.

:func:`evaluate_field` scores occupancy on held-out objects (loss, accuracy, IoU);
:func:`save_field` / :func:`load_field`: a directory with ``model.safetensors`` and
``config.json``, written atomically.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from neuract.atomic import atomic_dir, write_json
from neuract.config import from_dict
from neuract.errors import CheckpointError, ConfigError
from neuract.fit.checkpoint import load_weights, save_weights
from neuract.fit.loop import StateFile, Trainer
from neuract.touch.field import DescriptorField, DescriptorFieldConfig
from neuract.touch.training_shapes import FAMILIES, make_shape
from neuract.touch.views import occupancy_queries, partial_cloud

KIND = "touch_descriptor_field"


@dataclass
class FieldTrainConfig:
    """Schedule and data of :func:`train_field`."""

    steps: int = 2000
    batch: int = 8
    """objects per step"""
    n_points: int = 1000
    """points per single-view cloud"""
    n_queries: int = 1024
    """occupancy queries per object"""
    lr: float = 1e-3
    grad_clip: float = 1.0
    families: tuple[str, ...] = FAMILIES
    """analytic shape families drawn from (unused when ``objects`` is given)"""
    view_cell: float = 0.004
    """depth-buffer cell of the simulated camera [m]"""
    dense: int = 20000
    """surface points sampled per object before the view keeps the visible ones"""
    noise: float = 0.0
    """Gaussian noise of the cloud points [m]"""
    seed: int = 0
    checkpoint: str = ""
    """training-state file; resumed from if it exists ('' : none)"""
    checkpoint_every: int = 50
    max_seconds: float = 0.0
    """stop (state saved) after this much training time [s]; 0: no limit"""

    def validate(self) -> FieldTrainConfig:
        for name in ("steps", "batch", "n_points", "n_queries", "dense", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"FieldTrainConfig.{name}={getattr(self, name)!r}; "
                                  "accepted: an integer >= 1")
        if not self.lr > 0:
            raise ConfigError(f"FieldTrainConfig.lr={self.lr!r}; accepted: > 0")
        bad = [f for f in self.families if f not in FAMILIES]
        if bad or not self.families:
            raise ConfigError(f"FieldTrainConfig.families={list(self.families)!r}; accepted: "
                              f"a non-empty list of {', '.join(FAMILIES)}")
        return self


_NOT_KEY = ("steps", "checkpoint", "checkpoint_every", "max_seconds")
"""options that do not change what each step computes (the learning rate is constant, so a
finished run may be continued to more steps)"""


def _objects(train: FieldTrainConfig) -> Callable[[np.random.Generator], Any]:
    def draw(rng: np.random.Generator) -> Any:
        return make_shape(train.families[int(rng.integers(len(train.families)))], rng)
    return draw


def make_batch(objects: Callable[[np.random.Generator], Any], rng: np.random.Generator,
               batch: int, n_points: int, n_queries: int, cell: float = 0.004,
               noise: float = 0.0, dense: int = 20000
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``batch`` objects' clouds (B, n_points, 3), queries (B, n_queries, 3) [m] and
    occupancy labels (B, n_queries)."""
    clouds, queries, labels = [], [], []
    for _ in range(batch):
        obj = objects(rng)
        clouds.append(partial_cloud(obj, n_points, rng, dense=dense, cell=cell, noise=noise))
        q, o = occupancy_queries(obj, n_queries, rng)
        queries.append(q)
        labels.append(o)
    return np.stack(clouds), np.stack(queries), np.stack(labels)


def train_field(cfg: DescriptorFieldConfig, train: FieldTrainConfig,
                objects: Callable[[np.random.Generator], Any] | None = None,
                source: str = "analytic",
                progress: Callable[[int, int, dict], None] | None = None,
                ) -> tuple[DescriptorField, dict[str, Any]]:
    """Train a :class:`DescriptorField` (see the module); ``source`` names ``objects`` in the
    training state's key. Returns the model (eval mode) and a report."""
    cfg, train = cfg.validate(), train.validate()
    objects = objects or _objects(train)
    torch.manual_seed(train.seed)
    model = DescriptorField(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=train.lr)
    rng = np.random.default_rng(train.seed)
    history: list[dict] = []
    state = None
    if train.checkpoint:
        key = {"model": dataclasses.asdict(cfg), "source": source,
               "train": {k: v for k, v in dataclasses.asdict(train).items()
                         if k not in _NOT_KEY}}
        state = StateFile(train.checkpoint, key, KIND, train.checkpoint_every,
                          what="descriptor-field training state")

    def loss(step: int) -> tuple[torch.Tensor, dict[str, Any]]:
        c, q, o = (torch.as_tensor(a, dtype=torch.float32) for a in make_batch(
            objects, rng, train.batch, train.n_points, train.n_queries, train.view_cell,
            train.noise, train.dense))
        logits = model(c, q)
        value = F.binary_cross_entropy_with_logits(logits, o)
        acc = ((logits > 0).float() == o).float().mean()
        return value, {"loss": value.item(), "accuracy": acc.item()}

    trainer = Trainer(model, opt, train.steps, grad_clip=train.grad_clip,
                      torch_rng=torch.default_generator, numpy_rng=rng, state=state,
                      max_seconds=train.max_seconds,
                      nonfinite=lambda i: f"non-finite occupancy loss at step {i}; lower lr",
                      loop_state=lambda: {"history": history[-200:]},
                      restore=lambda st: history.extend(st["history"]))
    model.train()
    out = trainer.run(loss, record=lambda step, info: history.append({"step": step, **info}),
                      progress=(lambda step, info: progress(step, train.steps, info))
                      if progress is not None else None)
    model.eval()
    return model, {"steps": out.step, "seconds": out.seconds, "interrupted": out.interrupted,
                   "final": history[-1] if history else None, "history": history[-50:]}


@torch.no_grad()
def evaluate_field(model: DescriptorField, objects: Callable[[np.random.Generator], Any],
                   n_objects: int = 16, seed: int = 12345, n_points: int = 1000,
                   n_queries: int = 2048, cell: float = 0.004, noise: float = 0.0,
                   dense: int = 20000) -> dict[str, float]:
    """Occupancy of ``n_objects`` held-out objects' queries from single-view clouds: mean
    binary cross-entropy ``loss``, ``accuracy``, ``iou`` (intersection over union of the
    occupied queries), the fraction of occupied queries ``occupied`` and ``prior_loss``, the
    cross-entropy of always predicting that fraction (what a model that learned only the class
    balance scores)."""
    dtype = next(model.parameters()).dtype
    c, q, o = (torch.as_tensor(a, dtype=dtype) for a in make_batch(
        objects, np.random.default_rng(seed), n_objects, n_points, n_queries, cell, noise,
        dense))
    logits = torch.cat([model(c[i:i + 4], q[i:i + 4]) for i in range(0, n_objects, 4)])
    pred = logits > 0
    truth = o > 0.5
    inter, union = (pred & truth).sum().item(), (pred | truth).sum().item()
    p = float(o.mean())
    prior = -(p * np.log(p) + (1 - p) * np.log(1 - p)) if 0 < p < 1 else 0.0
    return {"loss": float(F.binary_cross_entropy_with_logits(logits, o)),
            "accuracy": float((pred == truth).float().mean()),
            "iou": inter / union if union else 1.0, "occupied": p, "prior_loss": float(prior)}


DEST = {"marker": "config.json", "kind": lambda j: j.get("kind") == KIND,
        "allowed": lambda name: name in ("config.json", "model.safetensors")}


def save_field(model: DescriptorField, out_dir: str | os.PathLike,
               extra: dict[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write ``out_dir/model.safetensors`` and ``out_dir/config.json`` atomically."""
    info = {"kind": KIND, "format": 1, "config": dataclasses.asdict(model.cfg),
            "extra": extra or {}}
    with atomic_dir(out_dir, overwrite=overwrite, **DEST) as tmp:
        save_weights(model, tmp / "model.safetensors", meta={"kind": KIND})
        write_json(tmp / "config.json", info)
    return Path(out_dir)


def load_field(ckpt_dir: str | os.PathLike) -> DescriptorField:
    """The :class:`DescriptorField` saved by :func:`save_field` (eval mode)."""
    path = Path(ckpt_dir) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{str(path)!r} not found; a descriptor-field checkpoint is a "
                              "directory with config.json and model.safetensors")
    try:
        info = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{str(path)!r} is not valid JSON: {exc}") from None
    if info.get("kind") != KIND or info.get("format") != 1:
        raise CheckpointError(f"{str(path)!r} has kind={info.get('kind')!r}, format="
                              f"{info.get('format')!r}; expected {KIND!r}, format 1")
    try:
        cfg = from_dict(DescriptorFieldConfig, info["config"]).validate()
    except (ConfigError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{str(path)!r}: invalid model config: {exc}") from None
    model = DescriptorField(cfg)
    load_weights(model, Path(ckpt_dir) / "model.safetensors")
    return model.eval()


__all__ = ["FieldTrainConfig", "evaluate_field", "load_field", "make_batch", "save_field",
           "train_field"]
