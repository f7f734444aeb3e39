"""Dynamixel Protocol 2.0 packets (the XM430-W350 of the OpenManipulator-X).

Instruction packet: ``FF FF FD 00 ID LEN_L LEN_H INST P1..PN CRC_L CRC_H``; status packet:
``FF FF FD 00 ID LEN_L LEN_H 55 ERR P1..PN CRC_L CRC_H``. ``LEN`` counts the instruction,
error, parameters and CRC after byte stuffing: wherever ``FF FF FD`` appears from the
instruction to the last parameter, an extra ``FD`` follows it on the wire (a receiver drops
it), so that a header never appears inside a packet. The CRC-16 (polynomial 0x8005, initial
value 0, no reflection: the table of ROBOTIS' reference code) covers the stuffed packet from
the first header byte to the last parameter. ID 0..252, 254 (0xFE) broadcast. Instructions:
PING 0x01 (status: model number LE, firmware version), READ 0x02 (address LE, length LE),
WRITE 0x03 (address LE, data...), REBOOT 0x08, SYNC READ 0x82 (address, length, IDs...; one
status packet per ID, in order), SYNC WRITE 0x83 (address, length L, then ID and L bytes per
device; no status packet); status 0x55. Error byte: bit 7 Alert (read Hardware Error Status),
bits 0-6 an error number (1 result fail, 2 instruction, 3 CRC, 4 data range, 5 data length,
6 data limit, 7 access).

Source: ROBOTIS e-Manual, *DYNAMIXEL Protocol 2.0* (emanual.robotis.com/docs/en/dxl/protocol2/;
the packet, byte-stuffing and CRC sections and the worked examples of Ping, Read, Write, Sync
Read and Sync Write, which are the vectors of ``tests/test_bus_protocol.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from neuract.errors import ConfigError

HEADER = b"\xff\xff\xfd\x00"
BROADCAST_ID = 0xFE
MAX_ID = 0xFC
MAX_LENGTH = 1024
"""largest LEN a receiver accepts (ROBOTIS' SDK: 1 KiB packets)"""

PING = 0x01
READ = 0x02
WRITE = 0x03
REBOOT = 0x08
STATUS = 0x55
SYNC_READ = 0x82
SYNC_WRITE = 0x83

ERR_ALERT = 0x80
ERR_RESULT_FAIL = 0x01
ERR_INSTRUCTION = 0x02
ERR_CRC = 0x03
ERR_DATA_RANGE = 0x04
ERR_DATA_LENGTH = 0x05
ERR_DATA_LIMIT = 0x06
ERR_ACCESS = 0x07


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        c = i << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x8005) if c & 0x8000 else (c << 1)
        table.append(c & 0xFFFF)
    return table


CRC_TABLE = _crc_table()
"""CRC-16 table of polynomial 0x8005 (MSB first); ``CRC_TABLE[1] == 0x8005``"""


def crc16(data: bytes | Iterable[int], crc: int = 0) -> int:
    """CRC-16/0x8005 of ``data`` continuing from ``crc`` (0 for a whole packet)."""
    for b in data:
        crc = ((crc << 8) ^ CRC_TABLE[((crc >> 8) ^ b) & 0xFF]) & 0xFFFF
    return crc


def stuff(body: bytes) -> bytes:
    """``body`` (instruction to last parameter) with an ``FD`` added after each ``FF FF FD``."""
    out = bytearray()
    for i, b in enumerate(body):
        out.append(b)
        if b == 0xFD and i >= 2 and body[i - 1] == 0xFF and body[i - 2] == 0xFF:
            out.append(0xFD)
    return bytes(out)


def unstuff(body: bytes) -> bytes:
    """Inverse of :func:`stuff`: drop the ``FD`` that follows each ``FF FF FD``."""
    out = bytearray()
    i = 0
    while i < len(body):
        b = body[i]
        out.append(b)
        if (b == 0xFD and len(out) >= 3 and out[-2] == 0xFF and out[-3] == 0xFF
                and i + 1 < len(body) and body[i + 1] == 0xFD):
            i += 1  # the stuffed byte
        i += 1
    return bytes(out)


def _check_id(servo_id: int, broadcast_ok: bool = True) -> None:
    ok = isinstance(servo_id, int) and not isinstance(servo_id, bool) and (
        0 <= servo_id <= MAX_ID or (broadcast_ok and servo_id == BROADCAST_ID))
    if not ok:
        more = f" or {BROADCAST_ID} (broadcast)" if broadcast_ok else ""
        raise ConfigError(f"Dynamixel id = {servo_id!r}; expected an integer in 0..{MAX_ID}"
                          f"{more}")


def _packet(servo_id: int, body: bytes) -> bytes:
    wire = stuff(body)
    length = len(wire) + 2
    if length > MAX_LENGTH:
        raise ConfigError(f"Dynamixel packet of length {length}; expected at most {MAX_LENGTH}")
    head = HEADER + bytes((servo_id, length & 0xFF, length >> 8))
    crc = crc16(head + wire)
    return head + wire + bytes((crc & 0xFF, crc >> 8))


def instruction(servo_id: int, inst: int, params: bytes = b"") -> bytes:
    """An instruction packet (``params`` before stuffing)."""
    _check_id(servo_id)
    return _packet(servo_id, bytes((inst,)) + bytes(params))


def status(servo_id: int, error: int = 0, params: bytes = b"") -> bytes:
    """A status packet (instruction 0x55) of device ``servo_id`` with error byte ``error``."""
    _check_id(servo_id, broadcast_ok=False)
    return _packet(servo_id, bytes((STATUS, error & 0xFF)) + bytes(params))


def _u16(x: int) -> bytes:
    return int(x).to_bytes(2, "little")


def ping(servo_id: int) -> bytes:
    return instruction(servo_id, PING)


def read(servo_id: int, address: int, length: int) -> bytes:
    return instruction(servo_id, READ, _u16(address) + _u16(length))


def write(servo_id: int, address: int, data: bytes) -> bytes:
    return instruction(servo_id, WRITE, _u16(address) + bytes(data))


def reboot(servo_id: int) -> bytes:
    return instruction(servo_id, REBOOT)


def sync_read(address: int, length: int, ids: Iterable[int]) -> bytes:
    return instruction(BROADCAST_ID, SYNC_READ, _u16(address) + _u16(length) + bytes(ids))


def sync_write(address: int, data: Mapping[int, bytes]) -> bytes:
    """One SYNC WRITE of the same-length ``data[id]`` to every device at ``address``."""
    sizes = {len(v) for v in data.values()}
    if len(sizes) != 1:
        raise ConfigError(f"Dynamixel sync write: data lengths {sorted(sizes)}; expected one "
                          "length for every device")
    size = sizes.pop()
    params = _u16(address) + _u16(size) + b"".join(bytes((i,)) + bytes(v)
                                                    for i, v in data.items())
    return instruction(BROADCAST_ID, SYNC_WRITE, params)


@dataclass(frozen=True)
class Packet:
    """A decoded packet. Instruction packets: ``code`` the instruction, ``error`` None;
    status packets (instruction 0x55): ``code`` 0x55, ``error`` the error byte. ``params``
    are unstuffed. ``ok`` is False when the CRC did not match (``raw``: the bytes as
    received)."""

    id: int
    code: int
    error: int | None
    params: bytes
    ok: bool
    raw: bytes


def _find_header(buf: bytearray) -> int:
    """Index of the first ``FF FF FD`` not followed by ``FD`` (-1: none yet)."""
    i = 0
    while True:
        i = buf.find(b"\xff\xff\xfd", i)
        if i < 0 or i + 3 >= len(buf) or buf[i + 3] != 0xFD:
            return i
        i += 1


class Parser:
    """Split a byte stream into packets (either direction).

    ``feed(data)`` returns the packets completed by ``data``; bytes before a header are
    skipped, a header with a nonzero reserved byte, an impossible ID or length is skipped one
    byte at a time, a packet whose CRC does not match is returned with ``ok=False`` and its
    bytes consumed.
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
            start = _find_header(buf)
            if start < 0:
                keep = 2 if buf.endswith(b"\xff\xff") else 1 if buf.endswith(b"\xff") else 0
                del buf[:len(buf) - keep]
                return out
            del buf[:start]
            if len(buf) < 7:
                return out
            sid, length = buf[4], buf[5] | (buf[6] << 8)
            if buf[3] != 0x00 or sid > BROADCAST_ID or not 3 <= length <= MAX_LENGTH:
                del buf[0]
                continue
            total = length + 7
            if len(buf) < total:
                return out
            raw = bytes(buf[:total])
            del buf[:total]
            ok = crc16(raw[:-2]) == raw[-2] | (raw[-1] << 8)
            body = unstuff(raw[7:-2])
            if body[0] == STATUS and len(body) >= 2:
                out.append(Packet(sid, STATUS, body[1], body[2:], ok, raw))
            else:
                out.append(Packet(sid, body[0], None, body[1:], ok, raw))


def decode(data: bytes) -> Packet:
    """The one packet in ``data`` (ConfigError if there is not exactly one)."""
    packets = Parser().feed(data)
    if len(packets) != 1:
        raise ConfigError(f"Dynamixel decode: {len(packets)} packets in {data.hex(' ')}; "
                          "expected 1")
    return packets[0]


__all__ = [
    "BROADCAST_ID", "CRC_TABLE", "ERR_ACCESS", "ERR_ALERT", "ERR_CRC", "ERR_DATA_LENGTH",
    "ERR_DATA_LIMIT", "ERR_DATA_RANGE", "ERR_INSTRUCTION", "ERR_RESULT_FAIL", "HEADER",
    "MAX_ID", "PING", "Packet", "Parser", "READ", "REBOOT", "STATUS", "SYNC_READ",
    "SYNC_WRITE", "WRITE", "crc16", "decode", "instruction", "ping", "read", "reboot",
    "status", "stuff", "sync_read", "sync_write", "unstuff", "write",
]
