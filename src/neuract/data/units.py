"""Unit table: every unit a user may declare for a column, and its conversion to SI (also
importable as :mod:`neuract.io.units`).

``to_si(values, unit, channel)`` converts and checks that the unit measures the quantity the
channel holds (an ``A`` column cannot feed ``q``). Unknown units raise :class:`UnitsError`
listing the accepted ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from neuract.errors import UnitsError
from neuract.servos import STS_STEPS_PER_REV


@dataclass(frozen=True)
class Unit:
    """A raw unit: ``SI value = raw * scale + offset`` for a physical ``quantity``."""

    quantity: str  # "angle", "angular_velocity", ...
    scale: float  # SI value = raw * scale + offset
    offset: float = 0.0


_STEP = 2.0 * math.pi / STS_STEPS_PER_REV  # one step of a 12-bit magnetic encoder (STS3215)

UNITS: dict[str, Unit] = {
    # time
    "s": Unit("time", 1.0),
    "ms": Unit("time", 1e-3),
    "us": Unit("time", 1e-6),
    "ns": Unit("time", 1e-9),
    # angle
    "rad": Unit("angle", 1.0),
    "deg": Unit("angle", math.pi / 180.0),
    "rev": Unit("angle", 2.0 * math.pi),
    "step4096": Unit("angle", _STEP),
    # angular velocity
    "rad/s": Unit("angular_velocity", 1.0),
    "deg/s": Unit("angular_velocity", math.pi / 180.0),
    "rpm": Unit("angular_velocity", 2.0 * math.pi / 60.0),
    "step4096/s": Unit("angular_velocity", _STEP),
    # angular acceleration
    "rad/s^2": Unit("angular_acceleration", 1.0),
    "deg/s^2": Unit("angular_acceleration", math.pi / 180.0),
    # current
    "A": Unit("current", 1.0),
    "mA": Unit("current", 1e-3),
    # voltage
    "V": Unit("voltage", 1.0),
    "dV": Unit("voltage", 0.1),
    "mV": Unit("voltage", 1e-3),
    # temperature
    "degC": Unit("temperature", 1.0),
    "K": Unit("temperature", 1.0, -273.15),
    # torque
    "N m": Unit("torque", 1.0),
    "mN m": Unit("torque", 1e-3),
    "N mm": Unit("torque", 1e-3),
    # force
    "N": Unit("force", 1.0),
    "mN": Unit("force", 1e-3),
    "kgf": Unit("force", 9.80665),
    # dimensionless fractions (duty, load)
    "1": Unit("fraction", 1.0),
    "%": Unit("fraction", 0.01),
    "permille": Unit("fraction", 1e-3),
    # flags
    "bool": Unit("flag", 1.0),
}

ALIASES: dict[str, str] = {
    "Nm": "N m",
    "N*m": "N m",
    "N.m": "N m",
    "mNm": "mN m",
    "Nmm": "N mm",
    "C": "degC",
    "°C": "degC",
    "celsius": "degC",
    "radian": "rad",
    "radians": "rad",
    "degree": "deg",
    "degrees": "deg",
    "rad/s2": "rad/s^2",
    "deg/s2": "deg/s^2",
    "fraction": "1",
    "duty": "1",
    "percent": "%",
    "sec": "s",
}

# channel -> the quantity its values must measure
CHANNEL_QUANTITY: dict[str, str] = {
    "t": "time",
    "q": "angle",
    "q_goal": "angle",
    "qd": "angular_velocity",
    "qdd": "angular_acceleration",
    "current": "current",
    "voltage": "voltage",
    "temperature": "temperature",
    "tau": "torque",
    "ee_force": "force",
    "load": "fraction",
    "pwm": "fraction",
    "torque_enable": "flag",
    "valid": "flag",
    "ee_force_mask": "flag",
    "contact": "flag",
    "condition": "fraction",
}


def accepted_units() -> list[str]:
    """Names of every unit :func:`lookup` accepts (aliases aside)."""
    return list(UNITS)


def lookup(unit: str) -> Unit:
    """The :class:`Unit` called ``unit`` (aliases such as ``Nm`` or ``C`` accepted)."""
    key = ALIASES.get(unit, unit)
    if key not in UNITS:
        raise UnitsError(f"unknown unit {unit!r}; accepted units: {', '.join(UNITS)}")
    return UNITS[key]


def check_unit(unit: str, channel: str, where: str = "") -> Unit:
    """Check that ``unit`` is known and measures what ``channel`` holds."""
    pre = f"{where}: " if where else ""
    try:
        u = lookup(unit)
    except UnitsError as exc:
        raise UnitsError(f"{pre}{exc}") from None
    want = CHANNEL_QUANTITY.get(channel)
    if want is not None and u.quantity != want:
        ok = [k for k, v in UNITS.items() if v.quantity == want]
        raise UnitsError(
            f"{pre}unit {unit!r} measures {u.quantity}, but channel {channel!r} "
            f"holds {want}; accepted units for {channel!r}: {', '.join(ok)}"
        )
    return u


def to_si(values: np.ndarray, unit: str, channel: str | None = None, where: str = "") -> np.ndarray:
    """``values`` in ``unit`` converted to the SI unit of ``channel`` (float64)."""
    u = check_unit(unit, channel, where) if channel else lookup(unit)
    x = np.asarray(values, dtype=np.float64)
    if u.scale == 1.0 and u.offset == 0.0:
        return x.copy()
    return x * u.scale + u.offset


__all__ = [
    "ALIASES",
    "CHANNEL_QUANTITY",
    "UNITS",
    "Unit",
    "accepted_units",
    "check_unit",
    "lookup",
    "to_si",
]
