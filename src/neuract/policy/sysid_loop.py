"""System identification inside the RL loop: deploy, record, identify, train on, repeat.

``run_experiment(LoopConfig())`` trains and evaluates three kinds of policy on the same
point-to-point task (see :mod:`neuract.policy.rl`):

(i) ``mujoco``: PPO in MuJoCo with the shipped model's position servo.
(ii) ``loop``: (i) deployed on the twin's *training* units (``actuator="twin"``: their
     hidden servos, the "real robot"), each episode's telemetry recorded as neuract
     :class:`~neuract.data.Trajectory` (``t``, ``q``, ``qd``, ``q_goal`` = the goals sent,
     ``voltage``), a parametric servo identified pose-only from them with
     :func:`neuract.fit.identify.identify` (a short fit, warm-started from the previous
     iteration's), PPO continued in the identified simulator (``actuator=(servo, joints)``),
     redeployed; ``iterations`` times, each iteration evaluated.
(iii) ``oracle``: PPO trained directly on the training units' hidden servos, with the budget
     of (i) plus all of (ii)'s continued training.

All are evaluated on *unseen* units (``eval_units``: their hidden servos and episodes).
``gap_closed = (rms_mujoco - rms_loop_last) / (rms_mujoco - rms_oracle)`` (1: the loop is as
good as the oracle; 0: no better than MuJoCo's servo).

``gap_closed`` is reported for each identification run.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from neuract.actuators import ActuatorConfig
from neuract.data import Trajectory, TrajectoryMeta
from neuract.envs.tasks import RATE_HZ
from neuract.errors import ConfigError
from neuract.fit.identify import build_model, identify
from neuract.fit.trainer import SystemModel, TrainConfig
from neuract.neuralactuator.config import ModelSize, NeuralActuatorConfig, servo_json
from neuract.neuralactuator.train import NeuralActuatorTrainConfig
from neuract.policy.rl import EnvSpec, PPOConfig, evaluate, rollout, train
from neuract.sim.simulate import JointParamsConfig

FIT_ROBOT = {"so101": "so101", "omx": "omx_arm"}
"""the bundled description ``neuract fit`` simulates each arm with (the environment's)"""


IDENTIFICATIONS = ("parametric", "neural")
TAU_MAX = {"so101": (3.35,), "omx": (4.1,)}
"""[N m] the servos' stall torque (STS3215 at 12 V; XM430-W350 at 12 V), the NeuralActuator's
torque bound, as the experiments' setups (:mod:`neuract.pipeline.setups`) use"""


def _quick_fit() -> TrainConfig:
    return TrainConfig(seed=0, horizons=(1.0, 2.0), stage_iters=(20, 20), val_every=10)


def _na_train() -> NeuralActuatorTrainConfig:
    return NeuralActuatorTrainConfig(steps=150, batch=16, horizon=24, seed=0)


def _na_size() -> ModelSize:
    return ModelSize(d_model=32, n_layers=2, n_heads=4, d_ff=64, d_trunk=32, history=8)


@dataclass
class LoopConfig:
    """The experiment; timesteps are environment steps summed over rows."""

    robot: str = "so101"
    task: str = "free"
    train_units: tuple[int, ...] = (0, 1, 2, 3)
    eval_units: tuple[int, ...] = (8, 9, 10, 11)
    iterations: int = 3
    record_episodes: int = 1  # per training unit and iteration
    eval_episodes: int = 1  # per unseen unit
    base_timesteps: int = 20_000  # (i), in MuJoCo
    continue_timesteps: int = 8_000  # (ii), per iteration in the identified simulator
    episode_s: float = 4.0
    identifications: tuple[str, ...] = ("parametric",)
    """the loops to run side by side: ``parametric`` and/or ``neural``"""
    actuator: ActuatorConfig = field(
        default_factory=lambda: ActuatorConfig(type="sts3215", friction="stribeck"))
    joints: JointParamsConfig = field(default_factory=JointParamsConfig)
    fit: TrainConfig = field(default_factory=_quick_fit)
    na: NeuralActuatorTrainConfig = field(default_factory=_na_train)
    """the neural loop's NeuralActuator training per iteration (simulator mode, pose-only)"""
    na_size: ModelSize = field(default_factory=_na_size)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    seed: int = 0

    def validate(self) -> None:
        if self.robot not in FIT_ROBOT:
            raise ConfigError(f"robot = {self.robot!r}; accepted: {sorted(FIT_ROBOT)}")
        bad = [i for i in self.identifications if i not in IDENTIFICATIONS]
        if bad or not self.identifications or len(set(self.identifications)) < len(
                self.identifications):
            raise ConfigError(f"identifications = {self.identifications!r}; accepted: distinct "
                              f"names from {list(IDENTIFICATIONS)}")
        for name in ("iterations", "record_episodes", "eval_episodes", "base_timesteps",
                     "continue_timesteps"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= (0 if name == "iterations" else 1)):
                raise ConfigError(f"{name} = {v!r}; accepted: an integer >= "
                                  f"{0 if name == 'iterations' else 1}")
        for name in ("train_units", "eval_units"):
            units = getattr(self, name)
            if not units or not all(isinstance(u, int) and u >= 0 for u in units):
                raise ConfigError(f"{name} = {units!r}; accepted: a non-empty tuple of unit "
                                  "numbers >= 0")
        if set(self.train_units) & set(self.eval_units):
            raise ConfigError(f"eval_units {self.eval_units} share units with train_units "
                              f"{self.train_units}; accepted: unseen units only")
        self.ppo.validate()
        self.fit.validate()

    def spec(self, actuator: Any, units: tuple[int, ...]) -> EnvSpec:
        return EnvSpec(robot=self.robot, task=self.task, actuator=actuator, units=units,
                       episode_s=self.episode_s, seed=self.seed)


def to_trajectories(episodes: list[dict[str, Any]], robot: str, joint_names: list[str]
                    ) -> list[Trajectory]:
    """Recorded episodes (:func:`neuract.policy.rl.rollout`) as neuract trajectories."""
    out = []
    for i, ep in enumerate(episodes):
        T, n = ep["q"].shape
        ch = {"t": ep["t"] - ep["t"][0], "q": ep["q"], "qd": ep["qd"], "q_goal": ep["goal"],
              "voltage": np.repeat(ep["voltage"][:, None], n, 1)}
        meta = TrajectoryMeta(robot=robot, joint_names=tuple(joint_names), source="rl-loop",
                              rate_hz=RATE_HZ[robot], name=f"unit{ep['unit']}_ep{i}",
                              labels={"unit": int(ep["unit"])})
        out.append(Trajectory(ch, meta))
    return out


def identify_servo(trajs: list[Trajectory], cfg: LoopConfig, init: SystemModel | None = None
                   ) -> tuple[SystemModel, dict[str, Any]]:
    """A parametric servo and joint parameters fitted pose-only to ``trajs`` (warm-started
    from a copy of ``init`` when given)."""
    model = copy.deepcopy(init) if init is not None else None
    return identify(trajs, cfg.actuator, cfg.joints, cfg.fit, FIT_ROBOT[cfg.robot],
                    val_fraction=0.0, model=model)


def initial_servo(cfg: LoopConfig, n: int) -> SystemModel:
    """The servo identification starts from (the configuration's defaults)."""
    return build_model(cfg.actuator, cfg.joints, n)


def _clone(model):
    """An independent copy of a stable-baselines3 model (saved and loaded in memory)."""
    from stable_baselines3 import PPO

    buf = io.BytesIO()
    model.save(buf)
    buf.seek(0)
    return PPO.load(buf, device="cpu")


@functools.cache
def _robot_joint_names(robot: str) -> tuple[str, ...]:
    """The twin model's joint names of ``robot`` (built once per robot, not per iteration)."""
    from neuract.twin.model import build_model as twin_model

    return tuple(twin_model(robot, 500.0).joint_names)


def _joint_names(cfg: LoopConfig) -> list[str]:
    return list(_robot_joint_names(cfg.robot))


def identify_neural(trajs: list[Trajectory], cfg: LoopConfig, servo: SystemModel,
                    init: Any | None = None) -> tuple[Any, dict[str, Any]]:
    """A simulator-mode NeuralActuator trained pose-only on ``trajs`` with ``servo`` (the
    iteration's identified parametric servo) as its frozen prior; fine-tunes ``init`` (the
    previous iteration's network, its prior replaced by ``servo``) when given. Returns the
    :class:`~neuract.neuralactuator.TransformerActuator` and the training report."""
    import torch

    from neuract.neuralactuator import TransformerActuator, train_neuralactuator
    from neuract.robot import load_robot

    ncfg = NeuralActuatorConfig(n_joints=len(trajs[0].meta.joint_names), mode="simulator",
                                **dataclasses.asdict(cfg.na_size), tau_max=TAU_MAX[cfg.robot],
                                prior="servo", servo=servo_json(cfg.actuator, cfg.joints))
    prior = copy.deepcopy(servo).float()
    if init is not None:
        init = copy.deepcopy(init.model).requires_grad_(True)  # (the actuator froze it)
        init.servo_model = prior.requires_grad_(False)
    torch.manual_seed(cfg.seed)
    robot = load_robot(FIT_ROBOT[cfg.robot], dtype=torch.float32)
    model, rep = train_neuralactuator(trajs, robot, ncfg, cfg.na, init=init,
                                      servo=None if init is not None else prior)
    return TransformerActuator(model), rep


def loop_iteration(policy, cfg: LoopConfig, servo: SystemModel | None,
                   log: Callable[[str], None] = print, neural: Any | None = None,
                   kind: str = "parametric") -> tuple[Any, SystemModel, dict]:
    """One turn of (ii): deploy ``policy`` on the training units, record, identify (from
    ``servo``; ``kind="neural"``: then the NeuralActuator on it, from ``neural``), continue
    PPO in the identified simulator. Returns (policy, servo, report); the neural loop's
    network is ``report["_actuator"]``."""
    t0 = time.perf_counter()
    eps = rollout(policy, cfg.spec("twin", cfg.train_units), cfg.record_episodes)
    trajs = to_trajectories(eps, cfg.robot, _joint_names(cfg))
    t1 = time.perf_counter()
    servo, fit_report = identify_servo(trajs, cfg, servo)
    pair: tuple[Any, Any] = (servo.actuator, servo.joints)
    extra: dict[str, Any] = {}
    if kind == "neural":
        t_na = time.perf_counter()
        act, na_rep = identify_neural(trajs, cfg, servo, neural)
        pair = (act, act.joints)
        extra = {"_actuator": act, "na_s": time.perf_counter() - t_na,
                 "na_final_loss": float(na_rep["history"][-1]["loss"])
                 if na_rep.get("history") else float("nan")}
    t2 = time.perf_counter()
    policy = train(cfg.spec(pair, cfg.train_units), cfg.ppo, model=policy,
                   timesteps=cfg.continue_timesteps)
    t3 = time.perf_counter()
    report = {"record_s": t1 - t0, "fit_s": t2 - t1, "train_s": t3 - t2,
              "fit_train_mae_mrad": 1e3 * float(fit_report["train_mae_rad"]),
              "recorded_episodes": len(trajs),
              "parameters": servo.physical_parameters(), **extra}
    log(f"  recorded {len(trajs)} episodes ({t1 - t0:.0f} s), fit {t2 - t1:.0f} s "
        f"(train MAE {report['fit_train_mae_mrad']:.2f} mrad), PPO {t3 - t2:.0f} s")
    return policy, servo, report


def gap_closed(rms_mujoco: float, rms_loop: float, rms_oracle: float) -> float:
    """Fraction of the (i) -> (iii) tracking-RMS gap the loop closes (NaN without a gap)."""
    gap = rms_mujoco - rms_oracle
    return float((rms_mujoco - rms_loop) / gap) if abs(gap) > 1e-12 else float("nan")


def run_experiment(cfg: LoopConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """(i), (ii) with ``cfg.iterations`` iterations and (iii), evaluated on the unseen units
    (see the module docstring); a JSON-ready result."""
    cfg.validate()
    ev = cfg.spec("twin", cfg.eval_units)
    res: dict[str, Any] = {"config": {"robot": cfg.robot, "train_units": cfg.train_units,
                                      "eval_units": cfg.eval_units,
                                      "iterations": cfg.iterations}}
    t0 = time.perf_counter()
    res["reference"] = evaluate(None, ev, cfg.eval_episodes)
    base = train(cfg.spec("mujoco", cfg.train_units), cfg.ppo, timesteps=cfg.base_timesteps)
    res["mujoco"] = evaluate(base, ev, cfg.eval_episodes)
    res["mujoco"]["train_s"] = time.perf_counter() - t0
    log(f"(i) mujoco: {res['mujoco']['tracking_rms_mrad']:.2f} mrad "
        f"(sending the reference: {res['reference']['tracking_rms_mrad']:.2f})")
    loops = {}
    for kind in cfg.identifications:
        policy, servo, net, iters = _clone(base), None, None, []
        for k in range(cfg.iterations):
            log(f"(ii) {kind} identification, iteration {k + 1}/{cfg.iterations}")
            policy, servo, rep = loop_iteration(policy, cfg, servo, log, net, kind)
            net = rep.pop("_actuator", None)
            rep.update(iteration=k + 1, **evaluate(policy, ev, cfg.eval_episodes))
            iters.append(rep)
            log(f"  loop ({kind}): {rep['tracking_rms_mrad']:.2f} mrad")
        loops[kind] = iters
        res[f"loop_{kind}"] = iters
    t0 = time.perf_counter()
    budget = cfg.base_timesteps + cfg.iterations * cfg.continue_timesteps
    oracle = train(cfg.spec("twin", cfg.train_units), cfg.ppo, timesteps=budget)
    res["oracle"] = evaluate(oracle, ev, cfg.eval_episodes)
    res["oracle"]["train_s"] = time.perf_counter() - t0
    log(f"(iii) oracle: {res['oracle']['tracking_rms_mrad']:.2f} mrad")
    rms = res["tracking_rms_mrad"] = {"mujoco": res["mujoco"]["tracking_rms_mrad"]}
    res["gap_closed"] = {}
    for kind, iters in loops.items():
        rms[f"loop_{kind}"] = [it["tracking_rms_mrad"] for it in iters]
        last = iters[-1]["tracking_rms_mrad"] if iters else rms["mujoco"]
        res["gap_closed"][kind] = gap_closed(rms["mujoco"], last,
                                             res["oracle"]["tracking_rms_mrad"])
    rms["oracle"] = res["oracle"]["tracking_rms_mrad"]
    return res


def quick_config(seed: int = 0) -> LoopConfig:
    """A tiny loop for tests and ``--quick``: two training units, one iteration."""
    return LoopConfig(train_units=(0, 1), eval_units=(8,), iterations=1,
                      base_timesteps=512, continue_timesteps=256, episode_s=2.0,
                      fit=TrainConfig(seed=0, horizons=(0.5,), stage_iters=(6,), val_every=3),
                      ppo=replace(PPOConfig(), n_envs=2, n_steps=64, batch_size=64),
                      na=NeuralActuatorTrainConfig(steps=3, batch=4, horizon=8, seed=0),
                      seed=seed)


__all__ = ["FIT_ROBOT", "IDENTIFICATIONS", "LoopConfig", "gap_closed", "identify_neural",
           "identify_servo", "initial_servo",
           "loop_iteration", "quick_config", "run_experiment", "to_trajectories"]
