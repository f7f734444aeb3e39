"""``neuract estimate``: stream telemetry through an estimator-mode checkpoint.

    neuract estimate --checkpoint runs/demo/checkpoints/neuralactuator_estimator \\
        --data ../shared/data/nad/so101/go_up_and_stay_still/500g/test/001.csv --out runs/est

It streams every episode through the checkpoint and writes one parquet file per episode:
per step torque [N m] per joint, end-effector force [N], contact gate probability and
per-motor degraded probability (estimator mode throughout), and ``summary.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from rich.console import Console
from rich.table import Table

from neuract.atomic import atomic_dir, write_json
from neuract.errors import ConfigError
from neuract.estimate import estimate
from neuract.estimate.filters import resolve_filters
from neuract.estimate.neural import stream_trajectory
from neuract.pipeline.progress import reporter
from neuract.pipeline.streaming import ESTIMATE_DEST, check_out, checkpoint_and_episodes
from neuract.record.config import RecordConfig


@dataclass
class EstimateConfig:
    """Stream telemetry through an estimator-mode NeuralActuator checkpoint."""

    checkpoint: Path
    """estimator-mode checkpoint directory (model.safetensors + config.json)"""
    data: Path = Path("")
    """a neuract dataset directory, or a NAD CSV file / folder (not with --live)"""
    out: Path = Path("runs/estimate")
    """output directory: one parquet file per episode + summary.json (all or nothing)"""
    condition_tau_s: float | None = None
    """time constant of the causal smoothing of the condition output [s] (default: the one
    chosen with the checkpoint's calibration, else 5 s)"""
    stream: bool = False
    """feed each episode to the estimator one sample at a time, as on a running robot
    (``neuract.neuralactuator.StreamingEstimator``; the same outputs as the default
    whole-episode pass)"""
    overwrite: bool = False
    """replace an existing --out directory"""
    quiet: bool = False
    live: bool = False
    """estimate on the live bus (the options under --bus.*, as neuract record's): a live table
    of torque, force, contact and condition per sample; the estimates written to --out episode
    by episode, the telemetry to --bus.out"""
    bus: RecordConfig = field(default_factory=lambda: RecordConfig(out=Path("runs/live_record")))
    """with --live: the bus and the recording (neuract record's options)"""


def estimates_table(model, traj, out: dict):
    """A pyarrow table of per-step estimates (columns named by joint; with a fixed-lag gate
    also ``contact_decided_t``, when each contact decision was made)."""
    cols: dict[str, Any] = {"t": np.asarray(traj["t"], dtype=np.float64),
                            "valid": out["valid"]}
    for j, name in enumerate(traj.meta.joint_names):
        cols[f"tau.{name}"] = out["tau"][:, j]
    for a, axis in enumerate("xyz"):
        cols[f"ee_force.{axis}"] = out["ee_force"][:, a]
    cols["contact_prob"] = out["contact_prob"]
    if getattr(model.cfg, "gate_lag", 0):  # a fixed-lag gate decides each sample later
        cols["contact_decided_t"] = out["contact_decided_t"]
    for j, name in enumerate(traj.meta.joint_names):
        cols[f"degraded_prob.{name}"] = out["condition_prob_joint"][:, j]
    cols["degraded_prob"] = out["condition_prob"]
    return pa.table(cols)


def run_estimate(cfg: EstimateConfig) -> dict[str, Any]:
    if cfg.live:
        from neuract.pipeline.estimate_live import run_live
        return run_live(cfg)
    if not str(cfg.data) or str(cfg.data) == ".":
        raise ConfigError("--data is missing; expected a neuract dataset directory or NAD "
                          "CSV file / folder (or --live to estimate on a servo bus)")
    torch.set_num_threads(1)
    out_dir = Path(cfg.out)
    check_out(out_dir, cfg.overwrite, (cfg.checkpoint, cfg.data), mode="estimator")
    model, trajs = checkpoint_and_episodes(cfg.checkpoint, cfg.data, "estimator", "estimates")
    resolve_filters(model, cfg.condition_tau_s)  # bad options fail before any work
    summary = {"mode": "estimator", "checkpoint": str(cfg.checkpoint), "episodes": []}
    stage = "estimate (episodes)"
    with reporter(cfg.quiet) as progress, \
            atomic_dir(out_dir, overwrite=cfg.overwrite, **ESTIMATE_DEST) as tmp_dir:
        progress(stage, 0, len(trajs))
        for i, tr in enumerate(trajs):
            summary["episodes"].append(_estimate_episode(model, tr, cfg, tmp_dir))
            progress(stage, i + 1, len(trajs))
        write_json(tmp_dir / "summary.json", summary)
    if not cfg.quiet:
        t = Table(title=f"NeuralActuator estimates (estimator mode) -> {out_dir}")
        for c in ("episode", "samples", "contact share", "degraded prob."):
            t.add_column(c)
        for e in summary["episodes"]:
            t.add_row(e["episode"], str(e["samples"]), f"{e['contact_share']:.2f}",
                      f"{e['degraded_prob_final']:.2f}")
        Console().print(t)
    return summary


def _estimate_episode(model, tr, cfg: EstimateConfig, out_dir: Path) -> dict[str, Any]:
    """One episode's estimates as a parquet file in ``out_dir``; returns its summary row."""
    if cfg.stream:
        est = stream_trajectory(model, tr, condition_tau_s=cfg.condition_tau_s)
    else:
        est = estimate(model, tr, condition_tau_s=cfg.condition_tau_s)
    name = tr.meta.name.replace("/", "__") or "episode"
    path = out_dir / f"{name}.parquet"
    pq.write_table(estimates_table(model, tr, est), path)  # inside the run's temporary dir
    v = est["valid"]
    return {"episode": tr.meta.name, "file": path.name, "samples": int(len(tr)),
            "mean_abs_tau": dict(zip(tr.meta.joint_names,
                                     abs(est["tau"][v]).mean(0).round(4).tolist())),
            "contact_share": float((est["contact_prob"][v] >= 0.5).mean()),
            "degraded_prob_final": float(est["condition_prob"][-1])}


def run(cfg: EstimateConfig) -> dict[str, Any]:
    return run_estimate(cfg)


__all__ = ["EstimateConfig", "estimates_table", "run", "run_estimate"]
