"""A simulator-mode NeuralActuator as an :class:`~neuract.actuators.base.Actuator`.

:class:`TransformerActuator` is the learned actuator of the NeuralActuator paper in the form
every other actuator family has: :func:`neuract.sim.simulate.simulate` (and anything else that
drives an ``Actuator``: a Gymnasium environment, a controller) rolls it out like a parametric
servo. Per control step it reads its history of (command, simulated q, simulated qd), runs the
Transformer once and holds the torque residual over the physics substeps; per substep:

* ``prior='servo'``: the identified servo model (firmware loop, DC motor, friction) gives the
  torque, and the residual acts as an extra joint torque that the servo's friction budget sees
  like any other load (``state.tau_ext + residual``); the joint parameters (armature, damping,
  offset) are the servo model's, :attr:`TransformerActuator.joints`;
* ``prior='pd'`` / ``'none'``: ``saturate(kp (command - q) - kd qd + residual)``.

This is the rollout :func:`neuract.neuralactuator.rollout.sim_rollout` integrates by hand for
training; the two agree to float32 round-off (tests/test_neuralactuator_actuator.py).

>>> act = TransformerActuator(model)          # a simulator-mode NeuralActuator
>>> rollout = simulate(robot, act, act.joints, q0, qd0, commands, dt, substeps=2)

A new one is built from :class:`TransformerActuatorConfig`, which builds on the configuration of
the physical servo it sits on (the servo's limits always apply; the learned residual is
bounded by ``tau_max``): ``build_transformer_actuator(cfg, n_joints)``. Untrained, its residual
is zero and it rolls out as that servo.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

import torch
from torch import Tensor

from neuract.actuators import ActuatorConfig
from neuract.actuators.base import Actuator, ActuatorState, History
from neuract.errors import ConfigError, SchemaError
from neuract.neuralactuator.checkpoint import load_checkpoint
from neuract.neuralactuator.config import ModelSize, NeuralActuatorConfig, servo_json
from neuract.neuralactuator.features import assemble
from neuract.neuralactuator.model import NeuralActuator
from neuract.sim.simulate import JointParams, JointParamsConfig

PAST = ("q_goal", "q", "qd")
"""channels of :meth:`TransformerActuator.prime`'s measured past"""


class TransformerActuator(Actuator):
    """A simulator-mode :class:`NeuralActuator` (its weights frozen) as an actuator.

    model: the network, ``cfg.mode == 'simulator'``. :attr:`joints` are the joint parameters
    to simulate it with (the servo prior's fitted ones; none for the PD prior).
    """

    def __init__(self, model: NeuralActuator) -> None:
        super().__init__()
        if model.cfg.mode != "simulator":
            raise ConfigError(f"TransformerActuator needs a simulator-mode NeuralActuator; got "
                              f"mode={model.cfg.mode!r} (an estimator reads measured "
                              "telemetry and cannot drive a simulation)")
        if model.cfg.prior == "servo" and model.servo_model is None:
            raise ConfigError("the model has prior='servo' but no servo model")
        self.model = model.eval().requires_grad_(False)
        self.history_len = model.cfg.history
        servo = model.servo_model if model.cfg.prior == "servo" else None
        self.servo = servo.actuator if servo is not None else None
        self.joints = servo.joints if servo is not None else _no_joints(model.cfg.n_joints)
        self._residual: Tensor | None = None
        self._past: History | None = None

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike) -> TransformerActuator:
        """The actuator of a simulator-mode checkpoint (``neuract evaluate`` output)."""
        return cls(load_checkpoint(path))

    @property
    def n_joints(self) -> int:
        return self.model.cfg.n_joints

    # -- history ---------------------------------------------------------------------------
    def prime(self, past: dict[str, Tensor] | None) -> None:
        """Start the next rollouts from a measured past instead of a steady history.

        past: ``q_goal``, ``q``, ``qd``, each (B, history - 1, n): the samples before the
        first command, oldest first (the first :meth:`observe` adds the last frame). None:
        a rollout starts from its first frame repeated (the base class's steady start).
        Kept over :meth:`reset`, as :func:`~neuract.sim.simulate.simulate` resets first.
        """
        if past is None:
            self._past = None
            return
        missing = [k for k in PAST if k not in past]
        if missing:
            raise SchemaError(f"prime: past lacks {missing}; expected {list(PAST)}")
        frames = torch.stack([torch.as_tensor(past[k], dtype=torch.float32) for k in PAST], -1)
        want = (self.history_len - 1, self.n_joints, 3)
        if frames.ndim != 4 or tuple(frames.shape[1:]) != want:
            raise SchemaError(f"prime: past has shape {tuple(frames.shape[:-1])} per channel; "
                              f"expected (B, {want[0]}, {want[1]}) (history - 1 samples)")
        # a full ring whose oldest frame the first push drops: pad with the oldest sample
        buf = torch.cat([frames[:, :1], frames], 1)
        self._past = History(buf, torch.ones(frames.shape[0], dtype=torch.bool))

    def observe(self, command: Tensor, state: ActuatorState) -> None:
        if self.history is None and self._past is not None:
            if self._past.buf.shape[0] != command.shape[0]:
                raise SchemaError(f"primed past has {self._past.buf.shape[0]} rows; the "
                                  f"rollout has {command.shape[0]}")
            self.history = self._past
        super().observe(command, state)
        if self.servo is not None:
            self.servo.observe(command, state)
        h = self.history
        parts = {"q_goal": h.channel("command"), "q": h.channel("q"), "qd": h.channel("qd")}
        x = assemble(parts, self.model.cfg.channels)
        lead = x.shape[:-2]
        res = self.model.heads(x.reshape(-1, *x.shape[-2:]))[0]
        self._residual = res.reshape(*lead, -1)

    def _reset_state(self, ids) -> None:
        self._residual = None
        if self.servo is not None:
            self.servo.reset(ids)

    # -- torque ----------------------------------------------------------------------------
    def torque(self, command: Tensor, state: ActuatorState,
               history: History | None = None) -> Tensor:
        if self._residual is None:
            raise ConfigError("TransformerActuator.torque needs observe() first (the "
                              "network reads the history once per control step)")
        m = self.model
        if self.servo is not None:
            r = m.saturate(self._residual)
            ext = state.tau_ext if state.tau_ext is not None else torch.zeros_like(state.q)
            loaded = dataclasses.replace(state, tau_ext=ext + r)
            return self.servo.torque(command, loaded) + r
        return m.saturate(m.pd_torque(command - state.q, state.qd) + self._residual)

    def torque_limits(self, state: ActuatorState) -> tuple[Tensor, Tensor]:
        if self.servo is not None:
            lo, hi = self.servo.torque_limits(state)
            tmax = self.model.tau_max
            return lo - tmax, hi + tmax
        tmax = self.model.tau_max.expand_as(state.q)
        return -tmax, tmax


@dataclass
class TransformerActuatorConfig:
    """A simulator-mode NeuralActuator on a physical servo: the servo's own configuration (its
    family, friction, firmware loop and limits, and the joint parameters it is simulated with)
    plus the network that learns the residual torque the servo model misses."""

    servo: ActuatorConfig = field(default_factory=ActuatorConfig)
    """the physical servo (``--actuator.*`` of ``neuract fit``); its limits always apply"""
    joints: JointParamsConfig = field(default_factory=JointParamsConfig)
    """joint parameters the servo is simulated with (armature, damping, friction, offset)"""
    size: ModelSize = field(default_factory=ModelSize)
    """the network's size (history: the control steps it reads)"""
    tau_max: tuple[float, ...] = (3.0,)
    """bound of the learned residual torque [N m] (one value, or one per joint)"""

    def network(self, n_joints: int) -> NeuralActuatorConfig:
        """The simulator-mode network's configuration (validated: a bad value is refused
        naming its field)."""
        self.servo.validate("servo.")
        self.joints.validate("joints.")
        return NeuralActuatorConfig(
            n_joints=n_joints, mode="simulator", prior="servo",
            servo=servo_json(self.servo, self.joints), **dataclasses.asdict(self.size),
            tau_max=tuple(self.tau_max)).validate()


def build_transformer_actuator(cfg: TransformerActuatorConfig, n_joints: int,
                               fitted_servo: torch.nn.Module | None = None
                               ) -> TransformerActuator:
    """A new (untrained) :class:`TransformerActuator` of ``cfg`` for ``n_joints`` joints; with
    ``fitted_servo`` (a fitted model of ``cfg.servo`` / ``cfg.joints``, e.g. ``neuract fit``'s)
    its servo holds the fitted values. Untrained, it rolls out as the servo alone."""
    model = NeuralActuator(cfg.network(n_joints))
    if fitted_servo is not None:
        model.set_servo(fitted_servo)
    return TransformerActuator(model)


def _no_joints(n: int) -> JointParams:
    """Joint parameters that add nothing (no armature, damping, friction or offset)."""
    cfg = JointParamsConfig(armature=0.0, fit_armature=False, fit_offset=False)
    return JointParams(n, cfg).float().requires_grad_(False)


__all__ = ["TransformerActuator", "TransformerActuatorConfig", "build_transformer_actuator"]
