"""Telemetry writer: raw SI samples -> servo registers (quantised) -> canonical SI channels.

This is the only place where register units exist in the twin. Per servo family
(:class:`~neuract.twin.config.RegisterSpec`):

- position: ``steps_per_rev`` = 4096 steps/rev (encoder noise and calibration offset are
  added before rounding, in the simulator, because the firmware sees the same reading);
- goal: what the host wrote, rounded to encoder steps;
- velocity: STS3215 reports the step difference over a 20 ms window x 50 (multiples of
  50 steps/s, as in every NAD SO-101 file); XM430 reports 0.229 rpm LSBs;
- SO-101 ``load``: STS3215 Present_Load, 0..1000 = 0..100 % duty with the direction in
  bit 10 (sign-magnitude); NAD's values are multiples of 4 counts, so the twin rounds to 4.
  The sign follows the real register as logged in NAD: load > 0 when the motor pushes
  toward -q (NAD rest frames: load ~ +2638 * (q - q_goal) counts), i.e. load = -duty;
- OMX ``pwm``: XM430 Present_PWM, 885 counts = 100 %, sign = drive direction (+q);
- current: STS3215 6.5 mA/LSB, unsigned supply-side |duty * I| (consistent with NAD: 3-4
  counts at 8 % duty at rest, 220 counts at 74 % duty while lifting 500 g); XM430 2.69 mA/LSB,
  signed motor current; optional reading noise before rounding (``current_noise_lsb``,
  ``SimConfig.current_noise_lsb``; default none);
- voltage 0.1 V LSB, temperature 1 degC LSB;
- ``overload`` (only with ``SimConfig.overload_protection``): True once the servo's overload
  protection has tripped, the bits a host reads in the STS3215 status byte (65: bit 5 load,
  bit 3 current) or the XM430 Hardware Error Status (70: bit 5 Overload Error).
Ground truth beside the telemetry: ``tau`` (servo output torque driving the joint [N m]),
``ee_force`` (external force at the end-effector point, world frame: payload weight on z
plus pushes [N]), ``ee_force_mask`` (all True: the twin knows the force everywhere),
``contact`` (True while a payload hangs from or a push acts on the end effector),
``condition`` (1 for the whole episode if any motor is degraded; which motors in the labels).
"""

from __future__ import annotations

import math

import numpy as np

from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.errors import ConfigError
from neuract.twin.config import Nonidealities, RobotTwinSpec
from neuract.twin.sim import EpisodeRecord


def _round(x: np.ndarray, lsb: float, on: bool) -> np.ndarray:
    return np.round(x / lsb) * lsb if (on and lsb > 0) else x


def telemetry_channels(c: dict, enc_steps_window: np.ndarray | None, spec: RobotTwinSpec,
                       ni: Nonidealities, current_noise_lsb: float = 0.0,
                       rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
    """The registers a host reads, in SI (``q``, ``qd``, ``current``, ``voltage``,
    ``temperature``, and ``load`` (STS3215) or ``pwm`` (XM430)), from raw samples ``c``
    (:data:`~neuract.twin.sim.RECORD_CHANNELS`, each (K, n)); any K, so a host reading one
    sample at a time gets what a whole episode's conversion gives (noise drawn in order)."""
    r = spec.registers
    if not (math.isfinite(current_noise_lsb) and current_noise_lsb >= 0):
        raise ConfigError(f"current_noise_lsb = {current_noise_lsb!r}; expected a finite "
                          "number >= 0 register LSBs")
    noisy = ni.noise and current_noise_lsb > 0
    if noisy and rng is None:
        raise ConfigError("to_trajectory: current_noise_lsb > 0 needs the episode's rng")
    quant = ni.quantisation
    lsb = 2 * np.pi / r.steps_per_rev
    if enc_steps_window is not None and quant:
        steps_now = np.round(c["q_enc"] / lsb)
        qd = (steps_now - enc_steps_window) / r.velocity_window * lsb
    else:
        qd = _round(c["qd_true"], r.velocity_lsb, quant)
    duty = c["duty"]
    counts = _round(duty * r.load_full_scale, r.load_lsb, quant)
    current = np.abs(duty * c["current"]) if r.current_supply_side else c["current"]
    if noisy:  # the reading's noise, in register LSBs
        current = current + rng.standard_normal(current.shape) * current_noise_lsb * r.current_lsb
        if r.current_supply_side:  # an unsigned register
            current = np.abs(current)
    ch = {"q": c["q_enc"], "qd": qd, "current": _round(current, r.current_lsb, quant),
          "voltage": _round(c["v_servo"], r.volt_lsb, quant),
          "temperature": _round(c["temperature"], r.temp_lsb, quant)}
    if r.family == "sts3215":
        ch["load"] = -counts / r.load_full_scale
    else:
        ch["pwm"] = counts / r.load_full_scale
    if "overload" in c:
        ch["overload"] = np.asarray(c["overload"]) > 0.5
    return ch


def to_trajectory(rec: EpisodeRecord, spec: RobotTwinSpec, ni: Nonidealities,
                  joint_names: list[str], name: str, labels: dict,
                  degraded: np.ndarray | None, current_noise_lsb: float = 0.0,
                  rng: np.random.Generator | None = None) -> Trajectory:
    """Canonical telemetry of one simulated episode (see the module docstring).
    current_noise_lsb: std of the current register's reading noise before rounding
    [register LSBs] (``SimConfig.current_noise_lsb``), drawn from ``rng`` (the episode's
    stream, after the simulation's draws); 0 or ``ni.noise`` off: none."""
    tele = telemetry_channels(rec.channels, rec.enc_steps_window, spec, ni,
                              current_noise_lsb, rng)
    effort = "load" if "load" in tele else "pwm"
    ch = {
        "t": rec.t, "q": tele["q"], "qd": tele["qd"], "q_goal": rec.q_goal,
        "current": tele["current"], "voltage": tele["voltage"],
        "temperature": tele["temperature"],
        "tau": rec.channels["tau"],
        "ee_force": rec.ee_force,
        "ee_force_mask": np.ones(len(rec.t), bool),
        "contact": rec.contact.astype(bool),
        "condition": np.full(len(rec.t), int(degraded is not None and bool(np.any(degraded))),
                             np.int8),
        effort: tele[effort],
    }
    if "overload" in tele:
        ch["overload"] = tele["overload"]
    meta = TrajectoryMeta(robot=spec.robot, joint_names=tuple(joint_names),
                          source="neuract twin", rate_hz=spec.rate_hz, name=name,
                          labels=labels)
    return Trajectory(ch, meta)
