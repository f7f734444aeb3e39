"""NeuralActuator: a small Transformer over servo telemetry history, on top of a servo model.

Shapes: x: (B, T, F) raw features, T = ``history`` tokens (one per time step), F =
``n_joints * n_channels`` (see :mod:`neuract.neuralactuator.features`). Outputs:

* ``tau``: (B, n_joints) joint torque the actuator produces [N m], always inside
  ``+-tau_max`` (a physical PD servo prior plus a learned residual, saturated with tanh);
* ``force``: (B, 3) external force at the end effector [N];
* ``gate_logit``: (B,) contact-gate logit (``sigmoid`` -> probability that something pushes);
* ``condition_logits``: (B, n_joints, n_conditions) per-motor condition (0 = normal).

The compute is kept lean on purpose: tokens are time steps (8 of them), the encoder is narrow,
and most parameters sit in the head trunk that reads the flattened encoder output once. Feature
normalisation statistics, torque limits and the servo prior live in buffers/parameters, so a
checkpoint is self-contained. FLOPs are counted analytically by :func:`count_flops`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from neuract.actuators import ActuatorConfig
from neuract.config import from_dict, to_dict
from neuract.errors import ConfigError
from neuract.fit.identify import build_model
from neuract.neuralactuator.features import channels_for, check_ident_memory
from neuract.sim.simulate import JointParamsConfig


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
    :func:`neuract.neuralactuator.gate_rnn.train_gate_rnn`); its logit replaces the gate
    head's in :func:`~neuract.neuralactuator.estimate.estimate`, the streaming estimator and
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
    t - k. :func:`~neuract.neuralactuator.estimate.estimate` decides each sample s from the
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
    (:func:`~neuract.neuralactuator.estimate.set_gate_decision_lag`). -1: ``gate_lag``"""
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
        return self

    def replace(self, **kw) -> NeuralActuatorConfig:
        return dataclasses.replace(self, **kw).validate()


PRIORS = ("pd", "servo", "none")
CONDITION_HEADS = ("trunk", "motor", "both")


def servo_configs(servo: str):
    """(ActuatorConfig, JointParamsConfig) from :attr:`NeuralActuatorConfig.servo`."""
    import json


    try:
        d = json.loads(servo)
        return (from_dict(ActuatorConfig, d["actuator"]),
                from_dict(JointParamsConfig, d.get("joints", {})))
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        raise ConfigError(f"NeuralActuatorConfig.servo={servo[:80]!r} is not a servo model: "
                          f"{exc}; expected JSON {{'actuator': {{...}}, 'joints': {{...}}}}"
                          ) from None


def servo_module(cfg: NeuralActuatorConfig, fitted: nn.Module | None = None) -> nn.Module:
    """The frozen float32 servo model of ``cfg.servo`` (with ``fitted``'s values if given)."""

    acfg, jcfg = servo_configs(cfg.servo)
    module = build_model(acfg, jcfg, cfg.n_joints, dtype=torch.float32)
    module.requires_grad_(False)
    if fitted is not None:
        try:
            module.load_state_dict(fitted.state_dict())
        except RuntimeError as exc:
            raise ConfigError(f"the servo model does not match NeuralActuatorConfig.servo: "
                              f"{str(exc).strip().splitlines()[0]}") from None
    return module


def servo_json(actuator, joints) -> str:
    """The :attr:`NeuralActuatorConfig.servo` string of (ActuatorConfig, JointParamsConfig)."""
    import json


    return json.dumps({"actuator": to_dict(actuator), "joints": to_dict(joints)},
                      sort_keys=True)


class EncoderLayer(nn.Module):
    """Pre-LayerNorm Transformer encoder layer; attention written as plain matmuls."""

    def __init__(self, d: int, n_heads: int, d_ff: int, activation: str = "gelu"):
        super().__init__()
        self.n_heads = n_heads
        self.act = F.relu if activation == "relu" else F.gelu
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, d_ff)
        self.ff2 = nn.Linear(d_ff, d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        B, T, D = h.shape
        H = self.n_heads
        qkv = self.qkv(self.ln1(h)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B, H, T, Dh)
        att = torch.softmax((q @ k.transpose(-1, -2)) * (D // H) ** -0.5, dim=-1)
        a = (att @ v).transpose(1, 2).reshape(B, T, D)
        h = h + self.out(a)
        return h + self.ff2(self.act(self.ff1(self.ln2(h))))


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


def gate_state_size(hidden: int, conv: int = 0) -> int:
    """Size of the recurrent gate's state: the GRU's ``hidden`` units and, with ``conv``
    convolution layers, each layer's last ``2 * dilation`` inputs (``hidden`` each)."""
    return hidden * (1 + sum(2 * 2 ** i for i in range(conv)))


class RecurrentGate(nn.Module):
    """Causal recurrent contact gate: input layer (ReLU), ``conv`` causal dilated convolutions
    (kernel 3, dilation 2**i, residual, ReLU; none by default), one GRU layer, logit (with
    ``lag`` > 0: ``lag + 1`` logits, one per lag, see :func:`lagged_probability`).

    ``forward(rows, state)`` takes normalised feature rows (B, T, F) (each sample's last
    window step, :meth:`NeuralActuator.gate_rows`) and the state (1, B, :attr:`state_size`)
    or None (an episode's start: a zero GRU state and zero inputs before the first row) and
    returns the contact logits (B, T), or (B, T, lag + 1) with a lag (logit k at sample t:
    contact at sample t - k), and the state after the last row. The state is the GRU
    state (H) followed by each convolution's last ``2 * dilation`` inputs (H each); without
    convolutions it is the GRU state alone. Feeding an episode in pieces, each with the state
    the previous one returned, gives the logits of feeding it whole."""

    def __init__(self, n_in: int, hidden: int, conv: int = 0, lag: int = 0):
        super().__init__()
        self.hidden = hidden
        self.lag = lag
        self.dilations = tuple(2 ** i for i in range(conv))
        self.state_size = gate_state_size(hidden, conv)
        # set by train_gate_rnn (kept in checkpoints): an untrained gate decides nothing
        self.register_buffer("trained", torch.zeros((), dtype=torch.bool))
        self.inp = nn.Linear(n_in, hidden)
        self.convs = nn.ModuleList(nn.Conv1d(hidden, hidden, 3, dilation=d)
                                   for d in self.dilations)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, lag + 1)

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        out = self.out(h)
        return out if self.lag else out.squeeze(-1)

    def forward(self, rows: torch.Tensor, state: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        if state is not None and (state.dim() != 3 or state.shape[0] != 1
                                  or state.shape[1] != rows.shape[0]
                                  or state.shape[2] != self.state_size):
            raise ConfigError(f"RecurrentGate state of shape {tuple(state.shape)}; expected "
                              f"(1, {rows.shape[0]}, {self.state_size}) (1, batch, state_size: "
                              "the state this gate returned), or None at an episode's start")
        h = F.relu(self.inp(rows))
        if not self.dilations:
            h, state = self.gru(h, state)
            return self._logits(h), state
        B, H = rows.shape[0], self.hidden
        if state is None:
            state = torch.zeros(1, B, self.state_size, dtype=h.dtype, device=h.device)
        past = state[0, :, H:].reshape(B, H, -1)  # every layer's last inputs, (B, H, sum 2d)
        h = h.transpose(1, 2)  # (B, H, T)
        kept, at = [], 0
        for d, conv in zip(self.dilations, self.convs):
            full = torch.cat([past[:, :, at:at + 2 * d], h], 2)
            kept.append(full[:, :, -2 * d:])
            h = h + F.relu(conv(full))
            at += 2 * d
        h, g = self.gru(h.transpose(1, 2), state[:, :, :H].contiguous())
        state = torch.cat([g, torch.cat(kept, 2).reshape(1, B, -1)], 2)
        return self._logits(h), state


def lagged_probability(logits: torch.Tensor, lag: int) -> torch.Tensor:
    """Contact probability (T,) of each sample of one episode from a fixed-lag gate's logits
    (T, D + 1) over the whole episode, decided at lag ``lag`` (at most D): sample s takes
    the logit of lag k = min(lag, T - 1 - s) at sample s + k (the gate has read k samples
    after s). A causal gate's logits (T,): their probabilities (lag must be 0)."""
    if logits.ndim == 1:
        if lag:
            raise ConfigError(f"lagged_probability: lag {lag} of a causal gate's logits (T,)")
        return torch.sigmoid(logits)
    if not 0 <= lag < logits.shape[1]:
        raise ConfigError(f"lagged_probability: lag {lag}; the logits {tuple(logits.shape)} "
                          f"hold lags 0 to {logits.shape[1] - 1}")
    k = torch.from_numpy(decision_delay(logits.shape[0], lag))
    return torch.sigmoid(logits[torch.arange(len(k)) + k, k])


def decision_delay(T: int, lag: int) -> np.ndarray:
    """Samples after each of T samples that its fixed-lag decision waits for:
    min(lag, T - 1 - s)."""
    return np.minimum(lag, T - 1 - np.arange(T)) if lag else np.zeros(T, np.int64)


class NeuralActuator(nn.Module):
    """Telemetry Transformer with torque, force + contact-gate and condition heads.

    ``forward(x)`` takes raw (unnormalised) features x: (B, T, F) and returns
    ``(tau [N m] (B, J), force [N] (B, 3), gate_logit (B,), condition_logits (B, J, K))``.
    """

    def __init__(self, cfg: NeuralActuatorConfig | None = None):
        super().__init__()
        cfg = (cfg or NeuralActuatorConfig()).validate()
        self.cfg = cfg
        self.act = F.relu if cfg.activation == "relu" else F.gelu
        J, T, Fdim, d = cfg.n_joints, cfg.history, cfg.n_features, cfg.d_model
        C = len(cfg.channels)
        self.register_buffer("x_mean", torch.zeros(Fdim))
        self.register_buffer("x_std", torch.ones(Fdim))
        tau = torch.tensor(cfg.tau_max, dtype=torch.float32).expand(J).clone()
        self.register_buffer("tau_max", tau)
        self.register_buffer("force_scale", torch.ones(3))
        # raw-feature indices of the last step's position error and velocity (PD prior)
        ch = cfg.channels
        last = (T - 1) * Fdim
        self.register_buffer("idx_err", torch.arange(J) * C + ch.index("pos_error") + last,
                             persistent=False)
        self.register_buffer("idx_qd", torch.arange(J) * C + ch.index("qd") + last,
                             persistent=False)
        self.log_kp = nn.Parameter(torch.full((J,), math.log(cfg.kp_init)))
        self.log_kd = nn.Parameter(torch.full((J,), math.log(cfg.kd_init)))
        self.inp = nn.Linear(Fdim, d)
        self.pos = nn.Parameter(torch.randn(T, d) * 0.02)
        self.layers = nn.ModuleList(EncoderLayer(d, cfg.n_heads, cfg.d_ff, cfg.activation)
                                    for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.trunk = nn.Linear(T * d, cfg.d_trunk)
        self.head = nn.Linear(cfg.d_trunk, cfg.n_outputs)
        with torch.no_grad():  # start as the physical prior: small residual, zero force
            self.head.weight.mul_(0.1)
            self.head.bias.zero_()
        self.cond_motor = None
        if cfg.condition_head in ("motor", "both"):
            self.register_buffer("joint_onehot", torch.eye(J), persistent=False)
            act = nn.GELU if cfg.activation == "gelu" else nn.ReLU
            h = cfg.d_motor
            self.cond_motor = nn.Sequential(nn.Linear(C + J, h), act(), nn.Linear(h, h), act(),
                                            nn.Linear(h, cfg.n_conditions))
        self.gate_rnn = None
        if cfg.gate_rnn:  # initialised off the global generator: the rest trains as without
            with torch.random.fork_rng(devices=[]):
                self.gate_rnn = RecurrentGate(Fdim, cfg.gate_rnn, cfg.gate_conv, cfg.gate_lag)
        self.servo_model = None
        self.servo_loaded = False  # set_servo / load_checkpoint: the servo holds fitted values
        if cfg.servo:  # a fitted servo (frozen): the prior, or the reference channels' model
            self.servo_model = servo_module(cfg)
        if cfg.prior == "servo":  # start exactly as the servo (zero torque residual)
            with torch.no_grad():
                self.head.weight[:J].zero_()

    @property
    def reference(self) -> tuple | None:
        """(servo model, arm, segment length) of the reference channels, or None."""
        if not self.cfg.reference_steps:
            return None
        return self.servo_model, self.cfg.physics_robot, self.cfg.reference_steps

    def set_servo(self, system_model: nn.Module) -> None:
        """Load a fitted servo (a :class:`neuract.fit.trainer.SystemModel` built from
        :attr:`NeuralActuatorConfig.servo`) as the frozen prior or reference."""
        if self.servo_model is None:
            raise ConfigError(f"set_servo needs prior='servo' or reference_steps > 0; this "
                              f"model has prior={self.cfg.prior!r}")
        self.servo_model = servo_module(self.cfg, system_model)
        self.servo_loaded = True

    # -- normalisation -------------------------------------------------------------------
    def set_stats(self, mean: torch.Tensor, std: torch.Tensor,
                  force_scale: torch.Tensor | None = None) -> None:
        """Store feature statistics (F,) (and the force scale (3,) [N]) in the buffers."""
        if mean.shape != self.x_mean.shape or std.shape != self.x_std.shape:
            raise ConfigError(f"stats shapes {tuple(mean.shape)}/{tuple(std.shape)}; expected "
                              f"({self.cfg.n_features},) for channels {self.cfg.channels}")
        if not (torch.isfinite(mean).all() and torch.isfinite(std).all() and (std > 0).all()):
            raise ConfigError("feature statistics must be finite with std > 0")
        self.x_mean.copy_(mean)
        self.x_std.copy_(std)
        if force_scale is not None:
            self.force_scale.copy_(torch.as_tensor(force_scale, dtype=torch.float32))

    # -- forward ---------------------------------------------------------------------------
    def servo_prior(self, x: torch.Tensor) -> torch.Tensor:
        """PD servo torque of the last step, tau: (B, J) [N m] from raw x: (B, T, F)."""
        flat = x.reshape(x.shape[0], -1)
        return self.pd_torque(flat[:, self.idx_err], flat[:, self.idx_qd])

    def pd_torque(self, pos_error: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """The physical servo prior ``kp * pos_error - kd * qd`` (..., J) [N m] (0 if none)."""
        if self.cfg.prior != "pd":  # 'servo' is applied by the rollouts (physical state)
            return torch.zeros_like(pos_error)
        return self.log_kp.exp() * pos_error - self.log_kd.exp() * qd

    def saturate(self, tau: torch.Tensor) -> torch.Tensor:
        """Smooth torque limit ``tau_max * tanh(tau / tau_max)`` (..., J) [N m]."""
        return self.tau_max * torch.tanh(tau / self.tau_max)

    def heads(self, x: torch.Tensor):
        """Network outputs before the actuator: (tau_residual [N m] (B, J), force [N] (B, 3),
        gate_logit (B,), condition_logits (B, J, K)) from raw x: (B, T, F)."""
        cfg = self.cfg
        J = cfg.n_joints
        xn = (x - self.x_mean) / self.x_std
        h = self.inp(xn) + self.pos
        for layer in self.layers:
            h = layer(h)
        z = self.act(self.trunk(self.ln_f(h).flatten(1)))
        out = self.head(z)
        force = out[:, J:J + 3] * self.force_scale
        if self.cond_motor is not None:  # each motor's own last-sample channels, shared MLP
            own = xn[:, -1].reshape(x.shape[0], J, -1)
            cond = self.cond_motor(torch.cat([own, self.joint_onehot.expand(len(x), J, J)], -1))
            if cfg.condition_head == "both":  # plus the trunk's logits (the window's evidence)
                cond = cond + out[:, J + 4:].reshape(-1, J, cfg.n_conditions)
        else:
            cond = out[:, J + 4:].reshape(-1, J, cfg.n_conditions)
        return out[:, :J], force, out[:, J + 3], cond

    def gate_rows(self, x_last: torch.Tensor) -> torch.Tensor:
        """The recurrent gate's input: raw last-step features (..., F) normalised."""
        return (x_last - self.x_mean) / self.x_std

    def recurrent_gate(self, x_last: torch.Tensor, state: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """The recurrent gate's logits (T,) over one episode's consecutive samples ((T, lag +
        1) for a fixed-lag gate, ``cfg.gate_lag``), from their raw last-step features x_last:
        (T, F), and its state after them (pass it back with the next samples; None: the
        episode's start). Needs ``cfg.gate_rnn``."""
        if self.gate_rnn is None:
            raise ConfigError("this model has no recurrent gate (NeuralActuatorConfig."
                              "gate_rnn = 0)")
        logit, state = self.gate_rnn(self.gate_rows(x_last)[None], state)
        return logit[0], state

    def forward(self, x: torch.Tensor):
        """Windowed and stateless: the gate logit is the gate head's, also for a model with a
        recurrent gate (whose logit needs the episode so far: :meth:`recurrent_gate`,
        ``estimate``, ``StreamingEstimator``, the ONNX export)."""
        res, force, gate, cond = self.heads(x)
        tau = self.saturate(self.servo_prior(x) + res)
        return tau, force, gate, cond

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> dict:
        """Inference helper: a dict with ``tau``, ``force``, ``gate`` (probability),
        ``force_gated`` (force where gate > 0.5, else 0), ``condition`` (class index) and
        ``condition_prob``. x: (..., T, F) raw features. Windowed and stateless, like
        :meth:`forward`: ``gate`` is the gate head's, uncalibrated (use ``estimate`` or
        ``StreamingEstimator`` for the calibrated decision and a recurrent gate)."""
        lead = x.shape[:-2]
        tau, force, gate, cond = self(x.reshape(-1, *x.shape[-2:]))
        p = torch.sigmoid(gate)
        out = {"tau": tau, "force": force, "gate": p,
               "force_gated": force * (p > 0.5).unsqueeze(-1),
               "condition_prob": torch.softmax(cond, -1), "condition": cond.argmax(-1)}
        return {k: v.reshape(*lead, *v.shape[1:]) for k, v in out.items()}


def check_gate_trained(model: NeuralActuator) -> None:
    """Refuse a model whose recurrent gate (``cfg.gate_rnn``) was never trained: its logit
    would replace the trained gate head's with a random network's."""
    g = getattr(model, "gate_rnn", None)
    if g is not None and not bool(g.trained):
        raise ConfigError(f"the model's recurrent contact gate (gate_rnn={model.cfg.gate_rnn}) "
                          "was never trained: train it with neuract.neuralactuator.gate_rnn."
                          "train_gate_rnn (experiments do, with --experiment.gate-rnn), or "
                          "build the model with gate_rnn=0 to use the gate head")


def count_params(model: nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def count_flops(cfg: NeuralActuatorConfig) -> int:
    """Analytic forward FLOPs per sample (batch 1), counting matrix products only.

    One multiply-accumulate = 2 FLOPs, the convention of ``torch.utils.flop_counter``;
    element-wise work (normalisation, LayerNorm, GELU, softmax, tanh: a few thousand FLOPs) is
    not counted.
    """
    T, d, f, Fdim = cfg.history, cfg.d_model, cfg.d_ff, cfg.n_features
    macs = T * Fdim * d  # input projection
    per_layer = T * d * 3 * d + 2 * T * T * d + T * d * d + 2 * T * d * f
    macs += cfg.n_layers * per_layer
    macs += T * d * cfg.d_trunk + cfg.d_trunk * cfg.n_outputs
    if cfg.condition_head in ("motor", "both"):
        C, J, h = len(cfg.channels), cfg.n_joints, cfg.d_motor
        macs += J * ((C + J) * h + h * h + h * cfg.n_conditions)
    if cfg.gate_rnn:  # one step of the recurrent gate: input layer, convolutions (3 taps
        g = cfg.gate_rnn  # each), GRU (3 gates), logit(s)
        macs += Fdim * g + cfg.gate_conv * 3 * g * g + 3 * 2 * g * g + g * (cfg.gate_lag + 1)
    return 2 * macs


__all__ = ["MAX_GATE_CONV", "MAX_GATE_LAG", "NeuralActuatorConfig", "decision_delay",
           "lagged_probability", "NeuralActuator", "RecurrentGate",
           "check_gate_decide", "check_gate_trained", "count_params", "count_flops",
           "gate_state_size"]
