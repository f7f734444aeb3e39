"""Gymnasium environments: the SO-101 and OpenManipulator-X with a pluggable actuator.

``import neuract.envs`` registers ``neuract/<ROBOT>-<TASK>-v0`` for ROBOT in SO101, OMX and
TASK in Track, Lift, PickPlace, Push (see :mod:`neuract.envs.arm`); ``ArmVectorEnv`` steps
many at once with one batched actuator call (:mod:`neuract.envs.vector`).
"""

from __future__ import annotations

import gymnasium as gym

from neuract.envs.arm import ArmEnv, obs_layout
from neuract.envs.tasks import ROBOT_IDS, TASK_IDS
from neuract.envs.vector import ArmVectorEnv

ENV_IDS = [f"neuract/{r}-{t}-v0" for r in ROBOT_IDS for t in TASK_IDS]


def _register() -> None:
    for r, robot in ROBOT_IDS.items():
        for t, task in TASK_IDS.items():
            env_id = f"neuract/{r}-{t}-v0"
            if env_id not in gym.registry:
                gym.register(env_id, entry_point="neuract.envs.arm:ArmEnv",
                             kwargs={"robot": robot, "task": task},
                             vector_entry_point="neuract.envs.vector:ArmVectorEnv",
                             disable_env_checker=False)


_register()

__all__ = ["ENV_IDS", "ArmEnv", "ArmVectorEnv", "obs_layout"]
