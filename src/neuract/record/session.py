"""``neuract record``: a follower arm's servos recorded episode by episode (see docs/record.md).

    neuract record --arm so101 --port /dev/ttyACM0 --episodes 5 --duration-s 30 \\
        --task pick --payload-kg 0.2 --out runs/rec_so101
    neuract record --arm so101 --port /dev/ttyACM0 --leader-port /dev/ttyACM1 --out runs/tele
    neuract record --emulate --arm omx --excite-rad 0.3 --out runs/rec_emulated

:func:`record_session` opens the bus (or an emulated arm), checks that every servo answers,
then runs :class:`~neuract.record.loop.Recorder` for each episode into a
:class:`~neuract.record.writer.RecordingWriter`; ``on_tick`` (``estimate --live``) sees every
tick.
"""

from __future__ import annotations

import contextlib
import math
import select
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neuract.bus.client import BusClient
from neuract.bus.emulator import PROTOCOLS, BusEmulator
from neuract.bus.tables import (
    counts_to_position,
    decode_value,
    position_counts,
    table_for,
)
from neuract.errors import ConfigError
from neuract.record.config import RecordConfig
from neuract.record.loop import Recorder, RecordStop, Tick, WallClock, tick_wire_s
from neuract.record.writer import RecordingWriter, recover

EXCITE_HZ = (0.31, 0.23, 0.41, 0.37, 0.53, 0.29)
"""sine frequencies of ``--excite-rad``, one per joint (distinct, so joints decorrelate)"""


@dataclass
class Session:
    """What :func:`record_session` runs on: the follower's bus and the leader's (or None),
    the clock, and the emulators it started (closed with it)."""

    bus: BusClient
    clock: Any
    leader: BusClient | None = None
    emulators: list[BusEmulator] = field(default_factory=list)
    port: str = ""


@contextlib.contextmanager
def open_session(cfg: RecordConfig):
    """The follower's bus (or a wall-clock emulated arm with ``--emulate``) and the leader's."""
    ids = cfg.resolved_ids()
    proto = PROTOCOLS[cfg.arm]
    emus: list[BusEmulator] = []
    buses: list[BusClient] = []
    try:
        port = cfg.port
        if cfg.emulate:
            total = cfg.episodes * (cfg.duration_s or 600.0) + 30.0
            emu = BusEmulator(robot=cfg.arm, ids=ids, seed=cfg.seed, baud=cfg.baud,
                              clock="wall", duration_s=min(total, 1800.0)).start()
            emus.append(emu)
            port = emu.port
        bus = BusClient(port, proto, cfg.baud, cfg.timeout_s)
        buses.append(bus)
        leader = None
        if cfg.leader_port:
            lport = cfg.leader_port
            if lport == "emulate":
                lemu = BusEmulator(robot=cfg.arm, ids=cfg.leader_ids or ids,
                                   seed=cfg.seed + 1, baud=cfg.baud, clock="wall",
                                   duration_s=emus[0].last_step * emus[0].dt,
                                   torque=False).start()
                emus.append(lemu)
                lport = lemu.port
            leader = BusClient(lport, proto, cfg.baud, cfg.timeout_s)
            buses.append(leader)
        yield Session(bus, WallClock(), leader, emus, port)
    except OSError as exc:
        raise ConfigError(f"cannot open the serial port: {exc}; check --port / --leader-port "
                          "and that you may use it (Linux: the dialout group)") from None
    finally:
        for b in buses:
            b.close()
        for e in emus:
            e.close()


def check_servos(bus: BusClient, table, ids, port: str, baud: int, what: str = "follower"
                 ) -> dict[str, np.ndarray]:
    """One telemetry sample from every servo (three tries), or a ConfigError naming the
    servos that do not answer."""
    start, length = table.telemetry
    missing: list[int] = list(ids)
    for _ in range(3):
        replies = bus.sync_read(start, length, ids)
        missing = [i for i in ids if not replies[i].ok]
        if not missing:
            from neuract.bus.tables import decode_telemetry
            per = [decode_telemetry(table, replies[i].params) for i in ids]
            return {k: np.array([p[k] for p in per]) for k in per[0]}
    raise ConfigError(f"{what} servo(s) {missing} do not answer on {port or 'the bus'} at "
                      f"{baud} baud; check the ids (--ids), the baud rate, the power and the "
                      "cable")


def leader_positions(bus: BusClient, table, ids) -> np.ndarray | None:
    """The leader arm's joint angles [rad] (None if a servo did not answer)."""
    f = table.f("present_position")
    replies = bus.sync_read(f.address, f.size, ids)
    if not all(r.ok and len(r.params) == f.size for r in replies.values()):
        return None
    return np.array([counts_to_position(decode_value(replies[i].params, f)) for i in ids])


def goal_registers(bus: BusClient, table, ids) -> np.ndarray:
    """The goal-position registers of the servos [rad] (what they hold before the first
    goal is written)."""
    f = table.f("goal_position")
    out = []
    for sid in ids:
        for _ in range(3):
            r = bus.read(sid, f.address, f.size)
            if r.ok and len(r.params) == f.size:
                out.append(counts_to_position(decode_value(r.params, f)))
                break
        else:
            raise ConfigError(f"servo {sid} does not answer a read of its goal position")
    return np.array(out)


class Keyboard:
    """Enter toggles an episode, ``q`` Enter ends the recording (stdin, without blocking)."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stdin
        self.quit = False

    def pressed(self) -> bool:
        try:
            ready, _, _ = select.select([self.stream], [], [], 0)
        except (ValueError, OSError, TypeError):
            return False
        if not ready:
            return False
        line = self.stream.readline()
        if line == "" or line.strip().lower() == "q":
            self.quit = True
        return True

    def wait(self, idle: Callable[[], None]) -> bool:
        """Wait for Enter (True) or q / end of input (False), calling ``idle`` meanwhile."""
        while not self.pressed():
            idle()
        return not self.quit


def _quantised_goal(q: np.ndarray) -> np.ndarray:
    """What the goal-position registers hold for goals ``q`` [rad]."""
    return np.array([counts_to_position(position_counts(v)) for v in q])


def record_session(cfg: RecordConfig, session: Session | None = None,
                   on_tick: Callable[[Tick, dict[str, Any]], None] | None = None,
                   keyboard: Keyboard | None = None,
                   on_episode: Callable[[str, int, Any], None] | None = None) -> dict[str, Any]:
    """Record ``cfg.episodes`` episodes (see the module docstring); the summary. ``session``:
    an open :class:`Session` (tests: a virtual-clock emulator); ``on_tick(tick, sample)``:
    called with every tick and its written sample (None for a dropped read; ``t`` [s] since
    the episode's start, as written);
    ``on_episode("begin", index, None)`` before each episode and ``on_episode("end", index,
    trajectory or None)`` once it is written."""
    cfg.validate()
    if cfg.recover:
        names = recover(_canonical_out(cfg))
        if not cfg.quiet:
            print(f"recovered {len(names)} partial episode(s): {', '.join(names) or 'none'}",
                  file=sys.stderr)
        return {"recovered": names}
    if session is None:
        with open_session(cfg) as s:
            return record_session(cfg, s, on_tick, keyboard, on_episode)
    table = table_for(cfg.arm)
    ids = list(cfg.resolved_ids())
    lids = list(cfg.leader_ids or ids)
    first = check_servos(session.bus, table, ids, session.port, cfg.baud)
    if session.leader is not None:
        check_servos(session.leader, table, lids, cfg.leader_port, cfg.baud, "leader")
    from neuract.twin.model import SHIPPED_SERVO, build_model
    arm = build_model(cfg.arm, 500.0)
    joints = arm.joint_names
    robot = SHIPPED_SERVO[cfg.arm]  # the bundled arm of these joints (omx: omx_arm)
    writer = RecordingWriter(_canonical_out(cfg), robot, joints, overwrite=cfg.overwrite,
                             append=cfg.append, config=cfg)
    rec = Recorder(session.bus, table, ids, clock=session.clock, rate_hz=cfg.rate_hz,
                   temperature_limit=cfg.limit(), lost_after_s=cfg.lost_after_s)
    goals = _goal_source(cfg, session, table, lids, first["q"], np.asarray(arm.ranges))
    goal0 = None
    if goals is not None:
        goal0 = goal_registers(session.bus, table, ids)
        rec.set_torque(True)
    labels = {"task": cfg.task, "notes": cfg.notes, "arm": cfg.arm, "servo_ids": ids,
              "port": session.port, "baud": cfg.baud, "rate_hz_set": cfg.rate_hz,
              "teleop": bool(cfg.leader_port)}
    if cfg.payload_kg is not None:
        labels["payload_mass_kg"] = cfg.payload_kg
    chans = ["q", "qd", "current", "voltage", "temperature",
             "load" if cfg.arm == "so101" else "pwm"] + (["q_goal"] if goals else [])
    kb = keyboard if keyboard is not None or cfg.duration_s else Keyboard()
    summary: dict[str, Any] = {"out": str(cfg.out), "episodes": []}
    stop_exc: BaseException | None = None
    last_goal = [goal0]  # the goals the servos hold (across episodes too)
    say = (lambda *a: None) if cfg.quiet else (lambda msg: print(msg, file=sys.stderr))
    for ep in range(cfg.episodes):
        if kb is not None:
            say(f"episode {writer.index}: Enter starts it (Enter again stops it), q Enter "
                "ends the recording")
            if not kb.wait(lambda: _idle_tick(rec, goals, session.clock)):
                break
        live = _Live(say, ep, cfg.episodes, rec)
        index = writer.index
        if on_episode is not None:
            on_episode("begin", index, None)
        writer.begin(chans, labels, source=session.port)

        def sink(tick: Tick, live: _Live = live) -> None:
            if tick.goal is not None:
                last_goal[0] = _quantised_goal(tick.goal)
            sample = None
            if tick.sample is not None:
                sample = dict(tick.sample)
                if goals is not None:
                    sample["q_goal"] = last_goal[0]
                sample["t"] = tick.t - rec._t_start  # the episode's time, as written
                writer.add(sample["t"], sample)
            if on_tick is not None:
                on_tick(tick, sample)
            live.update(tick)

        end, message = "duration", ""
        try:
            end = rec.run(cfg.duration_s or None, goals or (lambda t: None), sink,
                          stop=kb.pressed if kb is not None else (lambda: False))
        except RecordStop as exc:
            end, message, stop_exc = exc.reason, str(exc), exc
        except KeyboardInterrupt as exc:
            end, message, stop_exc = "interrupted", "interrupted (Ctrl-C): torque off", exc
        except BaseException:
            writer.close()  # the episode stays in its partial file
            raise
        tr = writer.finish(rec.counters.as_counts(), end,
                           {"stop_message": message} if message else None)
        if on_episode is not None:
            on_episode("end", index, tr)
        row = _episode_summary(writer, tr, rec, end, message)
        summary["episodes"].append(row)
        say(f"episode {row['episode']}: {row['samples']} samples, {row['rate_hz']:.1f} Hz, "
            f"dropped reads {row['dropped_reads']}, max {row['max_temperature']:.0f} degC, "
            f"end: {end}" + (f" ({message})" if message else ""))
        if cfg.format == "lerobot" and writer.trajs:
            from neuract.io.lerobot_write import write_lerobot
            write_lerobot(writer.trajs, cfg.out, overwrite=True, task=cfg.task or
                          "servo telemetry")
        if stop_exc is not None or (kb is not None and kb.quit):
            break
    summary["wire_s_per_tick"] = tick_wire_s(table, len(ids), cfg.baud, goals is not None)
    summary["bus_limit_hz"] = 1.0 / summary["wire_s_per_tick"]
    if stop_exc is not None:
        if isinstance(stop_exc, KeyboardInterrupt):
            raise stop_exc
        raise stop_exc
    return summary


def _canonical_out(cfg: RecordConfig) -> Path:
    out = Path(cfg.out)
    return out.with_name(out.name + ".neuract") if cfg.format == "lerobot" else out


def _goal_source(cfg, session: Session, table, lids, q0: np.ndarray, ranges: np.ndarray):
    """goals(t) -> (n,) [rad] or None (no write this tick); None where no goals are sent.
    Goals are clipped to the arm's joint ranges (a leader read past them, a sine too wide)."""
    lo, hi = ranges[:, 0], ranges[:, 1]
    if session.leader is not None:
        def lead(t: float) -> np.ndarray | None:
            q = leader_positions(session.leader, table, lids)
            return None if q is None else np.clip(q, lo, hi)
        return lead
    if cfg.excite_rad > 0:
        q0 = np.asarray(q0, float).copy()
        f = np.array(EXCITE_HZ[:len(q0)])
        return lambda t: np.clip(q0 + cfg.excite_rad * np.sin(2 * math.pi * f * t), lo, hi)
    return None


def _idle_tick(rec: Recorder, goals, clock) -> None:
    """Between keyboard episodes: keep teleoperating (nothing recorded)."""
    rec.tick(None if goals is None else goals(0.0))
    clock.sleep_until(clock.now() + 1.0 / rec.rate_hz)


class _Live:
    """The running summary: one line a second (rate, dropped reads, temperature)."""

    def __init__(self, say, ep: int, n: int, rec: Recorder) -> None:
        self.say, self.ep, self.n, self.rec = say, ep, n, rec
        self.next = time.monotonic() + 1.0

    def update(self, tick: Tick) -> None:
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + 1.0
        c = self.rec.counters
        rate = 1.0 / float(np.median(c.periods[-200:])) if c.periods else 0.0
        self.say(f"  episode {self.ep + 1}/{self.n}  t {tick.t - self.rec._t_start:6.1f} s  "
                 f"{rate:6.1f} Hz  dropped reads {c.dropped_reads} (timeouts "
                 f"{sum(c.timeout.values())}, corrupt {sum(c.corrupt.values())})  "
                 f"max {c.max_temperature:.0f} degC")


def _episode_summary(writer, tr, rec: Recorder, end: str, message: str) -> dict[str, Any]:
    c = rec.counters
    periods = np.array(c.periods) if c.periods else np.array([np.nan])
    return {"episode": tr.meta.name if tr is not None else None,
            "samples": 0 if tr is None else len(tr),
            "rate_hz": float(1.0 / np.median(periods)) if c.periods else 0.0,
            "dropped_reads": c.dropped_reads, "counts": c.as_counts(),
            "max_temperature": c.max_temperature if c.samples else float("nan"),
            "end": end, "message": message}


def run(cfg: RecordConfig) -> dict[str, Any]:
    return record_session(cfg)


__all__ = ["Keyboard", "Session", "check_servos", "leader_positions", "open_session",
           "record_session", "run"]
