"""The recording loop: each tick a sync write of the goals, one sync read of the servos'
telemetry block, a monotonic timestamp; the bus's faults counted, never filled in.

:class:`Recorder` runs on a :class:`~neuract.bus.BusClient` (a USB adapter or the emulator's
pty). One tick (:meth:`Recorder.tick`):

1. the goals (rad), if any, go out as one SYNC WRITE of the goal-position registers;
2. one SYNC READ of the contiguous telemetry block (:attr:`ServoTable.telemetry`: position,
   velocity, load / PWM, current, voltage, temperature), each servo's reply decoded by
   :func:`neuract.bus.tables.decode_telemetry` (the scales of :mod:`neuract.io.registers`);
3. the sample's time is the clock's reading when the read was sent (``time.monotonic`` on a
   real bus, the emulated time on a virtual-clock emulator).

A tick is a sample only when every servo answered with a good packet; otherwise it is a
*dropped read*, counted per servo and kind ("timeout", "corrupt") and written nowhere: no
value is interpolated. A servo that has not answered for ``lost_after_s`` (and at least
three reads in a row) ends the episode (:class:`ServoLost`, naming its id). A servo error
bit (the STS3215's status byte, the XM430's Alert and Hardware Error Status) or a
temperature at or above ``temperature_limit`` is a *safety stop*: every servo's torque is
switched off before :class:`SafetyStop` is raised; Ctrl-C (``KeyboardInterrupt``) switches
the torque off too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from neuract.bus import dxl2
from neuract.bus.client import BITS_PER_BYTE, BusClient, Reply
from neuract.bus.tables import ServoTable, decode_telemetry, encode_value, goal_counts
from neuract.errors import DataError

SCS_BITS = {0x01: "input voltage", 0x02: "angle limit", 0x04: "overheating",
            0x08: "over-current", 0x20: "overload"}
"""the STS3215 status byte's error bits"""
DXL_HW_BITS = {0x01: "input voltage", 0x04: "overheating", 0x08: "motor encoder",
               0x10: "electrical shock", 0x20: "overload"}
"""the XM430's Hardware Error Status bits (register 70)"""


class RecordStop(DataError):
    """The recording stopped because of the bus or a servo (the message says which)."""

    reason = "stopped"


class ServoLost(RecordStop):
    """A servo stopped answering."""

    reason = "servo_lost"

    def __init__(self, servo_id: int, silent_s: float, reads: int) -> None:
        self.servo_id = servo_id
        super().__init__(f"servo {servo_id} stopped answering (no reply for {silent_s:.2f} s, "
                         f"{reads} reads in a row): check its cable and power; the episode "
                         "ended there")


class SafetyStop(RecordStop):
    """A servo error bit or over-temperature: the torque was switched off."""

    reason = "safety_stop"

    def __init__(self, servo_id: int, why: str) -> None:
        self.servo_id, self.why = servo_id, why
        super().__init__(f"safety stop: servo {servo_id} {why}; torque switched off on every "
                         "servo, the episode ended there")


class WallClock:
    """``time.monotonic`` and sleeping until a time (the real bus)."""

    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, t: float) -> None:
        wait = t - time.monotonic()
        if wait > 0:
            time.sleep(wait)


class EmulatorClock:
    """The emulated time of a virtual-clock :class:`~neuract.bus.BusEmulator`: waiting
    advances it (a deterministic recording, as fast as the machine allows)."""

    def __init__(self, emu) -> None:
        self.emu = emu

    def now(self) -> float:
        self.emu.wait_idle(settle_s=0.0)  # the packets sent so far have moved the clock
        return self.emu.t

    def sleep_until(self, t: float) -> None:
        dt = t - self.now()
        if dt > 0:
            self.emu.advance(dt)


@dataclass
class Tick:
    """One tick: ``t`` [s] (clock time the read was sent), ``replies`` (id -> Reply),
    ``sample`` (channel -> (n,) in the id order, None for a dropped read), ``goal`` (n,) [rad]
    or None, ``busy_s`` the time the exchange took [s]."""

    t: float
    replies: dict[int, Reply]
    sample: dict[str, np.ndarray] | None
    goal: np.ndarray | None
    busy_s: float


@dataclass
class Counters:
    """Per-episode bus accounting."""

    ticks: int = 0
    samples: int = 0
    dropped_reads: int = 0
    timeout: dict[int, int] = field(default_factory=dict)
    corrupt: dict[int, int] = field(default_factory=dict)
    overruns: int = 0
    periods: list[float] = field(default_factory=list)
    max_temperature: float = float("-inf")

    def as_counts(self) -> dict[str, int]:
        """Integer counters for a trajectory's ``counts`` (per servo: ``timeout_id3``)."""
        out = {"reads": self.ticks, "samples": self.samples,
               "dropped_reads": self.dropped_reads, "overruns": self.overruns,
               "timeouts": sum(self.timeout.values()), "corrupt": sum(self.corrupt.values())}
        out.update({f"timeout_id{k}": v for k, v in sorted(self.timeout.items())})
        out.update({f"corrupt_id{k}": v for k, v in sorted(self.corrupt.items())})
        return out


def tick_wire_s(table: ServoTable, n: int, baud: float, goals: bool = True) -> float:
    """The bus's own time for one tick [s]: the sync read's instruction and status packets
    (and the sync write of the goals) at ``baud``, 10 bits a byte, no return delay."""
    start, length = table.telemetry
    goal = table.f("goal_position").size
    if table.protocol == "scs":
        read = (8 + n) + n * (6 + length)
        write = 8 + n * (1 + goal)
    else:
        read = (14 + n) + n * (11 + length)
        write = 14 + n * (1 + goal)
    return (read + (write if goals else 0)) * BITS_PER_BYTE / baud


class Recorder:
    """The recording loop on ``bus`` for servos ``ids`` (in joint order) of ``table``'s
    family (see the module docstring). clock: :class:`WallClock` (default) or
    :class:`EmulatorClock`. rate_hz: tick rate. temperature_limit [degC]: a safety stop at or
    above it. lost_after_s: a servo silent this long (and three reads) is lost."""

    def __init__(self, bus: BusClient, table: ServoTable, ids: Sequence[int], *,
                 clock=None, rate_hz: float = 100.0, temperature_limit: float = 65.0,
                 lost_after_s: float = 0.5) -> None:
        self.bus, self.table, self.ids = bus, table, list(ids)
        self.clock = clock or WallClock()
        self.rate_hz, self.temperature_limit = float(rate_hz), float(temperature_limit)
        self.lost_after_s = float(lost_after_s)
        self.counters = Counters()
        self._last_ok: dict[int, float] = {}
        self._misses: dict[int, int] = {}
        self._goal_addr = table.f("goal_position").address
        self._torque = table.f("torque_enable")
        self._t_start = self.clock.now()

    # -- servo commands -------------------------------------------------------------------

    def set_torque(self, on: bool) -> None:
        """Torque on or off on every servo (one SYNC WRITE, sent twice: it has no reply)."""
        data = encode_value(int(on), self._torque)
        for _ in range(2):
            self.bus.sync_write(self._torque.address, {sid: data for sid in self.ids})

    def torque_off(self) -> None:
        """The safety stop's action; never raises (the bus may be what failed)."""
        try:
            self.set_torque(False)
        except Exception:  # noqa: BLE001 - a stop must not fail on a broken port
            pass

    # -- one tick --------------------------------------------------------------------------

    def tick(self, goal: np.ndarray | None = None) -> Tick:
        """One exchange: the goals out (if given), the telemetry block in."""
        t0 = self.clock.now()
        w0 = time.monotonic()
        if goal is not None:
            self.bus.sync_write(self._goal_addr, {sid: goal_counts(self.table, float(q))
                                                  for sid, q in zip(self.ids, goal)})
        t = self.clock.now() if goal is not None else t0
        start, length = self.table.telemetry
        replies = self.bus.sync_read(start, length, self.ids)
        busy = time.monotonic() - w0
        c = self.counters
        c.ticks += 1
        decoded = {}
        for sid in self.ids:
            r = replies[sid]
            if r.ok and len(r.params) == length:
                decoded[sid] = decode_telemetry(self.table, r.params)
                self._last_ok[sid] = t
                self._misses[sid] = 0
            else:
                kind = c.corrupt if r.status == "corrupt" or r.ok else c.timeout
                kind[sid] = kind.get(sid, 0) + 1
                self._misses[sid] = self._misses.get(sid, 0) + 1
        sample = None
        if len(decoded) == len(self.ids):
            sample = {ch: np.array([decoded[sid][ch] for sid in self.ids])
                      for ch in decoded[self.ids[0]] if ch != "error"}
            c.samples += 1
            c.max_temperature = max(c.max_temperature, float(sample["temperature"].max()))
        else:
            c.dropped_reads += 1
        tick = Tick(t, replies, sample, None if goal is None else np.asarray(goal, float), busy)
        self._check(tick, decoded)
        return tick

    def _check(self, tick: Tick, decoded: dict[int, dict[str, float]]) -> None:
        """Safety stops and lost servos (torque off first)."""
        for sid in self.ids:
            r = tick.replies[sid]
            if not r.ok:
                continue
            why = self._error_bits(sid, r)
            if why:
                self.torque_off()
                raise SafetyStop(sid, why)
        for sid, d in decoded.items():
            if d["temperature"] >= self.temperature_limit:
                self.torque_off()
                raise SafetyStop(sid, f"at {d['temperature']:.0f} degC, at or above the "
                                      f"temperature limit {self.temperature_limit:g} degC")
        for sid in self.ids:
            last = self._last_ok.get(sid, self._t_start)
            silent = tick.t - last
            if self._misses.get(sid, 0) >= 3 and silent >= self.lost_after_s:
                raise ServoLost(sid, silent, self._misses[sid])

    def _error_bits(self, sid: int, r: Reply) -> str:
        """What a reply's error byte says is wrong with the servo ("" if nothing)."""
        if self.table.protocol == "scs":
            bits = r.error
            names = [n for b, n in SCS_BITS.items() if bits & b]
            return f"reports {' and '.join(names)} (status 0x{bits:02X})" if names else ""
        if not r.error & dxl2.ERR_ALERT:
            return ""
        hw = self.bus.read(sid, self.table.f("hardware_error").address, 1)
        bits = hw.params[0] if hw.ok and hw.params else 0
        names = [n for b, n in DXL_HW_BITS.items() if bits & b] or ["a hardware error"]
        return (f"reports {' and '.join(names)} (Alert, Hardware Error Status 0x{bits:02X})")

    # -- an episode ------------------------------------------------------------------------

    def start_episode(self) -> None:
        self.counters = Counters()
        self._t_start = self.clock.now()
        self._last_ok = {}
        self._misses = {}

    def run(self, duration_s: float | None, goals: Callable[[float], np.ndarray | None],
            sink: Callable[[Tick], None], stop: Callable[[], bool] = lambda: False) -> str:
        """Tick at ``rate_hz`` until ``duration_s`` has passed (None: until ``stop()``);
        ``goals(t)`` gives each tick's goals (t since the episode's start; None: no write),
        ``sink(tick)`` takes every tick. Returns the end reason ("duration" or "stopped");
        raises :class:`RecordStop` (after the torque is off where it is a safety stop) and
        switches the torque off on ``KeyboardInterrupt`` before passing it on."""
        self.start_episode()
        period = 1.0 / self.rate_hz
        t0 = self._t_start
        k = 0
        last = None
        try:
            while True:
                due = t0 + k * period
                now = self.clock.now()
                if now - due > period:  # fell behind by a whole period: restart the grid
                    self.counters.overruns += 1
                    k = max(k, int(math.floor((now - t0) / period)))
                    due = t0 + k * period
                self.clock.sleep_until(due)
                rel = self.clock.now() - t0
                if duration_s is not None and rel >= duration_s - 1e-9:
                    return "duration"
                if stop():
                    return "stopped"
                tick = self.tick(goals(rel))
                if last is not None:
                    self.counters.periods.append(tick.t - last)
                last = tick.t
                sink(tick)
                k += 1
        except KeyboardInterrupt:
            self.torque_off()
            raise


__all__ = ["Counters", "DXL_HW_BITS", "EmulatorClock", "RecordStop", "Recorder", "SCS_BITS",
           "SafetyStop", "ServoLost", "Tick", "WallClock", "tick_wire_s"]
