"""Hidden servo physics, batched over environments and joints (numpy, SI, output side).

Arrays are ``(E, n)``: ``E`` environments stepped in lockstep, ``n`` servo joints. One call of
:func:`servo_step` per physics step computes, for every servo at once, the firmware position
loop, the DC motor with back-EMF, current limit and saturating current-torque curve, the
gearbox friction bound (Coulomb + Stribeck + load-dependent; applied by MuJoCo's
``frictionloss`` so that stiction holds exactly), the winding temperature and the gear
backlash.

Backlash is a gap state ``delta = q_out - q_motor`` in ``[-b, b]``: the output rests on the
gear flank selected by the sign of the transmitted torque
(``delta* = b * tanh(tau_t / 0.02 N m)``) and crosses the gap with a first-order lag
``backlash_lag``; the rigid-body joint in MuJoCo carries the motor angle and the encoder (on
the output shaft, as in the STS3215 and XM430) reads ``q_motor + delta``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from neuract.twin.config import Nonidealities, OverloadSpec, RobotTwinSpec

T_REF = 25.0  # [degC] temperature at which ke/kt/R are stated


@dataclass
class ServoParams:
    """Hidden parameters of the servos of ``E`` environments; every field is ``(E, n)``."""

    kp: np.ndarray
    kd: np.ndarray
    p_scale: np.ndarray
    d_scale: np.ndarray
    deadband: np.ndarray  # [rad]
    ke: np.ndarray
    kt: np.ndarray  # at T_REF
    resistance: np.ndarray
    current_limit: np.ndarray
    i_sat: np.ndarray
    coulomb: np.ndarray
    stribeck: np.ndarray
    stribeck_speed: np.ndarray
    stribeck_alpha: np.ndarray
    load_mu: np.ndarray
    load_mu_stribeck: np.ndarray
    viscous: np.ndarray
    armature: np.ndarray
    backlash: np.ndarray
    backlash_lag: np.ndarray
    kt_temp_coeff: np.ndarray
    r_temp_coeff: np.ndarray
    r_th: np.ndarray
    tau_th: np.ndarray
    temp_start: np.ndarray
    ambient: np.ndarray
    volt_offset: np.ndarray
    encoder_noise: np.ndarray  # [steps]
    encoder_offset: np.ndarray  # [steps]

    @classmethod
    def stack(cls, units: list[ServoParams]) -> ServoParams:
        """Concatenate single-environment parameter sets ``(1, n)`` into ``(E, n)``."""
        return cls(**{f.name: np.concatenate([getattr(u, f.name) for u in units])
                      for f in fields(cls)})

    def row(self, e: int) -> ServoParams:
        return ServoParams(**{k: v[e:e + 1].copy() for k, v in asdict(self).items()})

    def to_labels(self) -> dict[str, list[float]]:
        """Per-joint hidden parameters of environment 0 as plain lists (episode labels)."""
        return {k: [float(x) for x in v[0]] for k, v in asdict(self).items()}


@dataclass
class UnitBus:
    """Per-environment supply and bus parameters, each ``(E,)``."""

    supply_voltage: np.ndarray
    supply_resistance: np.ndarray
    latency_read: np.ndarray
    latency_write: np.ndarray
    jitter: np.ndarray

    @classmethod
    def stack(cls, units: list[UnitBus]) -> UnitBus:
        return cls(**{f.name: np.concatenate([getattr(u, f.name) for u in units])
                      for f in fields(cls)})

    def to_labels(self) -> dict[str, float]:
        return {k: float(v[0]) for k, v in asdict(self).items()}


def _u(rng: np.random.Generator, rng_pair, size) -> np.ndarray:
    lo, hi = rng_pair
    return rng.uniform(lo, hi, size) if hi > lo else np.full(size, float(lo))


def sample_unit(spec: RobotTwinSpec, n: int, rng: np.random.Generator
                ) -> tuple[ServoParams, UnitBus]:
    """Draw one unit (one physical arm): ``(1, n)`` servo parameters and its bus."""
    s, b = spec.servo, spec.bus
    step = 2 * np.pi / spec.registers.steps_per_rev
    shape = (1, n)
    ke = _u(rng, s.ke, shape)
    params = ServoParams(
        kp=np.full(shape, s.kp), kd=np.full(shape, s.kd),
        p_scale=_u(rng, s.p_scale, shape), d_scale=_u(rng, s.d_scale, shape),
        deadband=_u(rng, s.deadband, shape) * step,
        ke=ke, kt=ke * _u(rng, s.kt_ratio, shape), resistance=_u(rng, s.resistance, shape),
        current_limit=_u(rng, s.current_limit, shape), i_sat=_u(rng, s.i_sat, shape),
        coulomb=_u(rng, s.coulomb, shape), stribeck=_u(rng, s.stribeck, shape),
        stribeck_speed=_u(rng, s.stribeck_speed, shape),
        stribeck_alpha=_u(rng, s.stribeck_alpha, shape),
        load_mu=_u(rng, s.load_mu, shape), load_mu_stribeck=_u(rng, s.load_mu_stribeck, shape),
        viscous=_u(rng, s.viscous, shape), armature=_u(rng, s.armature, shape),
        backlash=_u(rng, s.backlash, shape), backlash_lag=_u(rng, s.backlash_lag, shape),
        kt_temp_coeff=_u(rng, s.kt_temp_coeff, shape),
        r_temp_coeff=_u(rng, s.r_temp_coeff, shape), r_th=_u(rng, s.r_th, shape),
        tau_th=_u(rng, s.tau_th, shape), temp_start=_u(rng, s.temp_start_above_ambient, shape),
        ambient=np.full(shape, _u(rng, b.ambient, 1)[0]),
        volt_offset=_u(rng, b.volt_offset, shape),
        encoder_noise=_u(rng, b.encoder_noise, shape),
        encoder_offset=np.round(_u(rng, b.encoder_offset, shape)),
    )
    bus = UnitBus(
        supply_voltage=_u(rng, b.supply_voltage, 1),
        supply_resistance=_u(rng, b.supply_resistance, 1),
        latency_read=_u(rng, b.latency, 1), latency_write=_u(rng, b.latency, 1),
        jitter=_u(rng, b.jitter, 1),
    )
    return params, bus


def degrade(params: ServoParams, joints: np.ndarray, spec: RobotTwinSpec,
            rng: np.random.Generator) -> ServoParams:
    """Copy of single-environment ``params`` with the motors in ``joints`` (bool ``(n,)``)
    degraded: more friction, lower torque constant, more backlash."""
    d = spec.degraded
    out = ServoParams(**{k: v.copy() for k, v in asdict(params).items()})
    m = np.asarray(joints, bool)[None, :]
    fr = np.where(m, _u(rng, d.friction_scale, m.shape), 1.0)
    for name in ("coulomb", "stribeck", "viscous", "load_mu", "load_mu_stribeck"):
        setattr(out, name, getattr(out, name) * fr)
    out.kt = out.kt * np.where(m, _u(rng, d.kt_scale, m.shape), 1.0)
    out.backlash = out.backlash * np.where(m, _u(rng, d.backlash_scale, m.shape), 1.0)
    return out


@dataclass
class ServoState:
    """Evolving servo state of ``E`` environments."""

    temperature: np.ndarray  # (E, n) winding temperature [degC]
    supply_current: np.ndarray  # (E,) total supply current of the previous step [A]
    gap: np.ndarray  # (E, n) backlash state q_out - q_motor [rad]
    w_prev: np.ndarray  # (E, n) motor speed of the previous step [rad/s]

    @classmethod
    def initial(cls, p: ServoParams) -> ServoState:
        z = np.zeros_like(p.kp)
        return cls(p.ambient + p.temp_start, np.zeros(p.kp.shape[0]), z, z.copy())


@dataclass
class Protection:
    """Overload protection of ``E`` environments' servos (:class:`OverloadSpec`), opt-in.

    ``t_load`` / ``t_current`` (E, n): how long the load / current has been at or above its
    threshold without a break [s]; ``limit`` (E, n): the output limit (1 until a trip);
    ``tripped`` (E, n) bool: latched (the twin has no torque re-enable or reboot command).
    """

    spec: OverloadSpec
    supply_side: bool  # the current reading is |duty * I| (STS3215), else |I| (XM430)
    t_load: np.ndarray
    t_current: np.ndarray
    limit: np.ndarray
    tripped: np.ndarray

    @classmethod
    def initial(cls, spec: OverloadSpec, supply_side: bool, shape: tuple[int, int]
                ) -> Protection:
        z = np.zeros(shape)
        return cls(spec, supply_side, z, z.copy(), np.ones(shape), np.zeros(shape, bool))

    def update(self, duty: np.ndarray, current: np.ndarray, dt: float) -> None:
        """Advance the timers by one physics step of ``duty`` and ``current`` and latch the
        servos whose timer reached the protection time (their limit applies next step)."""
        s = self.spec
        if s.load_threshold is not None:
            over = np.abs(duty) >= s.load_threshold
            self.t_load = np.where(over, self.t_load + dt, 0.0)
            self._trip(self.t_load >= s.load_time - 1e-9, s.load_output)
        if s.current_threshold is not None:
            reading = np.abs(duty * current) if self.supply_side else np.abs(current)
            over = reading >= s.current_threshold
            self.t_current = np.where(over, self.t_current + dt, 0.0)
            self._trip(self.t_current >= s.current_time - 1e-9, s.current_output)

    def _trip(self, now: np.ndarray, output: float) -> None:
        self.limit = np.where(now, np.minimum(self.limit, output), self.limit)
        self.tripped |= now


@dataclass
class ServoOut:
    """One physics step of all servos; every field ``(E, n)`` except ``v_bus`` ``(E,)``."""

    duty: np.ndarray  # applied duty [-1, 1] (+ drives +q)
    current: np.ndarray  # motor current [A]
    tau_em: np.ndarray  # motor torque at the output before gear friction [N m]
    friction_bound: np.ndarray  # Coulomb/Stribeck/load friction bound [N m]
    v_servo: np.ndarray  # supply voltage at each servo [V]


def servo_step(p: ServoParams, st: ServoState, goal: np.ndarray, q_enc: np.ndarray,
               w_motor: np.ndarray, v_bus: np.ndarray, dt: float,
               ni: Nonidealities, kp_ideal: float, prot: Protection | None = None
               ) -> ServoOut:
    """Advance every servo one physics step (updates ``st`` and ``prot`` in place).

    goal, q_enc: (E, n) goal at the servo and encoder reading [rad]; w_motor: (E, n) joint
    (motor) speed [rad/s]; v_bus: (E,) supply voltage [V]; prot: overload protection (None:
    not modelled; also not with ``ni.motor`` off, the ideal actuator having no current).
    """
    err = goal - q_enc
    if not ni.motor:
        tau = kp_ideal * err
        zero = np.zeros_like(tau)
        return ServoOut(zero, zero, tau, zero, np.broadcast_to(v_bus[:, None], tau.shape))
    c = _derived(p, dt)
    if ni.quantisation:
        err[np.abs(err) <= p.deadband] = 0.0
    duty = c["p_gain"] * err
    duty -= c["d_gain"] * w_motor
    np.maximum(duty, -1.0, out=duty)
    np.minimum(duty, 1.0, out=duty)
    if prot is not None:
        np.clip(duty, -prot.limit, prot.limit, out=duty)
    v_col = v_bus[:, None]
    v_servo = v_col + p.volt_offset if ni.noise else np.repeat(v_col, err.shape[1], 1)
    if ni.thermal:
        dtemp = st.temperature - T_REF
        res = p.resistance * (1.0 + p.r_temp_coeff * dtemp)
        kt_isat = c["kt_isat"] * (1.0 + p.kt_temp_coeff * dtemp)
    else:
        res, kt_isat = p.resistance, c["kt_isat"]
    current = duty * v_servo
    current -= p.ke * w_motor
    current /= res
    np.maximum(current, c["neg_ilim"], out=current)
    np.minimum(current, p.current_limit, out=current)
    if prot is not None:
        current[prot.limit <= 0.0] = 0.0  # torque off: the bridge is open, no current
        prot.update(duty, current, dt)
    tau_em = kt_isat * np.tanh(current * c["inv_isat"])
    abs_tau = np.abs(tau_em)
    if ni.friction:
        s = np.exp(-np.power(np.abs(w_motor) * c["inv_ws"], p.stribeck_alpha))
        bound = p.coulomb + p.stribeck * s
        bound += (p.load_mu + p.load_mu_stribeck * s) * abs_tau
    else:
        bound = np.zeros_like(tau_em)
    if ni.thermal:
        st.temperature += c["th_heat"] * (current * current * res)
        st.temperature -= c["th_cool"] * (st.temperature - p.ambient)
    st.supply_current = np.abs(duty * current).sum(axis=1) + 0.05
    if ni.backlash:
        tau_t = tau_em - p.viscous * w_motor
        tau_t -= c["arm_dt"] * (w_motor - st.w_prev)
        target = p.backlash * np.tanh(tau_t * 50.0)  # flank switch scale 0.02 N m
        st.gap += (target - st.gap) * c["lag"]
    st.w_prev = w_motor
    return ServoOut(duty, current, tau_em, bound, v_servo)


def _derived(p: ServoParams, dt: float) -> dict[str, np.ndarray]:
    """Per-step constants of ``p`` (computed once per parameter set and time step)."""
    cache = getattr(p, "_derived_cache", None)
    if cache is None or cache[0] != dt:
        d = {
            "p_gain": p.kp * p.p_scale, "d_gain": p.kd * p.d_scale,
            "kt_isat": p.kt * p.i_sat, "inv_isat": 1.0 / p.i_sat,
            "neg_ilim": -p.current_limit, "inv_ws": 1.0 / p.stribeck_speed,
            "th_heat": dt * p.r_th / p.tau_th, "th_cool": dt / p.tau_th,
            "arm_dt": p.armature / dt, "lag": np.minimum(dt / p.backlash_lag, 1.0),
        }
        cache = (dt, d)
        object.__setattr__(p, "_derived_cache", cache)
    return cache[1]


def bus_voltage(bus: UnitBus, st: ServoState, ni: Nonidealities) -> np.ndarray:
    """(E,) supply voltage after the sag caused by the previous step's total current [V]."""
    if not ni.sag:
        return bus.supply_voltage.copy()
    return bus.supply_voltage - bus.supply_resistance * st.supply_current
