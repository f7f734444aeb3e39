"""Servo register scales: raw register counts -> SI units, each with its source.

Raw register units never leave the readers; every reader converts through the functions here.
The scales themselves are written down once, with their sources, in the servo registry
(:mod:`neuract.servos`: each family's :class:`~neuract.servos.Register` table); this module
decodes the raw words (sign-magnitude, two's complement, offsets) and applies them.

- Feetech STS3215 / STS3250: position and velocity in encoder steps, 4096 steps per
  revolution; load in 0.1 % of full duty (signed; the raw register is sign-magnitude with
  bit 10 = direction); present current 6.5 mA per count; voltage in decivolts (121 = 12.1 V);
  temperature in degC.
- Dynamixel XM430 / XL330 (protocol 2.0): PWM register full scale +/-885 = +/-100 % duty;
  the raw 16-bit register is two's complement. Dynamixel MX (protocol 1.0): see the registry.
- K-Scale STS3215 pendulum logs (``kscale_sts3215_12v/PROVENANCE.md``): ``current`` in mA
  (unsigned magnitude, undocumented by the authors, range 0..~4100), ``input_volts`` in V.
"""

from __future__ import annotations

import re

import numpy as np

from neuract import servos
from neuract.errors import ConfigError
from neuract.servos import Register

_STS = servos.STS3215
STS3215_STEPS_PER_REV = servos.STS_STEPS_PER_REV
"""Encoder steps per revolution of the STS3215 (12-bit magnetic encoder)."""
STS3215_RAD_PER_STEP = _STS.register("position").scale
STS3215_LOAD_FULL_SCALE = servos.STS_LOAD_FULL_SCALE
"""Load register counts at 100 % duty (unit 0.1 %)."""
STS3215_A_PER_CURRENT_COUNT = _STS.register("current").scale
"""Present-current register: 6.5 mA per count (Feetech STS datasheet convention)."""
STS3215_V_PER_VOLTAGE_COUNT = _STS.register("voltage").scale
"""Present-voltage register: decivolts."""

DXL_PWM_FULL_SCALE = servos.DXL_PWM_FULL_SCALE
"""Dynamixel XM430/XL330 Present PWM: +/-885 counts = +/-100 % duty."""


def sts3215_steps_to_rad(steps: np.ndarray) -> np.ndarray:
    """Position or velocity in encoder steps (or steps/s) -> rad (or rad/s)."""
    return np.asarray(steps, dtype=np.float64) * STS3215_RAD_PER_STEP


def sts3215_load_to_fraction(counts: np.ndarray) -> np.ndarray:
    """Signed load register counts (0.1 % duty) -> duty fraction in -1..1."""
    return np.asarray(counts, dtype=np.float64) / STS3215_LOAD_FULL_SCALE


def sts3215_current_to_A(counts: np.ndarray) -> np.ndarray:
    """Present-current register counts -> A (6.5 mA per count)."""
    return np.asarray(counts, dtype=np.float64) * STS3215_A_PER_CURRENT_COUNT


def sts3215_decivolts_to_V(counts: np.ndarray) -> np.ndarray:
    """Present-voltage register (decivolts) -> V."""
    return np.asarray(counts, dtype=np.float64) * STS3215_V_PER_VOLTAGE_COUNT


def sign_magnitude(raw: np.ndarray, sign_bit: int) -> np.ndarray:
    """Decode a sign-magnitude register (STS speed: bit 15, STS load: bit 10)."""
    raw = np.asarray(raw, dtype=np.int64)
    flag = 1 << sign_bit
    return np.where(raw & flag, -(raw & (flag - 1)), raw)


def twos_complement16(raw: np.ndarray) -> np.ndarray:
    """Decode an unsigned 16-bit register holding a two's-complement value."""
    raw = np.asarray(raw, dtype=np.int64)
    return np.where(raw > 32767, raw - 65536, raw)


def dxl_pwm_to_fraction(counts: np.ndarray) -> np.ndarray:
    """Signed Dynamixel PWM counts -> duty fraction in -1..1 (885 = 100 %)."""
    return np.asarray(counts, dtype=np.float64) / DXL_PWM_FULL_SCALE


def mA_to_A(ma: np.ndarray) -> np.ndarray:
    """Current in mA (the NAD OpenManipulator-X CSV column) -> A."""
    return np.asarray(ma, dtype=np.float64) * 1e-3


def decode(raw: np.ndarray, encoding: str) -> np.ndarray:
    """Raw register words -> signed counts for a registry ``encoding`` (``unsigned``,
    ``int16``, ``int32``, ``sign-magnitude bit N``)."""
    if encoding == "unsigned":
        return np.asarray(raw, dtype=np.int64)
    if encoding == "int16":
        return twos_complement16(raw)
    if encoding == "int32":
        raw = np.asarray(raw, dtype=np.int64)
        return np.where(raw > 2**31 - 1, raw - 2**32, raw)
    m = re.fullmatch(r"sign-magnitude bit (\d+)", encoding)
    if m:
        return sign_magnitude(raw, int(m.group(1)))
    raise ConfigError(f"register encoding {encoding!r}; accepted: unsigned, int16, int32, "
                      "sign-magnitude bit N")


def register_to_si(raw: np.ndarray, register: Register) -> np.ndarray:
    """Raw words of a registry :class:`~neuract.servos.Register` -> SI (its ``unit``)."""
    counts = decode(raw, register.encoding).astype(np.float64)
    return (counts - register.offset) * register.scale


def to_si(raw: np.ndarray, family: str, kind: str) -> np.ndarray:
    """Raw words of servo ``family``'s ``kind`` register (position, velocity, load, pwm,
    current, voltage, temperature) -> SI; a ConfigError names an unknown family or kind."""
    return register_to_si(raw, servos.family(family).register(kind))


__all__ = [
    "DXL_PWM_FULL_SCALE",
    "STS3215_A_PER_CURRENT_COUNT",
    "STS3215_LOAD_FULL_SCALE",
    "STS3215_RAD_PER_STEP",
    "STS3215_STEPS_PER_REV",
    "STS3215_V_PER_VOLTAGE_COUNT",
    "decode",
    "dxl_pwm_to_fraction",
    "mA_to_A",
    "register_to_si",
    "sign_magnitude",
    "sts3215_current_to_A",
    "sts3215_decivolts_to_V",
    "sts3215_load_to_fraction",
    "sts3215_steps_to_rad",
    "to_si",
    "twos_complement16",
]
