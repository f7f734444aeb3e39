"""NeuralActuator checkpoints as the verbs and experiments read and write them: the model
with its calibrated decisions (gate and condition thresholds, filters) stored in the
checkpoint's ``extra``, and ``--checkpoints`` given to ``neuract evaluate``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuract.atomic import is_output
from neuract.errors import ConfigError
from neuract.neuralactuator import load_checkpoint, read_config
from neuract.neuralactuator.checkpoint import CHECKPOINT_DEST

CALIBRATED = ("condition_threshold", "gate_threshold", "condition_tau_s", "gate_tau_s",
              "gate_release")
"""the calibrated decisions a checkpoint's ``extra`` may hold (model attributes once loaded)"""


def calibrated(model) -> dict[str, Any]:
    """The model's calibrated decisions (:data:`CALIBRATED` attributes that are set), as a
    checkpoint's ``extra`` stores them (a per-motor threshold as a list)."""
    return {k: list(v) if isinstance(v, tuple) else v
            for k in CALIBRATED if (v := getattr(model, k, None)) is not None}


def load_model(ckpt: Path):
    """A checkpoint with its calibrated condition and gate thresholds (``extra``)."""
    model = load_checkpoint(ckpt)
    extra = read_config(ckpt)[1].get("extra") or {}
    for k in CALIBRATED:
        v = extra.get(k)
        if v is not None:  # a condition threshold may be one per motor
            setattr(model, k, tuple(float(x) for x in v) if isinstance(v, list) else float(v))
    return model


def load_pretrained(path: Path | None) -> dict[str, Any]:
    """{mode: model} from ``--checkpoints``: a directory holding ``neuralactuator_simulator/``
    and/or ``neuralactuator_estimator/``, or one checkpoint directory itself (e.g. what
    ``neuract adapt`` writes), filed under its own mode. A directory of saved baselines
    (``baseline_*/``, read by :func:`~neuract.pipeline.baseline_checkpoints.load_baselines`)
    or one baseline checkpoint gives no NeuralActuator: {}."""
    if path is None:
        return {}
    path = Path(path)
    if is_output(path, **CHECKPOINT_DEST):  # a single checkpoint
        model = load_model(path)
        return {model.cfg.mode: model}
    if (path / "checkpoints").is_dir():  # a run directory (demo, evaluate)
        path = path / "checkpoints"
    out = {}
    for mode in ("simulator", "estimator"):
        p = path / f"neuralactuator_{mode}"
        if p.is_dir():
            out[mode] = load_model(p)
    if not out:
        if (path.name.startswith("baseline_") and (path / "config.json").is_file()) or any(
                path.glob("baseline_*/config.json")):
            return {}
        raise ConfigError(f"--checkpoints {str(path)!r}: no neuralactuator_simulator/, "
                          "neuralactuator_estimator/ or baseline_*/ checkpoint inside")
    return out


__all__ = ["CALIBRATED", "calibrated", "load_model", "load_pretrained"]
