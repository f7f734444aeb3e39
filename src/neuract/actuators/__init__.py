"""Actuator models: one family per module, one interface, limits always applied.

``build_actuator(ActuatorConfig(type="sts3215", friction="stribeck", delay=0.03))`` returns an
:class:`Actuator`; ``ACTUATORS.names()`` lists the families (``--actuator.type=NAME``), and
``FRICTIONS.names()`` the friction budgets (``--actuator.friction=NAME``; BAM's m1..m6 too).

- :mod:`~neuract.actuators.base`: interface, :class:`ActuatorState`, :class:`History`.
- :mod:`~neuract.actuators.servo`: firmware loop -> duty -> DC motor (STS3215, XM430).
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

from neuract.actuators.backlash import Backlash, CommandDelay
from neuract.actuators.base import Actuator, ActuatorState, History
from neuract.actuators.error_limit import ErrorLimit
from neuract.actuators.friction import FRICTIONS, BudgetFriction, FrictionConfig
from neuract.actuators.goal_slew import GoalSlew
from neuract.actuators.neural import NeuralActuator, NeuralConfig
from neuract.actuators.param import Param
from neuract.actuators.servo import STS3215, XM430, ServoActuator, ServoConfig
from neuract.errors import ConfigError
from neuract.registry import Registry


@dataclass
class ActuatorConfig:
    """One flat config for every family (``--actuator.type``, ``--actuator.friction``, ...).

    Servo options (friction, backlash, delay, motor constants) apply to ``servo``, ``sts3215``
    and ``xm430`` and to the physical base of a residual; ``neural`` configures ``mlp``,
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
    return NeuralActuator(ncfg, base=base)


def _servo_builder(defaults: dict) -> ActuatorBuilder:
    def build(cfg: ActuatorConfig, n_dof: int) -> Actuator:
        return _with_residual(cfg, ServoActuator(_servo_config(cfg, defaults), n_dof))

    return build


ACTUATORS.register("servo")(_servo_builder({}))
ACTUATORS.register("sts3215")(_servo_builder(STS3215))
ACTUATORS.register("xm430")(_servo_builder(XM430))


def _neural_builder(arch: str) -> ActuatorBuilder:
    def build(cfg: ActuatorConfig, n_dof: int) -> Actuator:
        if cfg.residual != "none":
            raise ConfigError(
                f"actuator.type={arch!r} is already neural; residual={cfg.residual!r} applies "
                "to servo types (servo, sts3215, xm430)"
            )
        return NeuralActuator(dataclasses.replace(cfg.neural, arch=arch))

    return build


for _arch in ("mlp", "gru", "transformer"):
    ACTUATORS.register(_arch)(_neural_builder(_arch))


def build_actuator(cfg: ActuatorConfig | None = None, n_dof: int = 1) -> Actuator:
    """Build the actuator named by ``cfg.type`` (unknown names list the valid ones)."""
    cfg = cfg or ActuatorConfig()
    if cfg.residual not in ("none", "mlp", "gru", "transformer"):
        raise ConfigError(
            f"actuator.residual={cfg.residual!r}; valid: none, mlp, gru, transformer"
        )
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
    "NeuralActuator",
    "NeuralConfig",
    "Param",
    "STS3215",
    "ServoActuator",
    "ServoConfig",
    "XM430",
    "build_actuator",
]
