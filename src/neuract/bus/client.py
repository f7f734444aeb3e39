"""A bus host on a serial port (a real adapter or :class:`~neuract.bus.BusEmulator`'s pty):
one instruction packet out, its status packets in, per servo.

:class:`BusClient` speaks either protocol with the packet builders of :mod:`neuract.bus.scs`
and :mod:`neuract.bus.dxl2` over pyserial (the ``record`` extra). Unlike the vendors' SDKs,
a sync read returns every servo's own result, so one missing or damaged servo does not cost
the others' samples. Each result is a :class:`Reply`: ``status`` "ok", "timeout" (no status
packet within the timeout) or "corrupt" (a status packet with a wrong checksum / CRC); for
"ok", ``error`` is the status byte and ``params`` the data.
"""

from __future__ import annotations

import select
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from neuract.bus import dxl2, scs
from neuract.errors import ConfigError

BITS_PER_BYTE = 10


@dataclass(frozen=True)
class Reply:
    """One servo's answer: status "ok", "timeout" or "corrupt"; error: the status byte (SCS)
    or error byte (Protocol 2.0: bit 7 Alert, bits 0-6 the error number); params: the data
    (a read's bytes, a ping's model number and firmware on Protocol 2.0)."""

    id: int
    status: str
    error: int = 0
    params: bytes = b""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class BusClient:
    """A host on the bus at ``port``: protocol "scs" or "dxl2", ``baud`` [bit/s];
    ``timeout_s``: how long to wait for a status packet beyond its wire time (the vendors'
    SDKs wait about 34 ms)."""

    def __init__(self, port: str, protocol: str, baud: int = 1_000_000,
                 timeout_s: float = 0.034) -> None:
        if protocol not in ("scs", "dxl2"):
            raise ConfigError(f"BusClient protocol = {protocol!r}; expected 'scs' or 'dxl2'")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ConfigError(f"BusClient timeout_s = {timeout_s!r}; expected seconds > 0")
        try:
            import serial
        except ImportError as e:  # pragma: no cover - the record extra is missing
            raise ConfigError("BusClient needs pyserial: pip install 'neuract[record]'") from e
        self.protocol, self.baud, self.timeout_s = protocol, int(baud), float(timeout_s)
        self.codec = scs if protocol == "scs" else dxl2
        self.serial = serial.Serial(port, self.baud, timeout=0)
        self.serial.reset_input_buffer()
        self._parser = self.codec.Parser()

    def close(self) -> None:
        self.serial.close()

    def __enter__(self) -> BusClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- exchanges -----------------------------------------------------------------------

    def _exchange(self, packet: bytes, expect: list[int], reply_bytes: int) -> dict[int, Reply]:
        """Send ``packet``; collect one status packet from each id of ``expect`` (in any
        order) until all came or the timeout passed."""
        self.serial.reset_input_buffer()
        self._parser.reset()
        self.serial.write(packet)
        if not expect:
            self.serial.flush()
            return {}
        wire = (len(packet) + reply_bytes) * BITS_PER_BYTE / self.baud
        deadline = time.monotonic() + wire + self.timeout_s
        out: dict[int, Reply] = {}
        while len(out) < len(expect):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            select.select([self.serial.fileno()], [], [], min(left, 0.005))
            data = self.serial.read(self.serial.in_waiting)
            for p in self._parser.feed(data):
                if p.id not in expect or p.id in out:
                    continue
                if not p.ok:
                    out[p.id] = Reply(p.id, "corrupt")
                elif self.protocol == "scs":
                    out[p.id] = Reply(p.id, "ok", p.code, p.params)
                elif p.code == dxl2.STATUS:
                    out[p.id] = Reply(p.id, "ok", p.error, p.params)
        # a damaged status packet whose id byte itself was hit cannot be told apart from
        # silence: what is left is a timeout, or "corrupt" if bytes came that made no packet
        stray = bool(self._parser.buf)
        return {i: out.get(i, Reply(i, "corrupt" if stray else "timeout")) for i in expect}

    def _status_len(self, n_params: int) -> int:
        return n_params + (6 if self.protocol == "scs" else 11)

    def _addr(self, *values: int) -> bytes:
        if self.protocol == "scs":
            return bytes(values)
        return b"".join(int(v).to_bytes(2, "little") for v in values)

    def ping(self, sid: int) -> Reply:
        n = 0 if self.protocol == "scs" else 3
        return self._exchange(self.codec.ping(sid), [sid], self._status_len(n))[sid]

    def read(self, sid: int, address: int, length: int) -> Reply:
        packet = self.codec.read(sid, address, length)
        return self._exchange(packet, [sid], self._status_len(length))[sid]

    def write(self, sid: int, address: int, data: bytes) -> Reply:
        """Write ``data`` at ``address`` of one servo and wait for its status packet."""
        return self._exchange(self.codec.write(sid, address, data), [sid],
                              self._status_len(0))[sid]

    def sync_read(self, address: int, length: int, ids: Iterable[int]) -> dict[int, Reply]:
        """One SYNC READ; every servo's :class:`Reply`, keyed by id."""
        ids = list(ids)
        packet = self.codec.sync_read(address, length, ids)
        return self._exchange(packet, ids, len(ids) * self._status_len(length))

    def sync_write(self, address: int, data: Mapping[int, bytes]) -> None:
        """One SYNC WRITE (no status packets by protocol)."""
        self._exchange(self.codec.sync_write(address, data), [], 0)


__all__ = ["BusClient", "Reply"]
