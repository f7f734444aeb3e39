"""``neuract simulate``: replay recorded commands open loop through a learned simulator.

    neuract simulate --checkpoint runs/demo/checkpoints/neuralactuator_simulator \\
        --data ../shared/data/nad/so101/go_up_and_stay_still/500g/test/001.csv --out runs/sim

Simulator mode throughout: each episode starts from its measured state (and the measured
``history``-sample past the model reads); afterwards only the commands (and the supply
voltage, a known input) enter, exactly as in the rollout protocol's full-trajectory horizon.
Writes one parquet file per episode (``t``, ``q_sim.<joint>`` [rad], and the measured
``q.<joint>`` beside it) and ``summary.json`` with each episode's open-loop joint MAE [deg],
all or nothing (an existing ``--out`` is replaced only with ``--overwrite``).
"""

from __future__ import annotations

from dataclasses import dataclass
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
from neuract.eval.protocol import simulate_full
from neuract.neuralactuator import simulator
from neuract.pipeline.streaming import (
    SIMULATE_DEST,
    check_out,
    checkpoint_and_episodes,
    resolve_robot,
)


@dataclass
class SimulateConfig:
    """Replay recorded commands open loop through a simulator-mode NeuralActuator checkpoint."""

    checkpoint: Path
    """simulator-mode checkpoint directory (model.safetensors + config.json)"""
    data: Path
    """episodes whose commands are replayed: a neuract dataset directory, or a NAD CSV file /
    folder"""
    out: Path = Path("runs/simulate")
    """output directory: one parquet file per episode + summary.json"""
    robot: str = ""
    """arm model (bundled name or MJCF/URDF path); empty: from the episodes (so101, omx)"""
    substeps: int = 2
    """physics steps per telemetry step"""
    overwrite: bool = False
    """replace an existing --out directory"""
    quiet: bool = False


def run_simulate(cfg: SimulateConfig) -> dict[str, Any]:
    torch.set_num_threads(1)
    if cfg.substeps < 1:
        raise ConfigError(f"--substeps {cfg.substeps}; expected >= 1")
    out_dir = Path(cfg.out)
    check_out(out_dir, cfg.overwrite, (cfg.checkpoint, cfg.data, cfg.robot), mode="simulator")
    model, trajs = checkpoint_and_episodes(cfg.checkpoint, cfg.data, "simulator",
                                           "open-loop simulations")
    h = model.cfg.history
    summary: dict[str, Any] = {"mode": "simulator", "checkpoint": str(cfg.checkpoint),
                               "prior": model.cfg.prior, "episodes": []}
    robot, _ = resolve_robot(cfg.robot, model, trajs)
    sim = simulator(model, robot, cfg.substeps)
    with atomic_dir(out_dir, overwrite=cfg.overwrite, **SIMULATE_DEST) as tmp_dir:
        _simulate_all(sim, trajs, h, tmp_dir, summary)
        write_json(tmp_dir / "summary.json", summary)
    if not cfg.quiet:
        t = Table(title=f"NeuralActuator open-loop simulation (simulator mode) -> {out_dir}")
        for c in ("episode", "samples", "joint MAE (deg), mean of all joints"):
            t.add_column(c)
        for e in summary["episodes"]:
            t.add_row(e["episode"], str(e["samples"]), f"{e['mean_mae_deg']:.3f}")
        Console().print(t)
    return summary


def _simulate_all(sim, trajs, h: int, out_dir: Path, summary: dict[str, Any]) -> None:
    """One parquet file per episode in ``out_dir``; each episode's errors into ``summary``."""
    for tr in trajs:
        inputs = ("q_goal", "voltage") if "voltage" in tr else ("q_goal",)
        q_sim = simulate_full(sim, tr, "NeuralActuator", inputs=inputs, history=h)
        q = np.asarray(tr["q"], dtype=np.float64)
        cols: dict[str, Any] = {"t": np.asarray(tr["t"], dtype=np.float64)}
        for j, name in enumerate(tr.meta.joint_names):
            cols[f"q_sim.{name}"] = q_sim[:, j]
            cols[f"q.{name}"] = q[:, j]
        name = tr.meta.name.replace("/", "__") or "episode"
        path = out_dir / f"{name}.parquet"
        pq.write_table(pa.table(cols), path)  # inside the run's temporary directory
        err = np.degrees(np.abs(q_sim[h:] - q[h:])).mean(0)
        summary["episodes"].append({
            "episode": tr.meta.name, "file": path.name, "samples": int(len(tr)),
            "first_simulated_sample": h, "joint_mae_deg": dict(zip(
                tr.meta.joint_names, err.round(4).tolist())),
            "mean_mae_deg": float(err.mean())})


def run(cfg: SimulateConfig) -> dict[str, Any]:
    return run_simulate(cfg)


__all__ = ["SimulateConfig", "run", "run_simulate"]
