"""Gymnasium environments of the SO-101 and OpenManipulator-X with a pluggable actuator.

``ArmEnv(robot="so101", task="free", actuator="mujoco")`` (or
``gymnasium.make("neuract/SO101-Track-v0", actuator=...)`` after ``import neuract.envs``).
One step is one telemetry period of the arm (SO-101 62 Hz, OMX 58.8 Hz), physics at about
500 Hz. Action: goal positions [rad] (the servos' command, as on hardware; clipped to the
joint ranges as the firmware's angle limits do; NaN or inf refused). Observation (flat
``float32``, ``env.unwrapped.obs_layout`` names the slices): ``q``, ``qd`` [rad, rad/s],
``effort`` (signed drive fraction), ``temperature`` [degC], ``voltage`` [V] and ``target``
(the task's reference goal for the next step) — the telemetry a real arm reports plus the
task. Reward: minus the mean absolute joint error to the reference [rad]. The episode ends
by truncation at the plan's length.

``actuator``: ``"mujoco"`` (the shipped model's position servo), ``"twin"`` / ``"twin:UNIT"``
(the twin's hidden servos of unit UNIT: the "real robot" of a sim-to-real experiment; its
hidden parameters never appear in observations or ``info``), a path to a ``neuract fit``
output or a simulator-mode NeuralActuator checkpoint, or an ``(Actuator, JointParams)`` pair.
``privileged=True`` adds the true torque, end-effector force, contact and payload to
``info``. ``overload_protection=True`` (the twin actuator only) models the servos' overload
protection (``SimConfig.overload_protection``) and adds ``info["overload"]`` (per-joint bool,
the status register a host reads: not privileged) and ``info["overload_stop"]`` (any joint
tripped); a trip does not end the episode (the caller decides; see docs/envs.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np

from neuract.envs.backends import Reading
from neuract.envs.factory import build_backend
from neuract.envs.tasks import RATE_HZ, draw_episode, reference, twin_config
from neuract.errors import ConfigError
from neuract.twin.model import build_model


def obs_layout(n: int) -> dict[str, slice]:
    """Slices of the flat observation of an ``n``-joint arm."""
    names, sizes = ("q", "qd", "effort", "temperature", "voltage", "target"), (n, n, n, n, 1, n)
    out, i = {}, 0
    for name, size in zip(names, sizes):
        out[name] = slice(i, i + size)
        i += size
    return out


def flat_obs(r: Reading, target: np.ndarray) -> np.ndarray:
    """(E, 5 n + 1) observations of every row (see :func:`obs_layout`)."""
    return np.concatenate([r.q, r.qd, r.effort, r.temperature, r.voltage[:, None], target],
                          axis=1).astype(np.float32)


def check_action(action: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The action as float64 of ``shape``; a clear error for a wrong shape or NaN/inf."""
    a = np.asarray(action, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"action shape {a.shape}; expected {shape} (goal positions [rad], one "
                         "per joint)")
    bad = ~np.isfinite(a)
    if bad.any():
        raise ValueError(f"action has NaN/inf at {np.argwhere(bad).tolist()}: goals must be "
                         "finite positions [rad]; the environment's state is unchanged")
    return a


def check_overload_option(overload_protection: bool, kind: str) -> None:
    """Refuse ``overload_protection`` for an actuator that does not model it (only the twin's
    servos have protection registers)."""
    if overload_protection and kind != "twin":
        raise ConfigError(f"overload_protection = True with actuator kind {kind!r}; only the "
                          "twin's servos ('twin' / 'twin:UNIT') model overload protection")


def overload_info(r: Reading) -> dict[str, Any]:
    """``overload`` (E, n) bool and ``overload_stop`` (E,) bool of every row."""
    over = np.asarray(r.overload, bool).copy()
    return {"overload": over, "overload_stop": over.any(axis=1)}


def setup(env: Any, n_rows: int, robot: str, task: str, actuator: Any, episode_s: float,
          physics_hz: float, unit: int, seed: int, substeps: int | None,
          overload_protection: bool) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """What a single and a vector environment share: sets ``env``'s ``robot``, ``cfg``, ``tm``,
    ``backend`` (``n_rows`` rows), ``kind``, ``unit``, ``overload_protection``, ``obs_layout``
    and the joint ranges; returns one row's action and observation spaces."""
    if robot not in RATE_HZ:
        raise ConfigError(f"robot {robot!r}; accepted: {sorted(RATE_HZ)}")
    env.robot = robot
    env.cfg = twin_config(robot, task, seed, episode_s, physics_hz, overload_protection)
    env.tm = build_model(robot, physics_hz)
    env.backend, env.kind, env.unit = build_backend(actuator, env.tm, env.cfg, n_rows, unit,
                                                    substeps)
    check_overload_option(overload_protection, env.kind)
    env.overload_protection = overload_protection
    n = env.tm.n
    env.obs_layout = obs_layout(n)
    env._lo, env._hi = env.tm.ranges[:, 0], env.tm.ranges[:, 1]
    return (gym.spaces.Box(env._lo.astype(np.float32), env._hi.astype(np.float32)),
            gym.spaces.Box(-np.inf, np.inf, (5 * n + 1,), np.float32))


def start_rows(env: Any, rows, eps) -> None:
    """Start ``env``'s backend rows ``rows`` on episodes ``eps``, each at rest at its
    reference's first goal."""
    q0 = np.stack([reference(ep, env.tm, np.zeros(1))[0] for ep in eps])
    env.backend.reset(rows, eps, q0)


class ArmEnv(gym.Env):
    """One arm (see the module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, robot: str = "so101", task: str = "free", actuator: Any = "mujoco",
                 episode_s: float = 10.0, physics_hz: float = 500.0, unit: int = 0,
                 privileged: bool = False, seed: int = 0, substeps: int | None = None,
                 overload_protection: bool = False):
        super().__init__()
        self.task, self.privileged = task, bool(privileged)
        self.action_space, self.observation_space = setup(
            self, 1, robot, task, actuator, episode_s, physics_hz, unit, seed, substeps,
            overload_protection)
        self.joint_names = list(self.tm.joint_names)
        self._episode = 0
        self._ep = None

    def _target(self, ahead: int) -> np.ndarray:
        """(1, n) the reference ``ahead`` samples after the current one."""
        ref = self.backend.ref[0]
        return ref[min(int(self.backend.k[0]) + ahead, len(ref) - 1)][None]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        opts = dict(options or {})
        unknown = set(opts) - {"episode", "unit"}
        if unknown:
            raise ConfigError(f"reset options {sorted(unknown)}; accepted: episode, unit")
        if seed is not None:
            self.cfg = dataclasses.replace(self.cfg, seed=int(seed))
            self._episode = 0
        episode = int(opts.get("episode", self._episode))
        self._episode = episode + 1
        unit = int(opts.get("unit", self.unit))
        self._ep = draw_episode(self.cfg, self.tm, unit, episode)
        self._start([0], [self._ep])
        r = self.backend.read()
        obs = flat_obs(r, self._target(1))[0]
        return obs, self._info(r, episode, unit)

    def _start(self, rows, eps) -> None:
        start_rows(self, rows, eps)

    def step(self, action):
        if self._ep is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        a = check_action(action, (self.tm.n,))
        goal = np.clip(a, self._lo, self._hi)
        self.backend.step(goal[None])
        r = self.backend.read()
        target_now = self._target(0)[0]
        reward = -float(np.abs(r.q[0] - target_now).mean())
        done = int(self.backend.k[0]) >= self.backend.horizon(0)
        obs = flat_obs(r, self._target(1))[0]
        return obs, reward, False, done, self._info(r, self._episode - 1, self._ep.job.unit)

    def _info(self, r: Reading, episode: int, unit: int) -> dict[str, Any]:
        info: dict[str, Any] = {"t": float(r.t[0]), "episode": episode, "actuator": self.kind}
        if self.kind == "twin":
            info["unit"] = unit
        if self.privileged:
            info.update(tau=r.tau[0].copy(), ee_force=r.ee_force[0].copy(),
                        contact=bool(r.contact[0]), payload_kg=float(r.payload[0]))
        if self.overload_protection:
            over = overload_info(r)
            info.update(overload=over["overload"][0], overload_stop=bool(over["overload_stop"][0]))
        return info


__all__ = ["ArmEnv", "check_action", "check_overload_option", "flat_obs", "obs_layout",
           "overload_info"]
