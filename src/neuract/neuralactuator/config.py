"""The configuration of a NeuralActuator model: architecture, mode, channels, priors, gates.

:class:`NeuralActuatorConfig` (validated on :meth:`~NeuralActuatorConfig.validate`), the servo
model it may sit on (:func:`servo_json` / :func:`servo_configs`) and the gate limits.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

import numpy as np

from neuract.actuators import ActuatorConfig
from neuract.config import from_dict, to_dict
from neuract.errors import ConfigError
from neuract.neuralactuator.features import channels_for, check_ident_memory
from neuract.sim.simulate import JointParamsConfig


@dataclass
class ModelSize:
    """NeuralActuator architecture (defaults: the shipped 1.43 M-parameter size; the same
    defaults as :class:`NeuralActuatorConfig`'s)."""

    history: int = 8
    d_model: int = 96
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    d_trunk: int = 1576


@dataclass
class NeuralActuatorConfig:
    """Architecture and mode of a NeuralActuator model (the defaults are the shipped size)."""

    n_joints: int = 6
    """joints modelled (SO-101: 6, OpenManipulator-X: 5)"""
    mode: str = "estimator"
    """``simulator`` (commands + simulated state only) or ``estimator`` (adds telemetry)"""
    effort: str = "current"
    """estimator mode: effort channel, ``current`` [A] or ``load`` [-1..1]"""
    sim_temperature: bool = False
    """simulator mode: also read a simulated temperature [degC]"""
    physics_robot: str = ""
    """estimator mode: arm model (bundled name or path) whose gravity torque and end-effector
    Jacobian at the measured pose are extra input channels; empty: none"""
    physics_site: str = ""
    """end-effector site of ``physics_robot`` (where the external force acts)"""
    context_s: float = 0.0
    """estimator mode: time constant [s] of the context channels (direction of each joint's
    last motion, slow averages of effort and position error; see
    :mod:`neuract.neuralactuator.features`); 0: none"""
    ident: bool = False
    """estimator mode: also read the identification channels (a running least-squares
    identification of each motor over the episode so far; see
    :mod:`neuract.neuralactuator.features`); needs ``physics_robot``"""
    ident_memory: int = 0
    """memory [samples] of the identification channels: each sample's weight in their running
    sums decays by ``1 - 1 / ident_memory`` per later sample (recursive least squares with a
    forgetting factor; for a robot that runs long without a reset); 0: every sample since the
    episode start (or :meth:`StreamingEstimator.reset`) weighs the same"""
    history: int = 8
    """time steps per window (tokens)"""
    d_model: int = 96
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    activation: str = "gelu"
    """``gelu`` or ``relu`` (encoder feed-forward and head trunk)"""
    d_trunk: int = 1576
    """width of the head trunk reading the flattened encoder output"""
    n_conditions: int = 2
    """condition classes per motor (0 = normal, 1 = degraded, ...)"""
    condition_head: str = "trunk"
    """where the condition logits come from: ``trunk`` (the output head over the Transformer's
    trunk, with the other heads) or ``motor`` (a small MLP shared by the motors, reading each
    motor's own normalised channels of the last sample and a one-hot of its joint: the same
    weights judge every motor, from what that motor reports; most useful with :attr:`ident`)
    or ``both`` (the two heads' logits added)"""
    d_motor: int = 64
    """hidden width of the ``motor`` condition head"""
    tau_max: tuple[float, ...] = (3.0,)
    """per-joint torque limit [N m]; one value is broadcast to every joint"""
    prior: str = "pd"
    """physical servo prior under the learned residual: ``pd`` (kp e - kd qd, learned),
    ``servo`` (simulator mode: an identified parametric servo, :attr:`servo`, frozen; its
    torque needs the simulated physical state, so rollouts apply it and ``forward`` returns
    the residual alone) or ``none``"""
    servo: str = ""
    """with ``prior='servo'`` (or ``reference_steps``): JSON ``{"actuator": ActuatorConfig,
    "joints": JointParamsConfig}`` of the servo model (its fitted values are in the weights)"""
    reference_steps: int = 0
    """estimator mode: segment length [samples] of the servo-reference channels (the measured
    position against :attr:`servo` driven open loop by the commands, on the arm
    ``physics_robot``; see :mod:`neuract.neuralactuator.reference`); 0: none"""
    gate_rnn: int = 0
    """estimator mode: hidden units of the recurrent contact gate, a GRU that reads each
    sample's normalised feature row (the last step of its window) and carries its state over
    the episode (:class:`RecurrentGate`, trained after the rest of the model by
    :func:`neuract.estimate.gate_rnn.train_gate_rnn`); its logit replaces the gate
    head's in :func:`~neuract.estimate.neural.estimate`, the streaming estimator and
    the export; 0: the gate head's logit (windowed, no state)"""
    gate_conv: int = 0
    """estimator mode, with :attr:`gate_rnn`: causal dilated convolutions before the
    recurrent gate's GRU, this many layers (kernel 3, dilation 1, 2, 4, ...; residual, ReLU;
    a receptive field of ``2 ** (gate_conv + 1) - 1`` samples: 127 for 6). The gate's state
    then also carries each layer's last ``2 * dilation`` inputs; 0: none (the GRU reads the
    input layer directly)"""
    gate_lag: int = 0
    """estimator mode, with :attr:`gate_rnn`: a fixed-lag gate. The recurrent gate then has
    one logit per lag k = 0 .. gate_lag: at sample t, the probability of contact at sample
    t - k. :func:`~neuract.estimate.neural.estimate` decides each sample s from the
    logit of lag gate_lag at s + gate_lag, so the decision needs the ``gate_lag`` samples
    after s (near an episode's end, the largest lag the episode allows); it is reported that
    much later (``contact_decided_t``). The streaming estimator gives each decision
    ``gate_lag`` samples after its sample (and the last ones at the episode's end,
    ``StreamingEstimator.finish``); the ONNX export gives every lag's logit. 0: the causal
    gate (one logit, lag 0)"""
    gate_decide: int = -1
    """with :attr:`gate_lag`: the lag whose logit decides (0 .. gate_lag; see
    :attr:`gate_decision_lag`), so that a gate trained with ``gate_lag`` look-back targets
    can decide sooner, after reading only this many samples more (0: at once, a causal
    decision). Set it with the gate's filter calibrated at that lag
    (:func:`~neuract.estimate.calibrate.set_gate_decision_lag`). -1: ``gate_lag``"""
    kp_init: float = 5.0
    """initial servo stiffness of the PD prior [N m / rad]"""
    kd_init: float = 0.1
    """initial servo damping of the PD prior [N m s / rad]"""

    @property
    def channels(self) -> tuple:
        return channels_for(self.mode, self.effort, self.sim_temperature,
                            physics=bool(self.physics_robot), context=bool(self.context_s),
                            reference=bool(self.reference_steps), ident=bool(self.ident))

    @property
    def gate_decision_lag(self) -> int:
        """Samples each contact decision waits for: :attr:`gate_decide`, or :attr:`gate_lag`
        where that is -1 (0: a causal decision)."""
        return self.gate_lag if self.gate_decide == -1 else int(self.gate_decide)

    @property
    def physics(self) -> tuple[str, str] | None:
        """(robot, site) that computes the physics channels, or None."""
        return (self.physics_robot, self.physics_site) if self.physics_robot else None

    @property
    def n_features(self) -> int:
        return self.n_joints * len(self.channels)

    @property
    def n_outputs(self) -> int:
        return self.n_joints + 3 + 1 + self.n_joints * self.n_conditions

    def validate(self) -> NeuralActuatorConfig:
        if not isinstance(self.ident, bool):
            raise ConfigError(f"NeuralActuatorConfig.ident={self.ident!r}; expected true or "
                              "false")
        self.channels  # noqa: B018  (validates mode/effort/ident)
        check_ident_memory(self.ident_memory, "NeuralActuatorConfig.ident_memory")
        if self.ident_memory and not self.ident:
            raise ConfigError(f"NeuralActuatorConfig.ident_memory={self.ident_memory} applies "
                              "to the identification channels: set ident=True")
        if self.physics_robot and (self.mode != "estimator" or not self.physics_site):
            raise ConfigError(f"physics_robot={self.physics_robot!r} needs mode='estimator' "
                              f"and a physics_site (got mode={self.mode!r}, physics_site="
                              f"{self.physics_site!r})")
        if not (isinstance(self.context_s, (int, float)) and math.isfinite(self.context_s)
                and self.context_s >= 0):
            raise ConfigError(f"NeuralActuatorConfig.context_s={self.context_s!r}; expected a "
                              "time constant >= 0 s (0: no context channels)")
        self._check_gates()
        self._check_sizes()
        self._check_prior()
        self._check_tau_max()
        return self

    def _check_gates(self) -> None:
        """The recurrent gate's options (hidden units, convolutions, lag, decision lag)."""
        if isinstance(self.gate_rnn, bool) or not (isinstance(self.gate_rnn, int)
                                                   and self.gate_rnn >= 0):
            raise ConfigError(f"NeuralActuatorConfig.gate_rnn={self.gate_rnn!r}; expected an "
                              "integer >= 0 hidden units (0: no recurrent gate)")
        if isinstance(self.gate_conv, bool) or not (isinstance(self.gate_conv, int)
                                                    and 0 <= self.gate_conv <= MAX_GATE_CONV):
            raise ConfigError(f"NeuralActuatorConfig.gate_conv={self.gate_conv!r}; expected an "
                              f"integer from 0 to {MAX_GATE_CONV} convolution layers")
        if isinstance(self.gate_lag, bool) or not (isinstance(self.gate_lag, int)
                                                   and 0 <= self.gate_lag <= MAX_GATE_LAG):
            raise ConfigError(f"NeuralActuatorConfig.gate_lag={self.gate_lag!r}; expected an "
                              f"integer from 0 to {MAX_GATE_LAG} samples")
        if self.gate_lag and not self.gate_rnn:
            raise ConfigError(f"NeuralActuatorConfig.gate_lag={self.gate_lag} is a lag of the "
                              "recurrent gate: set gate_rnn > 0 (hidden units), or gate_lag=0")
        check_gate_decide(self.gate_decide, self.gate_lag, "NeuralActuatorConfig.gate_decide")
        if self.gate_conv and not self.gate_rnn:
            raise ConfigError(f"NeuralActuatorConfig.gate_conv={self.gate_conv} builds on the "
                              "recurrent gate: set gate_rnn > 0 (hidden units), or gate_conv=0")
        if self.gate_rnn and self.mode != "estimator":
            raise ConfigError(f"NeuralActuatorConfig.gate_rnn={self.gate_rnn} is an "
                              f"estimator-mode gate; got mode={self.mode!r}")

    def _check_sizes(self) -> None:
        """The condition head and the integer sizes of the network."""
        if self.condition_head not in CONDITION_HEADS:
            raise ConfigError(f"NeuralActuatorConfig.condition_head={self.condition_head!r}; "
                              f"accepted: {list(CONDITION_HEADS)}")
        for name in ("n_joints", "history", "d_model", "n_layers", "n_heads", "d_ff",
                     "d_trunk", "n_conditions", "d_motor"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"NeuralActuatorConfig.{name}={v!r}; expected an integer >= 1")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads="
                              f"{self.n_heads}")
        if self.activation not in ("gelu", "relu"):
            raise ConfigError(f"activation={self.activation!r}; accepted: ['gelu', 'relu']")

    def _check_prior(self) -> None:
        """The physical prior and the servo model it or the reference channels use."""
        if self.prior not in PRIORS:
            raise ConfigError(f"prior={self.prior!r}; accepted: {list(PRIORS)}")
        if self.prior == "servo":
            if self.mode != "simulator":
                raise ConfigError(f"prior='servo' is a simulator-mode prior (it needs the "
                                  f"simulated state); got mode={self.mode!r}")
            servo_configs(self.servo)  # validates the JSON
        if not (isinstance(self.reference_steps, int) and self.reference_steps >= 0
                and self.reference_steps != 1):
            raise ConfigError(f"NeuralActuatorConfig.reference_steps={self.reference_steps!r}; "
                              "expected an integer >= 2 samples (0: no reference channels)")
        if self.reference_steps:
            missing = [what for what, ok in (
                (f"mode='estimator' (got {self.mode!r})", self.mode == "estimator"),
                ("the fitted servo's JSON in servo", bool(self.servo)),
                ("the arm in physics_robot", bool(self.physics_robot))) if not ok]
            if missing:
                raise ConfigError(f"reference_steps={self.reference_steps} needs "
                                  + ", ".join(missing))
            servo_configs(self.servo)
        elif self.servo and self.prior != "servo":
            raise ConfigError(f"servo={self.servo[:60]!r}... is set but prior={self.prior!r} "
                              "and reference_steps=0; a servo model is used with "
                              "prior='servo' or reference_steps > 0")

    def _check_tau_max(self) -> None:
        """The per-joint torque limits."""
        if not (isinstance(self.tau_max, tuple | list) and all(
                isinstance(t, int | float) and not isinstance(t, bool) for t in self.tau_max)):
            raise ConfigError(f"tau_max={self.tau_max!r}; expected a list of 1 or n_joints="
                              f"{self.n_joints} torque limits, each finite and > 0 N m")
        if len(self.tau_max) not in (1, self.n_joints):
            raise ConfigError(f"tau_max has {len(self.tau_max)} values; expected 1 or "
                              f"n_joints={self.n_joints}")
        if not all(math.isfinite(t) and t > 0 for t in self.tau_max):
            raise ConfigError(f"tau_max={tuple(self.tau_max)}; every limit must be finite "
                              "and > 0 N m")

    def replace(self, **kw) -> NeuralActuatorConfig:
        return dataclasses.replace(self, **kw).validate()


PRIORS = ("pd", "servo", "none")


CONDITION_HEADS = ("trunk", "motor", "both")


def servo_configs(servo: str):
    """(ActuatorConfig, JointParamsConfig) from :attr:`NeuralActuatorConfig.servo`."""

    try:
        d = json.loads(servo)
        return (from_dict(ActuatorConfig, d["actuator"]),
                from_dict(JointParamsConfig, d.get("joints", {})))
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        raise ConfigError(f"NeuralActuatorConfig.servo={servo[:80]!r} is not a servo model: "
                          f"{exc}; expected JSON {{'actuator': {{...}}, 'joints': {{...}}}}"
                          ) from None


def servo_json(actuator, joints) -> str:
    """The :attr:`NeuralActuatorConfig.servo` string of (ActuatorConfig, JointParamsConfig)."""

    return json.dumps({"actuator": to_dict(actuator), "joints": to_dict(joints)},
                      sort_keys=True)


MAX_GATE_CONV = 10
"""the most causal convolution layers of the recurrent gate (a receptive field of 2047
samples)"""


MAX_GATE_LAG = 600
"""the largest fixed lag of the recurrent gate [samples] (10 s at 60 Hz)"""


def check_gate_decide(decide: object, lag: int, name: str) -> None:
    """Refuse a decision lag (``gate_decide``) that is not -1 or an integer from 0 to the
    gate's ``lag``; ``name`` names the field in the message."""
    ok = (not isinstance(decide, bool) and isinstance(decide, (int, np.integer))
          and (decide == -1 or 0 <= decide <= lag))
    if not ok:
        raise ConfigError(f"{name}={decide!r}; expected -1 (decide at gate_lag) or an integer "
                          f"from 0 to gate_lag={lag}, the lags the gate has logits for")


__all__ = ["CONDITION_HEADS", "MAX_GATE_CONV", "MAX_GATE_LAG", "PRIORS", "ModelSize",
           "NeuralActuatorConfig",
           "check_gate_decide", "servo_configs", "servo_json"]
