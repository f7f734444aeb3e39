"""``neuract fit``: identify an actuator (+ joint parameters) from recorded runs, positions only.

    neuract fit --data ../shared/data/kscale_sts3215_12v/raw.tgz --actuator.type sts3215 \\
        --actuator.friction m1 --actuator.delay 0.03 --out runs/sts3215_m1

Writes into ``--out``: ``model.safetensors`` (best-validation weights), ``config.json`` (the
resolved config: rerun with it), ``report.json`` + ``report.md`` (fitted parameters, train and
validation open-loop MAE, learning curve) and ``checkpoint/`` (resumable: rerunning the same
command after a kill continues where the last checkpoint left off).

The checkpoint records the run key (:func:`neuract.fit.identify.fit_run_key`: actuator, joint
and training options, --robot, --val-fraction, --limit, --duration and a fingerprint of the
data). A rerun into the same --out whose key differs stops before touching anything, naming
each differing option with its old and new value: rerun with the original options (kept in
``config.json``), or pass --overwrite to start afresh, or choose another --out. Options that do
not change the result (--out, --threads, --train.checkpoint-every, the --data path of the same
data) may differ on resume.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from neuract.actuators import ActuatorConfig
from neuract.atomic import is_output, write_json, write_text
from neuract.config import check_rerun, save_resolved
from neuract.errors import ConfigError
from neuract.fit.batch import batch_from_trajectories
from neuract.fit.checkpoint import check_run_key, read_training_state, save_weights
from neuract.fit.identify import (
    build_model,
    fit_run_key,
    identify,
    load_runs,
    plant_factory,
)
from neuract.fit.simulate import JointParamsConfig
from neuract.fit.trainer import TrainConfig


@dataclass
class FitConfig:
    """Fit an actuator model to recorded runs by differentiable simulation (positions only)."""

    data: str
    """dataset directory, directory of BAM *.json logs, or a .tgz of them"""
    out: str = "runs/fit"
    """output directory (checkpoint, resolved config, report)"""
    actuator: ActuatorConfig = field(default_factory=ActuatorConfig)
    joints: JointParamsConfig = field(default_factory=JointParamsConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    robot: str = "pendulum"
    """'pendulum' (bench: one plant per run from its mass/length labels) or a robot name/path"""
    val_fraction: float = 0.1
    """fraction of runs held out for validation / early stopping (split by run, train.seed)"""
    limit: int = 0
    """use at most this many runs (0 = all)"""
    duration: float = 0.0
    """simulate at most this many seconds of each run (0 = whole runs)"""
    threads: int = 1
    """torch CPU threads"""
    overwrite: bool = False
    """start afresh even if --out holds a checkpoint"""


OUTPUTS = ("model.safetensors", "report.json", "report.md")
"""what a completed fit writes into --out beside config.json and checkpoint/"""
DEST = {"marker": "config.json", "kind": lambda j: j.get("type") == "FitConfig"}
"""what makes a directory an earlier output of this verb (``--overwrite`` discards only such a
directory's model and report)"""


def _markdown(report: dict) -> str:
    lines = ["# neuract fit report", "",
             f"- train open-loop MAE: {report['train_mae_rad']:.5f} rad "
             f"({report['n_train_runs']} runs)"]
    if report.get("val_mae_rad") is not None:
        lines.append(f"- validation open-loop MAE: {report['val_mae_rad']:.5f} rad "
                     f"({report['n_val_runs']} runs)")
    lines += [f"- fit time: {report.get('fit_seconds', 0.0):.1f} s, iterations: "
              f"{report['iteration']}, best at {report['best_iteration']}", "",
              "| parameter | value |", "|---|---|"]
    lines += [f"| {k} | {v if isinstance(v, list) else f'{v:.6g}'} |"
              for k, v in report["parameters"].items()]
    return "\n".join(lines) + "\n"


def run(cfg: FitConfig) -> dict:
    if not cfg.data:
        raise ConfigError("--data is required (dataset dir, BAM logs dir or .tgz)")
    if not (math.isfinite(cfg.duration) and cfg.duration >= 0):
        raise ConfigError(f"--duration {cfg.duration!r}; expected seconds >= 0 (0: whole runs)")
    if not (isinstance(cfg.limit, int) and cfg.limit >= 0):
        raise ConfigError(f"--limit {cfg.limit!r}; expected a number of runs >= 0 (0: all)")
    if not 0 <= cfg.val_fraction < 1:
        raise ConfigError(f"--val-fraction {cfg.val_fraction!r}; expected 0 <= share < 1")
    torch.set_num_threads(max(1, cfg.threads))
    out = Path(cfg.out)
    ckpt = out / "checkpoint"
    runs = load_runs(cfg.data, cfg.limit)
    batch = batch_from_trajectories(runs, duration=cfg.duration or None)
    key = fit_run_key(batch, cfg.actuator, cfg.joints, cfg.train, cfg.robot, cfg.val_fraction,
                      limit=cfg.limit, duration=cfg.duration)
    hints = {"resume_hint": f"rerun with the original options and data (options kept in "
                            f"{str(out / 'config.json')!r})",
             "restart_hint": f"pass --overwrite (discards its checkpoint) or choose another "
                             f"--out than {str(out)!r}"}
    last = ckpt / "last.safetensors"
    # every option that can be refused, before anything of an earlier run is removed
    cfg.train.validate()
    build_model(cfg.actuator, cfg.joints, batch.q.shape[-1])
    plant_factory(cfg.robot)
    if cfg.overwrite:  # afresh: an interrupted run must not leave the old model and report
        old = [out / name for name in OUTPUTS if (out / name).exists()]
        if old and not is_output(out, **DEST):
            raise ConfigError(f"--out {str(out)!r} holds {', '.join(p.name for p in old)} but "
                              "is not a fit's output (no fit config.json); --overwrite replaces "
                              "only an earlier fit: choose another --out")
        for f in [*ckpt.glob("*.safetensors"), *old]:
            f.unlink()
    elif last.is_file():  # refuse another run's checkpoint before config.json is rewritten
        check_run_key(last, read_training_state(last), key, **hints)
    elif any((out / name).exists() for name in OUTPUTS):  # a finished run, its state gone
        check_rerun(cfg, out, restart=f"Pass --overwrite (discards that run) or choose another "
                                      f"--out than {str(out)!r}")
    out.mkdir(parents=True, exist_ok=True)
    save_resolved(cfg, out)
    print(f"neuract fit: {len(batch)} runs, {batch.q.shape[1]} steps of {batch.dt:.4f} s, "
          f"actuator {cfg.actuator.type} (friction {cfg.actuator.friction})")
    model, report = identify(batch, cfg.actuator, cfg.joints, cfg.train, cfg.robot,
                             cfg.val_fraction, ckpt_dir=ckpt, log=print, run_key=key, **hints)
    save_weights(model, out / "model.safetensors",
                 {"actuator": cfg.actuator.type, "val_mae_rad": report.get("val_mae_rad")})
    report = {k: v for k, v in report.items() if k != "history"} | {
        "learning_curve": report.get("history", [])}
    write_json(out / "report.json", json.loads(json.dumps(report, default=float)))
    write_text(out / "report.md", _markdown(report))
    val = report["val_mae_rad"]
    val_s = "n/a" if val is None else f"{val:.5f} rad"
    print(f"neuract fit: train MAE {report['train_mae_rad']:.5f} rad, validation MAE {val_s}"
          f" -> {out}")
    return report
