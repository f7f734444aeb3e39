"""Checkpoints as safetensors + JSON: model weights, optimizer state, RNG, trainer state.

One training checkpoint is ONE safetensors file written atomically (weights ``model.*``,
optimizer tensors ``optim.*``, the torch RNG state ``rng``, the best weights so far
``best.*``), its trainer state (step, best evaluation, the run's key, ...) as JSON in the
file's metadata; a kill at any moment leaves either the previous or the new checkpoint, never a
mix. :mod:`neuract.fit.loop` writes and reads them for every training loop.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, safe_open, save_file
from torch import nn

from neuract.atomic import atomic_path
from neuract.config import key_differences
from neuract.errors import CheckpointError


def save_weights(module: nn.Module, path: str | os.PathLike, meta: dict[str, Any] | None = None
                 ) -> None:
    """Write ``module.state_dict()`` (all tensors) to ``path`` atomically."""
    tensors = {k: v.detach().contiguous().clone() for k, v in module.state_dict().items()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={"neuract": json.dumps(meta or {})})


def _read(path: str | os.PathLike, what: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors and raw metadata of a safetensors file; CheckpointError if absent/unreadable."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{what} {str(path)!r} not found")
    try:
        tensors = load_file(str(path))
        with safe_open(str(path), "pt") as f:
            meta = f.metadata() or {}
    except Exception as exc:  # noqa: BLE001 - corrupt files raise various errors
        raise CheckpointError(f"{what} {str(path)!r} unreadable: {exc}") from None
    return tensors, meta


def _load_model(module: nn.Module, model: dict[str, torch.Tensor], path) -> None:
    missing, unexpected = module.load_state_dict(model, strict=False)
    if missing or unexpected:
        raise CheckpointError(
            f"checkpoint {str(path)!r} does not match the model: missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)}"
        )


def load_weights(module: nn.Module, path: str | os.PathLike) -> dict[str, Any]:
    """Load weights saved by :func:`save_weights`; returns the stored metadata."""
    tensors, raw = _read(path, "checkpoint")
    try:
        meta = json.loads(raw.get("neuract", "{}"))
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} unreadable: {exc}") from None
    # (a training checkpoint's weights load too: its other tensors are left out)
    _load_model(module, {k[len("model."):] if k.startswith("model.") else k: v
                         for k, v in tensors.items()
                         if not k.startswith(("optim.", "rng", "best."))}, path)
    return meta


def save_training(path: str | os.PathLike, module: nn.Module, optimizer: torch.optim.Optimizer,
                  generator: torch.Generator | None, state: dict[str, Any],
                  best: dict[str, torch.Tensor] | None = None) -> None:
    """One resumable training checkpoint (see the module docstring); generator: the torch
    random stream to restore (None: none); best: weights kept apart (e.g. the best so far),
    read back by :func:`read_training_tensors` with prefix ``best.``."""
    tensors: dict[str, torch.Tensor] = {
        f"model.{k}": v.detach().contiguous().clone() for k, v in module.state_dict().items()
    }
    for k, v in (best or {}).items():
        tensors[f"best.{k}"] = v.detach().contiguous().clone()
    osd = optimizer.state_dict()
    for pid, st in osd["state"].items():
        for key, val in st.items():
            t = val if isinstance(val, torch.Tensor) else torch.tensor(val)
            tensors[f"optim.{pid}.{key}"] = t.detach().contiguous().clone()
    if generator is not None:
        tensors["rng"] = generator.get_state().clone()
    meta = {"trainer": json.dumps(state), "param_groups": json.dumps(osd["param_groups"])}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=meta)


def load_training(path: str | os.PathLike, module: nn.Module, optimizer: torch.optim.Optimizer,
                  generator: torch.Generator | None) -> dict[str, Any]:
    """Restore what :func:`save_training` wrote; returns the trainer state."""
    tensors, meta = _read(path, "training checkpoint")
    try:
        state = json.loads(meta["trainer"])
        groups = json.loads(meta["param_groups"])
    except (KeyError, ValueError) as exc:
        raise CheckpointError(f"training checkpoint {str(path)!r} unreadable: {exc}") from None
    _load_model(module, {k[len("model."):]: v for k, v in tensors.items()
                         if k.startswith("model.")}, path)
    opt_state: dict[int, dict[str, torch.Tensor]] = {}
    for k, v in tensors.items():
        if k.startswith("optim."):
            _, pid, key = k.split(".", 2)
            opt_state.setdefault(int(pid), {})[key] = v
    try:
        optimizer.load_state_dict({"state": opt_state, "param_groups": groups})
    except (ValueError, KeyError) as exc:
        raise CheckpointError(f"optimizer state in {str(path)!r} does not match: {exc}"
                              ) from None
    if generator is not None:
        if "rng" not in tensors:
            raise CheckpointError(f"training checkpoint {str(path)!r} holds no random state")
        generator.set_state(tensors["rng"])
    return state


def read_training_tensors(path: str | os.PathLike, prefix: str) -> dict[str, torch.Tensor]:
    """The tensors of a training checkpoint stored under ``prefix`` (e.g. ``best.``), the
    prefix removed; empty if it holds none."""
    tensors, _ = _read(path, "training checkpoint")
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def read_training_state(path: str | os.PathLike) -> dict[str, Any]:
    """The trainer state (JSON metadata) of a training checkpoint, without loading any tensor:
    lets a caller check what run wrote it before its weights are loaded into a model."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"training checkpoint {str(path)!r} not found")
    try:
        with safe_open(str(path), "pt") as f:
            meta = f.metadata() or {}
        state = json.loads(meta["trainer"])
    except Exception as exc:  # noqa: BLE001 - corrupt files raise various errors
        raise CheckpointError(f"training checkpoint {str(path)!r} unreadable: {exc}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"training checkpoint {str(path)!r} unreadable: trainer state "
                              f"is {type(state).__name__}, not an object")
    return state


def normalise_key(key: dict[str, Any]) -> dict[str, Any]:
    """``key`` as it reads back from a checkpoint's JSON metadata (tuples become lists, ...)."""
    return json.loads(json.dumps(key, default=str))


STATE_FORMAT = 2
"""format of the trainer state :mod:`neuract.fit.loop` writes (``state["format"]``); a state
without it was written by a neuract before the training loops were one, and is not resumed"""


def check_run_key(path: str | os.PathLike, state: dict[str, Any], key: dict[str, Any],
                  resume_hint: str = "rerun with the original options and data",
                  restart_hint: str = "delete it or use another checkpoint directory",
                  option: Any = None, *, kind: str | None = None, wording: str = "checkpoint",
                  what: str = "training checkpoint") -> None:
    """Refuse to resume from ``state`` (read from ``path``) unless it was written by a run with
    the same ``key``; the error names each differing field with its old and new value
    (``option(field)``, if given, names a field as the user's option, e.g. ``--train.lr``).

    kind: the kind of training the state must come from (None: any); a state of another
    trainer state format (:data:`STATE_FORMAT`) is refused too. wording: how a difference
    reads, ``checkpoint`` (``lr: 0.03 (checkpoint) -> 0.01 (this run)``) or ``then-now``
    (``lr: 0.03 then, 0.01 now``); what: how the error calls the file.

    A state without a key (written before keys were stored) is refused too: nothing shows it
    comes from this run, and silently continuing another run's weights is the failure this
    check exists for; starting afresh only costs the time of the fit.
    """
    if wording not in ("checkpoint", "then-now"):
        raise ValueError(f"check_run_key: wording={wording!r}; accepted: 'checkpoint', "
                         "'then-now'")
    where = f"{what} {str(path)!r}"
    fmt = state.get("format", 1)  # states before formats were numbered: 1
    if fmt != STATE_FORMAT:
        age = "an older" if isinstance(fmt, int) and fmt < STATE_FORMAT else "another"
        raise CheckpointError(
            f"{where} was written by {age} neuract (trainer state format {fmt!r}; this version "
            f"resumes format {STATE_FORMAT}); not resumed. To start afresh, {restart_hint}")
    if kind is not None and state.get("kind") != kind:
        raise CheckpointError(
            f"{where} holds the state of another kind of training ({state.get('kind')!r}, not "
            f"{kind!r}); not resumed. To start afresh, {restart_hint}")
    stored = state.get("key")
    if not isinstance(stored, dict):
        raise CheckpointError(
            f"{where} records no run key (written by an older "
            "neuract or another trainer), so nothing shows it comes from a run with these "
            f"options and data; not resumed. To start afresh, {restart_hint}")
    diffs = key_differences(stored, normalise_key(key))
    only_new = [name for name, old, _ in diffs if old == "(absent)"]
    if diffs and len(only_new) == len(diffs):  # every difference: a field the key gained
        raise CheckpointError(
            f"{where} was written by an older neuract whose run key "
            f"lacks {', '.join(only_new)}, so it cannot be shown to come from this run; not "
            f"resumed. To start afresh, {restart_hint}")
    if not diffs:
        return
    name_of = option or (lambda k: k)
    if wording == "then-now":
        shown = "; ".join(f"{name_of(name)}: {old} then, {new} now" for name, old, new in diffs)
        raise CheckpointError(
            f"{where} was written by a different run ({shown}); not resumed. To continue "
            f"that run, {resume_hint}; to start afresh, {restart_hint}")
    shown = "; ".join(f"{name_of(name)}: {old} (checkpoint) -> {new} (this run)"
                      for name, old, new in diffs)
    raise CheckpointError(
        f"{where} was written by a run with other options or "
        f"data; not resumed. Differs: {shown}. To continue that run, {resume_hint}; to "
        f"start afresh, {restart_hint}")
