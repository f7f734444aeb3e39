"""A servo bus on a pseudo-terminal, its servos simulated by the twin.

:class:`BusEmulator` opens a pty pair and serves its master side from a background thread;
:attr:`BusEmulator.port` (the slave device, ``/dev/pts/N``) is a serial port for pyserial and
for the vendors' SDKs (``scservo_sdk``, ``dynamixel_sdk``). The emulator speaks the real
packet formats (:mod:`neuract.bus.scs` for the SO-101's STS3215, :mod:`neuract.bus.dxl2` for
the OpenManipulator-X's XM430): ping, read, write, sync read and sync write, each answered by
status packets as the servos would, from control tables (:mod:`neuract.bus.tables`) whose
present registers are the twin's telemetry quantised to register units.

Physics: the twin's hidden servos and arm (:class:`neuract.twin.sim.Lockstep`, one
environment: unit ``unit`` of seed ``seed`` exactly as ``neuract twin`` draws it), stepped at
``physics_hz``. Goals come from the goal-position registers (write or sync write) and reach
the servo at the next physics step; a read at emulated time ``t`` returns the registers of
physics step ``floor(t * physics_hz)``. The twin's host schedule is bypassed: every physics
step is a telemetry sample, so :meth:`BusEmulator.truth` holds the twin's exact state at every
step (the ground truth a recording is checked against), and the host jitter and latency are
those of the emulated bus itself (the twin's ``Nonidealities.jitter`` / ``latency`` are off).

Clock (``clock``): ``"wall"``, emulated time is wall time since :meth:`BusEmulator.start`
(physics keeps up in the background); ``"virtual"``, emulated time advances only by the bus
traffic (each byte 10 bits at ``baud``, plus return delays and the slow-bus delay) and by
:meth:`BusEmulator.advance`, so that a test is deterministic. Either way the replies leave
after their wire time on the wall clock, so the host's timeouts behave as on a real bus.

Faults (:class:`FaultSpec`): lost instruction packets, status packets with a wrong checksum
or CRC, status packets that never come (timeouts), a servo that stops answering at a time,
error bits (overload, overheat, input voltage) raised at a time, and a slow bus.
"""

from __future__ import annotations

import dataclasses
import fcntl
import math
import os
import select
import struct
import termios
import threading
import time
import tty
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from neuract.bus import dxl2, scs
from neuract.bus.tables import (
    ServoTable,
    decode_value,
    encode_value,
    goal_from_counts,
    position_counts,
    quantised,
    si_to_counts,
    table_for,
)
from neuract.errors import ConfigError
from neuract.twin.config import ROBOT_SPECS, Nonidealities, OverloadSpec, SimConfig
from neuract.twin.generate import episode_rng, unit_rng
from neuract.twin.model import build_model
from neuract.twin.servo import degrade, sample_unit
from neuract.twin.sim import OVERLOAD_CHANNEL, Job, Lockstep
from neuract.twin.tasks import GRAVITY, HOME, EpisodePlan
from neuract.twin.telemetry import telemetry_channels

PROTOCOLS = {"so101": "scs", "omx": "dxl2"}
"""the bus protocol of each twin robot's servos"""
FAULT_KINDS = ("overload", "overheat", "voltage")
SHUTDOWN_KINDS = ("overload", "overheat")
"""injected errors that cut the servo's output (STS3215 Unloading_Condition 44 and XM430
Shutdown 52 both include overheating and overload, not input voltage)"""
BITS_PER_BYTE = 10
"""start bit, 8 data bits, stop bit"""
MAX_STEPS = 9e5
"""longest session in physics steps (the twin preallocates its record: ~0.5 kB a step)"""
STALE_PARTIAL_S = 0.05
"""a partial packet older than this is dropped (a servo's receive timeout)"""


@dataclass(frozen=True)
class ServoFault:
    """Error ``kind`` ("overload", "overheat" or "voltage") raised on servo ``id`` at
    emulated time ``at_s`` [s]. Overload and overheat also cut the servo's output (torque
    off), as the servos' default protection does; the XM430 then needs a REBOOT, the STS3215
    a torque-enable write."""

    id: int
    at_s: float
    kind: str


@dataclass(frozen=True)
class FaultSpec:
    """Faults the emulator injects (probabilities are per packet, from the emulator's own
    random stream: the same seed gives the same faults for the same traffic).

    drop: probability that an instruction packet is lost on the wire: no servo acts on it,
    none answers. corrupt: probability that a status packet goes out with a wrong checksum
    (SCS) or CRC (Protocol 2.0). timeout: probability that a servo acts on an instruction but
    its status packet never comes. vanish: servo id -> emulated time [s] from which it
    neither acts nor answers. errors: :class:`ServoFault` events. byte_delay_s: slow bus,
    extra time per status-packet byte [s] (the host's timeout is about 34 ms plus the
    packet's wire time in both vendors' SDKs).
    """

    drop: float = 0.0
    corrupt: float = 0.0
    timeout: float = 0.0
    vanish: Mapping[int, float] = field(default_factory=dict)
    errors: tuple[ServoFault, ...] = ()
    byte_delay_s: float = 0.0

    def validate(self, ids: Sequence[int]) -> None:
        for name in ("drop", "corrupt", "timeout"):
            p = getattr(self, name)
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
                raise ConfigError(f"FaultSpec.{name} = {p!r}; expected a probability in 0..1")
        d = self.byte_delay_s
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not (
                math.isfinite(d) and 0.0 <= d <= 1.0):
            raise ConfigError(f"FaultSpec.byte_delay_s = {d!r}; expected seconds in 0..1")
        for sid, t in dict(self.vanish).items():
            if sid not in ids or isinstance(t, bool) or not isinstance(t, (int, float)) or t < 0:
                raise ConfigError(f"FaultSpec.vanish = {dict(self.vanish)!r}; expected servo "
                                  f"ids of the bus ({list(ids)}) -> times >= 0 s")
        for ev in self.errors:
            if not isinstance(ev, ServoFault) or ev.id not in ids or ev.kind not in FAULT_KINDS \
                    or not ev.at_s >= 0:
                raise ConfigError(f"FaultSpec.errors entry {ev!r}; expected ServoFault(id, "
                                  f"at_s >= 0, kind) with an id of the bus ({list(ids)}) and "
                                  f"kind one of {', '.join(FAULT_KINDS)}")


@dataclass
class Exchange:
    """One instruction packet the emulator received and what became of it.

    t: emulated time it arrived [s]; step: the physics step the servos acted and read at;
    instruction: its instruction byte (-1: a packet with a bad checksum / CRC); ids: the
    servos it addressed; outcome: servo id -> "ok", "timeout" (acted, no status packet),
    "corrupt" (status packet with a wrong checksum), "vanished", "silent" (acted, no status
    packet by protocol: broadcast writes), or "dropped" (key -1: the packet was lost);
    t_done: emulated time its last status packet ended [s].
    """

    t: float
    step: int
    instruction: int
    ids: tuple[int, ...]
    outcome: dict[int, str]
    t_done: float = 0.0


@dataclass
class _Servo:
    id: int
    joint: int
    mem: bytearray
    injected: int = 0  # error bits raised by FaultSpec.errors
    shutdown: bool = False  # output cut by an injected error (until reboot / re-enable)


def _check_ids(ids, n: int, protocol: str) -> tuple[int, ...]:
    top = scs.MAX_ID if protocol == "scs" else dxl2.MAX_ID
    ids = tuple(ids) if ids is not None else tuple(range(1, n + 1))
    if len(ids) != n or len(set(ids)) != n or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= top for i in ids):
        raise ConfigError(f"BusEmulator ids = {list(ids)!r}; expected {n} distinct integers in "
                          f"0..{top}, one per joint")
    return ids


class BusEmulator:
    """An emulated servo bus on a pty (see the module docstring).

    protocol: "scs" (SO-101) or "dxl2" (OMX); None: the robot's. robot: "so101" or "omx".
    ids: one servo id per joint in the twin's joint order (default 1..n). baud: the emulated
    bit rate [bit/s] (wire time of a byte: 10 bits). unit, seed: the twin unit (its hidden
    servo parameters as ``neuract twin --seed seed`` draws unit ``unit``). faults:
    :class:`FaultSpec`. clock: "wall" or "virtual". duration_s: emulated time the session
    lasts [s] (the twin preallocates it; afterwards the servos stop answering and
    :attr:`finished` is True). q0: the starting pose and goal [rad] (default: the twin's
    home pose). payload_kg, pushes: a payload held at the end effector from the start and
    pushes ``(t0 [s], duration [s], force (3,) [N])`` as in the twin's plans. degraded: joint
    indices with a degraded motor. nonideal: the twin's :class:`Nonidealities` (jitter and
    latency are the bus's own and always off). overload_protection: model the servos'
    overload protection (the twin's :class:`OverloadSpec`; its trips set the overload bit).
    torque: torque enabled at power-up (real servos start disabled; True holds the pose).
    """

    def __init__(self, protocol: str | None = None, robot: str = "so101",
                 ids: Sequence[int] | None = None, baud: float = 1_000_000, unit: int = 0,
                 seed: int = 0, faults: FaultSpec | None = None, clock: str = "wall",
                 duration_s: float = 120.0, q0: Sequence[float] | None = None,
                 payload_kg: float = 0.0, pushes: Sequence = (), degraded: Sequence[int] = (),
                 nonideal: Nonidealities | None = None, physics_hz: float = 500.0,
                 overload_protection: bool = True, torque: bool = True) -> None:
        if robot not in PROTOCOLS:
            raise ConfigError(f"BusEmulator robot = {robot!r}; expected one of "
                              f"{', '.join(PROTOCOLS)}")
        protocol = PROTOCOLS[robot] if protocol is None else protocol
        if protocol != PROTOCOLS[robot]:
            raise ConfigError(f"BusEmulator protocol = {protocol!r} for robot {robot!r}; its "
                              f"servos speak {PROTOCOLS[robot]!r}")
        if clock not in ("wall", "virtual"):
            raise ConfigError(f"BusEmulator clock = {clock!r}; expected 'wall' or 'virtual'")
        for name, v, lo in (("baud", baud, 1.0), ("duration_s", duration_s, 0.1),
                            ("physics_hz", physics_hz, 100.0), ("payload_kg", payload_kg, 0.0)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                    math.isfinite(v) and v >= lo):
                raise ConfigError(f"BusEmulator {name} = {v!r}; expected a finite number >= {lo}")
        if duration_s * physics_hz > MAX_STEPS:
            raise ConfigError(f"BusEmulator duration_s = {duration_s} at physics_hz = "
                              f"{physics_hz}: {duration_s * physics_hz:.3g} physics steps, "
                              "each about 0.5 kB of ground truth held in memory; expected "
                              f"at most {MAX_STEPS:.0f} (30 minutes at 500 Hz)")
        for name, v in (("unit", unit), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"BusEmulator {name} = {v!r}; expected an integer >= 0")
        self.protocol, self.robot, self.clock = protocol, robot, clock
        self.baud, self.unit, self.seed = float(baud), unit, seed
        self.table: ServoTable = table_for(robot)
        self._codec = scs if protocol == "scs" else dxl2
        self._build_twin(robot, float(physics_hz), float(duration_s), q0, float(payload_kg),
                         pushes, degraded, nonideal, overload_protection)
        self.ids = _check_ids(ids, self.n, protocol)
        self.faults = faults if faults is not None else FaultSpec()
        self.faults.validate(self.ids)
        self._fault_rng = np.random.default_rng(np.random.SeedSequence([seed, 2, unit]))
        self._pending_errors = sorted(self.faults.errors, key=lambda ev: ev.at_s)
        self.servos = {sid: self._new_servo(sid, j, torque) for j, sid in enumerate(self.ids)}
        if not torque:
            self.run.prot.limit[0, :] = 0.0
        self.log: list[Exchange] = []
        self._lock = threading.RLock()
        self._parser = self._codec.Parser()
        self._tv = 0.0  # virtual clock [s]
        self._t0: float | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._busy = False
        self._master = self._slave = -1
        self.port: str | None = None
        self._read_cache: tuple[int, dict] | None = None

    # -- the twin ------------------------------------------------------------------------

    def _build_twin(self, robot, physics_hz, duration_s, q0, payload_kg, pushes, degraded,
                    nonideal, overload_protection) -> None:
        ni = dataclasses.replace(nonideal or Nonidealities(), jitter=False, latency=False)
        spec = ROBOT_SPECS[robot]()
        if not overload_protection:  # the protection state still carries torque off
            spec = dataclasses.replace(spec, overload=OverloadSpec(
                load_threshold=None, current_threshold=None))
        spec = dataclasses.replace(spec, rate_hz=physics_hz)  # one sample per physics step
        sim = SimConfig(physics_hz=physics_hz, episode_s=duration_s, n_envs=1, nonideal=ni,
                        overload_protection=True)
        tm = build_model(robot, physics_hz)
        n = tm.n
        lo, hi = tm.ranges[:, 0], tm.ranges[:, 1]
        q_start = HOME[robot] if q0 is None else np.asarray(q0, float)
        if q_start.shape != (n,) or not np.all(np.isfinite(q_start)):
            raise ConfigError(f"BusEmulator q0 = {q0!r}; expected {n} finite joint angles [rad] "
                              f"({', '.join(tm.joint_names)})")
        q_start = np.clip(q_start, lo, hi)
        plan = EpisodePlan("bus", "host", np.array([0.0, duration_s + 1.0]),
                           np.stack([q_start, q_start]), payload_kg=payload_kg,
                           attach_t=0.0 if payload_kg > 0 else np.inf)
        for p in pushes:
            t0, dur, vec = p
            vec = np.asarray(vec, float)
            if not (dur > 0 and t0 >= 0 and vec.shape == (3,) and np.all(np.isfinite(vec))):
                raise ConfigError(f"BusEmulator pushes entry {p!r}; expected (t0 >= 0 s, "
                                  "duration > 0 s, force (3,) [N])")
            plan.pushes.append((float(t0), float(dur), vec))
        params, bus = sample_unit(spec, n, unit_rng(self.seed, self.unit))
        rng = episode_rng(self.seed, self.unit, 0)
        deg = np.zeros(n, bool)
        for j in degraded:
            if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < n:
                raise ConfigError(f"BusEmulator degraded = {list(degraded)!r}; expected joint "
                                  f"indices in 0..{n - 1}")
            deg[j] = True
        if deg.any():
            params = degrade(params, deg, spec, rng)
            plan.degraded = deg
        self.tm, self.spec, self.sim, self.plan = tm, spec, sim, plan
        self.params, self.unit_bus = params, bus
        self.run = Lockstep(tm, spec, sim, [Job(self.unit, 0, params, bus, plan, rng)])
        self.dt = self.run.dt
        self.n = n
        self.joint_names = list(tm.joint_names)
        self.last_step = len(self.run.sched.ticks[0]) - 1
        self._goal = q_start.copy()
        self._lo, self._hi = lo, hi

    def _new_servo(self, sid: int, joint: int, torque: bool) -> _Servo:
        t = self.table
        mem = bytearray(t.memory_size)
        for addr, (size, value) in t.defaults.items():
            mem[addr:addr + size] = value.to_bytes(size, "little")

        def put(name: str, value: int) -> None:
            f = t.f(name)
            mem[f.address:f.address + f.size] = encode_value(value, f)

        put("model_number", t.model_number)
        if "firmware" in t.fields:
            put("firmware", t.firmware)
        put("id", sid)
        put("p_gain", int(round(self.spec.servo.kp)))
        put("d_gain", int(round(self.spec.servo.kd)))
        put("torque_enable", int(torque))
        put("goal_position", position_counts(self._goal[joint]))
        return _Servo(sid, joint, mem)

    @property
    def finished(self) -> bool:
        """True once the emulated session (``duration_s``) is over."""
        return self.run.s > self.last_step + 1

    @property
    def t(self) -> float:
        """The emulated time now [s]."""
        if self.clock == "virtual":
            return self._tv
        return 0.0 if self._t0 is None else time.monotonic() - self._t0

    def _advance_to(self, t: float) -> int:
        """Run physics through step ``floor(t / dt)`` (at most the last); that step."""
        s = min(int(math.floor(t / self.dt + 1e-9)), self.last_step + 1)
        self._apply_errors(t)
        if s >= self.run.s:
            self.run.advance(min(s, self.last_step + 1))
        return s

    def advance(self, seconds: float) -> None:
        """Advance the virtual clock by ``seconds`` (and the physics with it), once the
        packets already sent are handled (:meth:`wait_idle`)."""
        if self.clock != "virtual":
            raise ConfigError("BusEmulator.advance: the clock is 'wall'; advance() is for "
                              "clock='virtual'")
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ConfigError(f"BusEmulator.advance seconds = {seconds!r}; expected >= 0")
        self.wait_idle()
        with self._lock:
            self._tv += seconds
            self._advance_to(self._tv)

    def _set_goal(self, joint: int, q: float) -> None:
        """Goal of ``joint`` [rad] from the next physics step on."""
        self._goal[joint] = min(max(q, self._lo[joint]), self._hi[joint])
        run, g = self.run, self._goal.copy()
        s0 = min(run.s, len(run.sched.goals[0]) - 1)
        run.sched.G[0, s0:] = g  # the schedule has one tick per physics step
        run.sched.goals[0][s0:] = g

    def _set_output(self, servo: _Servo) -> None:
        """The servo's output limit from its torque-enable register, shutdown and trips."""
        prot, j = self.run.prot, servo.joint
        f = self.table.f("torque_enable")
        on = servo.mem[f.address] != 0 and not servo.shutdown
        if not on:
            prot.limit[0, j] = 0.0
        elif prot.tripped[0, j] and self.protocol == "dxl2":
            prot.limit[0, j] = 0.0  # an XM430 in shutdown needs a reboot
        else:
            prot.limit[0, j] = 1.0
            prot.tripped[0, j] = False  # an STS3215 re-enabled after a trip
            prot.t_load[0, j] = prot.t_current[0, j] = 0.0

    def _apply_errors(self, t: float) -> None:
        while self._pending_errors and self._pending_errors[0].at_s <= t:
            ev = self._pending_errors.pop(0)
            servo = self.servos[ev.id]
            servo.injected |= self.table.errors[ev.kind]
            if ev.kind in SHUTDOWN_KINDS:
                servo.shutdown = True
                if self.protocol == "dxl2":  # Torque Enable cleared to 0
                    servo.mem[self.table.f("torque_enable").address] = 0
                self._set_output(servo)

    def _error_bits(self, servo: _Servo) -> int:
        """The status byte (STS3215) / Hardware Error Status (XM430) of ``servo``."""
        bits = servo.injected
        if self.run.prot.tripped[0, servo.joint]:
            bits |= self.table.errors["overload"]
        return bits

    # -- registers -----------------------------------------------------------------------

    def _telemetry(self, step: int) -> dict[str, np.ndarray]:
        """The twin's telemetry (SI, every joint) the servos read at physics ``step``."""
        run = self.run
        raw = {c: v[0, step:step + 1] for c, v in run.rec.items()}
        win = None if run.rec_win is None else np.round(run.rec_win[0, step:step + 1] / run.lsb)
        tele = telemetry_channels(raw, win, self.spec, self.sim.nonideal)
        return {k: np.asarray(v)[0] for k, v in tele.items()}

    def _refresh(self, step: int) -> None:
        """Write the present registers of every servo from physics ``step``."""
        if self._read_cache is None or self._read_cache[0] != step:
            self._read_cache = (step, self._telemetry(step))
        tele = self._read_cache[1]
        t = self.table
        for servo in self.servos.values():
            j = servo.joint
            counts = si_to_counts(t, {k: float(v[j]) for k, v in tele.items()
                                      if k != "overload"})
            bits = self._error_bits(servo)
            if t.protocol == "scs":
                counts["status"] = bits
                counts["moving"] = int(abs(counts["present_velocity"]) >= 50)
            else:
                counts["hardware_error"] = bits
                counts["moving"] = int(abs(counts["present_velocity"]) >= 10)
                counts["realtime_tick"] = int(round(step * self.dt * 1000)) % 32768
            for name, v in counts.items():
                f = t.f(name)
                servo.mem[f.address:f.address + f.size] = encode_value(v, f)

    def _readonly(self, address: int, size: int) -> bool:
        """A write that would touch a read-only register, the ID or the baud rate."""
        t = self.table
        names = ("model_number", "firmware", "id", "baud_rate", "hardware_error", "status",
                 "moving", "realtime_tick")
        for name, f in t.fields.items():
            if (name in names or name.startswith("present_")) and \
                    address < f.address + f.size and f.address < address + size:
                return True
        return False

    def _write(self, servo: _Servo, address: int, data: bytes) -> int:
        """Write ``data`` at ``address``; 0, or the Protocol 2.0 error number."""
        t = self.table
        if address + len(data) > t.memory_size or not data:
            return dxl2.ERR_ACCESS
        if self._readonly(address, len(data)):
            return dxl2.ERR_ACCESS
        torque_f = t.f("torque_enable")
        if (t.protocol == "dxl2" and address < torque_f.address
                and servo.mem[torque_f.address] != 0):
            return dxl2.ERR_ACCESS  # EEPROM is locked while the torque is on
        servo.mem[address:address + len(data)] = data
        goal = t.f("goal_position")
        if address <= goal.address and goal.address + goal.size <= address + len(data):
            self._set_goal(servo.joint, goal_from_counts(
                t, bytes(servo.mem[goal.address:goal.address + goal.size])))
        if address <= torque_f.address < address + len(data):
            if servo.mem[torque_f.address] and servo.shutdown and t.protocol == "dxl2":
                servo.mem[torque_f.address] = 0  # stays off until a reboot
            elif servo.mem[torque_f.address] and t.protocol == "scs":
                servo.shutdown = False
                servo.injected = 0
            self._set_output(servo)
        return 0

    def _reboot(self, servo: _Servo) -> None:
        """Protocol 2.0 REBOOT: errors cleared, torque off (RAM back to its defaults)."""
        servo.injected, servo.shutdown = 0, False
        prot, j = self.run.prot, servo.joint
        prot.tripped[0, j] = False
        prot.t_load[0, j] = prot.t_current[0, j] = 0.0
        servo.mem[self.table.f("torque_enable").address] = 0
        self._set_output(servo)

    def _return_delay(self, servo: _Servo) -> float:
        return servo.mem[self.table.f("return_delay").address] * 2e-6

    # -- packets -------------------------------------------------------------------------

    def _status(self, servo: _Servo, error: int = 0, params: bytes = b"") -> bytes:
        if self.protocol == "scs":
            return scs.status(servo.id, error | self._error_bits(servo), params)
        alert = dxl2.ERR_ALERT if self._error_bits(servo) else 0
        return dxl2.status(servo.id, error | alert, params)

    def _u(self, params: bytes, i: int) -> int:
        """Address / length field ``i`` of a read-type instruction (1 byte SCS, 2 bytes LE
        Protocol 2.0)."""
        if self.protocol == "scs":
            return params[i]
        return params[2 * i] | (params[2 * i + 1] << 8)

    def _alive(self, t: float) -> dict[int, _Servo]:
        """The servos that still answer at emulated time ``t``."""
        gone = self.faults.vanish
        return {i: s for i, s in self.servos.items() if not (i in gone and t >= gone[i])}

    def _handle(self, pkt, step: int, t: float
                ) -> tuple[list[tuple[_Servo, bytes]], tuple[int, ...], dict[int, str]]:
        """Act on one good instruction packet; (servo, status packet) replies in order, the
        ids addressed and the outcome of each."""
        inst, sid, p = pkt.code, pkt.id, pkt.params
        bcast = self._codec.BROADCAST_ID
        replies: list[tuple[_Servo, bytes]] = []
        outcome: dict[int, str] = {}
        alive = self._alive(t)
        wide = 2 if self.protocol == "dxl2" else 1

        def target() -> list[_Servo]:
            if sid == bcast:
                return [alive[i] for i in sorted(alive)]
            return [alive[sid]] if sid in alive else []

        addressed = tuple(sorted(self.servos)) if sid == bcast else (sid,)
        if inst == self._codec.PING:
            for s in target():
                params = b"" if self.protocol == "scs" else (
                    self.table.model_number.to_bytes(2, "little") + bytes((self.table.firmware,)))
                replies.append((s, self._status(s, 0, params)))
        elif inst == self._codec.READ and sid != bcast and len(p) == 2 * wide:
            address, length = self._u(p, 0), self._u(p, 1)
            for s in target():
                self._refresh(step)
                if address + length > self.table.memory_size or length == 0:
                    if self.protocol == "dxl2":
                        replies.append((s, self._status(s, dxl2.ERR_ACCESS)))
                    continue
                replies.append((s, self._status(s, 0, bytes(s.mem[address:address + length]))))
        elif inst == self._codec.WRITE and len(p) > wide:
            address = self._u(p, 0)
            for s in target():
                err = self._write(s, address, p[wide:])
                if sid == bcast:
                    outcome[s.id] = "silent"
                else:  # an SCS servo acknowledges a write it does not apply
                    replies.append((s, self._status(s, err if self.protocol == "dxl2" else 0)))
        elif inst == self._codec.SYNC_READ and sid == bcast and len(p) > 2 * wide:
            address, length = self._u(p, 0), self._u(p, 1)
            ids = tuple(p[2 * wide:])
            addressed = ids
            self._refresh(step)
            for i in ids:
                s = alive.get(i)
                if s is None or address + length > self.table.memory_size:
                    continue
                replies.append((s, self._status(s, 0, bytes(s.mem[address:address + length]))))
        elif inst == self._codec.SYNC_WRITE and sid == bcast and len(p) > 2 * wide:
            address, length = self._u(p, 0), self._u(p, 1)
            body = p[2 * wide:]
            chunk = length + 1
            ids = tuple(body[k] for k in range(0, len(body) - chunk + 1, chunk))
            addressed = ids
            for k in range(0, len(body) - chunk + 1, chunk):
                s = alive.get(body[k])
                if s is not None and length > 0:
                    self._write(s, address, body[k + 1:k + chunk])
                    outcome[s.id] = "silent"
        elif self.protocol == "dxl2" and inst == dxl2.REBOOT:
            for s in target():
                self._reboot(s)
                if sid != bcast:
                    replies.append((s, self._status(s)))
        elif self.protocol == "dxl2" and sid != bcast and sid in alive:
            s = alive[sid]
            replies.append((s, self._status(s, dxl2.ERR_INSTRUCTION)))
        for i in addressed:
            if i in self.servos and i not in alive:
                outcome[i] = "vanished"
        return replies, addressed, outcome

    def t_at_step(self, step: int) -> float:
        """Emulated time of physics ``step`` [s]."""
        return step * self.dt

    def _on_packet(self, pkt, t_rx_wall: float) -> None:
        wire = BITS_PER_BYTE / self.baud
        with self._lock:
            if self.clock == "virtual":
                self._tv += len(pkt.raw) * wire
                t_arrive = self._tv
            else:
                t_arrive = t_rx_wall - self._t0 + len(pkt.raw) * wire
            step = self._advance_to(t_arrive)
            ex = Exchange(t_arrive, step, pkt.code if pkt.ok else -1, (pkt.id,), {})
            self.log.append(ex)
            if step > self.last_step:
                ex.outcome[-1] = "finished"
                return
            if self.faults.drop and self._fault_rng.random() < self.faults.drop:
                ex.outcome[-1] = "dropped"
                return
            if not pkt.ok:  # a damaged instruction: SCS servos ignore it, XM430 reports it
                s = self._alive(t_arrive).get(pkt.id)
                replies = [] if self.protocol == "scs" or s is None else [
                    (s, self._status(s, dxl2.ERR_CRC))]
                addressed, outcome = (pkt.id,), {}
            else:
                replies, addressed, outcome = self._handle(pkt, step, t_arrive)
            ex.ids, ex.outcome = addressed, outcome
            chunks = []
            t_wire = t_arrive
            for servo, data in replies:
                if self.faults.timeout and self._fault_rng.random() < self.faults.timeout:
                    ex.outcome[servo.id] = "timeout"
                    continue
                if self.faults.corrupt and self._fault_rng.random() < self.faults.corrupt:
                    data = data[:-1] + bytes((data[-1] ^ 0x5A,))
                    ex.outcome[servo.id] = "corrupt"
                else:
                    ex.outcome.setdefault(servo.id, "ok")
                t_wire += self._return_delay(servo)
                per_byte = wire + self.faults.byte_delay_s
                chunks.append((t_wire - t_arrive, per_byte, data))
                t_wire += len(data) * per_byte
            ex.t_done = t_wire
            if self.clock == "virtual":
                self._tv = t_wire
                self._advance_to(self._tv)
        self._send(chunks, t_rx_wall + len(pkt.raw) * wire)

    def _send(self, chunks, t0_wall: float) -> None:
        """Write each status packet from its due time on the wall clock (byte by byte on a
        slow bus)."""
        for offset, per_byte, data in chunks:
            due = t0_wall + offset
            if per_byte < 1e-4:
                self._sleep_until(due)
                self._write_master(data)
                continue
            for k in range(len(data)):
                self._sleep_until(due + (k + 1) * per_byte)
                self._write_master(data[k:k + 1])

    def _sleep_until(self, due: float) -> None:
        wait = due - time.monotonic()
        if wait > 2e-4:
            self._stop.wait(wait)

    def _write_master(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self._stop.is_set():
            try:
                k = os.write(self._master, view)
            except BlockingIOError:
                time.sleep(1e-4)
                continue
            except OSError:
                return
            view = view[k:]

    # -- serving -------------------------------------------------------------------------

    def start(self) -> BusEmulator:
        """Open the pty and start serving; returns self (also a context manager)."""
        if self._thread is not None:
            return self
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line editing: bytes pass as they are
        os.set_blocking(self._master, False)
        self.port = os.ttyname(self._slave)
        self._t0 = time.monotonic()
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="neuract-bus", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and close the pty."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        for fd in (self._master, self._slave):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._master = self._slave = -1

    def wait_idle(self, timeout_s: float = 1.0, settle_s: float = 0.003) -> bool:
        """Wait until every byte the host has written is handled and every status packet is
        out, and nothing new has come for ``settle_s`` (a pty hands bytes over a moment after
        the write); for a host that sent a packet without a reply (a sync write) before it
        looks at the emulator's state. False if still busy after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        idle_since = None
        while time.monotonic() < deadline:
            if self._master < 0:
                return True
            pending = struct.unpack("i", fcntl.ioctl(self._master, termios.FIONREAD,
                                                     b"\0\0\0\0"))[0]
            now = time.monotonic()
            if pending == 0 and not self._busy and not self._parser.buf:
                idle_since = now if idle_since is None else idle_since
                if now - idle_since >= settle_s:
                    return True
            else:
                idle_since = None
            time.sleep(5e-4)
        return False

    def __enter__(self) -> BusEmulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _serve(self) -> None:
        last_rx = time.monotonic()
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._master], [], [], 0.002)
            except (OSError, ValueError):
                return
            now = time.monotonic()
            if ready:
                self._busy = True
                try:
                    try:
                        data = os.read(self._master, 4096)
                    except BlockingIOError:
                        data = b""
                    except OSError:  # no reader on the other side yet
                        time.sleep(0.005)
                        data = b""
                    if data:
                        if self._parser.buf and now - last_rx > STALE_PARTIAL_S:
                            self._parser.reset()
                        last_rx = now
                        for pkt in self._parser.feed(data):
                            self._on_packet(pkt, now)
                finally:
                    self._busy = False
                if data:
                    continue
            if self._parser.buf and now - last_rx > STALE_PARTIAL_S:
                self._parser.reset()
            if self.clock == "wall":
                with self._lock:
                    self._advance_to(time.monotonic() - self._t0)

    # -- ground truth --------------------------------------------------------------------

    def truth(self) -> dict[str, np.ndarray]:
        """The twin's exact state at every physics step simulated so far (K steps):

        t (K,) [s]; q_goal (K, n) goal at the servo [rad]; q (K, n) true output angle [rad];
        qd (K, n) [rad/s]; tau (K, n) joint torque [N m]; q_enc (K, n) encoder reading
        [rad]; duty, current [A], v_servo [V], temperature [degC] (K, n); overload (K, n)
        bool (the protection has cut or limited the output); ee_force (K, 3) external force at
        the end effector [N]; payload (K,) [kg]; contact (K,) bool.
        """
        with self._lock:
            run = self.run
            k = min(run.s, self.last_step + 1)
            rec = {c: v[0, :k].copy() for c, v in run.rec.items()}
            goal = run.sched.G[0, run.sched.goal_idx[0, :k]].copy()
        t = np.arange(k) * self.dt
        payload = self.plan.payload_at(t)
        force = self.plan.push_at(t)
        force[:, 2] -= GRAVITY * payload
        return {"t": t, "q_goal": goal, "q": rec["q_true"], "qd": rec["qd_true"],
                "tau": rec["tau"], "q_enc": rec["q_enc"], "duty": rec["duty"],
                "current": rec["current"], "v_servo": rec["v_servo"],
                "temperature": rec["temperature"],
                "overload": rec[OVERLOAD_CHANNEL] > 0.5, "ee_force": force,
                "payload": payload, "contact": np.linalg.norm(force, axis=1) > 1e-6}

    def telemetry(self, step: int) -> dict[str, np.ndarray]:
        """What the servos report at physics ``step`` (an :attr:`Exchange.step`), decoded as
        :func:`neuract.bus.tables.decode_telemetry` decodes it: ``q``, ``qd``, ``current``,
        ``voltage``, ``temperature`` and ``load`` or ``pwm``, each (n,) in the joint order."""
        with self._lock:
            if not 0 <= step < min(self.run.s, self.last_step + 1):
                raise ConfigError(f"BusEmulator.telemetry step = {step}; expected a simulated "
                                  f"step in 0..{min(self.run.s, self.last_step + 1) - 1}")
            tele = self._telemetry(step)
        per = [quantised(self.table, {k: float(v[j]) for k, v in tele.items()
                                      if k != "overload"}) for j in range(self.n)]
        return {k: np.array([p[k] for p in per]) for k in per[0]}

    def registers(self, servo_id: int, address: int, length: int) -> bytes:
        """The bytes of servo ``servo_id``'s control table as last served (no refresh)."""
        with self._lock:
            return bytes(self.servos[servo_id].mem[address:address + length])

    def register(self, servo_id: int, name: str) -> int:
        """Register ``name`` (a :class:`~neuract.bus.tables.ServoTable` field) of a servo."""
        f = self.table.f(name)
        return decode_value(self.registers(servo_id, f.address, f.size), f)


__all__ = ["BusEmulator", "Exchange", "FAULT_KINDS", "FaultSpec", "PROTOCOLS", "ServoFault"]
