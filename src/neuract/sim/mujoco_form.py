"""The nearest MuJoCo form of a fitted parametric servo: position-actuator gains, force range,
joint armature, damping and dry friction, derived from the servo's physics.

The servo (:mod:`neuract.actuators.servo`) below its clips and without friction is linear:

    duty = g (kp_fw e - kd_fw qd),        g = error_gain * error_gain_ratio,  e = goal - q
    tau  = kt (duty V - kt qd) / R
         = (kt V / R) kp_fw g e  -  (kt V / R) kd_fw g qd  -  (kt^2 / R) qd

MuJoCo's position actuator produces ``kp (ctrl - q) - kv qd``, clipped to ``forcerange``, and
a joint adds ``-damping qd``. The duty clip ``|duty| <= max_duty`` acts on the firmware's P-D
term only, while the back-EMF term acts at any duty; so

    kp         = (kt V / R) kp_fw g          [N m / rad]
    kv         = (kt V / R) kd_fw g          [N m s / rad]   (firmware D, inside the clip)
    forcerange = +-(kt V / R) max_duty       [N m]           (stall torque at full duty)
    damping   += kt^2 / R                    [N m s / rad]   (back-EMF, outside the clip)

is exact for that servo, saturated or not (MuJoCo integrates joint damping implicitly by
default, neuract explicitly: the rollouts agree to O(dt), not to rounding; see
docs/exports.md). The rest maps as follows, each with the reason it is exact or not:

- joint parameters (:class:`~neuract.sim.simulate.JointParams`): armature adds to the robot
  file's armature (neuract's plant already includes the file's); damping and frictionloss
  become MuJoCo's (neuract clips their budget against the stopping torque, MuJoCo solves a
  soft dry-friction constraint: the same law up to MuJoCo's constraint softness); the encoder
  offset becomes the joint's ``ref = -offset`` (qpos then reads the encoder, as the checkpoint's
  commands and positions do), the joint and control ranges shifted with it.
- friction budget: Coulomb ``friction_base`` adds to frictionloss and viscous
  ``friction_viscous`` to damping (exact: a budget ``c + v |qd|`` slides at
  ``-c sign(qd) - v qd``). Stribeck: MuJoCo has one dry friction, so frictionloss takes half
  the Stribeck excess (midway between breakaway ``c + s`` and sliding ``c``). Load-dependent
  terms (BAM m3-m6) have no MuJoCo form and are left out.
- command delay: MuJoCo's own actuator delay (``delay``, linear interpolation): the command
  is delayed by the same time, exactly for a whole number of control frames; otherwise MuJoCo
  shifts the zero-order-held control signal in time while neuract interpolates between
  control frames. MuJoCo's history starts at ctrl 0 unless initialised
  (``mujoco.mj_initCtrlHistory``).
- error limit: ``forcerange = min(stall, kp * limit)``: exact without a firmware D gain.
- current limit: ``forcerange = min(stall, kt I_max)``: approximate (the current clip also
  bounds the back-EMF torque, which MuJoCo's joint damping never is).
- not representable, left out and reported: backlash, goal slew, punch, firmware I gain,
  smooth clips (the export uses the hard ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from neuract.actuators.servo import ServoActuator
from neuract.errors import ConfigError
from neuract.sim.simulate import JointParams


@dataclass
class MujocoJoint:
    """One joint's MuJoCo values (SI units)."""

    kp: float  # position actuator gain [N m/rad]
    kv: float  # position actuator velocity gain [N m s/rad]
    forcerange: float  # symmetric actuator force limit [N m]
    armature: float  # [kg m^2], the robot file's plus the fitted
    damping: float  # [N m s/rad]
    frictionloss: float  # [N m]
    offset: float = 0.0  # [rad] fitted encoder offset (written as joint ref = -offset)
    delay: float = 0.0  # [s] actuator command delay (0: none)


@dataclass
class MujocoForm:
    """The MuJoCo values of every joint, and what the servo family could not carry exactly."""

    joints: dict[str, MujocoJoint]
    firmware_kp: float
    voltage: float
    approximations: list[str] = field(default_factory=list)


def _vals(x, n: int) -> list[float]:
    """A Param value, a float or a tensor, as n floats."""
    if callable(x) and not isinstance(x, torch.Tensor):
        with torch.no_grad():
            x = x()
    t = torch.as_tensor(x, dtype=torch.float64).detach().flatten()
    return [float(v) for v in (t.expand(n) if t.numel() == 1 else t)]


def _friction_terms(actuator: ServoActuator, n: int, notes: list[str]
                    ) -> tuple[list[float], list[float]]:
    """(coulomb, viscous) per joint from the servo's friction budget, noting approximations."""
    zero = [0.0] * n
    f = actuator.friction
    if f is None or not f.coulomb:
        return zero, zero
    coulomb, viscous = _vals(f.friction_base, n), _vals(f.friction_viscous, n)
    if f.stribeck:
        s = _vals(f.friction_stribeck, n)
        coulomb = [c + 0.5 * si for c, si in zip(coulomb, s)]
        notes.append("Stribeck friction: MuJoCo has one dry friction; frictionloss takes "
                     "friction_base + friction_stribeck/2 (midway between breakaway "
                     f"and sliding; friction_stribeck = {_fmt(s)} N m)")
    if f.load_dependent or f.directional or f.quadratic:
        notes.append(f"load-dependent friction ({actuator.cfg.friction.type}): no MuJoCo "
                     "form (frictionloss is constant); its load terms are left out")
    if f.cfg.smooth:
        notes.append("smooth friction surrogates: MuJoCo's dry friction is its own "
                     "(soft-constraint) law")
    return coulomb, viscous


def _fmt(xs: list[float]) -> str:
    return "[" + ", ".join(f"{x:.4g}" for x in xs) + "]"


def _firmware_notes(actuator: ServoActuator, n: int, notes: list[str]) -> None:
    c = actuator.cfg
    if actuator.backlash is not None:
        notes.append(f"backlash {_fmt(_vals(actuator.backlash.width, n))} rad: no MuJoCo "
                     "form (a joint-space dead zone of the position error); left out")
    if actuator.goal_slew is not None:
        notes.append(f"goal slew {_fmt(_vals(actuator.goal_slew.speed, n))} rad/s: MuJoCo's "
                     "actuator has no rate limit of its control; left out")
    if actuator.punch is not None:
        notes.append(f"punch (minimum duty) {_fmt(_vals(actuator.punch, n))}: no MuJoCo "
                     "form; left out")
    if c.ki:
        notes.append(f"firmware I gain ki = {c.ki:g}: MuJoCo's position actuator has no "
                     "integral term; left out")
    if c.smooth:
        notes.append("smooth clips (duty, current, backlash): written as the hard clips")
    if actuator.delay is not None:
        notes.append("command delay: MuJoCo's actuator delay shifts the held control in time "
                     "(neuract interpolates between control frames); its history starts at "
                     "ctrl 0 unless set with mujoco.mj_initCtrlHistory")


def mujoco_form(actuator: ServoActuator, joints: JointParams, joint_names: list[str],
                base_armature: list[float] | None = None, firmware_kp: float | None = None,
                voltage: float | None = None) -> MujocoForm:
    """The nearest MuJoCo form of a fitted servo + joint parameters (module docstring).

    joint_names: the checkpoint's joints, in its order; base_armature: the robot file's
    armature per joint [kg m^2] (neuract's plant includes it; default 0); firmware_kp /
    voltage: the firmware P gain and supply [V] the export is for (default: the servo's
    configured ``kp`` / ``voltage``; a fit may have used per-run values instead).
    """
    if not isinstance(actuator, ServoActuator):
        raise ConfigError(f"a MuJoCo form needs a parametric servo (ServoActuator), got "
                          f"{type(actuator).__name__}")
    n = len(joint_names)
    c = actuator.cfg
    kp_fw = c.kp if firmware_kp is None else firmware_kp
    V = c.voltage if voltage is None else voltage
    for name, v, what in (("firmware_kp", kp_fw, "a firmware P gain > 0"),
                          ("voltage", V, "a supply voltage [V] > 0")):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ConfigError(f"{name} = {v!r}; accepted: {what}")
    base = list(base_armature) if base_armature is not None else [0.0] * n
    if len(base) != n:
        raise ConfigError(f"base_armature has {len(base)} values; accepted: one per joint "
                          f"({n}: {joint_names})")
    notes: list[str] = []
    kt, R = _vals(actuator.kt, n), _vals(actuator.R, n)
    ratio = _vals(actuator.error_gain_ratio, n)
    coulomb, viscous = _friction_terms(actuator, n, notes)
    passive = joints._has_passive
    j_damp = _vals(joints.damping, n) if passive else [0.0] * n
    j_fric = _vals(joints.frictionloss, n) if passive else [0.0] * n
    arm, offset = _vals(joints.armature, n), _vals(joints.offset, n)
    delay = _vals(actuator.delay.delay, n) if actuator.delay is not None else [0.0] * n
    limit = _vals(actuator.error_limit.limit, n) if actuator.error_limit is not None else None
    out = {}
    for i, name in enumerate(joint_names):
        k = kt[i] * V / R[i]  # torque per unit duty at rest [N m]
        g = c.error_gain * ratio[i]
        kp, kv, force = k * kp_fw * g, k * c.kd * g, k * c.max_duty
        if limit is not None:
            force = min(force, kp * limit[i])
        if c.current_limit > 0:
            force = min(force, kt[i] * c.current_limit)
        out[name] = MujocoJoint(
            kp=kp, kv=kv, forcerange=force, armature=base[i] + arm[i],
            damping=kt[i] ** 2 / R[i] + viscous[i] + j_damp[i],
            frictionloss=coulomb[i] + j_fric[i], offset=offset[i], delay=delay[i])
    if limit is not None and c.kd:
        notes.append("error limit with a firmware D gain: forcerange = min(stall, kp * limit) "
                     "clips the P-D sum, the firmware clips the error alone")
    if c.current_limit > 0 and any(kt[i] * c.current_limit < kt[i] * V / R[i] * c.max_duty
                                   for i in range(n)):
        notes.append(f"current limit {c.current_limit:g} A: forcerange = kt * limit; the "
                     "firmware's clip also bounds the back-EMF torque (joint damping here)")
    _firmware_notes(actuator, n, notes)
    return MujocoForm(out, float(kp_fw), float(V), notes)


__all__ = ["MujocoForm", "MujocoJoint", "mujoco_form"]
