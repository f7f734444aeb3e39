"""BAM parameter files: a published BAM friction fit in, a neuract-fitted servo out.

BAM (Rhoban's "Better Actuator Models") stores one fitted actuator as a flat JSON object: the
motor constants ``kt`` and ``R``, the joint's ``armature`` and ``q_offset``, the friction
parameters of one of its models ``m1`` .. ``m6``, and the names ``model`` and ``actuator``.
neuract's friction budgets (:mod:`neuract.actuators.friction`) name their parameters as BAM
does, so the numbers map one to one:

    {"kt": 3.6, "R": 9.8, "armature": 0.028, "q_offset": -0.014, "friction_base": 0.053,
     "friction_viscous": 0.059, "model": "m1", "actuator": "sts3215v12"}

:func:`load_bam_params` reads such a file into a :class:`BamParams` (the ActuatorConfig and
joint config it describes, and the values); :meth:`BamParams.build` makes the servo and the
joint parameters holding exactly those values. :func:`to_bam_params` /
:func:`save_bam_params` go the other way for a fitted :class:`ServoActuator` with a BAM
friction family; what BAM's model has no counterpart for (a delay, a minimum duty, backlash,
a smooth law, joint damping, ...) is refused by name rather than dropped.

Only BAM's ``sts3215v12`` actuator maps onto a neuract servo (``--actuator.type=sts3215``:
error gain 0.1649 per kp per rad, duty clipped at 1).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from neuract.actuators import ActuatorConfig, ServoActuator, build_actuator
from neuract.actuators.param import Param
from neuract.actuators.servo import STS3215
from neuract.atomic import write_text
from neuract.errors import ConfigError, SchemaError
from neuract.sim.simulate import OFFSET_HI, OFFSET_LO, JointParams, JointParamsConfig

BAM_MODELS = {"m1": "coulomb_viscous", "m2": "stribeck", "m3": "load", "m4": "load_stribeck",
              "m5": "directional", "m6": "quadratic"}
"""BAM's friction models and neuract's family of the same law"""
BAM_ACTUATORS = {"sts3215v12": "sts3215"}
"""BAM actuator names neuract maps, and the ``--actuator.type`` each becomes"""
COMMON_KEYS = ("kt", "R", "armature", "q_offset")
_STRIBECK = ("friction_stribeck", "dtheta_stribeck", "alpha")
FRICTION_KEYS = {
    "m1": ("friction_base", "friction_viscous"),
    "m2": ("friction_base", "friction_viscous", *_STRIBECK),
    "m3": ("friction_base", "friction_viscous", "load_friction_base"),
    "m4": ("friction_base", "friction_viscous", *_STRIBECK, "load_friction_base",
           "load_friction_stribeck"),
    "m5": ("friction_base", "friction_viscous", *_STRIBECK, "load_friction_motor",
           "load_friction_external", "load_friction_motor_stribeck",
           "load_friction_external_stribeck"),
    "m6": ("friction_base", "friction_viscous", *_STRIBECK, "load_friction_motor",
           "load_friction_external", "load_friction_motor_stribeck",
           "load_friction_external_stribeck", "load_friction_motor_quad",
           "load_friction_external_quad"),
}
"""each BAM model's friction parameters (also the attribute names of neuract's budget)"""


@dataclass
class BamParams:
    """One BAM parameter file, checked: what neuract builds from it, and its numbers."""

    model: str
    """BAM's friction model, m1 .. m6"""
    actuator: str
    """BAM's actuator name (sts3215v12)"""
    values: dict[str, float]
    """kt, R, armature, q_offset and the model's friction parameters (SI units)"""
    source: str = "BAM parameters"
    config: ActuatorConfig = field(init=False)
    joints: JointParamsConfig = field(init=False)

    def __post_init__(self) -> None:
        v = self.values
        self.config = ActuatorConfig(type=BAM_ACTUATORS[self.actuator], friction=self.model,
                                     kt=v["kt"], R=v["R"])
        self.joints = JointParamsConfig(armature=v["armature"], offset=v["q_offset"])

    def build(self, n_dof: int = 1, dtype: torch.dtype = torch.float64
              ) -> tuple[ServoActuator, JointParams]:
        """The servo and joint parameters holding exactly these values (every joint the same),
        in ``dtype``."""
        act = build_actuator(self.config, n_dof).to(dtype)
        joints = JointParams(n_dof, self.joints).to(dtype)
        targets = {"kt": act.kt, "R": act.R, "armature": joints.armature,
                   "q_offset": joints.offset}
        targets |= {k: getattr(act.friction, k) for k in FRICTION_KEYS[self.model]}
        for key, param in targets.items():
            set_exact(param, self.values[key])
        return act, joints


def _bounds(key: str) -> tuple[float | None, float | None]:
    """(lo, hi) a parameter takes in neuract (exclusive where a Param clips)."""
    if key == "q_offset":
        return OFFSET_LO, OFFSET_HI
    if key == "dtheta_stribeck":
        return 0.01, 5.0
    if key == "alpha":
        return 0.5, 10.0
    return 0.0, None


def bam_params_from_dict(data: Any, source: str = "BAM parameters") -> BamParams:
    """Check a parsed BAM parameter object; :class:`SchemaError` names the key, the value and
    what is accepted."""
    if not isinstance(data, dict):
        raise SchemaError(f"{source}: expected a JSON object of BAM parameters, got "
                          f"{type(data).__name__}")
    model, actuator = data.get("model"), data.get("actuator")
    if model not in BAM_MODELS:
        raise SchemaError(f"{source}: model {model!r}; accepted: {', '.join(BAM_MODELS)}")
    if actuator not in BAM_ACTUATORS:
        raise SchemaError(f"{source}: actuator {actuator!r}; accepted: "
                          f"{', '.join(BAM_ACTUATORS)} (the BAM actuators neuract maps)")
    wanted = COMMON_KEYS + FRICTION_KEYS[model]
    missing = [k for k in wanted if k not in data]
    if missing:
        raise SchemaError(f"{source}: model {model} lacks {', '.join(missing)}; a BAM {model} "
                          f"file gives {', '.join(wanted)}, model, actuator")
    extra = sorted(set(data) - set(wanted) - {"model", "actuator"})
    if extra:
        raise SchemaError(f"{source}: key(s) {', '.join(extra)} are not parameters of BAM "
                          f"model {model}; accepted: {', '.join(wanted)}, model, actuator")
    values: dict[str, float] = {}
    for k in wanted:
        v = data[k]
        lo, hi = _bounds(k)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if k in ("kt", "R"):
            ok = ok and v > 0
            accepted = "a number > 0"
        elif hi is None:
            ok = ok and v >= lo
            accepted = f"a number >= {lo:g}"
        else:
            ok = ok and lo < v < hi
            accepted = f"a number > {lo:g} and < {hi:g} (neuract's range)"
        if not ok:
            raise SchemaError(f"{source}: {k} {v!r}; accepted: {accepted}")
        values[k] = float(v)
    return BamParams(model, actuator, values, source)


def load_bam_params(path: str | os.PathLike) -> BamParams:
    """Read a BAM parameter file (e.g. K-Scale's ``friction_params/m6.json``)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"BAM parameter file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"BAM parameter file {str(path)!r} is not JSON: {exc}") from None
    return bam_params_from_dict(data, f"BAM parameter file {str(path)!r}")


@torch.no_grad()
def set_exact(param: Param, value: float) -> None:
    """Set ``param`` to ``value`` so that it reads back exactly when it can: the stored
    (unconstrained) number is nudged by a few units in the last place until the value it
    gives is ``value`` bit for bit (a value read off a Param of the same bounds and dtype
    always finds one), so an exported and re-imported model rolls out identically."""
    param.set(value)
    want = torch.full_like(param.raw, value)
    best = param.raw.clone()
    done = param._value() == want
    up, down, inf = best.clone(), best.clone(), torch.full_like(best, math.inf)
    for _ in range(16):
        if bool(done.all()):
            break
        up, down = torch.nextafter(up, inf), torch.nextafter(down, -inf)
        for cand in (up, down):
            param.raw.copy_(cand)
            hit = (param._value() == want) & ~done
            best, done = torch.where(hit, cand, best), done | hit
    param.raw.copy_(best)


def _family(act: ServoActuator) -> str:
    fr = act.friction
    name = None if fr is None else fr.cfg.type
    for model, family in BAM_MODELS.items():
        if name in (model, family):
            return model
    shown = "none" if name is None else name
    raise ConfigError(
        f"actuator.friction {shown!r} has no BAM equivalent; the families that export: "
        + ", ".join(f"{m} ({f})" for m, f in BAM_MODELS.items()))


def _refuse_extras(act: ServoActuator, joints: JointParams) -> None:
    """Raise ConfigError naming the first part of the model BAM's has no counterpart for."""
    c = act.cfg
    ratio = float(act.error_gain_ratio().reshape(-1)[0]) if c.fit_error_gain else 1.0
    checks = [
        ("actuator.error_gain", c.error_gain * ratio, math.isclose(
            c.error_gain * ratio, STS3215["error_gain"], rel_tol=1e-12),
         f"{STS3215['error_gain']} (BAM's sts3215v12)"),
        ("actuator.max_duty", c.max_duty, c.max_duty == 1.0, "1 (BAM's sts3215v12)"),
        ("actuator.current_limit", c.current_limit, c.current_limit == 0, "0 (none)"),
        ("actuator.ki", c.ki, c.ki == 0, "0 (BAM's firmware law is proportional)"),
        ("actuator.kd", c.kd, c.kd == 0, "0 (BAM's firmware law is proportional)"),
        ("actuator.delay", c.delay, c.delay == 0, "0 (none)"),
        ("actuator.backlash", c.backlash, c.backlash == 0, "0 (none)"),
        ("actuator.punch", c.punch, c.punch == 0, "0 (none)"),
        ("actuator.error_limit", c.error_limit, c.error_limit == 0, "0 (none)"),
        ("actuator.goal_slew", c.goal_slew, c.goal_slew == 0, "0 (none)"),
        ("actuator.smooth", c.smooth, not c.smooth, "false (BAM's law is the hard clip)"),
        ("actuator.disabled", c.disabled, c.disabled == "coast",
         "coast (how BAM's published fits reproduce)"),
        ("joints.damping / joints.frictionloss", "fitted or > 0", not joints._has_passive,
         "none (BAM's joint has only armature and offset)"),
    ]
    for name, value, ok, accepted in checks:
        if not ok:
            raise ConfigError(f"{name} {value!r} has no counterpart in a BAM parameter file; "
                              f"accepted for export: {accepted}")


def to_bam_params(actuator: Any, joints: JointParams, joint: int = 0) -> dict[str, Any]:
    """BAM's JSON object for joint ``joint`` of a fitted servo with a BAM friction family.

    Refuses (:class:`ConfigError`) a neural actuator, a friction family without a BAM model,
    and any servo feature BAM's model lacks, naming it."""
    if not isinstance(actuator, ServoActuator):
        kind = getattr(getattr(actuator, "cfg", None), "arch", type(actuator).__name__)
        raise ConfigError(
            f"actuator {kind!r} has no BAM parameters: only a physical servo (actuator.type "
            "sts3215, no residual net) with a BAM friction family exports to --format bam; "
            "export a learned net with --format onnx or --format torchscript")
    model = _family(actuator)
    _refuse_extras(actuator, joints)
    n = actuator.kt.raw.shape[-1] if actuator.kt.raw.dim() else 1
    if not (isinstance(joint, int) and 0 <= joint < n):
        raise ConfigError(f"joint {joint!r}; accepted: an index in [0, {n - 1}]")
    params = {"kt": actuator.kt, "R": actuator.R, "armature": joints.armature,
              "q_offset": joints.offset}
    params |= {k: getattr(actuator.friction, k) for k in FRICTION_KEYS[model]}
    with torch.no_grad():
        out: dict[str, Any] = {k: float(p().reshape(-1)[joint if p().numel() > 1 else 0])
                               for k, p in params.items()}
    return out | {"model": model, "actuator": "sts3215v12"}


def save_bam_params(path: str | os.PathLike, actuator: Any, joints: JointParams,
                    joint: int = 0) -> Path:
    """Write :func:`to_bam_params` to ``path`` (atomically); returns the path."""
    data = to_bam_params(actuator, joints, joint)
    path = Path(path)
    write_text(path, json.dumps(data, indent=2) + "\n")
    return path


__all__ = ["BAM_ACTUATORS", "BAM_MODELS", "FRICTION_KEYS", "BamParams", "bam_params_from_dict",
           "load_bam_params", "save_bam_params", "set_exact", "to_bam_params"]
