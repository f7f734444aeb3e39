"""Helpers for typed dataclass configs: resolved-config files, validation."""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from pathlib import Path
from typing import Any, TypeVar

from neuract.atomic import write_json
from neuract.errors import ConfigError

C = TypeVar("C")


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (nested) dataclass config."""
    if not dataclasses.is_dataclass(cfg):
        raise ConfigError(f"expected a dataclass config, got {type(cfg).__name__}")
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def save_resolved(cfg: Any, out_dir: str | os.PathLike, name: str = "config.json") -> Path:
    """Write the resolved config next to a run's outputs so the run can be reproduced."""
    path = Path(out_dir) / name
    write_json(path, {"type": type(cfg).__qualname__, "config": to_dict(cfg)})
    return path


def from_dict(cls: type[C], data: dict[str, Any]) -> C:
    """Rebuild a (nested) dataclass config from a dict, rejecting unknown fields."""
    if not dataclasses.is_dataclass(cls):
        raise ConfigError(f"{cls!r} is not a dataclass")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise ConfigError(
            f"unknown field(s) {sorted(unknown)} for {cls.__name__}; accepted: {sorted(fields)}"
        )
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in data.items():
        sub = hints.get(name)
        if dataclasses.is_dataclass(sub) and isinstance(value, dict):
            kwargs[name] = from_dict(sub, value)
        elif isinstance(value, list) and isinstance(fields[name].default, tuple):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


def load_resolved(cls: type[C], path: str | os.PathLike) -> C:
    """Load a config written by :func:`save_resolved`."""
    data = json.loads(Path(path).read_text())
    return from_dict(cls, data.get("config", data))
