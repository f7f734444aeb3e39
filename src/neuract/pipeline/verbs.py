"""``neuract evaluate`` and ``neuract estimate``.

    neuract evaluate --source twin --out runs/eval_twin            # generate, fit, score
    neuract evaluate --source nad --nad ../shared/data/nad --out runs/eval_nad
    neuract evaluate --source nad --robot omx --twin-pretrain.minutes 72   # + sim-to-real
    neuract evaluate --source dataset --data runs/twin_so101 --out runs/eval_ds \
        --checkpoints runs/demo/checkpoints                        # score trained models
    neuract estimate --checkpoint runs/demo/checkpoints/neuralactuator_estimator \
        --data ../shared/data/nad/so101/go_up_and_stay_still/500g/test/001.csv --out runs/est

``evaluate`` writes ``report.md`` / ``report.html`` (tables, rollout plot, force traces,
confusion matrix), ``results.json`` and the resolved config into the run directory.
``estimate`` streams every episode through an estimator-mode checkpoint and writes one
parquet file per episode: per step torque [N m] per joint, end-effector force [N], contact
gate probability and per-motor degraded probability (estimator mode throughout).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuract.errors import ConfigError, SchemaError
from neuract.pipeline.experiment import ExperimentConfig
from neuract.pipeline.nad_experiment import TwinPretrainConfig
from neuract.pipeline.twin_experiment import TwinDataConfig


@dataclass
class EvaluateConfig:
    """Fit (or load) NeuralActuator and the baselines, score them, write a report."""

    source: str = "twin"
    """twin (generate twin data), nad (NAD CSV files) or dataset (a neuract dataset)"""
    out: Path = Path("runs/evaluate")
    """run directory"""
    data: Path | None = None
    """dataset: dataset directory (episodes labelled split=test are the test set, else 25 %
    of each task's episodes)"""
    nad: Path = Path("../shared/data/nad")
    """nad: NAD root"""
    robot: str = "so101"
    """nad: whose files (so101 or omx); a dataset names its own robot"""
    twin: TwinDataConfig = field(default_factory=TwinDataConfig)
    """twin: data to generate"""
    checkpoints: Path | None = None
    """directory with neuralactuator_simulator/ and/or neuralactuator_estimator/ checkpoints
    to evaluate instead of training those modes (e.g. runs/demo/checkpoints), or one
    checkpoint directory (e.g. from neuract adapt), used for its own mode"""
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    twin_pretrain: TwinPretrainConfig = field(default_factory=TwinPretrainConfig)
    """nad: also an estimator pretrained on the robot's twin, then fine-tuned on the train
    files, scored beside the others (off by default: minutes 0; the NAD benchmark uses 72)"""
    quiet: bool = False
    """no progress bars and no closing summary"""


def progress_bar(quiet: bool):
    """(rich Progress, progress(stage, done, total) callback): one bar per stage, on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                   TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                   console=Console(stderr=True, quiet=quiet), disable=quiet)
    tasks: dict[str, int] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=max(total, 1))
        bar.update(tasks[stage], completed=done, total=max(total, 1))

    return bar, progress


CALIBRATED = ("condition_threshold", "gate_threshold", "condition_tau_s", "gate_tau_s",
              "gate_release")
"""the calibrated decisions a checkpoint's ``extra`` may hold (model attributes once loaded)"""


def calibrated(model) -> dict[str, Any]:
    """The model's calibrated decisions (:data:`CALIBRATED` attributes that are set), as a
    checkpoint's ``extra`` stores them (a per-motor threshold as a list)."""
    return {k: list(v) if isinstance(v, tuple) else v
            for k in CALIBRATED if (v := getattr(model, k, None)) is not None}


def load_model(ckpt: Path):
    """A checkpoint with its calibrated condition and gate thresholds (``extra``)."""
    from neuract.neuralactuator import load_checkpoint, read_config

    model = load_checkpoint(ckpt)
    extra = read_config(ckpt)[1].get("extra") or {}
    for k in CALIBRATED:
        v = extra.get(k)
        if v is not None:  # a condition threshold may be one per motor
            setattr(model, k, tuple(float(x) for x in v) if isinstance(v, list) else float(v))
    return model


def load_pretrained(path: Path | None) -> dict[str, Any]:
    """{mode: model} from ``--checkpoints``: a directory holding ``neuralactuator_simulator/``
    and/or ``neuralactuator_estimator/``, or one checkpoint directory itself (e.g. what
    ``neuract adapt`` writes), filed under its own mode."""
    if path is None:
        return {}
    path = Path(path)
    from neuract.atomic import is_output
    from neuract.neuralactuator.checkpoint import CHECKPOINT_DEST

    if is_output(path, **CHECKPOINT_DEST):  # a single checkpoint
        model = load_model(path)
        return {model.cfg.mode: model}
    if (path / "checkpoints").is_dir():  # a run directory (demo, evaluate)
        path = path / "checkpoints"
    out = {}
    for mode in ("simulator", "estimator"):
        p = path / f"neuralactuator_{mode}"
        if p.is_dir():
            out[mode] = load_model(p)
    if not out:
        raise ConfigError(f"--checkpoints {str(path)!r}: no neuralactuator_simulator/ or "
                          "neuralactuator_estimator/ checkpoint inside")
    return out


def run_evaluate(cfg: EvaluateConfig) -> dict[str, Any]:
    import torch

    from neuract.config import check_rerun, save_resolved
    from neuract.eval import write_report
    from neuract.pipeline.experiment import check_experiment, run_experiment
    from neuract.pipeline.report import build_report, write_results

    torch.set_num_threads(1)
    cfg.twin_pretrain.validate()
    if cfg.source not in ("twin", "nad", "dataset"):
        raise ConfigError(f"--source {cfg.source!r}; accepted: ['twin', 'nad', 'dataset']")
    if cfg.source == "dataset" and cfg.data is None:
        raise ConfigError("--source dataset needs --data DATASET_DIR")
    if cfg.source == "nad" and cfg.robot not in ("omx", "so101"):
        raise ConfigError(f"--robot {cfg.robot!r} with --source nad; accepted: ['omx', 'so101'] "
                          "(the arms NAD recorded)")
    if cfg.twin_pretrain.minutes and cfg.source != "nad":
        raise ConfigError(f"--twin-pretrain.minutes {cfg.twin_pretrain.minutes:g} applies to "
                          f"--source nad (sim-to-real on the NAD files); got --source "
                          f"{cfg.source!r}")
    pre = load_pretrained(cfg.checkpoints)
    check_experiment(cfg.experiment, tuple(pre))  # before anything is written
    if cfg.source != "twin":  # a twin run checks its own (TwinExperimentConfig) config
        check_rerun(cfg, cfg.out)
    bar, progress = progress_bar(cfg.quiet)
    with bar:
        if cfg.source == "twin":
            from neuract.pipeline.twin_experiment import (
                TwinExperimentConfig,
                run_twin_experiment,
            )

            if pre:
                raise ConfigError("--checkpoints applies to --source dataset or nad; a twin run "
                                  "generates fresh data and trains on it")
            tcfg = TwinExperimentConfig(cfg.out, cfg.twin, cfg.experiment)
            check_rerun(tcfg, cfg.out, options={"data": "twin"})  # named as evaluate's options
            return run_twin_experiment(tcfg, progress)
        if cfg.source == "nad":
            from neuract.pipeline.nad_experiment import RELEASE, load_nad
            from neuract.pipeline.twin_experiment import setup_for

            train, test = load_nad(cfg.nad, cfg.robot)
            setup = setup_for(cfg.robot)
            title, extra = f"NeuralActuator on NAD ({cfg.robot})", {"release": RELEASE}
        elif cfg.source == "dataset":
            from neuract.data import load_dataset
            from neuract.pipeline.twin_experiment import setup_for, split_by_task

            ds = load_dataset(cfg.data)
            trajs = [ds[i] for i in range(len(ds))]
            test = [t for t in trajs if t.meta.labels.get("split") == "test"]
            train = [t for t in trajs if t.meta.labels.get("split") != "test"]
            if not test or not train:
                train, test = split_by_task(trajs, 0.25)
            setup = setup_for(ds.robot)
            title, extra = f"NeuralActuator on {cfg.data}", {}
        from neuract.pipeline.experiment import check_split

        check_split(train, test)
        out = Path(cfg.out)  # only now that the data and the robot are known good
        out.mkdir(parents=True, exist_ok=True)
        save_resolved(cfg, out)
        res = run_experiment(setup, train, test, cfg.experiment, out_dir=out,
                             progress=progress, pretrained=pre)
        res.update(extra)
        if cfg.twin_pretrain.minutes:  # validated above: source nad
            from neuract.pipeline.nad_experiment import twin_pretrained

            res["twin_pretrained"] = twin_pretrained(cfg.robot, setup, train, test,
                                                     cfg.experiment, cfg.twin_pretrain, out,
                                                     progress)
            if pre.get("estimator") is not None:
                res["own_estimator_label"] = "the estimator above (from --checkpoints)"
        res["data"] = {"train": [t.meta.name for t in train],
                       "test": [t.meta.name for t in test]}
    write_results(out, res)  # first: a failing report must not lose the results
    write_report(out, build_report(res, title))
    return res


def _done(cfg: EvaluateConfig, res: dict[str, Any]) -> None:
    """The closing line: where the report and the results are, and the targets met."""
    if cfg.quiet:
        return
    from neuract.pipeline.report import targets

    met = targets(res) if "estimation" in res else []
    out = Path(cfg.out)
    print(f"neuract evaluate: report {out / 'report.html'} (and report.md), results "
          f"{out / 'results.json'}"
          + (f"; targets met: {sum(t['met'] for t in met)} of {len(met)}" if met else ""))


# --------------------------------------------------------------------------- estimate
@dataclass
class EstimateConfig:
    """Stream telemetry through an estimator-mode NeuralActuator checkpoint."""

    checkpoint: Path
    """estimator-mode checkpoint directory (model.safetensors + config.json)"""
    data: Path
    """a neuract dataset directory, or a NAD CSV file / folder"""
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


VERB_OF_MODE = {"estimator": "estimate", "simulator": "simulate"}
"""the verb that writes a ``summary.json`` of each ``mode``"""


def out_dest(mode: str) -> dict[str, Any]:
    """What makes a directory an earlier output of the verb of ``mode`` (estimator:
    ``neuract estimate``, simulator: ``neuract simulate``): its ``summary.json`` names that
    mode (as every version wrote it), so ``--overwrite`` of one verb never replaces the
    other's output."""
    if mode not in VERB_OF_MODE:
        raise ConfigError(f"out_dest: mode {mode!r}; accepted: {list(VERB_OF_MODE)}")
    return {"marker": "summary.json",
            "kind": lambda j: j.get("mode") == mode and "episodes" in j,
            "allowed": lambda name: name == "summary.json" or name.endswith(".parquet")}


ESTIMATE_DEST = out_dest("estimator")
SIMULATE_DEST = out_dest("simulator")
OUT_DEST = SIMULATE_DEST
"""the former name of :data:`SIMULATE_DEST` (``neuract simulate``'s outputs), kept for code
that imports it"""


def check_out(out: Path, overwrite: bool, inputs: Sequence[Path | str | None] = (),
              mode: str = "simulator") -> None:
    """Refuse, before any work, an ``--out`` that is or holds one of the ``inputs``
    (checkpoint, data, robot file), or an existing one that is not replaceable
    (:func:`neuract.atomic.check_dest`: without ``--overwrite``, not a directory, or not an
    earlier output of the verb of ``mode``: estimator for estimate, simulator (the default)
    for simulate)."""
    import json

    from neuract.atomic import check_dest

    dest = out_dest(mode)
    marker = Path(out) / "summary.json"
    if overwrite and marker.is_file() and not Path(out).is_symlink():
        try:
            other = json.loads(marker.read_text()).get("mode")
        except (OSError, ValueError, AttributeError):
            other = None
        if other in VERB_OF_MODE and other != mode:
            raise ConfigError(
                f"output directory {str(out)!r} is an earlier neuract {VERB_OF_MODE[other]} "
                f"output (summary.json mode {other!r}); --overwrite of neuract "
                f"{VERB_OF_MODE[mode]} replaces only its own outputs: choose another output "
                "path")
    check_dest(out, overwrite, inputs=inputs, **dest)


def read_telemetry(path: Path) -> list:
    """Episodes from a dataset directory or NAD CSV file(s)."""
    path = Path(path)
    if (path / "meta" / "info.json").is_file():
        from neuract.data import load_dataset

        ds = load_dataset(path)
        return [ds[i] for i in range(len(ds))]
    if path.is_file() and path.suffix.lower() == ".csv":
        from neuract.io.nad import read_nad_csv

        return [read_nad_csv(path)]
    if path.is_dir():
        from neuract.io.nad import iter_nad

        trajs = list(iter_nad(path))
        if trajs:
            return trajs
    raise SchemaError(f"--data {str(path)!r}: expected a dataset directory (meta/info.json), a "
                      "NAD CSV file or a folder of NAD CSV files")


def estimates_table(model, traj, out: dict):
    """A pyarrow table of per-step estimates (columns named by joint; with a fixed-lag gate
    also ``contact_decided_t``, when each contact decision was made)."""
    import numpy as np
    import pyarrow as pa

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


def _adapt(model, traj):
    """OMX episodes from NAD carry a gripper column the arm model does not have."""
    n = model.cfg.n_joints
    if len(traj.meta.joint_names) == n + 1 and traj.meta.robot == "omx":
        from neuract.pipeline.nad_experiment import omx_arm_only

        return omx_arm_only(traj)
    if len(traj.meta.joint_names) != n:
        raise SchemaError(f"episode {traj.meta.name!r} has {len(traj.meta.joint_names)} joints; "
                          f"the checkpoint models {n}")
    return traj


def checkpoint_and_episodes(checkpoint: Path, data: Path, mode: str, what: str):
    """(model, episodes) of a streaming verb: the checkpoint must be a ``mode`` model (for
    ``what``), the episodes are read from ``data`` and matched to its joints."""
    model = load_model(Path(checkpoint))
    if model.cfg.mode != mode:
        raise ConfigError(f"--checkpoint {str(checkpoint)!r} is a {model.cfg.mode}-mode "
                          f"model; {what} need a {mode}-mode checkpoint")
    return model, [_adapt(model, t) for t in read_telemetry(data)]


def resolve_robot(name: str, model, trajs, site: str = ""):
    """(float32 arm model, end-effector site) for a checkpoint's episodes: ``name`` (bundled
    name or MJCF/URDF path), else the checkpoint's physics robot, else the episodes' robot;
    ``omx`` with a 4-joint model is the bundled arm without the gripper (``omx_arm``)."""
    import torch

    from neuract.robot import load_robot

    name = name or model.cfg.physics_robot or str(trajs[0].meta.robot or "")
    if name == "omx" and model.cfg.n_joints == 4:  # the arm without the gripper
        name = "omx_arm"
    if not name:
        raise ConfigError("--robot is needed: the episodes do not name their robot")
    robot = load_robot(name, dtype=torch.float32)
    from neuract.robot.match import check_joints

    check_joints(name, robot.joint_names, list(trajs[0].meta.joint_names), "the episodes")
    defaults = {"so101": "gripperframe", "omx": "end_effector", "omx_arm": "end_effector"}
    return robot, site or model.cfg.physics_site or defaults.get(name) or None


def run_estimate(cfg: EstimateConfig) -> dict[str, Any]:
    import torch

    from neuract.atomic import atomic_dir, write_json
    from neuract.estimate.filters import resolve_filters

    torch.set_num_threads(1)
    out_dir = Path(cfg.out)
    check_out(out_dir, cfg.overwrite, (cfg.checkpoint, cfg.data), mode="estimator")
    model, trajs = checkpoint_and_episodes(cfg.checkpoint, cfg.data, "estimator", "estimates")
    resolve_filters(model, cfg.condition_tau_s)  # bad options fail before any work
    summary = {"mode": "estimator", "checkpoint": str(cfg.checkpoint), "episodes": []}
    with atomic_dir(out_dir, overwrite=cfg.overwrite, **ESTIMATE_DEST) as tmp_dir:
        for tr in trajs:
            summary["episodes"].append(_estimate_episode(model, tr, cfg, tmp_dir))
        write_json(tmp_dir / "summary.json", summary)
    if not cfg.quiet:
        from rich.console import Console
        from rich.table import Table

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
    import pyarrow.parquet as pq

    from neuract.estimate import estimate

    if cfg.stream:
        from neuract.estimate.stream import stream_trajectory

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


# tyro / cli entry points: one config + one run() per verb module
def run(cfg: EvaluateConfig | EstimateConfig) -> Any:
    if isinstance(cfg, EstimateConfig):
        return run_estimate(cfg)
    res = run_evaluate(cfg)
    _done(cfg, res)
    return res


__all__ = ["ESTIMATE_DEST", "EstimateConfig", "EvaluateConfig", "OUT_DEST", "SIMULATE_DEST",
           "check_out", "out_dest", "estimates_table", "read_telemetry",
           "run", "run_estimate", "run_evaluate"]
