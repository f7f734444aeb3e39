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

import math

import torch
import torch.nn.functional as F
from torch import nn

from neuract.errors import ConfigError
from neuract.fit.identify import build_model
from neuract.neuralactuator.config import NeuralActuatorConfig, servo_configs
from neuract.neuralactuator.gate import RecurrentGate


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
                          "was never trained: train it with neuract.estimate.gate_rnn."
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


__all__ = ["EncoderLayer", "NeuralActuator", "check_gate_trained", "count_flops", "count_params",
           "servo_module"]
