"""PPO on the arm environments: a stable-baselines3 ``VecEnv`` over :class:`ArmVectorEnv`,
a residual action, training and the point-to-point metrics.

``train(EnvSpec(actuator="mujoco"), PPOConfig())`` returns a ``stable_baselines3.PPO``;
``evaluate(model, EnvSpec(actuator="twin", units=(8, 9)), episodes=2)`` its metrics.

The residual action. The policy outputs ``a`` in [-1, 1]^n; the goal sent to the servos is
``target + residual_scale * a`` (clipped to the joint ranges by the environment), where
``target`` is the task's reference goal for the next step. ``a = 0`` is the plain controller
that sends the reference; PPO only learns the correction (lead, overshoot compensation),
which it finds in a few thousand steps where learning absolute goals takes far longer.

Observation (``5 n``, ``float32``): ``(target - q) / 0.1``, ``qd / 10``, ``effort``, ``target``,
``(ref[k + 1 + lookahead] - target) / 0.1`` (temperature and voltage left out: constant in the
fixed-rate simulators). Reward: ``-reward_scale * (mean |q - ref| + effort_weight mean |effort|)``.

The reference (``EnvSpec.reference``): ``"track"`` is the task's own (the ``free`` task's
minimum-jerk via points and sines); ``"step"`` is point-to-point: the task's reference sampled
every ``hold_s`` seconds and held, so the arm gets a step to a new goal at each hold's start.

Episode ends. :class:`ArmVectorEnv` resets a finished row on the *next* step (Gymnasium's
next-step autoreset); stable-baselines3 expects the reset in the *same* step: ``done`` with
the new episode's first observation, the final one in ``info["terminal_observation"]``. The
adapter restarts finished rows at once (the vector environment's own row start, so rows keep
playing episodes ``row``, ``row + num_envs``, ...) and never shows the next-step reset.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv

from neuract.envs import ArmVectorEnv
from neuract.envs.tasks import RATE_HZ
from neuract.errors import ConfigError

ERR_SCALE = 0.1  # rad: the observation's error and lookahead units


def _refuse(name: str, value: Any, accepted: str) -> None:
    raise ConfigError(f"{name} = {value!r}; accepted: {accepted}")


@dataclass
class EnvSpec:
    """Which arm, actuator and reference the policy trains or is evaluated on.

    actuator: anything ``ArmVectorEnv(actuator=)`` takes; ``"twin"`` with ``units`` runs each
    unit's hidden servos. units: twin units whose episode tables (and, for ``"twin"``,
    servos) the rows play; rows are shared out over them in order.
    """

    robot: str = "so101"
    task: str = "free"
    actuator: Any = "mujoco"
    units: tuple[int, ...] = (0,)
    reference: str = "step"  # step | track
    hold_s: float = 1.0
    episode_s: float = 4.0
    seed: int = 0
    residual_scale: float = 0.15  # rad
    effort_weight: float = 0.05
    reward_scale: float = 10.0
    lookahead: int = 3

    def validate(self) -> None:
        if self.reference not in ("step", "track"):
            _refuse("reference", self.reference, "'step' (point-to-point) or 'track'")
        if not self.units or not all(isinstance(u, int) and u >= 0 for u in self.units):
            _refuse("units", self.units, "a non-empty tuple of integers >= 0")
        for name in ("hold_s", "residual_scale", "reward_scale"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                _refuse(name, v, "a finite number > 0")
        if not (np.isfinite(self.effort_weight) and self.effort_weight >= 0):
            _refuse("effort_weight", self.effort_weight, "a finite number >= 0")
        if not (isinstance(self.lookahead, int) and self.lookahead >= 1):
            _refuse("lookahead", self.lookahead, "an integer >= 1")


@dataclass
class PPOConfig:
    """PPO sized for a 2-core machine (about 10k steps a minute with MuJoCo's servo)."""

    n_envs: int = 8
    n_steps: int = 128  # per row between updates
    total_timesteps: int = 20_000
    learning_rate: float = 3e-4
    batch_size: int = 256
    n_epochs: int = 5
    gamma: float = 0.95
    seed: int = 0
    net: tuple[int, ...] = field(default=(64, 64))
    log_std_init: float = -1.0
    torch_threads: int = 1

    def validate(self) -> None:
        for name in ("n_envs", "n_steps", "total_timesteps", "batch_size", "n_epochs",
                     "torch_threads"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                _refuse(name, v, "an integer >= 1")
        if not (isinstance(self.seed, int) and self.seed >= 0):
            _refuse("seed", self.seed, "an integer >= 0")
        if not (np.isfinite(self.learning_rate) and self.learning_rate > 0):
            _refuse("learning_rate", self.learning_rate, "a learning rate > 0")
        if not 0 < self.gamma <= 1:
            _refuse("gamma", self.gamma, "a discount in (0, 1]")
        if not self.net or not all(isinstance(h, int) and h >= 1 for h in self.net):
            _refuse("net", self.net, "hidden layer widths, integers >= 1")


def _stepify(ref: np.ndarray, hold: int) -> None:
    """Hold ``ref`` (K, n) in place at its samples 0, hold, 2 hold, ..."""
    idx = (np.arange(len(ref)) // hold) * hold
    ref[:] = ref[idx].copy()


class ArmSB3VecEnv(VecEnv):
    """``n_envs`` rows of ``spec`` as a stable-baselines3 ``VecEnv`` (see the module
    docstring); one :class:`ArmVectorEnv` per unit of ``spec.units``."""

    def __init__(self, spec: EnvSpec, n_envs: int):
        spec.validate()
        U = len(spec.units)
        if not (isinstance(n_envs, int) and n_envs >= U):
            _refuse("n_envs", n_envs, f"an integer >= the number of units ({U})")
        self.spec = spec
        counts = [n_envs // U + (i < n_envs % U) for i in range(U)]
        self.vecs: list[ArmVectorEnv] = []
        self.slices: list[slice] = []
        start = 0
        for u, c in zip(spec.units, counts):
            act = spec.actuator
            if isinstance(act, tuple):  # a stateful actuator: one copy per batch
                act = copy.deepcopy(act)
            self.vecs.append(ArmVectorEnv(c, spec.robot, spec.task, actuator=act,
                                          episode_s=spec.episode_s, unit=u, seed=spec.seed))
            self.slices.append(slice(start, start + c))
            start += c
        v0 = self.vecs[0]
        self.n = v0.tm.n
        self.layout = v0.obs_layout
        self.rate = RATE_HZ[spec.robot]
        self.hold = max(1, round(spec.hold_s * self.rate))
        obs_space = spaces.Box(-np.inf, np.inf, (5 * self.n,), np.float32)
        act_space = spaces.Box(-1.0, 1.0, (self.n,), np.float32)
        super().__init__(n_envs, obs_space, act_space)
        self._actions: np.ndarray | None = None
        self._target = np.zeros((n_envs, self.n))
        self._ret = np.zeros(n_envs)
        self._len = np.zeros(n_envs, np.int64)
        self.episode_returns: list[float] = []
        self.recording = False  # keep every finished episode's samples in :attr:`finished`
        self.finished: list[dict[str, Any]] = []
        self._cur: list[dict[str, Any]] = [{} for _ in range(n_envs)]
        self._trace: list[list[dict[str, Any]]] = [[] for _ in range(n_envs)]
        self._unit = [u for u, sl in zip(spec.units, self.slices)
                      for _ in range(sl.start, sl.stop)]

    # -- observation ------------------------------------------------------------------------
    def _ref_at(self, vec: ArmVectorEnv, ahead: int) -> np.ndarray:
        b = vec.backend
        return np.stack([b.ref[e][min(int(b.k[e]) + ahead, len(b.ref[e]) - 1)]
                         for e in range(vec.num_envs)])

    def _obs(self, vec: ArmVectorEnv, q, qd, effort) -> np.ndarray:
        """(rows, 5 n) policy observations; remembers the targets the next action adds to."""
        target = self._ref_at(vec, 1)
        look = self._ref_at(vec, 1 + self.spec.lookahead)
        return np.concatenate([(target - q) / ERR_SCALE, qd / 10.0, effort, target,
                               (look - target) / ERR_SCALE], 1).astype(np.float32), target

    def _split(self, flat: np.ndarray):
        lay = self.layout
        return flat[:, lay["q"]].astype(np.float64), flat[:, lay["qd"]].astype(np.float64), \
            flat[:, lay["effort"]].astype(np.float64)

    def _sample(self, i0: int, vec: ArmVectorEnv, t, q, qd, effort, volt, rows=None) -> None:
        """Remember each row's current reading (the sample a goal is sent after)."""
        ref = self._ref_at(vec, 0)
        for e in (range(vec.num_envs) if rows is None else rows):
            self._cur[i0 + e] = {"t": float(t[e]), "q": q[e], "qd": qd[e], "effort": effort[e],
                                 "voltage": float(volt[e]), "ref": ref[e]}

    def _log(self, i: int, goal: np.ndarray, end: bool = False) -> None:
        if not self.recording:
            return
        self._trace[i].append({**self._cur[i], "goal": goal.copy()})
        if end:
            tr = self._trace[i]
            ep = {k: np.array([s[k] for s in tr]) for k in tr[0]}
            self.finished.append({**ep, "unit": self._unit[i]})
            self._trace[i] = []

    def _prepare(self, vec: ArmVectorEnv, rows: list[int]) -> None:
        if self.spec.reference == "step":
            for e in rows:
                _stepify(vec.backend.ref[e], self.hold)

    # -- VecEnv -----------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        out = np.zeros((self.num_envs, 5 * self.n), np.float32)
        for i, (vec, sl) in enumerate(zip(self.vecs, self.slices)):
            seed = self._seeds[sl.start]
            flat, info = vec.reset(seed=self.spec.seed + i if seed is None else seed)
            self._prepare(vec, list(range(vec.num_envs)))
            q, qd, effort = self._split(flat)
            out[sl], self._target[sl] = self._obs(vec, q, qd, effort)
            self._sample(sl.start, vec, info["t"], q, qd, effort,
                         flat[:, self.layout["voltage"]][:, 0])
        self._ret[:] = 0.0
        self._len[:] = 0
        self._trace = [[] for _ in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return out

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.clip(np.asarray(actions, dtype=np.float64).reshape(
            self.num_envs, self.n), -1.0, 1.0)

    def goals(self, actions: np.ndarray) -> np.ndarray:
        """(E, n) goal positions [rad] of residual ``actions`` at the current step."""
        return self._target + self.spec.residual_scale * actions

    def step_wait(self):
        goals = self.goals(self._actions)
        obs = np.zeros((self.num_envs, 5 * self.n), np.float32)
        rew = np.zeros(self.num_envs, np.float32)
        dones = np.zeros(self.num_envs, bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for vec, sl in zip(self.vecs, self.slices):
            for e in range(vec.num_envs):
                self._log(sl.start + e, goals[sl.start + e])
            flat, _, _, trunc, info = vec.step(goals[sl])
            q, qd, effort = self._split(flat)
            self._sample(sl.start, vec, info["t"], q, qd, effort,
                         flat[:, self.layout["voltage"]][:, 0])
            ref_now = self._ref_at(vec, 0)
            r = -(np.abs(q - ref_now).mean(1) + self.spec.effort_weight
                  * np.abs(effort).mean(1)) * self.spec.reward_scale
            o, tgt = self._obs(vec, q, qd, effort)
            ended = np.flatnonzero(trunc).tolist()
            if ended:
                for e in ended:
                    infos[sl.start + e].update({"terminal_observation": o[e].copy(),
                                                "TimeLimit.truncated": True})
                    self._log(sl.start + e, goals[sl.start + e], end=True)
                vec.restart(ended)  # the row's next episode now, as SB3 expects
                self._prepare(vec, ended)
                rd = vec.backend.read()
                o2, t2 = self._obs(vec, rd.q, rd.qd, rd.effort)
                self._sample(sl.start, vec, rd.t, rd.q, rd.qd, rd.effort, rd.voltage, ended)
                o[ended], tgt[ended] = o2[ended], t2[ended]
            obs[sl], rew[sl], dones[sl], self._target[sl] = o, r, trunc, tgt
        self._bookkeep(rew, dones, infos)
        return obs, rew, dones, infos

    def _bookkeep(self, rew, dones, infos) -> None:
        self._ret += rew
        self._len += 1
        for i in np.flatnonzero(dones):
            infos[i]["episode"] = {"r": float(self._ret[i]), "l": int(self._len[i]), "t": 0.0}
            self.episode_returns.append(float(self._ret[i]))
            self._ret[i], self._len[i] = 0.0, 0

    def _vec_of(self, i: int) -> ArmVectorEnv:
        return next(v for v, s in zip(self.vecs, self.slices) if s.start <= i < s.stop)

    def close(self) -> None:
        for v in self.vecs:
            v.close()

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return [getattr(self._vec_of(i), attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        for i in self._get_indices(indices):
            setattr(self._vec_of(i), attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs):
        return [getattr(self._vec_of(i), method_name)(*method_args, **method_kwargs)
                for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]


# -- training -------------------------------------------------------------------------------
def make_ppo(env: VecEnv, cfg: PPOConfig):
    """A fresh ``stable_baselines3.PPO`` on ``env`` with ``cfg``'s sizes."""
    import torch
    from stable_baselines3 import PPO

    cfg.validate()
    torch.set_num_threads(cfg.torch_threads)
    return PPO("MlpPolicy", env, learning_rate=cfg.learning_rate, n_steps=cfg.n_steps,
               batch_size=cfg.batch_size, n_epochs=cfg.n_epochs, gamma=cfg.gamma,
               seed=cfg.seed, device="cpu", verbose=0,
               policy_kwargs={"net_arch": list(cfg.net), "log_std_init": cfg.log_std_init})


def train(spec: EnvSpec, cfg: PPOConfig, model=None, timesteps: int | None = None):
    """PPO on ``cfg.n_envs`` rows of ``spec``: a new model, or ``model`` trained on (continued
    with its optimiser state and step count); ``timesteps`` defaults to
    ``cfg.total_timesteps``."""
    cfg.validate()
    env = ArmSB3VecEnv(spec, cfg.n_envs)
    if model is None:
        model = make_ppo(env, cfg)
        model.learn(timesteps or cfg.total_timesteps)
    else:
        model.set_env(env)
        model.learn(timesteps or cfg.total_timesteps, reset_num_timesteps=False)
    return model


# -- evaluation -----------------------------------------------------------------------------
def rollout(model, spec: EnvSpec, episodes: int) -> list[dict[str, Any]]:
    """``episodes`` episodes per unit of ``spec`` (one row per unit), the policy's mean action
    (``model=None``: the zero residual, i.e. sending the reference). Each episode: arrays
    ``t`` (T,), ``q``, ``qd``, ``effort``, ``ref`` (the reference at each sample), ``goal`` (the
    goal sent after each sample; the last repeated) (T, n), ``voltage`` (T,), and ``unit``."""
    env = ArmSB3VecEnv(spec, len(spec.units))
    env.recording = True
    obs = env.reset()
    while min(sum(ep["unit"] == u for ep in env.finished) for u in spec.units) < episodes:
        if model is None:
            act = np.zeros((env.num_envs, env.n))
        else:
            act, _ = model.predict(obs, deterministic=True)
        obs, *_ = env.step(act)
    out = []
    for u in spec.units:
        out += [ep for ep in env.finished if ep["unit"] == u][:episodes]
    return out


def step_metrics(t: np.ndarray, q: np.ndarray, ref: np.ndarray, min_step: float = 0.05,
                 band: float = 0.05, band_min: float = 0.01) -> dict[str, float]:
    """Point-to-point metrics of one episode: positions ``q`` against a piecewise-constant
    reference ``ref`` (both (T, n) [rad]) at times ``t`` (T,) [s].

    - ``tracking_rms_mrad``: sqrt of the mean over samples and joints of (q - ref)^2, x 1000.
    - A *step* is a sample where a joint's reference jumps by ``|D| >= min_step`` rad; its
      segment runs to the next jump of any size (or the episode's end). Per step:
    - ``drift_mrad``: the mean |q - ref| over the last 20 % of the segment (the final-position
      error the arm is left with).
    - ``overshoot_pct``: max over the segment of (q - ref) sign(D), at least 0, over |D|, x 100.
    - ``settle_s``: from the sample the new goal is sent at (the one before the reference's
      jump) to the first sample from which |q - ref| stays within ``max(band |D|, band_min)``
      to the segment's end (to the segment's end if it never does).
    Step metrics are means over every joint's steps (NaN if there are none).
    """
    q, ref, t = np.asarray(q, float), np.asarray(ref, float), np.asarray(t, float)
    e = q - ref
    out = {"tracking_rms_mrad": float(np.sqrt(np.mean(e ** 2)) * 1e3)}
    d = np.diff(ref, axis=0)
    drift, over, settle = [], [], []
    for j in range(q.shape[1]):
        jumps = np.flatnonzero(np.abs(d[:, j]) > 1e-12) + 1
        ends = list(jumps[1:]) + [len(t)]
        for k, end in zip(jumps, ends):
            D = ref[k, j] - ref[k - 1, j]
            if abs(D) < min_step or end - k < 2:
                continue
            seg = e[k:end, j]
            tail = seg[int(0.8 * len(seg)):]
            drift.append(np.mean(np.abs(tail)) * 1e3)
            over.append(max(0.0, float(np.max(seg * np.sign(D)))) / abs(D) * 100.0)
            outside = np.flatnonzero(np.abs(seg) > max(band * abs(D), band_min))
            i_set = 0 if len(outside) == 0 else outside[-1] + 1
            t_end = t[end] if end < len(t) else t[-1]
            settle.append((t[k + i_set] if i_set < len(seg) else t_end) - t[k - 1])
    for name, vals in (("drift_mrad", drift), ("overshoot_pct", over), ("settle_s", settle)):
        out[name] = float(np.mean(vals)) if vals else float("nan")
    out["n_steps"] = float(len(over))
    return out


def evaluate(model, spec: EnvSpec, episodes: int = 1) -> dict[str, float]:
    """:func:`step_metrics` averaged over ``episodes`` episodes of each unit of ``spec``
    (``spec.reference = "step"`` for the step metrics to have steps)."""
    eps = rollout(model, spec, episodes)
    rows = [step_metrics(ep["t"], ep["q"], ep["ref"]) for ep in eps]
    keys = rows[0].keys()
    return {k: float(np.nanmean([r[k] for r in rows])) if any(np.isfinite(r[k]) for r in rows)
            else float("nan") for k in keys}


__all__ = ["ArmSB3VecEnv", "EnvSpec", "PPOConfig", "evaluate", "make_ppo", "rollout",
           "step_metrics", "train"]
