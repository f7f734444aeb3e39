"""``RecordConfig``: the options of ``neuract record`` (and of ``estimate --live``'s bus)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from neuract.errors import ConfigError

DEFAULT_IDS = {"so101": (1, 2, 3, 4, 5, 6), "omx": (11, 12, 13, 14)}
"""servo ids in joint order: the SO-101's six STS3215 (LeRobot's numbering, gripper 6); the
OpenManipulator-X's four arm joints (ROBOTIS' numbering 11..14; the gripper, 15, is not a
joint of the model)"""
TEMPERATURE_LIMIT = {"so101": 65.0, "omx": 72.0}
"""default safety-stop temperature [degC], a margin below the servos' own limits (STS3215
70 degC, XM430 80 degC)"""


@dataclass
class RecordConfig:
    """Record a follower arm's servos at full rate into a dataset (optionally teleoperated
    from a leader arm)."""

    out: Path = Path("runs/record")
    """dataset directory, written episode by episode (a crash keeps every finished episode)"""
    port: str = ""
    """the follower's serial port (/dev/ttyACM0, /dev/ttyUSB0, COM3); not needed with
    --emulate"""
    arm: Literal["so101", "omx"] = "so101"
    """so101: SO-101, Feetech STS3215, SCS protocol; omx: OpenManipulator-X, Dynamixel XM430,
    Protocol 2.0"""
    ids: tuple[int, ...] | None = None
    """servo ids in joint order (default so101 1..6, omx 11..14)"""
    baud: int = 1_000_000
    """bus bit rate [bit/s]"""
    rate_hz: float = 100.0
    """ticks a second: one sync write of the goals and one sync read of the telemetry each"""
    episodes: int = 1
    """number of episodes"""
    duration_s: float = 10.0
    """length of each episode [s]; 0: start and stop each episode with Enter (q Enter ends)"""
    task: str = ""
    """episode label: what the arm does"""
    payload_kg: float | None = None
    """episode label: the payload held [kg]"""
    notes: str = ""
    """episode label: operator notes"""
    format: Literal["neuract", "lerobot"] = "neuract"
    """neuract: the canonical dataset at --out; lerobot: a LeRobot v3.0 dataset at --out,
    rewritten after each episode from the canonical one kept beside it (OUT.neuract)"""
    leader_port: str = ""
    """teleoperation: the leader arm's serial port; its positions become the follower's
    goals ("emulate": an emulated leader, with --emulate)"""
    leader_ids: tuple[int, ...] | None = None
    """the leader's servo ids in joint order (default: the follower's)"""
    excite_rad: float = 0.0
    """without a leader: drive the follower with a sine of this amplitude [rad] around its
    starting pose (0: write no goals, record only)"""
    temperature_limit: float | None = None
    """safety stop (torque off) at or above this servo temperature [degC] (default so101 65,
    omx 72)"""
    timeout_s: float = 0.034
    """how long to wait for a status packet beyond its wire time [s]"""
    lost_after_s: float = 0.5
    """a servo silent this long ends the episode [s]"""
    emulate: bool = False
    """record from a built-in emulated arm (neuract.bus.BusEmulator) instead of a port"""
    seed: int = 0
    """the emulated arm's unit seed (with --emulate)"""
    append: bool = False
    """add episodes to the dataset at --out (same arm and joints)"""
    recover: bool = False
    """only turn the partial episode files a crash left in --out into episodes, and exit"""
    overwrite: bool = False
    """replace an existing dataset at --out"""
    quiet: bool = False
    """no running summary"""

    def resolved_ids(self) -> tuple[int, ...]:
        return tuple(self.ids) if self.ids else DEFAULT_IDS[self.arm]

    def limit(self) -> float:
        return TEMPERATURE_LIMIT[self.arm] if self.temperature_limit is None \
            else float(self.temperature_limit)

    def validate(self) -> None:
        """Refuse bad options before the bus is opened (one line each)."""
        if self.arm not in DEFAULT_IDS:
            raise ConfigError(f"--arm {self.arm!r}; expected so101 or omx")
        ids = self.resolved_ids()
        n = len(DEFAULT_IDS[self.arm])
        if len(ids) != n or len(set(ids)) != n or not all(0 <= i <= 252 for i in ids):
            raise ConfigError(f"--ids {list(ids)}; expected {n} distinct servo ids in 0..252, "
                              f"one per joint of the {self.arm} in joint order")
        if self.leader_ids is not None and (len(self.leader_ids) != n
                                            or len(set(self.leader_ids)) != n):
            raise ConfigError(f"--leader-ids {list(self.leader_ids)}; expected {n} distinct "
                              "servo ids")
        for name, v, lo, hi in (("rate-hz", self.rate_hz, 1.0, 1000.0),
                                ("duration-s", self.duration_s, 0.0, 86400.0),
                                ("timeout-s", self.timeout_s, 1e-3, 1.0),
                                ("lost-after-s", self.lost_after_s, 0.01, 60.0),
                                ("excite-rad", self.excite_rad, 0.0, 1.5),
                                ("temperature-limit", self.limit(), 20.0, 100.0)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi):
                raise ConfigError(f"--{name} {v!r}; expected a number in {lo:g}..{hi:g}")
        if not (isinstance(self.episodes, int) and self.episodes >= 1):
            raise ConfigError(f"--episodes {self.episodes!r}; expected an integer >= 1")
        if self.baud not in (9600, 19200, 38400, 57600, 115200, 128000, 250000, 500000,
                             1_000_000, 2_000_000, 3_000_000, 4_000_000, 4_500_000):
            raise ConfigError(f"--baud {self.baud}; expected one of the servos' rates "
                              "(1000000 is both arms' default)")
        if self.payload_kg is not None and not (math.isfinite(self.payload_kg)
                                                and self.payload_kg >= 0):
            raise ConfigError(f"--payload-kg {self.payload_kg}; expected a mass >= 0 kg")
        if not self.emulate and not self.port and not self.recover:
            raise ConfigError("--port is missing; expected the follower's serial port "
                              "(/dev/ttyACM0, /dev/ttyUSB0, COM3), or --emulate")
        if self.leader_port == "emulate" and not self.emulate:
            raise ConfigError("--leader-port emulate needs --emulate")
        if self.leader_port and self.excite_rad:
            raise ConfigError("--excite-rad with --leader-port: the goals come from one or "
                              "the other")
        if self.append and self.overwrite:
            raise ConfigError("--append and --overwrite together; choose one")


__all__ = ["DEFAULT_IDS", "RecordConfig", "TEMPERATURE_LIMIT"]
