"""What ``neuract policy`` runs (:mod:`neuract.pipeline.policy_verb`): training and
evaluating a behaviour-cloning policy or a PPO policy, and the report."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from neuract.atomic import atomic_dir, write_json
from neuract.errors import ConfigError
from neuract.policy import bc as bc_mod
from neuract.policy.bc import BCConfig, demo_arrays, load_policy, save_policy
from neuract.policy.bc import train_bc as fit_policy
from neuract.policy.expert import Expert, ExpertConfig
from neuract.policy.rollout import ForceStream, run_episode
from neuract.policy.trials import PolicyRun, paired_trials, plot_trials, summarize
from neuract.progress import current, no_progress, resumed, with_loss

BC_KIND = bc_mod.KIND
PPO_KIND = "neuract-ppo-policy"
POLICY_KINDS = (BC_KIND, PPO_KIND)
KIND_NAMES = {BC_KIND: "bc", PPO_KIND: "ppo"}
TRIAL_EPISODES = 1000
"""evaluation trials play the twin's episodes from this index on (demonstrations from 0), so
the two never share an episode"""
Say = Callable[[str], None]


def _estimator(path: Path | str | None) -> ForceStream | None:
    if path is None:
        return None
    from neuract.neuralactuator.checkpoint import load_checkpoint

    return ForceStream(load_checkpoint(path))


def _env(cfg):
    """The twin environment a behaviour-cloning run demonstrates and is tried on (the servos'
    overload protection on: an over-current stop fails a trial)."""
    from neuract.envs import ArmEnv

    return ArmEnv(cfg.robot, cfg.task, actuator="twin", privileged=True,
                  episode_s=cfg.episode_s, seed=cfg.seed, overload_protection=True)


# -- behaviour cloning ---------------------------------------------------------------------
def train_bc(cfg, out: Path, say: Say) -> dict[str, Any]:
    """Expert demonstrations on ``cfg.units`` (episodes 0..), then the policy."""
    force = _estimator(cfg.estimator)
    env = _env(cfg)
    expert = Expert(env.tm)
    demos, t0 = [], time.time()
    progress = current() or no_progress
    n_demos = len(cfg.units) * cfg.episodes
    progress("demonstrations (episodes)", 0, n_demos)
    for u in cfg.units:
        for k in range(cfg.episodes):
            d = run_episode(env, lambda s: expert.act(s.target, s.payload_kg), cfg.seed, u, k,
                            force, keep_steps=True)
            demos.append(d)
            say(f"demonstration unit {u} episode {k}: payload {d.payload_kg:.2f} kg, expert "
                f"{'succeeds' if d.success else 'fails'}")
            progress("demonstrations (episodes)", len(demos), n_demos)
    use_f = force is not None
    x, y = demo_arrays(demos, use_f)
    (out / "checkpoint").mkdir(exist_ok=True)
    bcfg = BCConfig(robot=cfg.robot, task=cfg.task, use_force=use_f, steps=cfg.steps,
                    seed=cfg.seed, checkpoint=str(out / "checkpoint" / "bc.safetensors"))
    say(f"training a ({'q, a, f' if use_f else 'q, a'}) policy on {len(x)} samples, "
        f"{cfg.steps} steps")
    model, losses = fit_policy(x, y, bcfg, progress=lambda s, n, loss: with_loss(
        progress, "train the policy", s, n, loss))
    est = str(Path(cfg.estimator).resolve()) if cfg.estimator is not None else None
    final = float(np.mean(losses[-50:]))
    save_policy(model, out / "policy", overwrite=True,
                extra={"estimator": est, "units": list(cfg.units), "demos": len(demos),
                       "final_loss": final})
    return {"action": "train", "kind": "bc", "robot": cfg.robot, "task": cfg.task,
            "uses_force": use_f, "estimator": est, "units": list(cfg.units),
            "demonstrations": len(demos), "samples": int(len(x)),
            "expert_success": float(np.mean([d.success for d in demos])),
            "final_loss": final, "policy": str(out / "policy"),
            "seconds": round(time.time() - t0, 1)}


def evaluate_bc(cfg, out: Path, say: Say) -> dict[str, Any]:
    """The policy and plain reference following on the same trials of ``cfg.units``."""
    policy = load_policy(cfg.policy, robot=cfg.robot, task=cfg.task)
    extra = json.loads((Path(cfg.policy) / "config.json").read_text()).get("extra", {})
    force = None
    if policy.cfg.use_force:
        est = cfg.estimator or extra.get("estimator")
        if not est:
            raise ConfigError(f"--policy {str(cfg.policy)!r} reads the force estimate: give "
                              "--estimator (the estimator-mode checkpoint it was trained with)")
        force = _estimator(est)
    elif cfg.estimator is not None:
        raise ConfigError(f"--estimator given, but --policy {str(cfg.policy)!r} does not read "
                          "the force estimate")
    env = _env(cfg)
    plain = Expert(env.tm, ExpertConfig(gain=0.0))
    runs = [PolicyRun("reference", lambda s: plain.act(s.target, s.payload_kg)),
            PolicyRun("policy", policy.act, force)]
    t0 = time.time()
    episodes = range(TRIAL_EPISODES, TRIAL_EPISODES + cfg.episodes)
    traces = paired_trials(lambda: env, runs, cfg.seed, cfg.units, episodes, progress=say)
    res = summarize(traces, "reference", "policy")
    heavy = int(np.argmax([t.payload_kg for t in traces["policy"]]))
    plot_trials(traces, heavy, out / "trial.png", title=f"{cfg.task}: heaviest trial")
    return {"action": "evaluate", "kind": "bc", "robot": cfg.robot, "task": cfg.task,
            "policy": str(cfg.policy), "uses_force": policy.cfg.use_force,
            "units": list(cfg.units), "summary": res, "plot": "trial.png",
            "seconds": round(time.time() - t0, 1)}


# -- PPO -----------------------------------------------------------------------------------
def _spec(cfg, base: dict[str, Any] | None = None):
    from neuract.policy.rl import EnvSpec

    kw = dict(base or {})
    kw.update(robot=cfg.robot, task=cfg.task, actuator=cfg.actuator, units=tuple(cfg.units),
              episode_s=cfg.episode_s, seed=cfg.seed)
    spec = EnvSpec(**kw)
    spec.validate()
    return spec


def train_ppo(cfg, out: Path, say: Say) -> dict[str, Any]:
    """PPO in chunks of about a tenth of ``cfg.steps``; each chunk saved, a rerun resumes."""
    from stable_baselines3 import PPO

    from neuract.policy.rl import PPOConfig, train

    spec, ppo = _spec(cfg), PPOConfig(total_timesteps=cfg.steps, seed=cfg.seed)
    ppo.validate()
    ck = out / "checkpoint"
    ck.mkdir(exist_ok=True)
    state = ck / "ppo.json"
    model, done = None, 0
    if state.is_file() and (ck / "ppo.zip").is_file():
        done = int(json.loads(state.read_text())["timesteps"])
        model = PPO.load(str(ck / "ppo.zip"), device="cpu")
        resumed(ck / "ppo.zip", done, cfg.steps, unit="timestep")
    chunk = max(ppo.n_envs * ppo.n_steps, cfg.steps // 10)
    t0 = time.time()
    progress = current() or no_progress
    progress("PPO (timesteps)", done, cfg.steps)
    while done < cfg.steps:
        n = min(chunk, cfg.steps - done)
        model = train(spec, ppo, model=model, timesteps=n)
        done += n
        tmp = ck / ".ppo.zip.tmp.zip"
        model.save(str(tmp))
        os.replace(tmp, ck / "ppo.zip")
        write_json(state, {"timesteps": done})
        progress("PPO (timesteps)", done, cfg.steps)
    info = {"kind": PPO_KIND, "robot": cfg.robot, "task": cfg.task,
            "spec": {k: v for k, v in dataclasses.asdict(spec).items()
                     if k not in ("actuator", "units", "seed")},
            "ppo": dataclasses.asdict(ppo), "trained_on": {"actuator": str(cfg.actuator),
                                                          "units": list(cfg.units)}}
    with atomic_dir(out / "policy", overwrite=True) as tmp:
        model.save(str(tmp / "model.zip"))
        write_json(tmp / "config.json", info)
    return {"action": "train", "kind": "ppo", "robot": cfg.robot, "task": cfg.task,
            "actuator": str(cfg.actuator), "units": list(cfg.units), "timesteps": done,
            "policy": str(out / "policy"), "seconds": round(time.time() - t0, 1)}


def evaluate_ppo(cfg, out: Path, say: Say) -> dict[str, Any]:
    """Step metrics of the policy and of sending the reference on ``cfg.units``."""
    from stable_baselines3 import PPO

    from neuract.policy.rl import evaluate

    info = json.loads((Path(cfg.policy) / "config.json").read_text())
    spec = _spec(cfg, info.get("spec"))
    model = PPO.load(str(Path(cfg.policy) / "model.zip"), device="cpu")
    t0 = time.time()
    res = {"policy": evaluate(model, spec, cfg.episodes),
           "reference": evaluate(None, spec, cfg.episodes)}
    say("tracking RMS [mrad]: policy {:.2f}, sending the reference {:.2f}".format(
        res["policy"]["tracking_rms_mrad"], res["reference"]["tracking_rms_mrad"]))
    return {"action": "evaluate", "kind": "ppo", "robot": cfg.robot, "task": cfg.task,
            "policy": str(cfg.policy), "actuator": str(cfg.actuator), "units": list(cfg.units),
            "episodes_per_unit": cfg.episodes, "metrics": res,
            "seconds": round(time.time() - t0, 1)}


# -- report --------------------------------------------------------------------------------
def report(res: dict[str, Any]) -> str:
    """The run's results as a short markdown page."""
    head = (f"# neuract policy: {res['action']} ({res['kind']}, {res['robot']}, task "
            f"{res['task']})\n")
    if res["action"] == "train":
        rows = [(k, v) for k, v in res.items() if k not in ("action", "kind", "robot", "task")]
        return head + "\n| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows) \
            + "\n"
    if res["kind"] == "bc":
        from neuract.policy.trials import report_markdown

        return (head + f"\nPolicy {res['policy']} against plain reference following on the "
                f"same trials of units {res['units']} (paired).\n\n"
                + report_markdown({res["task"]: res["summary"]}, "reference", "policy")
                + f"\n![trial]({res['plot']})\n")
    m = res["metrics"]
    keys = ("tracking_rms_mrad", "drift_mrad", "overshoot_pct", "settle_s")
    lines = ["| controller | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name in ("policy", "reference"):
        lines.append(f"| {name} | " + " | ".join(f"{m[name][k]:.3g}" for k in keys) + " |")
    return (head + f"\nOn actuator {res['actuator']}, units {res['units']}, "
            f"{res['episodes_per_unit']} episode(s) each.\n\n" + "\n".join(lines) + "\n")


__all__ = ["BC_KIND", "KIND_NAMES", "POLICY_KINDS", "PPO_KIND", "evaluate_bc", "evaluate_ppo",
           "report", "train_bc", "train_ppo"]
