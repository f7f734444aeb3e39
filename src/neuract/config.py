"""Helpers for typed dataclass configs: resolved-config files, validation."""

from __future__ import annotations

import copy
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


RERUN_IGNORED = ("out", "quiet", "overwrite", "threads", "experiment.checkpoint_every",
                 "train.checkpoint_every", "data.workers", "twin.workers", "force_robot",
                 "preset")
"""config fields (dotted paths) that do not change a run's results: where it is written,
progress display, whether an earlier output may be replaced, CPU threads and processes, how
often a training state is saved, whether a robot model of another arm than the data's was
asked for (the model itself is an option of its own), the name of the preset the options
started from (its values are options of their own)"""


RUN_KINDS = {
    "TwinExperimentConfig": "a twin experiment (neuract evaluate --source twin, neuract demo)",
    "EvaluateConfig": "neuract evaluate --source nad or --source dataset",
    "NADExperimentConfig": "the NAD experiment (benchmarks)",
    "FitConfig": "neuract fit",
    "IdentifyConfig": "neuract identify",
    "ControlConfig": "neuract control",
}
"""what writes a run directory whose resolved config is of each type"""


def _kind(type_name: Any) -> str:
    return RUN_KINDS.get(str(type_name), "another kind of run")


def check_rerun(cfg: Any, out_dir: str | os.PathLike, name: str = "config.json",
                restart: str = "Choose another --out, or delete that directory to start "
                               "afresh", options: dict[str, str] | None = None) -> None:
    """Refuse to run ``cfg`` into ``out_dir`` where that holds an earlier run with other
    options (its resolved config, ``name``, differs beyond :data:`RERUN_IGNORED`): a run
    directory is reused in place, so that a rerun resumes its training states, and a run with
    other options, interrupted, would leave a mix of both runs' files that reads like one
    finished run. A missing or empty ``out_dir``, one holding nothing but ``name``, and the
    same config pass; a dataset directory (``meta/info.json``) and another command's output (a
    ``name`` of another config type) are refused as such, without listing their options.
    Raises ConfigError naming each differing field as a command-line option
    (``--experiment.sim-steps``); ``options`` renames a verb's option groups where they differ
    from the config's fields (e.g. ``{"data": "twin"}``). A path spelled another way (relative
    or absolute) counts as another option."""
    out = Path(out_dir)
    path = out / name
    if (out / "meta" / "info.json").is_file():  # a dataset (neuract twin, ingest)
        raise ConfigError(f"--out {str(out)!r} holds a dataset (meta/info.json, written by "
                          "neuract twin or ingest), not a run of this command: choose another "
                          "--out (a new or empty directory)")
    if not path.is_file():
        return
    others = sorted(p.name for p in out.iterdir() if p.name != name)
    if not others:
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"--out {str(out)!r} holds an unreadable {name} ({e}) beside "
                          f"{others}. {restart}") from None

    def strip(d: Any) -> Any:
        if not isinstance(d, dict) or not isinstance(d.get("config"), dict):
            return d
        conf = copy.deepcopy(d["config"])
        for dotted in RERUN_IGNORED:
            *parents, leaf = dotted.split(".")
            node = conf
            for k in parents:
                node = node.get(k) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(leaf, None)
        return {**d, "config": conf}

    old, new = strip(old), strip({"type": type(cfg).__qualname__, "config": to_dict(cfg)})
    if old == new:
        return
    if isinstance(old, dict) and old.get("type") != new["type"]:  # another command's output
        then, now = old.get("type"), new["type"]
        raise ConfigError(
            f"--out {str(out)!r} holds the output of {_kind(then)} (its {name} is of type "
            f"{json.dumps(then)}), not a run of {_kind(now)} ({now}) to resume. {restart}")

    def option(key: str) -> str:
        if not key.startswith("config."):
            return key
        head, _, rest = key.removeprefix("config.").partition(".")
        head = (options or {}).get(head, head)
        return "--" + ".".join(x for x in (head, rest) if x).replace("_", "-")

    diffs = (key_differences(old, new) if isinstance(old, dict)
             else [("config", json.dumps(old), "(a run config)")])
    shown = "; ".join(f"{option(k)}: {a} then, {b} now" for k, a, b in diffs[:6])
    more = f"; and {len(diffs) - 6} more" if len(diffs) > 6 else ""
    raise ConfigError(
        f"--out {str(out)!r} holds a run with other options ({shown}{more}). A run directory "
        "is reused so that a rerun of the same command resumes its training; a run with other "
        f"options would mix its files with that run's. {restart}")


def load_resolved(cls: type[C], path: str | os.PathLike) -> C:
    """Load a config written by :func:`save_resolved`."""
    data = json.loads(Path(path).read_text())
    return from_dict(cls, data.get("config", data))


_ABSENT = object()


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def key_differences(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(dotted field, old value, new value) as JSON text for every leaf of two run keys that
    differs; a field present on one side only reads ``(absent)`` on the other."""
    a, b = _flatten(old), _flatten(new)
    names = list(b) + [k for k in a if k not in b]
    out = []
    for k in names:
        va, vb = a.get(k, _ABSENT), b.get(k, _ABSENT)
        sa = "(absent)" if va is _ABSENT else json.dumps(va)
        sb = "(absent)" if vb is _ABSENT else json.dumps(vb)
        if sa != sb:
            out.append((k, sa, sb))
    return out
