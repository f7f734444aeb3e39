"""Typed configuration of the digital twin: every randomisation range is stated here.

All quantities are SI at the servo's output shaft (after the gearbox): torque [N m],
speed [rad/s], current [A], voltage [V], resistance [Ohm], temperature [degC], time [s].
A range ``(lo, hi)`` is sampled uniformly per unit and per joint; ``(x, x)`` fixes it.

Sources of the defaults (see also `neuract twin` in docs/cli.md):

- STS3215 (SO-101): LeRobot writes P_Coefficient=16, D_Coefficient=32, I=0 on the SO-101
  follower. Firmware P semantics measured on the K-Scale STS3215 bench
  (``../shared/data/kscale_sts3215_12v/orig_docs/README.md``): duty = kp * 0.1649 * error
  [rad], clipped to +-1 -- confirmed on NAD SO-101 rest frames, where
  load_counts ~= 1000 * 16 * 0.1649 * (q - q_goal). Electrical scale: stall current 2.7 A at
  12 V (R ~ 4.4 Ohm); the NAD current register (6.5 mA/LSB, supply-side |duty * I|) agrees
  with R in 4-5.5 Ohm. Back-EMF constant chosen so that ke^2/R ~ 1.0-1.6 N m s/rad, the
  damping BAM fitted on the K-Scale pendulum with kd = 0 (1.38-1.85 N m s/rad incl. viscous).
  Friction ranges bracket BAM's M1-M6 fits on that bench (Coulomb 0-0.05, Stribeck
  0.08-0.2, load-dependent 0.24-0.30, viscous 0.054-0.076, armature 0.027-0.028 kg m^2).
- XM430-W350 (OpenManipulator-X): ROBOTIS e-manual (docs/en/dxl/x/xm430-w350.md):
  Position P Gain 800, I 0, D 0 (defaults), KPP = P/128 in PWM counts per encoder step,
  PWM limit 885 = 100 %, Current Limit 1193 x 2.69 mA = 3.2 A, stall 4.1 N m at 12 V and
  2.3 A (R ~ 5.2 Ohm), no-load 46 rpm at 12 V (ke ~ 2.5 V s/rad), gear ratio 353.5:1.
  NAD OMX rest frames agree: pwm ~= (800/128) * error_steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Range = tuple[float, float]


@dataclass(frozen=True)
class ServoRanges:
    """Per-unit, per-joint randomisation ranges of the hidden servo physics (output side).

    Firmware: duty = clip(kp * p_scale * e + kd * d_scale * de/dt, -1, 1), e = goal - encoder.
    Motor: I = (duty * V - ke * w) / R(T), clipped to +-current_limit; torque
    tau_em = kt(T) * i_sat * tanh(I / i_sat) (saturating current-torque curve).
    Gearbox: friction bound F = coulomb + stribeck * exp(-(|w|/w_s)^alpha)
    + (load_mu + load_mu_stribeck * exp(-(|w|/w_s)^alpha)) * |tau_em|; viscous * w;
    backlash half-gap [rad]. Thermal: dT/dt = (I^2 R - (T - T_amb)/r_th) / (tau_th / r_th).
    """

    kp: float = 16.0  # firmware register value
    kd: float = 32.0
    p_scale: Range = (0.160, 0.170)  # duty per rad per kp unit (0.1649 measured)
    d_scale: Range = (0.0, 0.004)  # duty per (rad/s) per kd unit (undocumented; assumption)
    deadband: Range = (0.0, 1.0)  # firmware dead band [encoder steps]
    ke: Range = (2.2, 2.7)  # back-EMF constant at the output [V s/rad]
    kt_ratio: Range = (0.95, 1.05)  # kt / ke at 25 degC
    resistance: Range = (4.0, 5.5)  # winding + driver resistance at 25 degC [Ohm]
    current_limit: Range = (2.4, 3.2)  # firmware current limit [A]
    i_sat: Range = (3.0, 5.0)  # current-torque saturation scale [A]
    coulomb: Range = (0.0, 0.05)  # [N m]
    stribeck: Range = (0.08, 0.2)  # extra breakaway friction [N m]
    stribeck_speed: Range = (0.05, 0.15)  # [rad/s]
    stribeck_alpha: Range = (0.8, 2.0)
    load_mu: Range = (0.20, 0.30)  # friction per N m of motor torque
    load_mu_stribeck: Range = (0.0, 0.30)
    viscous: Range = (0.05, 0.08)  # [N m s/rad]
    armature: Range = (0.024, 0.030)  # reflected rotor inertia [kg m^2]
    backlash: Range = (0.002, 0.006)  # half gap [rad] (0.1-0.35 deg)
    backlash_lag: Range = (0.005, 0.02)  # time to cross the gap [s]
    kt_temp_coeff: Range = (-0.0015, -0.0008)  # 1/K (magnet)
    r_temp_coeff: Range = (0.0039, 0.0039)  # 1/K (copper)
    r_th: Range = (8.0, 14.0)  # winding-to-ambient thermal resistance [K/W]
    tau_th: Range = (250.0, 700.0)  # thermal time constant [s]
    temp_start_above_ambient: Range = (7.0, 18.0)  # units have been running [K]


@dataclass(frozen=True)
class DegradedRanges:
    """Multipliers applied to a degraded motor (condition label 1)."""

    friction_scale: Range = (1.8, 3.0)  # coulomb, stribeck, viscous, load_mu
    kt_scale: Range = (0.65, 0.85)
    backlash_scale: Range = (2.0, 4.0)


@dataclass(frozen=True)
class BusRanges:
    """Supply, bus timing and sensor noise (per unit)."""

    supply_voltage: Range = (12.1, 12.5)  # open-circuit [V]
    supply_resistance: Range = (0.5, 1.0)  # sag per A of total supply current [Ohm]
    volt_offset: Range = (-0.15, 0.15)  # per-servo ADC offset [V]
    ambient: Range = (22.0, 27.0)  # [degC]
    latency: Range = (0.001, 0.004)  # read/write bus latency [s]
    jitter: Range = (0.0004, 0.0009)  # std of the sample period [s]
    encoder_noise: Range = (0.0, 0.05)  # std before quantisation [encoder steps]
    encoder_offset: Range = (-2.0, 2.0)  # calibration offset [steps] (hidden)


@dataclass(frozen=True)
class RegisterSpec:
    """Servo family register scales (the telemetry writer quantises to these)."""

    family: str = "sts3215"
    steps_per_rev: int = 4096
    load_full_scale: float = 1000.0  # load register counts at 100 % duty (sign bit 10)
    load_lsb: float = 4.0  # observed resolution of the load register in NAD [counts]
    velocity_window: float = 0.02  # speed = step difference over this window [s]
    velocity_lsb: float = 0.0  # [rad/s] per LSB when not windowed (XM430: 0.229 rpm)
    current_lsb: float = 0.0065  # [A] per LSB (STS3215 6.5 mA; XM430 2.69 mA)
    current_supply_side: bool = True  # STS3215 reads |duty * I|; XM430 the motor current
    volt_lsb: float = 0.1  # [V]
    temp_lsb: float = 1.0  # [degC]


@dataclass(frozen=True)
class OverloadSpec:
    """A servo family's overload protection (opt-in: ``SimConfig.overload_protection``).

    Two latched trips, each timed on the physics grid: the load trip (``|duty| >=
    load_threshold`` continuously for ``load_time``) and the current trip (the family's current
    reading, supply-side ``|duty * I|`` on the STS3215 or the motor current on the XM430,
    ``>= current_threshold`` continuously for ``current_time``). A tripped servo's output (its
    duty) is limited to ``*_output`` of full scale from the next physics step on; an output
    of 0 is torque off (H-bridge open: no drive, no back-EMF braking). ``None``: no such trip.

    STS3215 defaults (SO-101): the factory registers as read back from an SO-101's servos,
    Overload_Torque(36) = 80 %, Protection_Time(35) = 200 x 10 ms, Protective_Torque(34) = 20 %
    (the output after an overload trip), Protection_Current(28) = 500 x 6.5 mA = 3.25 A,
    Over_Current_Protection_Time(38) = 200 x 10 ms, Unloading_Condition(19) = 44 (bits 2, 3,
    5: overheat, over-current and overload protection on); an over-current trip unloads the
    servo (torque off; the Feetech table names bit 3 an unloading condition). Status byte
    (65): bit 3 current, bit 5 load. XM430-W350 (OMX): Shutdown(63) = 52 sets bit 5 "Overload
    Error" ("persistent load that exceeds maximum output"), which clears Torque Enable(64) and
    sets Hardware Error Status(70) bit 5 until a reboot. ROBOTIS states no threshold or time;
    ASSUMPTION: motor current >= 1.2 A (the level the NeuralActuator paper reports position-only
    policies tripping at) for 3 s ("a high current for a few seconds", ROBOTIS on
    DynamixelSDK issue 285). See docs/envs.md (Overload protection) for the sources.
    """

    load_threshold: float | None = 0.80  # duty fraction that starts the load timer
    load_time: float = 2.0  # [s]
    load_output: float = 0.20  # duty limit after a load trip (0: torque off)
    current_threshold: float | None = 3.25  # [A] on the family's current reading
    current_time: float = 2.0  # [s]
    current_output: float = 0.0  # duty limit after a current trip (0: torque off)


@dataclass(frozen=True)
class RobotTwinSpec:
    """Everything robot-specific: servo family, gains, rates, ranges."""

    robot: str
    rate_hz: float
    servo: ServoRanges
    bus: BusRanges
    registers: RegisterSpec
    degraded: DegradedRanges = field(default_factory=DegradedRanges)
    overload: OverloadSpec = field(default_factory=OverloadSpec)


def so101_spec() -> RobotTwinSpec:
    """SO-101 with STS3215 servos, LeRobot gains (P=16, D=32), ~62 Hz telemetry."""
    return RobotTwinSpec("so101", 62.3, ServoRanges(), BusRanges(), RegisterSpec())


def omx_spec() -> RobotTwinSpec:
    """OpenManipulator-X with XM430-W350 servos, default gains (P=800, I=D=0), ~58.8 Hz."""
    steps = 4096
    # KPP = P/128 PWM counts per step; 885 counts = 100 % -> duty per rad per P unit:
    p_scale = (1.0 / 128.0) * (steps / (2 * 3.141592653589793)) / 885.0
    servo = ServoRanges(
        kp=800.0, kd=0.0, p_scale=(0.97 * p_scale, 1.03 * p_scale), d_scale=(0.0, 0.0),
        deadband=(0.0, 0.5), ke=(2.3, 2.7), resistance=(4.6, 5.6), current_limit=(2.8, 3.2),
        i_sat=(3.5, 6.0), coulomb=(0.0, 0.04), stribeck=(0.04, 0.12), load_mu=(0.15, 0.25),
        load_mu_stribeck=(0.0, 0.2), viscous=(0.03, 0.06), armature=(0.02, 0.03),
        backlash=(0.001, 0.0035),  # "backlash 0.25 deg" class of X-series gearboxes
    )
    bus = BusRanges(supply_voltage=(12.8, 13.0), supply_resistance=(0.4, 0.8),
                    encoder_noise=(0.1, 0.3))
    regs = RegisterSpec(
        family="xm430", load_full_scale=885.0, load_lsb=1.0, velocity_window=0.0,
        velocity_lsb=0.229 * 2 * 3.141592653589793 / 60.0, current_lsb=0.00269,
        current_supply_side=False,
    )
    # Shutdown(63) bit 5 only; thresholds undocumented (assumption, see OverloadSpec)
    overload = OverloadSpec(load_threshold=None, current_threshold=1.2, current_time=3.0,
                            current_output=0.0)
    return RobotTwinSpec("omx", 58.8, servo, bus, regs, overload=overload)


ROBOT_SPECS = {"so101": so101_spec, "omx": omx_spec}


@dataclass(frozen=True)
class Nonidealities:
    """Switches for every non-ideality; ``ideal()`` turns all of them off.

    With all off the servo is a pure P position actuator tau = kp_ideal * (goal - q) on the
    true joint angle, and the twin equals MuJoCo's own position actuator.
    """

    motor: bool = True  # DC motor, back-EMF, current limit, saturation (off: tau = kp_ideal*e)
    friction: bool = True
    backlash: bool = True
    thermal: bool = True
    sag: bool = True
    noise: bool = True
    quantisation: bool = True
    latency: bool = True
    jitter: bool = True

    @classmethod
    def ideal(cls) -> Nonidealities:
        return cls(**{k: False for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class SimConfig:
    """Simulation settings shared by all tasks."""

    physics_hz: float = 500.0
    episode_s: float = 30.0
    n_envs: int = 32  # environments stepped in lockstep per process
    degraded_fraction: float = 0.25
    """share of the ``degraded_tasks`` episodes with one or two degraded motors"""
    degraded_tasks: tuple[str, ...] = ("degraded",)
    """tasks whose episodes may have degraded motors (``degraded_fraction`` of them): by
    default task 'degraded' alone; a training set can also put worn motors into 'pick' or
    'push' episodes (push: the gate then sees a worn motor and a push together)"""
    payload_range_kg: Range = (0.0, 0.5)
    push_force_n: Range = (0.5, 6.0)
    nonideal: Nonidealities = field(default_factory=Nonidealities)
    kp_ideal: float = 8.0  # [N m/rad], only used when nonideal.motor is False
    external_forces_until_s: float = float("inf")
    """pushes starting and payloads attached at or after this episode time [s] are left out,
    the motion plan, timing and noise kept: the counterfactual that tells which contact
    samples the telemetry shows (:mod:`neuract.twin.observability`); inf: all kept"""
    current_noise_lsb: float = 0.0
    """std of the current register's reading noise, added before rounding [register LSBs:
    6.5 mA on the SO-101, 2.69 mA on the OMX]; the supply-side SO-101 register stays >= 0.
    Drawn after the simulation from the episode's own random stream, so every other channel
    is the same as without it. 0 (the default, and the data every benchmark here used): none;
    with noise switched off (``nonideal.noise``) none either. On replays of the NAD files,
    0.7 LSB (SO-101) and 0.3 LSB (OMX) bring the share of rest samples whose register
    changes near the real files' (``benchmarks/studies/bench_twin_current_noise.py``)"""
    healthy_motors: tuple[int, ...] = ()
    """motors (joint indices) kept healthy where an episode's plan degrades them, the
    degradation still drawn (the rest of the episode, its other worn motors included, stays
    the same): the counterfactual that tells what a worn motor does to an estimate; empty:
    every planned degradation applied"""
    overload_protection: bool = False
    """model the servos' overload protection (:class:`OverloadSpec` of the robot): a servo
    whose load or current stays above its protection threshold for the protection time trips,
    limits or cuts its output and stays tripped for the rest of the episode (the twin has no
    torque re-enable / reboot command); the raw record and the telemetry then carry a per-joint
    ``overload`` channel (the status register's overload bits). False (the default, and the
    data every benchmark here used): not modelled, every array as before"""
