"""The options of ``neuract ingest`` (see :mod:`neuract.io.ingest`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro


@dataclass
class IngestConfig:
    """Convert telemetry logs into a neuract dataset directory."""

    source: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="SOURCE")]
    """log file, folder or archive to read"""
    format: str
    """input format: nad, bam, lerobot, csv, or neuract (a neuract dataset directory, e.g. to
    export it with --out-format lerobot)"""
    out: Path
    """output dataset directory (must not exist unless --overwrite)"""
    out_format: str = "neuract"
    """output layout: neuract (the canonical dataset) or lerobot (LeRobot v3.0, every channel
    as a feature, positions in rad)"""
    robot: str | None = None
    """robot name (so101, omx, panda, planar2, pendulum, ...); default: inferred by the reader"""
    mapping: Path | None = None
    """csv: JSON column mapping (see neuract.io.csv)"""
    position_units: str = "auto"
    """lerobot: auto, rad, deg or range_m100_100"""
    calibration: Path | None = None
    """lerobot: LeRobot calibration JSON for exact conversion of normalised positions"""
    include: str | None = None
    """only files whose path relative to SOURCE matches this glob (e.g. 'so101/*')"""
    limit: int | None = None
    """read at most this many episodes"""
    resample_hz: float | None = None
    """resample every episode to this fixed rate [Hz]"""
    derivatives: bool = False
    """compute qd and qdd with a Savitzky-Golay filter (needs a uniform rate)"""
    derivative_window_s: float = 0.05
    """Savitzky-Golay window length [s]"""
    skip_bad: bool = False
    """leave out each input file (or archive member) that cannot be read, and each episode
    that is too short (a warning names each one), and ingest the rest; a LeRobot dataset is
    read as one input, so it is left out whole; default: the first such input stops the
    ingest, nothing written"""
    overwrite: bool = False
    """replace an existing output directory"""
    quiet: bool = False
    """no progress bar or summary table"""
