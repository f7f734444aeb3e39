"""Control tables of the emulated servos and register <-> SI conversions.

Two servo families, one per twin robot:

- ``sts3215`` (SO-101, Feetech SCS/STS protocol, little-endian): addresses from Feetech's
  STS/SMS memory table as LeRobot transcribes it (``lerobot/motors/feetech/tables.py``,
  ``STS_SMS_SERIES_CONTROL_TABLE``): model number 3 (2 bytes, 777), ID 5, return delay 7
  (2 us units), P/D coefficients 21/22, torque enable 40, goal position 42, present
  position 56, present speed 58 (steps/s, sign bit 15), present load 60 (0.1 % of full
  duty, sign bit 10), present voltage 62 (0.1 V), present temperature 63 (degC), status
  65 (the status byte's bits), moving 66, present current 69 (6.5 mA); the protection
  registers (19, 28, 34-38) as read back from an SO-101 (see
  :class:`neuract.twin.config.OverloadSpec`).
- ``xm430`` (OpenManipulator-X, Dynamixel Protocol 2.0): the XM430-W350 control table of
  the ROBOTIS e-Manual (emanual.robotis.com/docs/en/dxl/x/xm430-w350/): model number 0
  (1020), ID 7, return delay 9 (2 us, default 250), torque enable 64, hardware error status
  70, position D/I/P gains 80/82/84, goal position 116, present PWM 124 (885 = 100 %),
  present current 126 (2.69 mA, signed), present velocity 128 (0.229 rpm, signed 32-bit),
  present position 132 (signed 32-bit), present input voltage 144 (0.1 V), present
  temperature 146 (degC).

Position registers count 4096 steps per turn with the joint's zero at step 2048
(:data:`POSITION_CENTER`): ``q = (counts - 2048) * 2 pi / 4096``. The SI scales are
:mod:`neuract.io.registers`' and the twin's :class:`~neuract.twin.config.RegisterSpec`, so
that a value read over the emulated bus decodes to the twin's telemetry exactly.

A recorder reads one block per servo per tick (:attr:`ServoTable.telemetry`, the span from
present position / PWM to present current / temperature) with one SYNC READ and decodes it
with :func:`decode_telemetry` into the canonical channels ``q``, ``qd``, ``current``,
``voltage``, ``temperature`` and ``load`` (STS3215) or ``pwm`` (XM430); goals go out as
:func:`goal_counts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuract.errors import ConfigError
from neuract.io.registers import (
    DXL_PWM_FULL_SCALE,
    STS3215_A_PER_CURRENT_COUNT,
    STS3215_LOAD_FULL_SCALE,
    STS3215_RAD_PER_STEP,
    STS3215_V_PER_VOLTAGE_COUNT,
)
from neuract.twin.config import omx_spec

POSITION_CENTER = 2048
"""position register counts at the joint's zero"""
RAD_PER_STEP = STS3215_RAD_PER_STEP
"""both families: 4096 steps per turn"""
XM430_A_PER_CURRENT_COUNT = omx_spec().registers.current_lsb
"""XM430 present current: 2.69 mA per count"""
XM430_RADS_PER_VELOCITY_COUNT = omx_spec().registers.velocity_lsb
"""XM430 present velocity: 0.229 rpm per count"""
XM430_V_PER_VOLTAGE_COUNT = 0.1


@dataclass(frozen=True)
class Field:
    """One register: address, size [bytes] and encoding: ``"u"`` unsigned, ``"s"`` two's
    complement, ``"sm15"`` / ``"sm10"`` sign-magnitude with the sign in bit 15 / 10."""

    address: int
    size: int
    encoding: str = "u"


def encode_value(value: int, f: Field) -> bytes:
    """Integer ``value`` as the little-endian bytes of register ``f`` (saturated)."""
    v = int(value)
    bits = 8 * f.size
    if f.encoding == "u":
        v = min(max(v, 0), (1 << bits) - 1)
    elif f.encoding == "s":
        v = min(max(v, -(1 << (bits - 1))), (1 << (bits - 1)) - 1) & ((1 << bits) - 1)
    else:
        sign = int(f.encoding[2:])
        mag = min(abs(v), (1 << sign) - 1)
        v = mag | ((1 << sign) if v < 0 else 0)
    return v.to_bytes(f.size, "little")


def decode_value(data: bytes, f: Field) -> int:
    """The integer held by register ``f``'s little-endian bytes ``data``."""
    v = int.from_bytes(bytes(data[:f.size]), "little")
    if f.encoding == "s":
        bits = 8 * f.size
        return v - (1 << bits) if v >= 1 << (bits - 1) else v
    if f.encoding.startswith("sm"):
        sign = int(f.encoding[2:])
        return -(v & ((1 << sign) - 1)) if v & (1 << sign) else v
    return v


@dataclass(frozen=True)
class ServoTable:
    """A servo family's control table as the emulator serves it.

    fields: canonical name -> :class:`Field`; defaults: address -> (size, value) written at
    power-up; telemetry: (start address, length) of the block a recorder sync-reads;
    errors: fault kind -> bit of the status byte (STS) / Hardware Error Status (XM430).
    """

    family: str
    protocol: str
    model_number: int
    firmware: int
    memory_size: int
    fields: dict[str, Field]
    defaults: dict[int, tuple[int, int]]
    telemetry: tuple[int, int]
    errors: dict[str, int] = field(default_factory=dict)

    def f(self, name: str) -> Field:
        return self.fields[name]


STS3215 = ServoTable(
    family="sts3215", protocol="scs", model_number=777, firmware=3, memory_size=256,
    fields={
        "model_number": Field(3, 2), "id": Field(5, 1), "baud_rate": Field(6, 1),
        "return_delay": Field(7, 1), "min_position": Field(9, 2),
        "max_position": Field(11, 2), "p_gain": Field(21, 1), "d_gain": Field(22, 1),
        "torque_enable": Field(40, 1), "goal_position": Field(42, 2),
        "present_position": Field(56, 2), "present_velocity": Field(58, 2, "sm15"),
        "present_load": Field(60, 2, "sm10"), "present_voltage": Field(62, 1),
        "present_temperature": Field(63, 1), "status": Field(65, 1), "moving": Field(66, 1),
        "present_current": Field(69, 2),
    },
    defaults={
        0: (1, 3), 1: (1, 6),  # firmware major / minor
        6: (1, 0),  # baud rate code 0: 1 Mbps
        7: (1, 0),  # return delay 0 us
        8: (1, 1),  # response status level: reply to every instruction
        9: (2, 0), 11: (2, 4095),  # position limits
        13: (1, 70), 14: (1, 140), 15: (1, 40),  # temperature / voltage limits
        16: (2, 1000),  # max torque
        19: (1, 44),  # unloading condition: overheat, over-current, overload
        20: (1, 47),  # LED alarm condition
        28: (2, 500), 34: (1, 20), 35: (1, 200), 36: (1, 80), 38: (1, 200),  # protection
        40: (1, 1),  # torque enabled (see BusEmulator)
        48: (2, 1000),  # torque limit
    },
    telemetry=(56, 15),
    errors={"voltage": 0x01, "overheat": 0x04, "overcurrent": 0x08, "overload": 0x20},
)
"""Feetech STS3215 (SO-101)"""

XM430 = ServoTable(
    family="xm430", protocol="dxl2", model_number=1020, firmware=45, memory_size=662,
    fields={
        "model_number": Field(0, 2), "firmware": Field(6, 1), "id": Field(7, 1),
        "baud_rate": Field(8, 1), "return_delay": Field(9, 1),
        "max_position": Field(48, 4, "s"), "min_position": Field(52, 4, "s"),
        "torque_enable": Field(64, 1), "hardware_error": Field(70, 1),
        "d_gain": Field(80, 2), "i_gain": Field(82, 2), "p_gain": Field(84, 2),
        "goal_position": Field(116, 4, "s"), "realtime_tick": Field(120, 2),
        "moving": Field(122, 1), "present_pwm": Field(124, 2, "s"),
        "present_current": Field(126, 2, "s"), "present_velocity": Field(128, 4, "s"),
        "present_position": Field(132, 4, "s"), "present_voltage": Field(144, 2),
        "present_temperature": Field(146, 1),
    },
    defaults={
        8: (1, 3),  # baud rate code 3: 1 Mbps
        9: (1, 250),  # return delay 500 us
        10: (1, 0), 11: (1, 3), 13: (1, 2),  # drive mode, position control, protocol 2.0
        31: (1, 80), 32: (2, 160), 34: (2, 95),  # temperature / voltage limits
        36: (2, 885), 38: (2, 1193), 44: (4, 350),  # PWM / current / velocity limits
        48: (4, 4095), 52: (4, 0),  # position limits
        63: (1, 52),  # shutdown: overheating, electrical shock, overload
        64: (1, 1),  # torque enabled (see BusEmulator)
        68: (1, 2),  # status return level: reply to every instruction
        76: (2, 1920), 78: (2, 100),  # velocity I / P gains
    },
    telemetry=(124, 23),
    errors={"voltage": 0x01, "overheat": 0x04, "overload": 0x20},
)
"""ROBOTIS XM430-W350 (OpenManipulator-X)"""

TABLES = {"sts3215": STS3215, "xm430": XM430}
ROBOT_TABLE = {"so101": STS3215, "omx": XM430}
"""the servo family of each twin robot"""


def table_for(robot: str) -> ServoTable:
    if robot not in ROBOT_TABLE:
        raise ConfigError(f"robot = {robot!r}; emulated buses: {', '.join(ROBOT_TABLE)}")
    return ROBOT_TABLE[robot]


def position_counts(q: float) -> int:
    """Joint angle [rad] -> position register counts (zero at 2048)."""
    return POSITION_CENTER + int(round(float(q) / RAD_PER_STEP))


def counts_to_position(counts: float) -> float:
    """Position register counts -> joint angle [rad]."""
    return (float(counts) - POSITION_CENTER) * RAD_PER_STEP


def goal_counts(table: ServoTable, q: float) -> bytes:
    """The goal-position register bytes that command joint angle ``q`` [rad]."""
    return encode_value(position_counts(q), table.f("goal_position"))


def si_to_counts(table: ServoTable, tele: dict[str, float]) -> dict[str, int]:
    """Telemetry in SI (the twin's :func:`~neuract.twin.telemetry.telemetry_channels`, one
    servo: ``q``, ``qd``, ``current``, ``voltage``, ``temperature``, ``load`` or ``pwm``)
    -> present-register counts by field name."""
    out = {"present_position": position_counts(tele["q"]),
           "present_temperature": int(round(tele["temperature"]))}
    if table.family == "sts3215":
        out["present_position"] %= 4096  # a single-turn 12-bit encoder
        out["present_velocity"] = int(round(tele["qd"] / RAD_PER_STEP))
        out["present_load"] = int(round(tele["load"] * STS3215_LOAD_FULL_SCALE))
        out["present_voltage"] = int(round(tele["voltage"] / STS3215_V_PER_VOLTAGE_COUNT))
        out["present_current"] = int(round(abs(tele["current"]) / STS3215_A_PER_CURRENT_COUNT))
    else:
        out["present_velocity"] = int(round(tele["qd"] / XM430_RADS_PER_VELOCITY_COUNT))
        out["present_pwm"] = int(round(tele["pwm"] * DXL_PWM_FULL_SCALE))
        out["present_voltage"] = int(round(tele["voltage"] / XM430_V_PER_VOLTAGE_COUNT))
        out["present_current"] = int(round(tele["current"] / XM430_A_PER_CURRENT_COUNT))
    return out


def decode_telemetry(table: ServoTable, data: bytes) -> dict[str, float]:
    """One servo's telemetry block (``table.telemetry``'s bytes) -> SI channels: ``q``
    [rad], ``qd`` [rad/s], ``current`` [A], ``voltage`` [V], ``temperature`` [degC] and
    ``load`` (STS3215: fraction of full duty, the NAD sign) or ``pwm`` (XM430: duty
    fraction, + drives +q); plus ``error`` (STS3215: the status byte, 65) where the block
    holds it."""
    start, length = table.telemetry
    if len(data) != length:
        raise ConfigError(f"{table.family} telemetry block of {len(data)} bytes; expected "
                          f"{length} (address {start})")

    def get(name: str) -> int:
        f = table.f(name)
        return decode_value(data[f.address - start:f.address - start + f.size], f)

    out = {"q": counts_to_position(get("present_position")),
           "temperature": float(get("present_temperature"))}
    if table.family == "sts3215":
        out["qd"] = get("present_velocity") * RAD_PER_STEP
        out["load"] = get("present_load") / STS3215_LOAD_FULL_SCALE
        out["voltage"] = get("present_voltage") * STS3215_V_PER_VOLTAGE_COUNT
        out["current"] = get("present_current") * STS3215_A_PER_CURRENT_COUNT
        out["error"] = float(get("status"))
    else:
        out["qd"] = get("present_velocity") * XM430_RADS_PER_VELOCITY_COUNT
        out["pwm"] = get("present_pwm") / DXL_PWM_FULL_SCALE
        out["voltage"] = get("present_voltage") * XM430_V_PER_VOLTAGE_COUNT
        out["current"] = get("present_current") * XM430_A_PER_CURRENT_COUNT
    return out


def quantised(table: ServoTable, tele: dict[str, float]) -> dict[str, float]:
    """What :func:`decode_telemetry` returns for telemetry ``tele`` sent over the bus (the
    register rounding and saturation), for comparisons with the twin's ground truth."""
    counts = si_to_counts(table, tele)
    start, length = table.telemetry
    block = bytearray(length)
    for name, v in counts.items():
        f = table.f(name)
        block[f.address - start:f.address - start + f.size] = encode_value(v, f)
    out = decode_telemetry(table, bytes(block))
    out.pop("error", None)
    return out


def goal_from_counts(table: ServoTable, data: bytes) -> float:
    """Goal-position register bytes -> joint angle [rad]."""
    return counts_to_position(decode_value(data, table.f("goal_position")))


__all__ = [
    "Field", "POSITION_CENTER", "RAD_PER_STEP", "ROBOT_TABLE", "STS3215", "ServoTable",
    "TABLES", "XM430", "XM430_A_PER_CURRENT_COUNT", "XM430_RADS_PER_VELOCITY_COUNT",
    "counts_to_position", "decode_telemetry", "decode_value", "encode_value",
    "goal_counts", "goal_from_counts", "position_counts", "quantised", "si_to_counts",
    "table_for",
]
