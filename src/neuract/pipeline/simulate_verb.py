"""``neuract simulate``: replay recorded commands open loop through a learned simulator.

    neuract simulate --checkpoint runs/demo/checkpoints/neuralactuator_simulator \\
        --data ../shared/data/nad/so101/go_up_and_stay_still/500g/test/001.csv --out runs/sim
    neuract simulate --checkpoint runs/fit_so101 --data runs/nad_so101 --out runs/sim_fit

``--checkpoint`` is a simulator-mode NeuralActuator checkpoint, a ``neuract fit`` output
directory (a parametric servo or actuator net and its joint parameters, simulated on the robot
it was fitted on by :func:`neuract.sim.simulate.simulate` in float64, from each episode's
first measured sample; a fit on the bench pendulum runs each episode on the pendulum its
``mass`` and ``length`` labels describe, with the labels it reads, e.g. ``kp``) or a baseline
checkpoint ``neuract evaluate`` saved (``checkpoints/baseline_<name>/``: a fitted baseline is
a fit output; the MuJoCo servo runs in MuJoCo with its saved parameters).

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
from neuract.data.dataset import require_channels
from neuract.errors import ConfigError
from neuract.eval.protocol import simulate_full
from neuract.fit.saved import is_fit_output
from neuract.neuralactuator import simulator
from neuract.pipeline.baseline_checkpoints import is_mujoco_servo
from neuract.pipeline.progress import no_progress, reporter
from neuract.pipeline.score import (
    arm_joints,
    check_model_data,
    load_scorable,
    read_episodes,
    rollouts,
)
from neuract.pipeline.streaming import (
    SIMULATE_DEST,
    check_out,
    checkpoint_and_episodes,
    read_telemetry,
    resolve_robot,
)
from neuract.robot.match import check_arm


@dataclass
class SimulateConfig:
    """Replay recorded commands open loop through a simulator-mode NeuralActuator checkpoint."""

    checkpoint: Path
    """simulator-mode NeuralActuator checkpoint directory (model.safetensors + config.json),
    a neuract fit output directory, or a baseline checkpoint neuract evaluate saved
    (checkpoints/baseline_<name>)"""
    data: Path
    """episodes whose commands are replayed: a neuract dataset directory, or a NAD CSV file /
    folder (a pendulum fit: BAM logs too)"""
    out: Path = Path("runs/simulate")
    """output directory: one parquet file per episode + summary.json"""
    robot: str = ""
    """arm model (bundled name or MJCF/URDF path); empty: from the episodes (so101, omx)"""
    force_robot: bool = False
    """use a bundled --robot on episodes recorded on another arm (refused otherwise)"""
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
    if is_fit_output(cfg.checkpoint):
        return _simulate_fit(cfg, out_dir)
    if is_mujoco_servo(cfg.checkpoint):
        return _simulate_mujoco(cfg, out_dir)
    model, trajs = checkpoint_and_episodes(cfg.checkpoint, cfg.data, "simulator",
                                           "open-loop simulations")
    h = model.cfg.history
    summary: dict[str, Any] = {"mode": "simulator", "checkpoint": str(cfg.checkpoint),
                               "prior": model.cfg.prior, "episodes": []}
    robot, _ = resolve_robot(cfg.robot, model, trajs, force=cfg.force_robot,
                             data=f"--data {str(cfg.data)!r}")
    steps = _Steps(trajs, h)
    sim = simulator(model, robot, cfg.substeps, progress=steps)
    return _write(cfg, out_dir, sim, trajs, h, summary, steps)


FIT_CHANNELS = ("t", "q", "q_goal")
"""what a ``neuract fit`` model replays: the commands from each episode's measured start"""


def _simulate_fit(cfg: SimulateConfig, out_dir: Path) -> dict[str, Any]:
    """A ``neuract fit`` output's model, open loop on the episodes' commands."""
    from neuract.eval.adapters import system_model_simulator
    from neuract.fit.identify import plant_factory
    from neuract.fit.saved import load_fit

    fm = load_fit(cfg.checkpoint)
    robot = cfg.robot or fm.robot
    if fm.robot == "pendulum":
        return _simulate_pendulum_fit(cfg, out_dir, fm)
    trajs = read_telemetry(cfg.data)
    require_channels(trajs, FIT_CHANNELS, cfg.data,
                     f"the fitted model --checkpoint {str(cfg.checkpoint)!r}")
    for tr in trajs:
        if len(tr.meta.joint_names) != fm.n_dof:
            raise ConfigError(f"episode {tr.meta.name!r} has {len(tr.meta.joint_names)} "
                              f"joints; the fitted model {str(cfg.checkpoint)!r} has "
                              f"{fm.n_dof}")
    plant = plant_factory(robot)
    if cfg.robot:  # the arm given against the episodes' (its own joints checked above)
        check_arm(robot, plant([]).joint_names, list(trajs[0].meta.joint_names),
                  f"--data {str(cfg.data)!r}", trajs[0].meta.robot, cfg.force_robot)
    summary: dict[str, Any] = {"mode": "simulator", "checkpoint": str(cfg.checkpoint),
                               "model": "fit", "actuator": fm.config.actuator.type,
                               "robot": robot, "episodes": []}
    steps = _Steps(trajs, 1)
    sims = {v: system_model_simulator(fm.system, plant, cfg.substeps, use_voltage=v,
                                      progress=steps)
            for v in (False, True)}
    return _write(cfg, out_dir, sims, trajs, 1, summary, steps)


def _simulate_pendulum_fit(cfg: SimulateConfig, out_dir: Path, fm) -> dict[str, Any]:
    """A fit on the bench pendulum: each episode on the pendulum of its labels (mass,
    length, arm_mass), with the labels the model reads (e.g. the firmware kp), on the
    episodes' uniform grid, as ``neuract fit`` validates and ``neuract score`` scores it
    (the parquet files hold the grid's times)."""
    model = load_scorable(cfg.checkpoint, option="--checkpoint")
    trajs = read_episodes(cfg.data)
    summary: dict[str, Any] = {"mode": "simulator", "checkpoint": str(cfg.checkpoint),
                               "model": "fit", "actuator": fm.config.actuator.type,
                               "robot": "pendulum", "grid": "uniform", "episodes": []}
    with reporter(cfg.quiet) as progress, \
            atomic_dir(out_dir, overwrite=cfg.overwrite, **SIMULATE_DEST) as tmp_dir:
        stage = f"simulate {len(trajs)} episode(s), batched"
        rolls = rollouts(model, trajs, str(cfg.data), cfg.robot, cfg.force_robot,
                         cfg.substeps, lambda k, n: progress(stage, k, n))
        for r in rolls:
            cols: dict[str, Any] = {"t": r.t}
            names = list(trajs[0].meta.joint_names)
            for j, name in enumerate(names):
                cols[f"q_sim.{name}"] = r.q_sim[:, j]
                cols[f"q.{name}"] = r.q[:, j]
            path = tmp_dir / f"{r.name.replace('/', '__') or 'episode'}.parquet"
            pq.write_table(pa.table(cols), path)
            err = np.where(r.scored, np.abs(r.q_sim - r.q), 0.0).sum(0) / np.maximum(
                r.scored.sum(0), 1)
            err = np.degrees(err)
            summary["episodes"].append({
                "episode": r.name, "file": path.name, "samples": int(len(r.t)),
                "first_simulated_sample": 1,
                "joint_mae_deg": dict(zip(names, err.round(4).tolist())),
                "mean_mae_deg": float(err.mean())})
        write_json(tmp_dir / "summary.json", summary)
    _table(cfg, out_dir, summary)
    return summary


def _simulate_mujoco(cfg: SimulateConfig, out_dir: Path) -> dict[str, Any]:
    """A saved MuJoCo servo baseline, in MuJoCo with its parameters."""
    model = load_scorable(cfg.checkpoint, option="--checkpoint")
    trajs = read_telemetry(cfg.data)
    require_channels(trajs, FIT_CHANNELS, cfg.data,
                     f"the MuJoCo servo --checkpoint {str(cfg.checkpoint)!r}")
    check_model_data(model, trajs, str(cfg.data), cfg.robot, cfg.force_robot)
    trajs = arm_joints(model, trajs)
    summary: dict[str, Any] = {"mode": "simulator", "checkpoint": str(cfg.checkpoint),
                               "model": "mujoco_servo", "robot": model.robot, "episodes": []}
    steps = _Steps(trajs, 1)
    return _write(cfg, out_dir, model.obj.simulator(), trajs, 1, summary, steps)


class _Steps:
    """The run's progress in simulated samples over all its episodes (one stage, so that
    its ETA spans the run): the simulators call it after each step of an episode."""

    def __init__(self, trajs, h: int):
        self.first = max(h - 1, 0)  # the measured samples an episode starts from
        self.total = sum(max(len(tr) - 1 - self.first, 0) for tr in trajs)
        self.stage = f"simulate {len(trajs)} episode(s), samples"
        self.base, self.report = 0, no_progress

    def __call__(self, k: int, n: int) -> None:
        self.report(self.stage, self.base + k, self.total)

    def episode_done(self, tr) -> None:
        self.base += max(len(tr) - 1 - self.first, 0)


def _write(cfg: SimulateConfig, out_dir: Path, sim, trajs, h: int,
           summary: dict[str, Any], steps: _Steps) -> dict[str, Any]:
    with reporter(cfg.quiet) as progress, \
            atomic_dir(out_dir, overwrite=cfg.overwrite, **SIMULATE_DEST) as tmp_dir:
        steps.report = progress
        steps(0, 0)  # the start: a first line before the first episode's long rollout
        _simulate_all(sim, trajs, h, tmp_dir, summary, steps)
        write_json(tmp_dir / "summary.json", summary)
    _table(cfg, out_dir, summary)
    return summary


def _table(cfg: SimulateConfig, out_dir: Path, summary: dict[str, Any]) -> None:
    if not cfg.quiet:
        what = {"fit": "neuract fit model", "mujoco_servo": "MuJoCo servo"}.get(
            summary.get("model", ""), "NeuralActuator (simulator mode)")
        t = Table(title=f"{what}: open-loop simulation -> {out_dir}")
        for c in ("episode", "samples", "joint MAE (deg), mean of all joints"):
            t.add_column(c)
        for e in summary["episodes"]:
            t.add_row(e["episode"], str(e["samples"]), f"{e['mean_mae_deg']:.3f}")
        Console().print(t)


def _simulate_all(sim, trajs, h: int, out_dir: Path, summary: dict[str, Any],
                  steps: _Steps) -> None:
    """One parquet file per episode in ``out_dir``; each episode's errors into ``summary``."""
    for tr in trajs:
        volt = "voltage" in tr
        inputs = ("q_goal", "voltage") if volt else ("q_goal",)
        run = sim[volt] if isinstance(sim, dict) else sim  # a fit's: with or without voltage
        q_sim = simulate_full(run, tr, "NeuralActuator", inputs=inputs, history=h)
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
        steps.episode_done(tr)


def run(cfg: SimulateConfig) -> dict[str, Any]:
    return run_simulate(cfg)


__all__ = ["SimulateConfig", "run", "run_simulate"]
