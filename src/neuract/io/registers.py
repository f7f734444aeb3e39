"""Servo register scales: raw register counts -> SI units, each with its source.

Raw register units never leave the readers; every reader converts through the functions here,
so each scale is written down exactly once.

Sources (all in ``../shared/data/<folder>/PROVENANCE.md`` beside the project):

- Feetech STS3215 (``nad/PROVENANCE.md``, ``nad/SOURCE_dataset_doc.md``,
  ``robonine_sts3215_backlash/PROVENANCE.md``, Feetech STS control table):
  position and velocity in encoder steps, 4096 steps per revolution; load in 0.1 % of full
  duty (signed; the raw register is sign-magnitude with bit 10 = direction); present current
  6.5 mA per count; voltage in decivolts (121 = 12.1 V); temperature in degC.
- Dynamixel XM430 / XL330 (``nad/SOURCE_dataset_doc.md``, ``bam_xl330_2026/PROVENANCE.md``,
  ROBOTIS e-manual "Present PWM"): PWM register full scale +/-885 = +/-100 % duty; the raw
  16-bit register is two's complement.
- K-Scale STS3215 pendulum logs (``kscale_sts3215_12v/PROVENANCE.md``): ``current`` in mA
  (unsigned magnitude, undocumented by the authors, range 0..~4100), ``input_volts`` in V.
"""

from __future__ import annotations

import math

import numpy as np

STS3215_STEPS_PER_REV = 4096
"""Encoder steps per revolution of the STS3215 (12-bit magnetic encoder)."""
STS3215_RAD_PER_STEP = 2.0 * math.pi / STS3215_STEPS_PER_REV
STS3215_LOAD_FULL_SCALE = 1000.0
"""Load register counts at 100 % duty (unit 0.1 %)."""
STS3215_A_PER_CURRENT_COUNT = 6.5e-3
"""Present-current register: 6.5 mA per count (Feetech STS datasheet convention)."""
STS3215_V_PER_VOLTAGE_COUNT = 0.1
"""Present-voltage register: decivolts."""

DXL_PWM_FULL_SCALE = 885.0
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


__all__ = [
    "DXL_PWM_FULL_SCALE",
    "STS3215_A_PER_CURRENT_COUNT",
    "STS3215_LOAD_FULL_SCALE",
    "STS3215_RAD_PER_STEP",
    "STS3215_STEPS_PER_REV",
    "STS3215_V_PER_VOLTAGE_COUNT",
    "dxl_pwm_to_fraction",
    "mA_to_A",
    "sign_magnitude",
    "sts3215_current_to_A",
    "sts3215_decivolts_to_V",
    "sts3215_load_to_fraction",
    "sts3215_steps_to_rad",
    "twos_complement16",
]
