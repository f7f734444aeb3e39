"""Actuator models: one family per module, one interface, limits always applied.

``build_actuator(ActuatorConfig(type="sts3215", friction="stribeck", delay=0.03))`` returns an
:class:`Actuator`; ``ACTUATORS.names()`` lists the families (``--actuator.type=NAME``), and
``FRICTIONS.names()`` the friction budgets (``--actuator.friction=NAME``; BAM's m1..m6 too).

- :mod:`~neuract.actuators.base`: interface, :class:`ActuatorState`, :class:`History`.
- :mod:`~neuract.actuators.servo`: firmware loop -> duty -> DC motor, one actuator type per
  servo family of the registry (:mod:`neuract.servos`: sts3215, sts3250, xm430, xl330, mx64,
  mx106) with that family's sourced defaults, plus the generic ``servo``.
- :mod:`~neuract.actuators.friction`: friction budgets clipping the stopping torque.
- :mod:`~neuract.actuators.backlash`: backlash dead zone and command delay.
- :mod:`~neuract.actuators.error_limit`: firmware clamp of the position error.
- :mod:`~neuract.actuators.goal_slew`: firmware speed limit of the internal goal.
- :mod:`~neuract.actuators.neural`: MLP / GRU / Transformer, standalone or residual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from neuract.actuators.backlash import MAX_WIDTH, Backlash, CommandDelay
from neuract.actuators.base import Actuator, ActuatorState, History
from neuract.actuators.error_limit import MAX_LIMIT, MIN_LIMIT, ErrorLimit
from neuract.actuators.friction import FRICTIONS, BudgetFriction, FrictionConfig
from neuract.actuators.goal_slew import MAX_SPEED, MIN_SPEED, GoalSlew
from neuract.actuators.neural import ActuatorNet, NeuralConfig
from neuract.actuators.param import Param, finite, option, refuse
from neuract.actuators.servo import (
    MAX_PUNCH,
    SERVO_DEFAULTS,
    STS3215,
    XM430,
    ServoActuator,
    ServoConfig,
)
from neuract.errors import ConfigError
from neuract.registry import Registry
from neuract.servos import SERVOS


@dataclass
class ActuatorConfig:
    """One flat config for every family (``--actuator.type``, ``--actuator.friction``, ...).

    Servo options (friction, backlash, delay, motor constants) apply to ``servo`` and to
    every servo family of :data:`neuract.servos.SERVOS` (``sts3215``, ``sts3250``, ``xm430``,
    ``xl330``, ``mx64``, ``mx106``) and to the physical base of a residual; ``neural``
    configures ``mlp``,
    ``gru``, ``transformer`` and any residual (``residual=mlp|gru|transformer``). Motor
    constants left at None take the family's defaults.
    """

    type: str = "sts3215"
    friction: str = "coulomb_viscous"
    smooth: bool = False
    backlash: float = 0.0  # [rad], 0 = none
    delay: float = 0.0  # [s], 0 = none
    delay_frames: int = 8
    residual: str = "none"  # none | mlp | gru | transformer
    control_dt: float = 0.01  # [s]
    kp: float | None = None
    kd: float | None = None
    ki: float | None = None
    error_gain: float | None = None
    voltage: float | None = None
    kt: float | None = None
    R: float | None = None
    current_limit: float | None = None
    fit_error_gain: bool = False
    punch: float = 0.0  # firmware minimum duty [-]; 0 = none, > 0 = fitted from this value
    error_limit: float = 0.0  # firmware position-error clamp [rad]; 0 = none, > 0 = fitted
    goal_slew: float = 0.0  # firmware goal speed limit [rad/s]; 0 = none, > 0 = fitted
    disabled: str = "coast"  # torque off: coast | brake
    neural: NeuralConfig = field(default_factory=NeuralConfig)

    def validate(self, prefix: str = "actuator.") -> None:
        """Raise :class:`ConfigError` for a value no actuator can be built from, naming the
        field after ``prefix`` (``--actuator.`` names it as ``neuract fit``'s option), the
        value and what is accepted. Motor constants left at None are not checked (the
        family's defaults are valid)."""
        _check_actuator(self, prefix)


NEURAL_TYPES = ("mlp", "gru", "transformer")
RESIDUALS = ("none", *NEURAL_TYPES)
SERVO_TYPES = ("servo", *SERVOS)
"""the physical actuator types: the generic servo, then each servo family of the registry"""


def valid_types() -> str:
    """The accepted ``--actuator.type`` values, grouped, for messages."""
    return (f"servo families {', '.join(SERVOS)} (neuract.servos); servo (generic); "
            f"neural {', '.join(NEURAL_TYPES)}")


def _check_actuator(c: ActuatorConfig, prefix: str) -> None:
    def bad(name: str, accepted: str) -> None:
        refuse(prefix, name, getattr(c, name), accepted)

    if c.type not in ACTUATORS:  # "valid actuator types: ...", as the registry says it
        raise ConfigError(f"{option(prefix, 'type')} {c.type!r}; valid actuator types: "
                          f"{valid_types()}")
    if c.friction != "none" and c.friction not in FRICTIONS:
        raise ConfigError(f"{option(prefix, 'friction')} {c.friction!r}; valid friction "
                          f"types: none, {', '.join(FRICTIONS.names())}")
    if c.residual not in RESIDUALS:
        bad("residual", ", ".join(RESIDUALS))
    if c.residual != "none" and c.type in NEURAL_TYPES:
        bad("residual", f"none with {option(prefix, 'type')} {c.type} (already neural); a "
            f"residual net applies to the servo types {', '.join(SERVO_TYPES)}")
    if c.disabled not in ("coast", "brake"):
        bad("disabled", "coast, brake")
    if not (finite(c.control_dt) and c.control_dt > 0):
        bad("control_dt", "a control period [s] > 0")
    if not (finite(c.backlash) and 0 <= c.backlash < MAX_WIDTH):
        bad("backlash", f"a gear gap width [rad] >= 0 and < {MAX_WIDTH} (0: none)")
    if not (finite(c.delay) and c.delay >= 0):
        bad("delay", "a command latency [s] >= 0 (0: none)")
    if c.delay > 0:
        if c.delay_frames < 2:
            bad("delay_frames", f"an integer >= 2 with {option(prefix, 'delay')} > 0")
        longest = (c.delay_frames - 1) * c.control_dt
        if not c.delay < longest:
            frames = option(prefix, "delay_frames")
            bad("delay", f"a latency [s] >= 0 and < {longest:g} ({frames} - 1 control periods "
                f"of {c.control_dt:g} s; raise {frames} for a longer one)")
    gains = {"kp": "a firmware P gain > 0", "error_gain": "duty per (kp rad) > 0",
             "voltage": "a supply voltage [V] > 0", "kt": "a torque constant [N m/A] > 0",
             "R": "a winding resistance [ohm] > 0"}
    for name, accepted in gains.items():
        v = getattr(c, name)
        if v is not None and not (finite(v) and v > 0):
            bad(name, accepted + " (default: the actuator type's)")
    for name, accepted in (("kd", "a firmware D gain >= 0"), ("ki", "a firmware I gain >= 0"),
                           ("current_limit", "a current limit [A] >= 0 (0: none)")):
        v = getattr(c, name)
        if v is not None and not (finite(v) and v >= 0):
            bad(name, accepted + " (default: the actuator type's)")
    if not (finite(c.punch) and 0 <= c.punch < MAX_PUNCH):
        bad("punch", f"a minimum duty >= 0 and < {MAX_PUNCH} (0: none)")
    if not (finite(c.error_limit) and (c.error_limit == 0
                                       or MIN_LIMIT < c.error_limit < MAX_LIMIT)):
        bad("error_limit", f"0 (none) or a position-error clamp [rad] > {MIN_LIMIT} and "
            f"< {MAX_LIMIT}")
    if not (finite(c.goal_slew) and (c.goal_slew == 0 or MIN_SPEED < c.goal_slew < MAX_SPEED)):
        bad("goal_slew", f"0 (none) or a goal speed limit [rad/s] > {MIN_SPEED} and "
            f"< {MAX_SPEED}")
    _check_neural(c.neural, prefix + "neural.",
                  c.residual if c.residual != "none" else c.type)


def _check_neural(n: NeuralConfig, prefix: str, arch: str) -> None:
    def bad(name: str, accepted: str) -> None:
        refuse(prefix, name, getattr(n, name), accepted)

    for name, what in (("history", "frames"), ("hidden", "units"), ("layers", "layers"),
                       ("heads", "attention heads")):
        if not getattr(n, name) >= 1:
            bad(name, f"an integer >= 1 ({what})")
    if arch == "transformer" and n.hidden % n.heads:
        bad("hidden", f"a multiple of {option(prefix, 'heads')} {n.heads} (transformer)")
    for name, what in (("tau_max", "an output bound [N m]"),
                       ("residual_scale", "a residual scale [N m]"),
                       ("error_scale", "an input scale [rad]"),
                       ("velocity_scale", "an input scale [rad/s]"),
                       ("torque_scale", "an input scale [N m]")):
        v = getattr(n, name)
        if not (finite(v) and v > 0):
            bad(name, f"{what} > 0")
    if n.context_scale and len(n.context_scale) != len(n.context):
        bad("context_scale", f"one scale per {option(prefix, 'context')} key "
            f"({len(n.context)}), or none (all 1)")
    if not all(finite(v) and v > 0 for v in n.context_scale):
        bad("context_scale", "input scales > 0")


ActuatorBuilder = Callable[[ActuatorConfig, int], Actuator]
ACTUATORS: Registry[ActuatorBuilder] = Registry("actuator")


def _servo_config(cfg: ActuatorConfig, defaults: dict) -> ServoConfig:
    FRICTIONS.get(cfg.friction)  # validate the name early, listing the valid ones
    kw = dict(defaults)
    for name in ("kp", "kd", "ki", "error_gain", "voltage", "kt", "R", "current_limit"):
        v = getattr(cfg, name)
        if v is not None:
            kw[name] = v
    friction = None if cfg.friction == "none" else FrictionConfig(cfg.friction, cfg.smooth)
    return ServoConfig(**kw, control_dt=cfg.control_dt, friction=friction,
                       backlash=cfg.backlash, delay=cfg.delay, delay_frames=cfg.delay_frames,
                       smooth=cfg.smooth, fit_error_gain=cfg.fit_error_gain, punch=cfg.punch,
                       error_limit=cfg.error_limit, goal_slew=cfg.goal_slew,
                       disabled=cfg.disabled)


def _with_residual(cfg: ActuatorConfig, base: Actuator) -> Actuator:
    if cfg.residual == "none":
        return base
    ncfg = dataclasses.replace(cfg.neural, arch=cfg.residual)
    return ActuatorNet(ncfg, base=base)


def _servo_builder(defaults: dict) -> ActuatorBuilder:
    def build(cfg: ActuatorConfig, n_dof: int) -> Actuator:
        return _with_residual(cfg, ServoActuator(_servo_config(cfg, defaults), n_dof))

    return build


ACTUATORS.register("servo")(_servo_builder({}))
for _name, _defaults in SERVO_DEFAULTS.items():  # every registry family, its own defaults
    ACTUATORS.register(_name)(_servo_builder(_defaults))


def _neural_builder(arch: str) -> ActuatorBuilder:
    def build(cfg: ActuatorConfig, n_dof: int) -> Actuator:
        if cfg.residual != "none":
            raise ConfigError(
                f"actuator.type={arch!r} is already neural; residual={cfg.residual!r} applies "
                f"to servo types ({', '.join(SERVO_TYPES)})"
            )
        return ActuatorNet(dataclasses.replace(cfg.neural, arch=arch))

    return build


for _arch in ("mlp", "gru", "transformer"):
    ACTUATORS.register(_arch)(_neural_builder(_arch))


def build_actuator(cfg: ActuatorConfig | None = None, n_dof: int = 1) -> Actuator:
    """Build the actuator named by ``cfg.type`` (unknown names list the valid ones)."""
    cfg = cfg or ActuatorConfig()
    cfg.validate()
    return ACTUATORS.get(cfg.type)(cfg, n_dof)


__all__ = [
    "ACTUATORS",
    "FRICTIONS",
    "Actuator",
    "ActuatorConfig",
    "ActuatorState",
    "Backlash",
    "BudgetFriction",
    "CommandDelay",
    "ErrorLimit",
    "GoalSlew",
    "FrictionConfig",
    "History",
    "ActuatorNet",
    "NeuralConfig",
    "Param",
    "SERVO_TYPES",
    "STS3215",
    "ServoActuator",
    "ServoConfig",
    "XM430",
    "build_actuator",
]
