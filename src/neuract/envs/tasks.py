"""The environments' tasks: the twin's episode plans, drawn exactly as ``neuract twin`` draws
them, give each episode its reference (the goal trajectory the task asks to follow), payload
(attached and released) and pushes (external force at the end effector).

A unit and an episode index name a twin episode: ``unit_rng(seed, unit)`` draws the unit's
hidden servos, ``episode_rng(seed, unit, episode)`` the plan and everything after it, so an
environment reset with the same seed, unit and episode meets the same episode as
:func:`neuract.twin.generate`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuract.errors import ConfigError
from neuract.twin.config import SimConfig
from neuract.twin.generate import ROBOT_SPECS, GenerateConfig, make_job
from neuract.twin.model import TwinModel
from neuract.twin.sim import Job
from neuract.twin.tasks import EpisodePlan

TASK_IDS = {"Track": "free", "Lift": "lift", "PickPlace": "pick", "Push": "push"}
"""environment task name -> twin task: follow a free-motion reference; go up and stay still
with a payload; pick-and-place (payload attached, carried, released); hold and move slowly
under pushes"""
ROBOT_IDS = {"SO101": "so101", "OMX": "omx"}
RATE_HZ = {"so101": 62.0, "omx": 58.8}
"""telemetry rate of each arm as the twin's host reads it [Hz]: one environment step"""


@dataclass
class Episode:
    """One drawn episode: its twin job (hidden unit, plan, private stream)."""

    job: Job

    @property
    def plan(self) -> EpisodePlan:
        return self.job.plan


def twin_config(robot: str, task: str, seed: int, episode_s: float, physics_hz: float,
                overload_protection: bool = False) -> GenerateConfig:
    """The ``neuract twin`` options whose episode ``(unit, episode)`` an environment replays
    (``overload_protection``: ``SimConfig.overload_protection``, the twin actuator only)."""
    if task not in TASK_IDS.values():
        raise ConfigError(f"task {task!r}; accepted: {sorted(TASK_IDS.values())}")
    if not (np.isfinite(episode_s) and 1.0 <= episode_s <= 600.0):
        raise ConfigError(f"episode_s = {episode_s!r}; expected seconds in [1, 600]")
    if not isinstance(overload_protection, bool):
        raise ConfigError(f"overload_protection = {overload_protection!r}; expected True or "
                          "False")
    return GenerateConfig(robot=robot, tasks=(task,), seed=int(seed),
                          sim=SimConfig(episode_s=float(episode_s), physics_hz=physics_hz,
                                        overload_protection=overload_protection))


def draw_episode(cfg: GenerateConfig, tm: TwinModel, unit: int, episode: int) -> Episode:
    """The unit's hidden servos and the episode's plan, as :func:`neuract.twin.generate` draws
    them (:func:`neuract.twin.generate.make_job`)."""
    job = make_job(cfg, ROBOT_SPECS[cfg.robot](), tm, unit, episode, cfg.tasks[0])
    return Episode(job)


def reference(ep: Episode, tm: TwinModel, t: np.ndarray) -> np.ndarray:
    """(K, n) the task's reference goal at times ``t`` [rad], inside the joint ranges."""
    lo, hi = tm.ranges[:, 0] + 0.05, tm.ranges[:, 1] - 0.05
    return ep.plan.goal(np.asarray(t, dtype=np.float64), np.zeros(tm.n), lo, hi)


__all__ = ["Episode", "RATE_HZ", "ROBOT_IDS", "TASK_IDS", "draw_episode", "reference",
           "twin_config"]
