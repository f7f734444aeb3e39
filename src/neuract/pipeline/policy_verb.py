"""``neuract policy``: train or evaluate a policy on the arm environments.

    neuract policy --action train --kind bc --task lift --units 4 5 6 7 --episodes 10 \\
        --estimator runs/demo/checkpoints/neuralactuator_estimator --out runs/policy_lift_f
    neuract policy --action evaluate --policy runs/policy_lift_f/policy --units 8 9 10 11 \\
        --episodes 10 --out runs/policy_lift_f_eval
    neuract policy --action train --kind ppo --task free --actuator mujoco --steps 20000 \\
        --out runs/ppo_p2p
    neuract policy --action evaluate --policy runs/ppo_p2p/policy --actuator twin \\
        --units 8 9 --out runs/ppo_p2p_eval

``--kind bc`` (tasks ``lift``, ``pick``): behaviour cloning of a scripted expert that reads the
true payload, on the twin's units ``--units`` (docs/policy.md); with ``--estimator`` (an
estimator-mode NeuralActuator) the policy also reads its streamed force estimate f̂. Training
resumes from ``OUT/checkpoint/`` when rerun with the same options. Evaluation runs the policy
and plain reference following on the same trials (paired) and reports success rates with
Wilson intervals and their paired difference. ``--kind ppo`` (task ``free``, point-to-point on
the Track reference): PPO (stable-baselines3) with a residual action on ``--actuator``'s
environment (docs/policy_rl.md); training resumes from its last saved chunk; evaluation
reports tracking RMS, drift, overshoot and settle time against sending the reference.

``OUT`` gets ``config.json`` (these options), ``results.json``, ``report.md`` and, when
training, ``policy/`` (what ``--policy`` takes). An existing ``OUT`` holding another run's
results is refused unless ``--overwrite``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neuract.atomic import write_json, write_text
from neuract.config import check_rerun, save_resolved
from neuract.errors import CheckpointError, ConfigError
from neuract.pipeline import policy_runs
from neuract.pipeline.progress import reporter

KINDS = {"bc": ("lift", "pick"), "ppo": ("free",)}
ACTIONS = ("train", "evaluate")


@dataclass
class PolicyConfig:
    """Train or evaluate a policy on the arm environments (behaviour cloning, PPO)."""

    action: str = "train"
    """train or evaluate"""
    kind: str = "bc"
    """bc (behaviour cloning of the scripted expert) or ppo (stable-baselines3); evaluate
    reads it from --policy"""
    robot: str = ""
    """so101 or omx (bc: so101); empty: so101 when training, the policy's when evaluating"""
    task: str = ""
    """bc: lift or pick; ppo: free (point-to-point on the Track reference); empty: lift (bc) or
    free (ppo) when training, the policy's when evaluating"""
    out: Path = Path("runs/policy")
    """output directory: config.json, results.json, report.md (and policy/ when training)"""
    policy: Path | None = None
    """evaluate: the policy/ directory a train run wrote"""
    estimator: Path | None = None
    """bc: an estimator-mode NeuralActuator checkpoint whose force estimate the policy reads
    (train: makes a (q, a, f) policy; evaluate: default the one it was trained with)"""
    actuator: str = "twin"
    """the environment's actuator: twin (each of --units' hidden servos), mujoco, or a neuract
    fit output / NeuralActuator simulator checkpoint (ppo)"""
    units: tuple[int, ...] = (4, 5, 6, 7)
    """twin units: demonstration / training units (train), unseen units (evaluate)"""
    episodes: int = 5
    """per unit: demonstrations (bc train) or trials (evaluate)"""
    episode_s: float = 10.0
    """episode length [s]"""
    steps: int = 2000
    """bc: training steps; ppo: environment timesteps"""
    seed: int = 0
    overwrite: bool = False
    """replace an earlier output of this verb in --out"""
    quiet: bool = False


def check_options(cfg: PolicyConfig) -> PolicyConfig:
    """Refuse bad options by name, before anything is written; returns the config with the
    robot and task filled in (training: the defaults; evaluating: the policy's)."""
    if cfg.action not in ACTIONS:
        raise ConfigError(f"--action {cfg.action!r}; accepted: {', '.join(ACTIONS)}")
    _check_common(cfg)
    if cfg.action == "evaluate":
        if cfg.policy is None:
            raise ConfigError("--action evaluate needs --policy (the policy/ directory of a "
                              "`neuract policy --action train` run)")
        info = policy_kind(cfg.policy)
        for name in ("robot", "task"):
            given = getattr(cfg, name)
            if given and given != info.get(name):
                raise ConfigError(f"--policy {str(cfg.policy)!r} was trained for {name} "
                                  f"{info.get(name)!r}, not {given!r}; accepted: "
                                  f"{info.get(name)!r} (or leave --{name} out)")
        return dataclasses.replace(cfg, robot=info["robot"], task=info["task"],
                                   kind=policy_runs.KIND_NAMES[info["kind"]])
    if cfg.kind not in KINDS:
        raise ConfigError(f"--kind {cfg.kind!r}; accepted: {', '.join(KINDS)}")
    cfg = dataclasses.replace(cfg, robot=cfg.robot or "so101",
                              task=cfg.task or KINDS[cfg.kind][0])
    if cfg.task not in KINDS[cfg.kind]:
        raise ConfigError(f"--task {cfg.task!r} for --kind {cfg.kind}; accepted: "
                          f"{', '.join(KINDS[cfg.kind])}")
    ok = ("so101",) if cfg.kind == "bc" else ("so101", "omx")
    if cfg.robot not in ok:
        raise ConfigError(f"--robot {cfg.robot!r} for --kind {cfg.kind}; accepted: "
                          f"{', '.join(ok)}")
    if cfg.kind == "bc" and cfg.actuator != "twin":
        raise ConfigError(f"--actuator {cfg.actuator!r} for --kind bc; accepted: twin (the "
                          "expert demonstrates on the twin's units)")
    if cfg.estimator is not None and cfg.kind != "bc":
        raise ConfigError("--estimator applies to --kind bc (the force estimate as an input)")
    return cfg


def _check_common(cfg: PolicyConfig) -> None:
    if not cfg.units or not all(isinstance(u, int) and u >= 0 for u in cfg.units):
        raise ConfigError(f"--units {list(cfg.units)!r}; accepted: one or more twin units >= 0")
    for name in ("episodes", "steps"):
        v = getattr(cfg, name)
        if not (isinstance(v, int) and v >= 1):
            raise ConfigError(f"--{name} {v!r}; accepted: an integer >= 1")
    if not (np.isfinite(cfg.episode_s) and 1.0 <= cfg.episode_s <= 600.0):
        raise ConfigError(f"--episode-s {cfg.episode_s!r}; accepted: seconds in [1, 600]")


def policy_kind(path: Path) -> dict[str, Any]:
    """The ``config.json`` of a saved policy (bc or ppo), refusing anything else."""
    try:
        info = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"--policy {str(path)!r}: no readable config.json ({exc}); "
                              "accepted: the policy/ directory of `neuract policy --action "
                              "train`") from None
    if info.get("kind") not in policy_runs.POLICY_KINDS:
        raise CheckpointError(f"--policy {str(path)!r} is a {info.get('kind')!r}; accepted: "
                              f"{', '.join(policy_runs.POLICY_KINDS)}")
    return info


def _check_out(cfg: PolicyConfig, out: Path) -> None:
    """A new or empty --out, this command's earlier run with the same options (resumed), or
    with --overwrite an earlier run of this command (its outputs removed)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; accepted: a directory")
    if not (out / "config.json").is_file():
        if any(out.iterdir()):
            raise ConfigError(f"--out {str(out)!r} is a non-empty directory without a "
                              "neuract policy config.json; choose a new or empty directory")
        return
    try:
        kind = json.loads((out / "config.json").read_text()).get("type")
    except (OSError, ValueError, AttributeError):
        kind = None
    if cfg.overwrite and kind == "PolicyConfig":
        for name in ("results.json", "report.md"):
            (out / name).unlink(missing_ok=True)
        for name in ("policy", "checkpoint"):
            if (out / name).is_dir():
                shutil.rmtree(out / name)
        return
    check_rerun(cfg, out, restart="Pass --overwrite (discards that run) or choose another "
                                  "--out")


def run(cfg: PolicyConfig) -> dict[str, Any]:
    cfg = check_options(cfg)
    out = Path(cfg.out)
    _check_out(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    save_resolved(cfg, out)
    say = (lambda m: None) if cfg.quiet else print
    with reporter(cfg.quiet):  # demonstrations, training steps, PPO timesteps; a resume
        if cfg.action == "train":
            train = policy_runs.train_bc if cfg.kind == "bc" else policy_runs.train_ppo
            res = train(cfg, out, say)
        else:
            evaluate = policy_runs.evaluate_bc if cfg.kind == "bc" else policy_runs.evaluate_ppo
            res = evaluate(cfg, out, say)
    write_json(out / "results.json", res)
    write_text(out / "report.md", policy_runs.report(res))
    say(f"neuract policy: {cfg.action} done -> {out / 'report.md'}")
    return res


__all__ = ["PolicyConfig", "check_options", "run"]
