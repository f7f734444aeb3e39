"""One episode of an arm environment driven by a controller, with the frozen estimator's
external-force estimate streamed on the same telemetry.

The telemetry sample of step ``k`` is what the environment observed (``q``, ``qd``, the
servo ``load`` = minus the observation's ``effort``, ``voltage``, ``temperature``, the time
``info['t']``) plus the goal sent at that tick (``q_goal``, as the twin's host records it).
The estimator reads the sample once the controller has chosen that goal, so the controller
of step ``k`` sees the estimate of sample ``k - 1`` (one telemetry period old; zeros until
the estimator's history has filled).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuract.envs.tasks import draw_episode
from neuract.errors import ConfigError
from neuract.estimate.stream import StreamingEstimator
from neuract.neuralactuator.model import NeuralActuator
from neuract.policy.expert import Kinematics, lift_success, pick_success

SAMPLE_CHANNELS = ("q", "qd", "q_goal", "load", "voltage", "temperature")
"""the telemetry channels an environment's step gives the estimator"""


class ForceStream:
    """A frozen estimator-mode NeuralActuator streamed on an environment's telemetry."""

    def __init__(self, model: NeuralActuator, network: str = "torch"):
        mode = getattr(model.cfg, "mode", None)
        if mode != "estimator":
            raise ConfigError(f"the force estimate needs an estimator-mode NeuralActuator; this "
                              f"checkpoint's mode is {mode!r} (accepted: 'estimator')")
        for p in model.parameters():
            p.requires_grad_(False)
        self.est = StreamingEstimator(model.eval(), network=network)
        missing = [c for c in self.est.inputs if c not in SAMPLE_CHANNELS]
        if missing:
            raise ConfigError(f"the estimator reads channels {missing} that the environment "
                              f"does not report; accepted: {list(SAMPLE_CHANNELS)}")
        self.fhat = np.zeros(3)

    def reset(self) -> None:
        self.est.reset()
        self.fhat = np.zeros(3)

    def update(self, obs: np.ndarray, lay: dict[str, slice], goal: np.ndarray, t: float
               ) -> np.ndarray:
        """Stream one sample (the observation and the goal sent with it); the new estimate
        (3,) [N], zeros while the estimator is not valid yet."""
        sample = {"t": t, "q": obs[lay["q"]], "qd": obs[lay["qd"]], "q_goal": goal,
                  "load": -obs[lay["effort"]], "voltage": obs[lay["voltage"]],
                  "temperature": obs[lay["temperature"]]}
        out = self.est.step(sample)
        self.fhat = out["ee_force"] if out["valid"] else np.zeros(3)
        return self.fhat


@dataclass
class Step:
    """What a controller sees at one step: the observation's q, qd, target (the reference
    goal for this tick), the last goal sent, the force estimate (zeros without an
    estimator) and the privileged payload (only the expert reads it)."""

    q: np.ndarray
    qd: np.ndarray
    target: np.ndarray
    a_prev: np.ndarray
    fhat: np.ndarray
    payload_kg: float


Controller = Callable[[Step], np.ndarray]


@dataclass
class Trace:
    """One episode: per step the sample time, joint positions, reference, goal sent, force
    estimate the controller saw and end-effector error [m]; the trial's outcome."""

    task: str
    unit: int
    episode: int
    payload_kg: float
    release_t: float
    t: np.ndarray
    q: np.ndarray
    ref: np.ndarray
    goal: np.ndarray
    fhat: np.ndarray
    q0: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """the joint positions observed at reset (the trial's initial state)"""
    feats: list[Step] = field(default_factory=list, repr=False)
    err: np.ndarray = field(default_factory=lambda: np.zeros(0))
    overloads: int = 0
    overload_reported: bool = False
    success: bool = False


def _overload(info: dict[str, Any]) -> tuple[int, bool]:
    """(servos tripped so far, whether the environment reports it at all): the status
    register stays set once a servo trips, so the episode's stops are the last count."""
    if "overload" not in info:
        return 0, False
    return int(np.sum(np.asarray(info["overload"], dtype=bool))), True


def run_episode(env: Any, act: Controller, seed: int, unit: int, episode: int,
                force: ForceStream | None = None, keep_steps: bool = False) -> Trace:
    """Run ``act`` on episode ``episode`` of ``unit`` (environment seed ``seed``); the env
    must be privileged (the expert and the trial record read the payload)."""
    base = env.unwrapped
    if not base.privileged:
        raise ConfigError("run_episode needs an environment made with privileged=True")
    lay = base.obs_layout
    plan = draw_episode(dataclasses_replace_seed(base.cfg, seed), base.tm, unit, episode).plan
    obs, info = env.reset(seed=seed, options={"episode": episode, "unit": unit})
    if force is not None:
        force.reset()
    fhat, a_prev = np.zeros(3), obs[lay["target"]].astype(np.float64)
    q0 = obs[lay["q"]].astype(np.float64)
    rows: dict[str, list] = {k: [] for k in ("t", "q", "ref", "goal", "fhat")}
    feats, over, reported, done = [], 0, False, False
    while not done:
        s = Step(obs[lay["q"]].astype(np.float64), obs[lay["qd"]].astype(np.float64),
                 obs[lay["target"]].astype(np.float64), a_prev, fhat.copy(),
                 float(info.get("payload_kg", 0.0)))
        a = np.asarray(act(s), dtype=np.float64)
        if keep_steps:
            feats.append(s)
        if force is not None:
            fhat = force.update(obs, lay, a, float(info["t"])).copy()
        obs, _, term, trunc, info = env.step(a)
        done = bool(term or trunc)
        n_over, rep = _overload(info)
        over, reported = max(over, n_over), reported or rep
        for k, v in (("t", info["t"]), ("q", obs[lay["q"]]), ("ref", s.target), ("goal", a),
                     ("fhat", s.fhat)):
            rows[k].append(np.asarray(v, dtype=np.float64))
        a_prev = a
    arr = {k: np.array(v) for k, v in rows.items()}
    tr = Trace(base.task, unit, episode, float(plan.payload_kg), float(plan.release_t),
               arr["t"], arr["q"], arr["ref"], arr["goal"], arr["fhat"], q0, feats,
               overloads=over, overload_reported=reported)
    tr.err = Kinematics(base.tm).ee_error(tr.q, tr.ref)
    tr.success = trial_success(tr)
    return tr


def dataclasses_replace_seed(cfg: Any, seed: int) -> Any:
    """The environment's twin options with another seed (as its reset with ``seed`` does)."""
    return dataclasses.replace(cfg, seed=int(seed))


def trial_success(tr: Trace) -> bool:
    """The task's success of a finished episode (:mod:`neuract.policy.expert`)."""
    if tr.task == "lift":
        return lift_success(tr.t, tr.err, tr.overloads)
    if tr.task == "pick":
        return pick_success(tr.t, tr.err, tr.release_t, tr.overloads)
    raise ConfigError(f"task {tr.task!r}; accepted: lift, pick")


__all__ = ["Controller", "ForceStream", "SAMPLE_CHANNELS", "Step", "Trace", "run_episode",
           "trial_success"]
