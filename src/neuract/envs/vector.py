"""Many arms stepped together: a Gymnasium ``VectorEnv`` whose backend runs all rows at once.

``ArmVectorEnv(num_envs=256, robot="so101", task="free", actuator=path)`` (or
``gymnasium.make_vec("neuract/SO101-Track-v0", num_envs=256,
vectorization_mode="vector_entry_point", actuator=path)``):
with a learned actuator, every physics step is one batched actuator call over all rows (the
network once per control step for all rows); MuJoCo runs each row's dynamics. Rows reset
themselves one step after their episode ends (Gymnasium's next-step autoreset): that step
returns the new episode's first observation, reward 0 and no termination. Row ``i`` plays
episode ``i``, ``i + num_envs``, ... of the twin's episode table of ``seed``.
``overload_protection=True`` (twin actuator only): ``info["overload"]`` (num_envs, n) bool and
``info["overload_stop"]`` (num_envs,) bool, as :class:`~neuract.envs.arm.ArmEnv`; no automatic
termination.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from neuract.envs.arm import check_action, flat_obs, overload_info, setup, start_rows
from neuract.envs.tasks import draw_episode
from neuract.errors import ConfigError


class ArmVectorEnv(VectorEnv):
    """``num_envs`` arms of one robot, task and actuator (see the module docstring)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, num_envs: int = 8, robot: str = "so101", task: str = "free",
                 actuator: Any = "mujoco", episode_s: float = 10.0, physics_hz: float = 500.0,
                 unit: int = 0, privileged: bool = False, seed: int = 0,
                 substeps: int | None = None, overload_protection: bool = False, **_: Any):
        if not (isinstance(num_envs, int) and num_envs >= 1):
            raise ConfigError(f"num_envs = {num_envs!r}; expected an integer >= 1")
        self.num_envs, self.privileged = num_envs, bool(privileged)
        self.single_action_space, self.single_observation_space = setup(
            self, num_envs, robot, task, actuator, episode_s, physics_hz, unit, seed, substeps,
            overload_protection)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._eps: list = [None] * num_envs
        self._episode = np.zeros(num_envs, np.int64)
        self._done = np.zeros(num_envs, bool)

    def restart(self, rows: list[int]) -> None:
        """Start rows ``rows`` on their next episodes now (a same-step autoreset, as
        stable-baselines3 expects; the environment itself restarts a row one step after its
        episode ends). Read the rows' first observation with ``backend.read()``."""
        eps = [draw_episode(self.cfg, self.tm, self.unit, int(self._episode[e])) for e in rows]
        for e, ep in zip(rows, eps):
            self._eps[e] = ep
            self._episode[e] += self.num_envs
        start_rows(self, rows, eps)
        self._done[rows] = False

    def _targets(self, ahead: int) -> np.ndarray:
        """(E, n) each row's reference ``ahead`` samples after its current one."""
        b = self.backend
        return np.stack([b.ref[e][min(int(b.k[e]) + ahead, len(b.ref[e]) - 1)]
                         for e in range(self.num_envs)])

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if options:
            raise ConfigError(f"reset options {sorted(options)}; the vector environment takes "
                              "none (rows play episodes row, row + num_envs, ...)")
        if seed is not None:
            self.cfg = dataclasses.replace(self.cfg, seed=int(seed))
        self._episode = np.arange(self.num_envs, dtype=np.int64)
        self.restart(list(range(self.num_envs)))
        r = self.backend.read()
        return flat_obs(r, self._targets(1)), self._infos(r)

    def step(self, actions):
        a = check_action(actions, (self.num_envs, self.tm.n))
        goals = np.clip(a, self._lo, self._hi)
        ended = np.flatnonzero(self._done).tolist()  # last step ended these rows' episodes
        self.backend.step(goals)
        if ended:
            self.restart(ended)
        r = self.backend.read()
        target_now = self._targets(0)
        reward = -np.abs(r.q - target_now).mean(1)
        reward[ended] = 0.0
        k = self.backend.k
        trunc = np.array([int(k[e]) >= self.backend.horizon(e) for e in range(self.num_envs)])
        trunc[ended] = False
        self._done = trunc.copy()
        obs = flat_obs(r, self._targets(1))
        return obs, reward, np.zeros(self.num_envs, bool), trunc, self._infos(r)

    def _infos(self, r) -> dict[str, Any]:
        info: dict[str, Any] = {"t": r.t.copy()}
        if self.privileged:
            info.update(tau=r.tau.copy(), ee_force=r.ee_force.copy(), contact=r.contact.copy(),
                        payload_kg=r.payload.copy())
        if self.overload_protection:
            info.update(overload_info(r))
        return info


__all__ = ["ArmVectorEnv"]
