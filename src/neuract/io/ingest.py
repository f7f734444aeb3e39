"""``neuract ingest SOURCE --format nad|bam|lerobot|csv|neuract --robot NAME --out DIR``.

Reads every episode of SOURCE with the chosen reader, optionally resamples to a fixed rate
and differentiates positions, writes a dataset directory (parquet per episode +
``meta/info.json`` + ``meta/stats.json`` + ``config.json``) atomically, and prints a summary
table. Any error leaves no output directory behind. ``--out-format lerobot`` writes the
episodes as a LeRobot v3.0 dataset instead (:mod:`neuract.io.lerobot_write`); with
``--format neuract`` that exports an existing neuract dataset.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuract.atomic import check_dest
from neuract.data.dataset import DATASET_DEST, write_dataset
from neuract.data.derivatives import add_derivatives
from neuract.data.resample import resample
from neuract.data.trajectory import Trajectory
from neuract.errors import ConfigError, SchemaError
from neuract.io.common import check_robot_name
from neuract.io.ingest_config import IngestConfig
from neuract.io.ingest_formats import FORMATS
from neuract.io.lerobot_write import LEROBOT_DEST, write_lerobot

OUT_FORMATS = ("neuract", "lerobot")
"""what ``--out-format`` writes: the canonical dataset, or a LeRobot v3.0 dataset"""


def _postprocess(cfg: IngestConfig, tr: Trajectory) -> Trajectory:
    if cfg.resample_hz is not None:

        tr = resample(tr, rate_hz=cfg.resample_hz)
    if cfg.derivatives:

        tr = add_derivatives(tr, window_s=cfg.derivative_window_s)
    return tr


MIN_SAMPLES = 2
"""samples an ingested episode needs (one time step); fewer are refused, not stored"""


def _check_length(cfg: IngestConfig, raw: Trajectory, tr: Trajectory) -> Trajectory:
    """``tr`` (``raw`` post-processed), refused when it has fewer than :data:`MIN_SAMPLES`
    samples: a one-sample episode has no time step, no rate and nothing any model can use."""
    if len(tr) >= MIN_SAMPLES:
        return tr
    where = tr.meta.source or str(cfg.source)
    if cfg.resample_hz is not None and len(raw) >= MIN_SAMPLES:
        dur = float(raw.duration)
        need = (MIN_SAMPLES - 1) / dur  # the grid holds floor(dur * rate) + 1 samples
        scale = 10.0 ** (math.floor(math.log10(need)) - 2)  # 3 significant digits, rounded up
        raise SchemaError(
            f"{where}: episode {tr.meta.name!r} has {len(tr)} sample(s) after --resample-hz "
            f"{cfg.resample_hz:g} ({len(raw)} before, {dur:.3g} s long); an episode needs at "
            f"least {MIN_SAMPLES}: choose a rate of at least "
            f"{float(f'{math.ceil(need / scale) * scale:.3g}'):g} Hz"
        )
    raise SchemaError(
        f"{where}: episode {tr.meta.name!r} has {len(tr)} sample(s); an episode needs at least "
        f"{MIN_SAMPLES} (one time step): leave out such files (--include) or record longer"
    )


def read_all(cfg: IngestConfig) -> list[Trajectory]:
    """Read (and post-process) every episode cfg selects; no output is written."""
    make = FORMATS.get(cfg.format)
    if cfg.resample_hz is not None and not 0 < cfg.resample_hz <= 100_000:
        raise ConfigError(f"--resample-hz {cfg.resample_hz}; expected a rate in (0, 100000] Hz")
    if not (math.isfinite(cfg.derivative_window_s) and cfg.derivative_window_s > 0):
        raise ConfigError(f"--derivative-window-s {cfg.derivative_window_s}; expected a finite "
                          "window > 0 s")
    items, read = make(cfg)
    if cfg.skip_bad:
        read = _skipping(read)
    trajs: list[Trajectory] = []
    for tr in _progress(items, read, cfg):
        try:
            tr = _check_length(cfg, tr, tr)  # before resampling / derivatives need 2 samples
            trajs.append(_check_length(cfg, tr, _postprocess(cfg, tr)))
        except SchemaError as exc:
            if not cfg.skip_bad:
                raise
            warnings.warn(f"left out (--skip-bad): {exc}", LeftOutEpisode, stacklevel=2)
        if cfg.limit is not None and len(trajs) >= cfg.limit:
            break
    if not trajs:
        raise SchemaError(f"{cfg.source}: no episodes read"
                          + (" (every one left out by --skip-bad)" if cfg.skip_bad else ""))
    return trajs


class LeftOutEpisode(UserWarning):
    """An episode (or file) that ``--skip-bad`` left out, and why."""


def _skipping(read: Callable[[Any], list[Trajectory]]) -> Callable[[Any], list[Trajectory]]:
    """``read`` that warns about an item it cannot read and returns no episode for it."""

    def safe(item: Any) -> list[Trajectory]:
        try:
            return list(read(item))
        except SchemaError as exc:
            warnings.warn(f"left out (--skip-bad): {exc}", LeftOutEpisode, stacklevel=2)
            return []

    return safe


def _progress(items: list[Any], read: Callable[[Any], list[Trajectory]], cfg: IngestConfig):
    if cfg.quiet:
        for it in items:
            yield from read(it)
        return
    from neuract.progress import reporter

    stage = f"ingest {cfg.format} (files)"
    with reporter() as progress:
        progress(stage, 0, len(items))
        for i, it in enumerate(items):
            yield from read(it)
            progress(stage, i + 1, len(items))


def summarize(trajs: list[Trajectory]) -> dict[str, Any]:
    """Totals shown in the summary table."""
    import numpy as np

    rates = [t.meta.rate_hz for t in trajs if t.meta.rate_hz]
    counts: dict[str, int] = {}
    for t in trajs:
        for k, v in t.meta.counts.items():
            counts[k] = counts.get(k, 0) + v
    channels: list[str] = []
    labels: list[str] = []
    for t in trajs:
        channels += [c for c in t.channels if c not in channels]
        labels += [k for k in t.meta.labels if k not in labels]
    return {
        "robot": trajs[0].meta.robot,
        "joints": list(trajs[0].meta.joint_names),
        "episodes": len(trajs),
        "samples": int(sum(len(t) for t in trajs)),
        "duration_s": float(sum(t.duration for t in trajs)),
        "rate_hz": (min(rates), float(np.median(rates)), max(rates)) if rates else None,
        "channels": channels,
        "labels": labels,
        "dropped_samples": counts.get("dropped_samples", 0),
        "masked_samples": counts.get("masked_samples", 0),
    }


def _print_summary(s: dict[str, Any], out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"neuract ingest -> {out}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    rate = s["rate_hz"]
    rows = [
        ("robot", f"{s['robot']} ({len(s['joints'])} joints: {', '.join(s['joints'])})"),
        ("episodes", str(s["episodes"])),
        ("samples", str(s["samples"])),
        ("duration", f"{s['duration_s']:.1f} s ({s['duration_s'] / 60:.1f} min)"),
        (
            "rate",
            f"{rate[1]:.2f} Hz (min {rate[0]:.2f}, max {rate[2]:.2f})" if rate else "-",
        ),
        ("channels", ", ".join(s["channels"])),
        ("labels", ", ".join(s["labels"]) or "-"),
        ("dropped samples", str(s["dropped_samples"])),
        ("masked samples", str(s["masked_samples"])),
    ]
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)


def run(cfg: IngestConfig) -> dict[str, Any]:
    """Ingest; returns the summary (also printed unless ``cfg.quiet``)."""

    FORMATS.get(cfg.format)  # unknown format: fail before reading anything
    if cfg.out_format not in OUT_FORMATS:
        raise ConfigError(f"--out-format {cfg.out_format!r}; accepted: {', '.join(OUT_FORMATS)}")
    if cfg.limit is not None and not (isinstance(cfg.limit, int) and cfg.limit >= 1):
        raise ConfigError(f"--limit {cfg.limit!r}; expected a number of episodes >= 1 (leave "
                          "it out to read every episode)")
    # a name neuract does not know is a typo; an arm of its own is given as its MJCF/URDF file
    # (as simulate and adapt resolve it), or named in a CSV column mapping's "robot" field
    if cfg.robot is not None and not Path(cfg.robot).is_file():

        try:
            check_robot_name(cfg.robot)
        except ConfigError as exc:
            raise ConfigError(f"{exc}, or the path of the arm's MJCF/URDF file (with --format "
                              'csv, any name in the column mapping\'s "robot" field)') from None
    if cfg.calibration is not None and not Path(cfg.calibration).is_file():
        raise ConfigError(f"--calibration {str(cfg.calibration)!r}: file not found; expected a "
                          "LeRobot calibration JSON file")
    dest = LEROBOT_DEST if cfg.out_format == "lerobot" else DATASET_DEST
    check_dest(cfg.out, cfg.overwrite, inputs=(cfg.source, cfg.mapping, cfg.calibration),
               **dest)  # before reading anything
    with warnings.catch_warnings():
        if cfg.quiet:  # the readers' notes; what --skip-bad leaves out is always said
            warnings.simplefilter("ignore")
            warnings.simplefilter("always", LeftOutEpisode)
        trajs = read_all(cfg)
    robots = {(t.meta.robot, t.meta.joint_names) for t in trajs}
    if len(robots) > 1:
        found = sorted(f"{r} ({len(j)} joints: {', '.join(j)})" for r, j in robots)
        forced = f" (--robot {cfg.robot!r} was applied to all of them)" if cfg.robot else ""
        raise SchemaError(
            f"{cfg.source}: episodes of several robots found{forced}: {'; '.join(found)}. "
            "One dataset holds one robot: select files with --include (e.g. 'so101/*')"
        )
    if cfg.out_format == "lerobot":
        write_lerobot(trajs, cfg.out, overwrite=cfg.overwrite)
    else:
        write_dataset(trajs, cfg.out, overwrite=cfg.overwrite, config=cfg)
    summary = summarize(trajs)
    if not cfg.quiet:
        _print_summary(summary, cfg.out)
    return summary


__all__ = ["FORMATS", "OUT_FORMATS", "IngestConfig", "LeftOutEpisode", "read_all", "run",
           "summarize"]
