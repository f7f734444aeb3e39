"""NeuralActuator checkpoints: a directory with ``model.safetensors`` + ``config.json``.

``config.json`` holds the architecture/mode config (the single source of truth to rebuild the
model), the channel list, parameter and FLOP counts and free-form ``extra`` (training
provenance); the safetensors file holds every parameter and buffer, normalisation statistics
and torque limits included, so a checkpoint is self-contained. No pickle anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from neuract.atomic import atomic_dir, write_json
from neuract.config import from_dict
from neuract.errors import CheckpointError, ConfigError
from neuract.fit.checkpoint import load_weights, save_weights
from neuract.neuralactuator.config import NeuralActuatorConfig
from neuract.neuralactuator.model import NeuralActuator, count_flops, count_params

KIND = "neuralactuator"
FORMAT = 1
CHECKPOINT_DEST = {"marker": "config.json", "kind": lambda j: j.get("kind") == KIND,
                   "allowed": lambda name: name in ("config.json", "model.safetensors")}
"""what makes a directory a checkpoint (``overwrite`` replaces only such a directory)"""


def save_checkpoint(model: NeuralActuator, out_dir: str | os.PathLike,
                    extra: dict[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write ``out_dir/model.safetensors`` and ``out_dir/config.json`` atomically."""
    out_dir = Path(out_dir)
    cfg = model.cfg
    info = {
        "kind": KIND,
        "format": FORMAT,
        "config": dataclasses.asdict(cfg),
        "channels": list(cfg.channels),
        "n_params": count_params(model),
        "flops_per_sample": count_flops(cfg),
        "extra": extra or {},
    }
    with atomic_dir(out_dir, overwrite=overwrite, **CHECKPOINT_DEST) as tmp:
        save_weights(model, tmp / "model.safetensors", meta={"kind": KIND})
        write_json(tmp / "config.json", info)
    return out_dir


def read_config(ckpt_dir: str | os.PathLike) -> tuple[NeuralActuatorConfig, dict[str, Any]]:
    """The model config and the whole ``config.json`` of a checkpoint directory."""
    path = Path(ckpt_dir) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{str(path)!r} not found; a NeuralActuator checkpoint is a "
                              "directory with config.json and model.safetensors")
    try:
        info = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{str(path)!r} is not valid JSON: {exc}") from None
    if info.get("kind") != KIND:
        raise CheckpointError(f"{str(path)!r} has kind={info.get('kind')!r}; expected {KIND!r}")
    if info.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} has format={info.get('format')!r}; this version "
                              f"reads format {FORMAT}")
    try:
        cfg = from_dict(NeuralActuatorConfig, info["config"]).validate()
    except (ConfigError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{str(path)!r}: invalid model config: {exc}") from None
    return cfg, info


def load_checkpoint(ckpt_dir: str | os.PathLike) -> NeuralActuator:
    """Rebuild the model from ``config.json`` and load its weights (eval mode)."""
    cfg, _ = read_config(ckpt_dir)
    model = NeuralActuator(cfg)
    weights = Path(ckpt_dir) / "model.safetensors"
    try:
        load_weights(model, weights)
    except RuntimeError as exc:  # shape mismatch between config.json and the weights
        if isinstance(exc, CheckpointError):
            raise
        first = str(exc).strip().splitlines()[-1].strip()
        raise CheckpointError(f"{str(weights)!r} does not match the architecture in "
                              f"config.json: {first}") from None
    model.servo_loaded = model.servo_model is not None  # fitted values came with the weights
    return model.eval()


__all__ = ["save_checkpoint", "load_checkpoint", "read_config"]
