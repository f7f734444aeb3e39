"""An emulated servo bus for tests and CI (no hardware needed).

- :mod:`neuract.bus.scs` / :mod:`neuract.bus.dxl2`: the Feetech SCS/STS and Dynamixel
  Protocol 2.0 packets (encode, decode, checksum / CRC-16, byte stuffing).
- :mod:`neuract.bus.tables`: the STS3215 (SO-101) and XM430 (OpenManipulator-X) control
  tables and register <-> SI conversions (:func:`~neuract.bus.tables.decode_telemetry`).
- :mod:`neuract.bus.client`: :class:`BusClient`, a host on a serial port (pyserial) with
  per-servo results (:class:`Reply`), for a real bus or the emulator.
- :mod:`neuract.bus.emulator`: :class:`BusEmulator`, a bus on a pseudo-terminal whose servos
  are the twin's, with injectable faults (:class:`FaultSpec`, :class:`ServoFault`) and the
  twin's ground truth (:meth:`BusEmulator.truth`). See docs/bus.md.
"""

from neuract.bus import dxl2, scs, tables
from neuract.bus.client import BusClient, Reply
from neuract.bus.emulator import PROTOCOLS, BusEmulator, Exchange, FaultSpec, ServoFault
from neuract.bus.tables import STS3215, XM430, ServoTable, decode_telemetry, goal_counts

__all__ = [
    "PROTOCOLS",
    "Reply",
    "STS3215",
    "XM430",
    "BusClient",
    "BusEmulator",
    "Exchange",
    "FaultSpec",
    "ServoFault",
    "ServoTable",
    "decode_telemetry",
    "dxl2",
    "goal_counts",
    "scs",
    "tables",
]
