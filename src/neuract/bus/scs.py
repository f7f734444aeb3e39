"""Feetech SCS/STS packets ("FT-SCS" protocol of the SCS, STS and SMS servos, the STS3215 of
the SO-101 among them).

Instruction packet: ``FF FF ID LEN INST P1..PN CHK`` with ``LEN = N + 2``; status packet:
``FF FF ID LEN ERR P1..PN CHK``; ``CHK = ~(ID + LEN + INST|ERR + P1 + ... + PN) & 0xFF``.
ID 0..253, 254 (0xFE) broadcast (no status packet except to PING). Instructions: PING 0x01,
READ 0x02 (address, length), WRITE 0x03 (address, data...), SYNC READ 0x82 (address, length,
IDs...; the servos answer one status packet each, in the order of the IDs), SYNC WRITE 0x83
(address, length L, then ID and L data bytes per servo; no status packet). Multi-byte
register values of the magnetic-encoder servos (STS) are little-endian.

Source: Feetech, *Servo SCS Communication Protocol* (FT-SCS), sections 2-4; its worked
examples are the vectors of ``tests/test_bus_protocol.py``. The status byte's bits (voltage
0x01, angle/sensor 0x02, overheat 0x04, over-current 0x08, overload 0x20) are those of the
STS memory table's status register (65) and of Feetech's own SDK.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from neuract.errors import ConfigError

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_ID = 0xFD
MAX_LENGTH = 250
"""largest LEN a receiver accepts (Feetech's SDK: 250-byte packets)"""

PING = 0x01
READ = 0x02
WRITE = 0x03
REG_WRITE = 0x04
ACTION = 0x05
SYNC_READ = 0x82
SYNC_WRITE = 0x83

ERR_VOLTAGE = 0x01
ERR_ANGLE = 0x02
ERR_OVERHEAT = 0x04
ERR_OVERCURRENT = 0x08
ERR_OVERLOAD = 0x20


def checksum(body: bytes | Iterable[int]) -> int:
    """``~(sum of ID, LEN, INST/ERR and the parameters) & 0xFF``."""
    return ~sum(body) & 0xFF


def _check_id(servo_id: int, broadcast_ok: bool = True) -> None:
    top = BROADCAST_ID if broadcast_ok else MAX_ID
    if isinstance(servo_id, bool) or not isinstance(servo_id, int) or not 0 <= servo_id <= top:
        raise ConfigError(f"SCS servo id = {servo_id!r}; expected an integer in 0..{top}")


def _packet(servo_id: int, code: int, params: bytes) -> bytes:
    if len(params) + 2 > MAX_LENGTH:
        raise ConfigError(f"SCS packet of {len(params)} parameter bytes; expected at most "
                          f"{MAX_LENGTH - 2}")
    body = bytes((servo_id, len(params) + 2, code)) + bytes(params)
    return HEADER + body + bytes((checksum(body),))


def instruction(servo_id: int, inst: int, params: bytes = b"") -> bytes:
    """An instruction packet (``params`` as they go on the wire)."""
    _check_id(servo_id)
    return _packet(servo_id, inst, params)


def status(servo_id: int, error: int = 0, params: bytes = b"") -> bytes:
    """A status packet of servo ``servo_id`` with status byte ``error``."""
    _check_id(servo_id, broadcast_ok=False)
    return _packet(servo_id, error & 0xFF, params)


def ping(servo_id: int) -> bytes:
    return instruction(servo_id, PING)


def read(servo_id: int, address: int, length: int) -> bytes:
    return instruction(servo_id, READ, bytes((address, length)))


def write(servo_id: int, address: int, data: bytes) -> bytes:
    return instruction(servo_id, WRITE, bytes((address,)) + bytes(data))


def sync_read(address: int, length: int, ids: Iterable[int]) -> bytes:
    return instruction(BROADCAST_ID, SYNC_READ, bytes((address, length)) + bytes(ids))


def sync_write(address: int, data: Mapping[int, bytes]) -> bytes:
    """One SYNC WRITE of the same-length ``data[id]`` to every servo at ``address``."""
    sizes = {len(v) for v in data.values()}
    if len(sizes) != 1:
        raise ConfigError(f"SCS sync write: data lengths {sorted(sizes)}; expected one "
                          "length for every servo")
    size = sizes.pop()
    params = bytes((address, size)) + b"".join(bytes((i,)) + bytes(v) for i, v in data.items())
    return instruction(BROADCAST_ID, SYNC_WRITE, params)


@dataclass(frozen=True)
class Packet:
    """A decoded packet: ``code`` is the instruction (instruction packets) or the status byte
    (status packets); ``ok`` is False when the checksum did not match (``raw`` holds the
    bytes as received)."""

    id: int
    code: int
    params: bytes
    ok: bool
    raw: bytes


class Parser:
    """Split a byte stream into packets (either direction: the layout is the same).

    ``feed(data)`` returns the packets completed by ``data``; bytes before a header are
    skipped, a header with an impossible ID or length is skipped one byte at a time, a packet
    whose checksum does not match is returned with ``ok=False`` and its bytes consumed.
    """

    def __init__(self) -> None:
        self.buf = bytearray()

    def reset(self) -> None:
        self.buf.clear()

    def feed(self, data: bytes) -> list[Packet]:
        self.buf += data
        out: list[Packet] = []
        buf = self.buf
        while True:
            start = buf.find(HEADER)
            if start < 0:
                del buf[:max(0, len(buf) - 1)]  # keep a trailing 0xFF
                if buf and buf[-1] != 0xFF:
                    buf.clear()
                return out
            del buf[:start]
            if len(buf) < 4:
                return out
            sid, length = buf[2], buf[3]
            if sid == 0xFF or sid > BROADCAST_ID or not 2 <= length <= MAX_LENGTH:
                del buf[0]
                continue
            total = length + 4
            if len(buf) < total:
                return out
            raw = bytes(buf[:total])
            del buf[:total]
            ok = raw[-1] == checksum(raw[2:-1])
            out.append(Packet(sid, raw[4], raw[5:-1], ok, raw))


def decode(data: bytes) -> Packet:
    """The one packet in ``data`` (ConfigError if there is not exactly one)."""
    packets = Parser().feed(data)
    if len(packets) != 1:
        raise ConfigError(f"SCS decode: {len(packets)} packets in {data.hex(' ')}; expected 1")
    return packets[0]


__all__ = [
    "ACTION", "BROADCAST_ID", "ERR_ANGLE", "ERR_OVERCURRENT", "ERR_OVERHEAT", "ERR_OVERLOAD",
    "ERR_VOLTAGE", "HEADER", "MAX_ID", "PING", "Packet", "Parser", "READ", "REG_WRITE",
    "SYNC_READ", "SYNC_WRITE", "WRITE", "checksum", "decode", "instruction", "ping", "read",
    "status", "sync_read", "sync_write", "write",
]
