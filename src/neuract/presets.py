"""Named bundles of option values (``neuract fit --preset sts3215-best``), one place for all.

A preset is a verb's options written as config fields (dotted: ``actuator.friction``) with
values; ``neuract VERB --preset NAME ...`` starts from the verb's defaults with the preset's
values set, and the options given on the command line override them (``--preset sts3215-best
--train.seed 1``). The resolved config a run writes (``config.json``) holds every value, the
preset's name too. The benchmarks build their models from the same presets
(``benchmarks/bench_sts3215.py``), so a benchmark's figure is the command line's.

:func:`preset_options` writes a preset as the command-line options it stands for.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neuract.errors import ConfigError


@dataclass(frozen=True)
class Preset:
    summary: str
    """one line: what the preset is"""
    values: Mapping[str, Any] = field(default_factory=dict)
    """config field (dotted) -> value"""


STS3215_CONTEXT = ("kp", "voltage", "torque_enable")
STS3215_CONTEXT_SCALE = (32.0, 12.0, 1.0)

STS3215_BENCH: dict[str, Any] = {
    # the STS3215 (firmware P loop, DC motor) at its published motor constants, the network
    # inputs (context) of a neural part
    "actuator.type": "sts3215", "actuator.kt": 3.6, "actuator.R": 9.8,
    "actuator.neural.context": STS3215_CONTEXT,
    "actuator.neural.context_scale": STS3215_CONTEXT_SCALE,
    # the bench's rotor inertia and friction started near published fits
    "joints.armature": 0.028, "joints.offset": 0.0, "joints.fit_offset": True,
    "init": ("friction_base=0.05", "friction_viscous=0.06"),
    # 1 s windows, then 3 s; 48 runs per iteration; validation on whole runs
    "train.horizons": (1.0, 3.0), "train.stage_iters": (70, 40), "train.runs_per_iter": 48,
    "train.substeps": 1, "train.val_every": 10, "train.patience": 4, "train.lr": 0.05,
    "train.label_inputs": ("kp",), "val_fraction": 0.1,
}
"""what every STS3215 pendulum-bench model shares (``benchmarks/bench_sts3215.py``): the
servo's motor constants, joint and friction starting values, the training schedule"""

STS3215_SERVO: dict[str, Any] = {
    **STS3215_BENCH,
    "actuator.friction": "m6", "actuator.delay": 0.03, "actuator.punch": 0.02,
    "actuator.fit_error_gain": True, "actuator.backlash": 0.01, "actuator.error_limit": 0.6,
    "actuator.goal_slew": 5.0, "train.substeps": 2,
}
"""the bench's best physical model (``ours_m6_delay_punch_gain_backlash_elim_slew_sub2``)"""

RESIDUAL_TRAIN: dict[str, Any] = {
    "train.stage_iters": (150, 80), "train.lr": 0.01, "train.lr_net": 3e-3,
}
"""the schedule of a network on the STS3215 bench (residual or alone)"""

STS3215_BEST: dict[str, Any] = {
    **STS3215_SERVO,
    "actuator.residual": "gru", "actuator.neural.hidden": 32,
    "actuator.neural.residual_scale": 0.5,
    "base.fit": True, "base.lr": 0.05, "base.stage_iters": (70, 40),
    **RESIDUAL_TRAIN,
}
"""the bench's best model: the servo above fitted first, then a GRU residual trained with it
(``ours_residual_gru``)"""

PRESETS: dict[str, dict[str, Preset]] = {
    "fit": {
        "sts3215-servo": Preset(
            "the STS3215 bench's best servo model: M6 friction, 30 ms latency, punch, "
            "error-gain correction, backlash, error clamp, goal speed limit; 2 substeps",
            STS3215_SERVO),
        "sts3215-best": Preset(
            "sts3215-servo fitted first (--out/base), then a GRU residual network (32 units, "
            "+-0.5 N m) on it, trained together: the STS3215 benchmark's best model",
            STS3215_BEST),
    },
}
"""verb -> preset name -> :class:`Preset`"""


def names(verb: str) -> list[str]:
    return sorted(PRESETS.get(verb, {}))


def get(verb: str, name: str) -> Preset:
    """The preset ``name`` of ``verb``; ConfigError listing the verb's presets otherwise."""
    known = PRESETS.get(verb, {})
    if name not in known:
        have = ", ".join(sorted(known)) or "none"
        raise ConfigError(f"--preset {name!r}; valid presets of neuract {verb}: {have}")
    return known[name]


def _set(cfg: Any, dotted: str, value: Any, where: str) -> Any:
    """``cfg`` (a dataclass) with the field ``dotted`` set to ``value`` (a copy)."""
    head, _, rest = dotted.partition(".")
    names_ = {f.name for f in dataclasses.fields(cfg)}
    if head not in names_:
        raise ConfigError(f"{where}: {type(cfg).__name__} has no field {head!r}")
    if rest:
        return dataclasses.replace(cfg, **{head: _set(getattr(cfg, head), rest, value, where)})
    return dataclasses.replace(cfg, **{head: value})


def apply(cfg: Any, values: Mapping[str, Any], where: str = "preset") -> Any:
    """``cfg`` with every ``values`` field set (a copy)."""
    for dotted, value in values.items():
        cfg = _set(cfg, dotted, value, f"{where} {dotted}")
    return cfg


def _blank(cls: type) -> Any:
    """``cls()`` with its fields that have no default set empty (a string field: ""), for
    the command line to fill in."""
    hints = typing.get_type_hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kw[f.name] = "" if hints.get(f.name) is str else None
    return cls(**kw)


def find_preset(args: Sequence[str]) -> str | None:
    """The value of the last ``--preset NAME`` / ``--preset=NAME`` in ``args`` (up to ``--``),
    None if absent."""
    found = None
    for i, a in enumerate(args):
        if a == "--":
            break
        if a == "--preset" and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith("--preset="):
            found = a.split("=", 1)[1]
    return found


def default_for(verb: str, cls: type, args: Sequence[str]) -> Any | None:
    """The config the command line ``args`` of ``verb`` starts from: ``cls``'s defaults with
    the values of the preset ``args`` names; None when they name none."""
    name = find_preset(args)
    if not name:
        return None
    preset = get(verb, name)
    return apply(_blank(cls), {**preset.values, "preset": name}, f"preset {name}")


def _flag(dotted: str) -> str:
    return "--" + dotted.replace("_", "-")


def _words(value: Any) -> list[str]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (tuple, list)):
        return [str(v) for v in value]
    return [str(value)]


def options(cfg: Any, base: Any | None = None, prefix: str = "") -> list[str]:
    """The command-line options that turn ``base`` (default: ``type(cfg)``'s defaults) into
    ``cfg``: each differing field as ``--dotted.name VALUE...`` (a switch as ``--name`` or
    ``--no-name``)."""
    base = _blank(type(cfg)) if base is None else base
    out: list[str] = []
    for f in dataclasses.fields(cfg):
        a, b = getattr(cfg, f.name), getattr(base, f.name)
        dotted = prefix + f.name
        if dataclasses.is_dataclass(a) and not isinstance(a, type):
            out += options(a, b, dotted + ".")
        elif a != b:
            if isinstance(a, bool):
                out.append(_flag(dotted) if a else _flag(prefix + "no_" + f.name))
            else:
                out += [_flag(dotted), *_words(a)]
    return out


def preset_options(verb: str, name: str, cls: type) -> list[str]:
    """The preset ``name`` as the options of ``verb`` it stands for."""
    cfg = default_for(verb, cls, ["--preset", name])
    return options(dataclasses.replace(cfg, preset=""))


__all__ = ["PRESETS", "Preset", "apply", "default_for", "find_preset", "get", "names",
           "options", "preset_options"]
