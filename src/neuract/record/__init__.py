"""Recording a servo arm's telemetry live (``neuract record``; see docs/record.md).

- :mod:`neuract.record.loop`: :class:`Recorder`, the tick loop (sync write of the goals, one
  sync read of the telemetry block, monotonic timestamps, fault counters, safety stops).
- :mod:`neuract.record.writer`: :class:`RecordingWriter`, a dataset written episode by
  episode (per-episode files renamed into place whole, the current one in a partial file),
  and :func:`recover`.
- :mod:`neuract.record.session`: :func:`record_session`, the verb (episodes, labels,
  teleoperation, keyboard, the running summary).
"""

from neuract.record.config import DEFAULT_IDS, RecordConfig
from neuract.record.loop import (
    EmulatorClock,
    Recorder,
    RecordStop,
    SafetyStop,
    ServoLost,
    Tick,
    WallClock,
    tick_wire_s,
)
from neuract.record.writer import RecordingWriter, read_partial, recover

__all__ = ["DEFAULT_IDS", "EmulatorClock", "RecordConfig", "RecordStop", "Recorder",
           "RecordingWriter", "SafetyStop", "ServoLost", "Tick", "WallClock", "read_partial",
           "recover", "tick_wire_s"]
