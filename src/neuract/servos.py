"""Servo families from datasheets: one registry entry per servo in our data, every constant
with its source.

:data:`SERVOS` maps a family name (``--actuator.type NAME``, the ``family`` label the BAM
reader writes) to a frozen :class:`ServoFamily`: maker, bus protocol, datasheet ratings
(stall torque and current, no-load speed, nominal voltage, gear ratio), the DC-motor
constants a fit starts from (``kt``, ``R``), the firmware position loop (default P gain, what
one register unit of P does: :attr:`ServoFamily.error_gain`, duty ceiling, current limit),
the temperature limit and the telemetry registers' scales (:class:`Register`). Each constant
is a :class:`Const` holding a ``source`` (a datasheet URL and table, a measurement in
``../shared/data`` or a published model), and derived ones say how they were derived.

Firmware P law shared by every family (the servo model of :mod:`neuract.actuators.servo`):
``duty = clip(kp * error_gain * (goal - q), -max_duty, max_duty)`` with ``kp`` the P-gain
register value and ``goal - q`` in rad; ``error_gain`` is duty per register unit per rad.

The module is plain Python (no numpy, no torch): the readers (:mod:`neuract.io.registers`)
and the actuator models both take their constants from here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

from neuract.errors import ConfigError

RPM = 2.0 * math.pi / 60.0
"""rad/s per rev/min"""
KGF_CM = 0.0980665
"""N m per kgf cm (Feetech rates torque in kg cm)"""

# --------------------------------------------------------------------------- sources
EMANUAL = "https://emanual.robotis.com/docs/en/dxl/"
BAM = "https://github.com/Rhoban/bam"
BAM_DXL = f"{BAM} bam/dynamixel/actuator.py"
STS_TABLE = ("Feetech STS memory table (SMS_STS.h / LeRobot's feetech control table: present "
             "position 56, speed 58, load 60, voltage 62, temperature 63, current 69)")
STS_SCALES = ("../shared/data nad/PROVENANCE.md and robonine_sts3215_backlash/PROVENANCE.md "
              "(STS register units)")
KSCALE = "../shared/data/kscale_sts3215_12v"
ROBONINE_3215 = ("Robonine STS3215 test (https://robonine.com/testing-of-feetech-sts3215-"
                 "servomotor-backlash-repeatability-and-torque) and SO-ARM100 issue #134 "
                 "(https://github.com/TheRobotStudio/SO-ARM100/issues/134), datasheet columns")
ROBONINE_3250 = ("Feetech STS3250 spec sheet (doc 6384135881578380868917773, 2024-01-16) as "
                 "tabulated by Robonine (https://robonine.com/feetech-sts3250-smart-actuator-"
                 "evaluation-of-accuracy-torque-and-backlash), Table 1")

# Register scales several families share: defined once, used by the registers below and by
# neuract.io.registers.
STS_STEPS_PER_REV = 4096
"""STS encoder steps per revolution (12-bit magnetic encoder)"""
STS_LOAD_FULL_SCALE = 1000.0
"""STS load register counts at 100 % duty (unit 0.1 %)"""
STS_A_PER_CURRENT_COUNT = 6.5e-3
"""STS present-current register: 6.5 mA per count"""
DECIVOLT = 0.1
"""V per count of the STS and Dynamixel present-voltage registers"""
DXL_PULSES_PER_REV = 4096
"""Dynamixel X / MX position pulses per revolution"""
DXL_PWM_FULL_SCALE = 885.0
"""Dynamixel protocol-2.0 PWM register counts at 100 % duty (PWM Limit(36) 885, 0.113 %/count)"""
DXL_VELOCITY_RPM = 0.229
"""rev/min per count of the Dynamixel protocol-2.0 velocity registers"""


@dataclass(frozen=True)
class Const:
    """A constant with its unit and where it comes from."""

    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class Register:
    """One telemetry register: ``SI = (decoded - offset) * scale``.

    ``encoding``: ``unsigned``, ``int16`` / ``int32`` (two's complement) or
    ``sign-magnitude bit N`` (bit N holds the direction)."""

    name: str  # the maker's register name
    address: int
    scale: float  # SI units per count
    unit: str  # SI unit of the converted value
    encoding: str
    source: str
    offset: float = 0.0


@dataclass(frozen=True)
class ServoFamily:
    """One servo family: datasheet ratings, motor constants, firmware loop, registers."""

    name: str
    model: str
    maker: str
    protocol: str
    aliases: tuple[str, ...]  # motor names a log may give (case, '-', '_', ' ' ignored)
    nominal_voltage: Const
    stall_torque: Const
    no_load_speed: Const
    gear_ratio: Const
    kt: Const  # torque constant at the output shaft (= back-EMF constant), fit start value
    R: Const  # winding resistance, fit start value
    kp: Const  # default firmware P gain (register units)
    error_gain: Const  # duty per register unit of P per rad of position error
    gain_semantics: str  # what the P register means, in words
    max_duty: Const
    current_limit: Const  # firmware current limit the model applies [A]; 0 = none
    temperature_limit: Const
    registers: Mapping[str, Register] = field(hash=False)
    stall_current: Const | None = None  # None: not in the sources we hold

    def servo_defaults(self) -> dict[str, float]:
        """The :class:`neuract.actuators.servo.ServoConfig` defaults of this family."""
        return {"kp": self.kp.value, "error_gain": self.error_gain.value,
                "max_duty": self.max_duty.value, "voltage": self.nominal_voltage.value,
                "kt": self.kt.value, "R": self.R.value,
                "current_limit": self.current_limit.value}

    def constants(self) -> dict[str, Const | Register]:
        """Every sourced constant, by field name (registers as ``register.KIND``)."""
        out: dict[str, Const | Register] = {
            f.name: getattr(self, f.name) for f in fields(self)
            if isinstance(getattr(self, f.name), Const)}
        out.update({f"register.{k}": r for k, r in self.registers.items()})
        return out

    def register(self, kind: str) -> Register:
        """The register of ``kind`` (position, velocity, load, pwm, current, voltage,
        temperature); a ConfigError lists the ones this family has."""
        try:
            return self.registers[kind]
        except KeyError:
            raise ConfigError(f"servo family {self.name!r} has no {kind!r} register; it has "
                              f"{', '.join(self.registers)}") from None


def _regs(**kw: Register) -> Mapping[str, Register]:
    return MappingProxyType(dict(kw))


# ----------------------------------------------------------------------- Feetech STS
def _sts_registers(which: str) -> Mapping[str, Register]:
    src = f"{STS_TABLE}; units: {STS_SCALES}; {which}"
    step = 2.0 * math.pi / STS_STEPS_PER_REV
    return _regs(
        position=Register("Present_Position", 56, step, "rad", "unsigned", src),
        velocity=Register("Present_Speed", 58, step, "rad/s", "sign-magnitude bit 15", src),
        load=Register("Present_Load", 60, 1.0 / STS_LOAD_FULL_SCALE, "1 (duty)",
                      "sign-magnitude bit 10", src),
        voltage=Register("Present_Voltage", 62, DECIVOLT, "V", "unsigned", src),
        temperature=Register("Present_Temperature", 63, 1.0, "degC", "unsigned", src),
        current=Register("Present_Current", 69, STS_A_PER_CURRENT_COUNT, "A", "unsigned", src),
    )


STS_P_LAW = ("STS position loop: duty = P_Coefficient(21) * error_gain * error [rad], clipped "
             "to +-max_duty; I_Coefficient(23) and D_Coefficient(22) add to it (0 here)")

STS3215 = ServoFamily(
    name="sts3215",
    model="Feetech STS3215 (12 V, C018)",
    maker="Feetech",
    protocol="Feetech STS (SCS serial, half duplex TTL)",
    aliases=("sts3215", "sts3215v12", "sts321512v", "st3215"),
    nominal_voltage=Const(12.0, "V", f"{ROBONINE_3215}: 12 V version"),
    stall_torque=Const(30 * KGF_CM, "N m", f"{ROBONINE_3215}: 30 kg cm at 12 V"),
    no_load_speed=Const(45 * RPM, "rad/s", f"{ROBONINE_3215}: 45 rpm (0.22 s/60 deg) at 12 V"),
    gear_ratio=Const(345.0, "1", f"{ROBONINE_3215}: reduction 1:345"),
    kt=Const(3.6, "N m/A", f"fit start value near K-Scale's BAM M6 fit on this bench (kt "
             f"3.5555: {KSCALE}/orig_docs/README.md); the datasheet point (stall 2.94 N m, "
             "no-load 4.71 rad/s at 12 V) gives ke = 12 / 4.71 = 2.55 V s/rad"),
    R=Const(9.8, "ohm", f"fit start value of the order of K-Scale's BAM M6 fit (R 7.1214: "
            f"{KSCALE}/orig_docs/README.md) and of the datasheet point (ke V / stall torque "
            "= 10.4 ohm)"),
    kp=Const(32.0, "register", f"the P_Coefficient K-Scale measured the error gain at "
             f"({KSCALE}/orig_docs/README.md: K_P = 32) and BAM's STS3215 model default "
             f"({BAM} bam/feetech/actuator.py kp=32)"),
    error_gain=Const(0.1649, "duty/(kp rad)", f"K-Scale oscilloscope measurement, K_P = 32, "
                     f"stable region before the torque-limit drop ({KSCALE}/orig_docs/"
                     "README.md: 0.164890901); BAM measured 0.166 on the 7.4 V STS3215 "
                     f"({BAM} bam/feetech/actuator.py)"),
    gain_semantics=STS_P_LAW,
    max_duty=Const(1.0, "1", f"K-Scale's BAM model clips the duty at +-1 ({KSCALE}/orig_docs/"
                   "README.md control law; neuract.io.bam_params 'sts3215v12')"),
    current_limit=Const(0.0, "A", "none modelled: the STS Protection_Current(28) is an "
                        "overload cut-off after Over_Current_Protection_Time, not a "
                        f"regulator ({STS_TABLE})"),
    temperature_limit=Const(70.0, "degC", f"{ROBONINE_3215}: overheat protection 70 degC"),
    registers=_sts_registers("STS3215"),
)

_STS3250_W0 = 60 * math.pi / 180 / 0.133  # no-load speed [rad/s] from 0.133 s/60 deg
_STS3250_TS = 50 * KGF_CM  # stall torque [N m]
_STS3250_KE = 12.0 / _STS3250_W0  # ideal DC motor at full duty: ke = V / w0

STS3250 = ServoFamily(
    name="sts3250",
    model="Feetech STS3250 (12 V, C001)",
    maker="Feetech",
    protocol="Feetech STS (SCS serial, half duplex TTL)",
    aliases=("sts3250", "st3250"),
    nominal_voltage=Const(12.0, "V", f"{ROBONINE_3250}: 6-12.6 V, typical 12 V"),
    stall_torque=Const(_STS3250_TS, "N m", f"{ROBONINE_3250}: 50 kg cm at 12 V"),
    no_load_speed=Const(_STS3250_W0, "rad/s", f"{ROBONINE_3250}: 0.133 s/60 deg at 12 V"),
    gear_ratio=Const(345.0, "1", "Robonine servo comparison (https://robonine.com/smart-"
                     "serial-servo-motor-comparison-robotics): STS3215, STS3235 and STS3250 "
                     "share the 1/345 gear ratio"),
    kt=Const(_STS3250_KE, "N m/A", "derived from the datasheet (ideal DC motor at full "
             "duty, kt = ke): ke = 12 V / no-load speed 7.87 rad/s"),
    R=Const(_STS3250_KE * 12.0 / _STS3250_TS, "ohm", "derived from the datasheet: R = "
            "ke * 12 V / stall torque 4.90 N m"),
    kp=Const(32.0, "register", "the kp the STS3250 bench logs record (../shared/data/"
             "bam_feetech_2024/PROVENANCE.md: kp 32, metadata only) and the STS default of "
             f"BAM's Feetech model ({BAM} bam/feetech/actuator.py)"),
    error_gain=Const(0.1638, "duty/(kp rad)", f"K-Scale's STS3250 measurement, as "
                     f"{KSCALE}/PROVENANCE.md reports it ('0.1649 (STS3215) / 0.1638 "
                     "(STS3250)'); same STS firmware P law as the STS3215"),
    gain_semantics=STS_P_LAW,
    max_duty=Const(1.0, "1", "as the STS3215 (same STS firmware; duty register 0-1000 = "
                   f"0-100 %: {STS_TABLE})"),
    current_limit=Const(0.0, "A", "none modelled (STS overload cut-off, not a regulator: "
                        f"{STS_TABLE})"),
    temperature_limit=Const(70.0, "degC", f"{ROBONINE_3250}: thermal protection 70 degC"),
    registers=_sts_registers("STS3250: same STS control table (LeRobot's feetech model "
                             "table: sts3250 uses the STS control table, resolution 4096)"),
)


# -------------------------------------------------------------- Dynamixel protocol 2.0
def _dxl2_registers(page: str, ma_per_count: float) -> Mapping[str, Register]:
    src = f"ROBOTIS e-Manual {EMANUAL}{page}, Control Table of RAM Area"
    pulse = 2.0 * math.pi / DXL_PULSES_PER_REV
    return _regs(
        position=Register("Present Position", 132, pulse, "rad", "int32", src),
        velocity=Register("Present Velocity", 128, DXL_VELOCITY_RPM * RPM, "rad/s", "int32",
                          src + " (0.229 rev/min per count)"),
        pwm=Register("Present PWM", 124, 1.0 / DXL_PWM_FULL_SCALE, "1 (duty)", "int16",
                     src + " (PWM Limit(36) 885 = 100 %, 0.113 % per count)"),
        current=Register("Present Current", 126, ma_per_count * 1e-3, "A", "int16",
                         src + f" ({ma_per_count:g} mA per count)"),
        voltage=Register("Present Input Voltage", 144, DECIVOLT, "V", "unsigned", src),
        temperature=Register("Present Temperature", 146, 1.0, "degC", "unsigned", src),
    )


def _dxl2_gain(divisor: float) -> float:
    """duty per Position P Gain unit per rad: KPP = P / divisor PWM counts per pulse."""
    return DXL_PULSES_PER_REV / (2.0 * math.pi) / divisor / DXL_PWM_FULL_SCALE


XM430_PAGE = "x/xm430-w350/"
XM430 = ServoFamily(
    name="xm430",
    model="Dynamixel XM430-W350",
    maker="ROBOTIS",
    protocol="Dynamixel protocol 2.0",
    aliases=("xm430", "xm430w350", "xm430w350t", "xm430w350r"),
    nominal_voltage=Const(12.0, "V", f"{EMANUAL}{XM430_PAGE} Specifications: recommended "
                          "12.0 V"),
    stall_torque=Const(4.1, "N m", f"{EMANUAL}{XM430_PAGE} Specifications: 4.1 N m at "
                       "12.0 V, 2.3 A"),
    stall_current=Const(2.3, "A", f"{EMANUAL}{XM430_PAGE} Specifications: 2.3 A at 12.0 V"),
    no_load_speed=Const(46 * RPM, "rad/s", f"{EMANUAL}{XM430_PAGE} Specifications: 46 rpm "
                        "at 12.0 V"),
    gear_ratio=Const(353.5, "1", f"{EMANUAL}{XM430_PAGE} Specifications: 353.5 : 1"),
    kt=Const(1.8, "N m/A", "datasheet stall point: 4.1 N m / 2.3 A = 1.78 N m/A"),
    R=Const(5.2, "ohm", "datasheet stall point: 12.0 V / 2.3 A = 5.2 ohm"),
    kp=Const(800.0, "register", f"{EMANUAL}{XM430_PAGE} Position P Gain(84) initial 800"),
    error_gain=Const(_dxl2_gain(128), "duty/(kp rad)", f"{EMANUAL}{XM430_PAGE} Position PID "
                     "Gain: KPP = Position P Gain(84) / 128 PWM counts per pulse, 4096 pulses "
                     "per turn, 885 counts = 100 % duty; NAD OpenManipulator-X rest frames "
                     "agree (pwm ~= 800/128 * error pulses, neuract.twin.config)"),
    gain_semantics=("Dynamixel X position mode: PWM [counts] = (P(84) / 128) * error "
                    "[pulses] (+ I(82), D(80), 0 here), 885 counts = 100 % duty"),
    max_duty=Const(1.0, "1", f"{EMANUAL}{XM430_PAGE} PWM Limit(36) initial 885 (100 %)"),
    current_limit=Const(3.2, "A", f"{EMANUAL}{XM430_PAGE} Current Limit(38) initial 1193 "
                        "x 2.69 mA = 3.21 A (rounded)"),
    temperature_limit=Const(80.0, "degC", f"{EMANUAL}{XM430_PAGE} Temperature Limit(31) "
                            "initial 80"),
    registers=_dxl2_registers(XM430_PAGE, 2.69),
)

XL330_PAGE = "x/xl330-m288/"
_XL330_STALL = (0.52, 1.47)  # [N m], [A] at 5.0 V
XL330 = ServoFamily(
    name="xl330",
    model="Dynamixel XL330-M288-T",
    maker="ROBOTIS",
    protocol="Dynamixel protocol 2.0",
    aliases=("xl330", "xl330m288", "xl330m288t"),
    nominal_voltage=Const(5.0, "V", f"{EMANUAL}{XL330_PAGE} Specifications: 3.7-6.0 V, "
                          "recommended 5.0 V (the BAM bench ran it at 7.4 V: ../shared/data/"
                          "bam_xl330_2026/PROVENANCE.md)"),
    stall_torque=Const(_XL330_STALL[0], "N m", f"{EMANUAL}{XL330_PAGE} Specifications: "
                       "0.52 N m at 5.0 V, 1.47 A"),
    stall_current=Const(_XL330_STALL[1], "A", f"{EMANUAL}{XL330_PAGE} Specifications: "
                        "1.47 A at 5.0 V"),
    no_load_speed=Const(103 * RPM, "rad/s", f"{EMANUAL}{XL330_PAGE} Specifications: "
                        "103 rpm at 5.0 V"),
    gear_ratio=Const(288.4, "1", f"{EMANUAL}{XL330_PAGE} Specifications: 288.4 : 1"),
    kt=Const(_XL330_STALL[0] / _XL330_STALL[1], "N m/A", "datasheet stall point: 0.52 N m "
             f"/ 1.47 A = 0.354 N m/A (BAM's fit: 0.370, {BAM} bam/params/xl330/m1.json)"),
    R=Const(5.0 / _XL330_STALL[1], "ohm", "datasheet stall point: 5.0 V / 1.47 A = 3.40 ohm "
            f"(BAM's fit: 3.50, {BAM} bam/params/xl330/m1.json)"),
    kp=Const(400.0, "register", f"{EMANUAL}{XL330_PAGE} Position P Gain(84) initial 400"),
    error_gain=Const(_dxl2_gain(256), "duty/(kp rad)", f"{BAM_DXL} XL330Actuator: KPP = "
                     "P(84) / 256 (found empirically; the e-Manual says 128), 4096 pulses per "
                     "turn, 885 counts = 100 % duty; ../shared/data/bam_xl330_2026 raw logs "
                     "(Present PWM against kp * error) agree within 1 %"),
    gain_semantics=("Dynamixel X position mode as the XM430, but the XL330 firmware divides "
                    "the P register by 256, not the 128 the e-Manual gives: PWM [counts] = "
                    "(P(84) / 256) * error [pulses], 885 counts = 100 % duty"),
    max_duty=Const(1.0, "1", f"{EMANUAL}{XL330_PAGE} PWM Limit(36) initial 885 (100 %)"),
    current_limit=Const(1.75, "A", f"{EMANUAL}{XL330_PAGE} Current Limit(38) initial 1750 "
                        f"x 1 mA; BAM's XL330 model uses max_current 1.75 ({BAM_DXL})"),
    temperature_limit=Const(70.0, "degC", f"{EMANUAL}{XL330_PAGE} Temperature Limit(31) "
                            "initial 70"),
    registers=_dxl2_registers(XL330_PAGE, 1.0),
)


# ------------------------------------------------------- Dynamixel MX, protocol 1.0
def _mx1_registers(page: str) -> Mapping[str, Register]:
    src = f"ROBOTIS e-Manual {EMANUAL}{page}, Control Table of RAM Area"
    pulse = 2.0 * math.pi / DXL_PULSES_PER_REV
    return _regs(
        position=Register("Present Position", 36, pulse, "rad", "unsigned", src),
        velocity=Register("Present Speed", 38, 0.114 * RPM, "rad/s", "sign-magnitude bit 10",
                          src + " (about 0.114 rev/min per count, bit 10 = CW)"),
        load=Register("Present Load", 40, 1e-3, "1 (of max torque)", "sign-magnitude bit 10",
                      src + " (about 0.1 % per count, bit 10 = CW)"),
        voltage=Register("Present Voltage", 42, DECIVOLT, "V", "unsigned", src),
        temperature=Register("Present Temperature", 43, 1.0, "degC", "unsigned", src),
        current=Register("Current", 68, 4.5e-3, "A", "unsigned",
                         src + " (I = 4.5 mA * (CURRENT - 2048))", offset=2048.0),
    )


MX_P_LAW = ("Dynamixel MX protocol 1.0: P Gain(28) register (0-254, KP = P / 8 in the "
            "e-Manual); BAM measured duty = P * error_gain * error [rad] with an oscilloscope. "
            "MX(2.0) firmware instead has a 0-16383 Position P Gain(84) with KPP = P / 128: "
            "pass --actuator.error-gain 0.00575 (= 4096 / 2 pi / 128 / 885) for it")
ATOMIC = "../shared/data/bam_atomic_mx_2024"


def _mx(name: str, model: str, page: str, page2: str, stall: tuple[float, float], rpm: float,
        ratio: float, error_gain: float, current_limit: tuple[int, str]) -> ServoFamily:
    torque, amps = stall
    spec = f"{EMANUAL}{page2} Specifications"
    return ServoFamily(
        name=name, model=model, maker="ROBOTIS", protocol="Dynamixel protocol 1.0",
        aliases=(name, name.replace("mx", "mx-"), f"{name}at", f"{name}ar", f"{name}t",
                 f"{name}r"),
        nominal_voltage=Const(12.0, "V", f"{spec}: 10-14.8 V, recommended 12 V (BAM's bench "
                              f"ran MX servos at 15 V: {BAM_DXL} MXActuator vin)"),
        stall_torque=Const(torque, "N m", f"{spec}: {torque:g} N m at 12 V, {amps:g} A"),
        stall_current=Const(amps, "A", f"{spec}: {amps:g} A at 12 V"),
        no_load_speed=Const(rpm * RPM, "rad/s", f"{spec}: {rpm:g} rpm at 12 V"),
        gear_ratio=Const(ratio, "1", f"{spec}: {ratio:g} : 1"),
        kt=Const(torque / amps, "N m/A", f"datasheet stall point: {torque:g} N m / {amps:g} A"),
        R=Const(12.0 / amps, "ohm", f"datasheet stall point: 12 V / {amps:g} A"),
        kp=Const(32.0, "register", f"{EMANUAL}{page} P Gain(28) initial 32"),
        error_gain=Const(error_gain, "duty/(kp rad)", f"BAM oscilloscope measurement "
                         f"({ATOMIC}/pwm_{name}.json, atomic/README.md via {ATOMIC}/"
                         f"PROVENANCE.md: H = {error_gain:g}); BAM's MX model rounds both "
                         f"MX-64 and MX-106 to 0.158 ({BAM_DXL} MXActuator)"),
        gain_semantics=MX_P_LAW,
        max_duty=Const(0.9625, "1", f"BAM oscilloscope measurement ({BAM_DXL} MXActuator "
                       "max_pwm)"),
        current_limit=Const(0.0, "A", f"none in protocol 1.0 position mode ({EMANUAL}{page}: "
                            "Torque Limit(34) caps the output, no current regulator); MX(2.0) "
                            f"Current Limit(38) {current_limit[0]} x 3.36 mA = "
                            f"{current_limit[1]} ({EMANUAL}{page2})"),
        temperature_limit=Const(80.0, "degC", f"{EMANUAL}{page} Temperature Limit(11) "
                                "initial 80"),
        registers=_mx1_registers(page),
    )


MX64 = _mx("mx64", "Dynamixel MX-64T/AT (protocol 1.0 firmware)", "mx/mx-64/", "mx/mx-64-2/",
           (6.0, 4.1), 63, 200, 0.1594, (1941, "6.52 A"))
MX106 = _mx("mx106", "Dynamixel MX-106T/R (protocol 1.0 firmware)", "mx/mx-106/",
            "mx/mx-106-2/", (8.4, 5.2), 45, 225, 0.1575, (2047, "6.88 A"))

SERVOS: Mapping[str, ServoFamily] = MappingProxyType(
    {f.name: f for f in (STS3215, STS3250, XM430, XL330, MX64, MX106)})
"""family name -> :class:`ServoFamily`, in the order docs list them"""


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


_ALIASES = {_key(a): f for f in SERVOS.values() for a in (f.name, *f.aliases)}


def family(name: str) -> ServoFamily:
    """The family named ``name`` (``--actuator.type`` spelling); a ConfigError lists them."""
    try:
        return SERVOS[name]
    except KeyError:
        raise ConfigError(f"unknown servo family {name!r}; known families: "
                          f"{', '.join(SERVOS)}") from None


def family_of_motor(motor: str) -> ServoFamily | None:
    """The family a log's ``motor`` names (its name or an alias; case, '-', '_' and spaces
    ignored: ``XL330-M288-T`` is ``xl330``); None when no family matches."""
    return _ALIASES.get(_key(motor))


def accepted_motors() -> str:
    """The motor names a log may give, for messages."""
    return ", ".join(SERVOS) + " (or an alias such as xl330-m288-t, mx-64; case, '-' and '_' " \
        "ignored)"


__all__ = [
    "MX106",
    "MX64",
    "SERVOS",
    "STS3215",
    "STS3250",
    "XL330",
    "XM430",
    "Const",
    "Register",
    "ServoFamily",
    "accepted_motors",
    "family",
    "family_of_motor",
]
