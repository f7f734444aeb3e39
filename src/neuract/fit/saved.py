"""A finished ``neuract fit`` output directory, loaded back as a model.

``load_fit(out)`` rebuilds the fitted actuator and joint parameters from ``out/config.json``
(the resolved :class:`~neuract.fit.verb.FitConfig`) and ``out/model.safetensors`` (the
best-validation weights), in float64, ready for :func:`neuract.sim.simulate.simulate`, a
Gymnasium environment (:mod:`neuract.envs`) or an export.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from neuract.config import load_resolved
from neuract.errors import CheckpointError, ConfigError
from neuract.fit.checkpoint import load_weights
from neuract.fit.identify import build_model
from neuract.fit.options import FitConfig
from neuract.fit.trainer import SystemModel


@dataclass
class FittedModel:
    """What ``neuract fit`` wrote: the model and the options that built it."""

    system: SystemModel  # .actuator, .joints
    config: FitConfig  # .actuator, .joints, .train, .robot (the plant it was fitted on)
    n_dof: int
    path: Path

    @property
    def robot(self) -> str:
        """'pendulum', a bundled robot name or a description's path."""
        return self.config.robot


def is_fit_output(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory ``neuract fit`` wrote (its config.json is a FitConfig)."""
    cfg = Path(path) / "config.json"
    try:
        return json.loads(cfg.read_text()).get("type") == "FitConfig"
    except (OSError, ValueError, AttributeError):
        return False


def load_fit(path: str | os.PathLike, dtype: torch.dtype = torch.float64) -> FittedModel:
    """Load a ``neuract fit`` output directory (``config.json`` + ``model.safetensors``)."""
    p = Path(path)
    weights = p / "model.safetensors"
    if not is_fit_output(p):
        raise CheckpointError(f"{str(p)!r} is not a neuract fit output: expected a directory "
                              "with the config.json (type FitConfig) and model.safetensors "
                              "that `neuract fit --out DIR` writes")
    if not weights.is_file():
        raise CheckpointError(f"{str(p)!r}: no model.safetensors (the fit did not finish; "
                              "rerun `neuract fit` with the same options to resume it)")
    try:
        cfg = load_resolved(FitConfig, p / "config.json")
    except (ConfigError, TypeError) as e:
        raise CheckpointError(f"{str(p / 'config.json')!r}: {e}") from None
    with safe_open(str(weights), framework="pt") as f:
        key = "joints.armature.raw"
        shape = f.get_slice(key).get_shape() if key in f.keys() else None
    if not shape:
        raise CheckpointError(f"{str(weights)!r}: no joint parameters (joints.armature); not a "
                              "neuract fit model")
    n = int(shape[0])
    system = build_model(cfg.actuator, cfg.joints, n, dtype)
    load_weights(system, weights)
    system.eval()
    return FittedModel(system, cfg, n, p)


__all__ = ["FittedModel", "is_fit_output", "load_fit"]
