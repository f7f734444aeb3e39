"""Neural actuators: MLP (Hwangbo et al. 2019), GRU and a small Transformer over telemetry.

Each network sees, per joint and with weights shared across joints, a window of position
errors (command - q) and velocities from the history buffer, the current simulated error and
velocity, the external torque on the joint, and optional known inputs (firmware kp, supply
voltage). Used standalone, the output is scaled and soft-clipped to ``tau_max``; used as a
residual on a physical actuator, the sum is clipped to that actuator's torque envelope, so
the physical limits always apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from neuract.actuators.base import Actuator, ActuatorState, History
from neuract.actuators.param import softclip
from neuract.errors import ConfigError


@dataclass
class NeuralConfig:
    """Architecture and input scaling of a neural actuator (inputs are divided by the scales)."""

    arch: str = "mlp"  # mlp | gru | transformer
    history: int = 8  # frames of (error, velocity) in the window
    hidden: int = 32
    layers: int = 2
    heads: int = 2  # transformer only
    tau_max: float = 5.0  # [N m] standalone output bound
    residual_scale: float = 0.5  # [N m] residual output scale (tanh units)
    error_scale: float = 0.3  # [rad]
    velocity_scale: float = 3.0  # [rad/s]
    torque_scale: float = 1.0  # [N m] for tau_ext and the physical torque
    context: tuple[str, ...] = ()  # keys of ActuatorState.inputs fed to the net
    context_scale: tuple[float, ...] = ()  # one per context key (default 1)


def _window(history: History, state: ActuatorState, cfg: NeuralConfig) -> Tensor:
    """(..., n, H, 2) scaled (error, velocity) window, newest frame last."""
    err = (history.channel("command") - history.channel("q")) / cfg.error_scale
    vel = history.channel("qd") / cfg.velocity_scale
    return torch.stack([err, vel], dim=-1).transpose(-3, -2)


def _current(command: Tensor, state: ActuatorState, cfg: NeuralConfig,
             tau_phys: Tensor | None) -> Tensor:
    """(..., n, F) scaled instantaneous features: error, velocity, tau_ext, tau_phys, context."""
    feats = [(command - state.q) / cfg.error_scale, state.qd / cfg.velocity_scale]
    tau_ext = state.tau_ext if state.tau_ext is not None else torch.zeros_like(state.q)
    feats.append(tau_ext / cfg.torque_scale)
    feats.append((tau_phys if tau_phys is not None else torch.zeros_like(state.q))
                 / cfg.torque_scale)
    scales = cfg.context_scale or (1.0,) * len(cfg.context)
    for key, sc in zip(cfg.context, scales):
        if key not in state.inputs:
            raise ConfigError(
                f"neural actuator context {key!r} missing from the rollout inputs; "
                f"available: {sorted(state.inputs)}"
            )
        feats.append((state.inputs[key] / sc).expand_as(state.q))
    return torch.stack(feats, dim=-1)


def n_current_features(cfg: NeuralConfig) -> int:
    return 4 + len(cfg.context)


class _MLPNet(nn.Module):
    def __init__(self, cfg: NeuralConfig) -> None:
        super().__init__()
        d_in = 2 * cfg.history + n_current_features(cfg)
        layers: list[nn.Module] = []
        for _ in range(cfg.layers):
            layers += [nn.Linear(d_in, cfg.hidden), nn.Softsign()]
            d_in = cfg.hidden
        layers.append(nn.Linear(d_in, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, window: Tensor, current: Tensor, hidden: Tensor | None) -> Tensor:
        x = torch.cat([window.flatten(-2), current], dim=-1)
        return self.net(x).squeeze(-1)


class _TransformerNet(nn.Module):
    def __init__(self, cfg: NeuralConfig) -> None:
        super().__init__()
        d = cfg.hidden
        self.embed = nn.Linear(2, d)
        self.embed_now = nn.Linear(n_current_features(cfg), d)
        self.pos = nn.Parameter(torch.randn(cfg.history + 1, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, cfg.heads, dim_feedforward=2 * d, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, 1)

    def forward(self, window: Tensor, current: Tensor, hidden: Tensor | None) -> Tensor:
        lead = window.shape[:-2]
        tokens = torch.cat([self.embed(window), self.embed_now(current).unsqueeze(-2)], dim=-2)
        tokens = (tokens + self.pos).reshape(-1, *tokens.shape[-2:])
        out = self.encoder(tokens)[:, -1]
        return self.head(out).reshape(lead)


class _GRUNet(nn.Module):
    """A GRU cell advanced once per control frame; the head reads hidden + current features."""

    def __init__(self, cfg: NeuralConfig) -> None:
        super().__init__()
        self.cell = nn.GRUCell(2, cfg.hidden)
        self.head = nn.Sequential(nn.Linear(cfg.hidden + n_current_features(cfg), cfg.hidden),
                                  nn.Softsign(), nn.Linear(cfg.hidden, 1))
        self.hidden = cfg.hidden

    def advance(self, hidden: Tensor | None, frame_feat: Tensor) -> Tensor:
        flat = frame_feat.reshape(-1, 2)
        h = None if hidden is None else hidden.reshape(-1, self.hidden)
        return self.cell(flat, h).reshape(*frame_feat.shape[:-1], self.hidden)

    def forward(self, window: Tensor, current: Tensor, hidden: Tensor | None) -> Tensor:
        if hidden is None:
            hidden = torch.zeros(*current.shape[:-1], self.hidden, dtype=current.dtype)
        return self.head(torch.cat([hidden, current], dim=-1)).squeeze(-1)


_NETS = {"mlp": _MLPNet, "gru": _GRUNet, "transformer": _TransformerNet}


class ActuatorNet(Actuator):
    """A learned actuator, standalone or as a residual on a physical ``base`` actuator.

    Standalone: ``tau = softclip(tau_max * net, tau_max)``.
    Residual: ``tau = clamp(base + residual_scale * tanh(net), envelope)`` where the envelope
    is the base actuator's torque at full duty in the current state (widened to include the
    base torque itself, so its friction is never cut).
    """

    def __init__(self, cfg: NeuralConfig | None = None, base: Actuator | None = None) -> None:
        super().__init__()
        cfg = cfg or NeuralConfig()
        if cfg.arch not in _NETS:
            raise ConfigError(f"unknown neural arch {cfg.arch!r}; valid: {sorted(_NETS)}")
        if cfg.history < 1:
            raise ConfigError(f"neural history must be >= 1 frame, got {cfg.history}")
        if cfg.context_scale and len(cfg.context_scale) != len(cfg.context):
            raise ConfigError(
                f"context_scale has {len(cfg.context_scale)} entries for "
                f"{len(cfg.context)} context keys {cfg.context}"
            )
        self.cfg = cfg
        self.net = _NETS[cfg.arch](cfg)
        self.base = base
        self.history_len = max(cfg.history, base.history_len if base is not None else 1)
        self._hidden: Tensor | None = None
        # start a residual at zero so the fit begins from the physical model
        last = [m for m in self.net.modules() if isinstance(m, nn.Linear)][-1]
        if base is not None:
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    def _reset_state(self, ids) -> None:
        if self.base is not None:
            self.base._reset_state(ids)
        if self._hidden is None or ids is None:
            self._hidden = None
        else:
            h = self._hidden.clone()
            h[torch.as_tensor(ids, dtype=torch.long)] = 0.0
            self._hidden = h

    def _observe_state(self, frame: Tensor, state: ActuatorState) -> None:
        if self.base is not None:
            self.base.history = self.history
            self.base._observe_state(frame, state)
        if isinstance(self.net, _GRUNet):
            feat = torch.stack([(frame[..., 0] - frame[..., 1]) / self.cfg.error_scale,
                                frame[..., 2] / self.cfg.velocity_scale], dim=-1)
            self._hidden = self.net.advance(self._hidden, feat)

    def torque(self, command: Tensor, state: ActuatorState, history: History | None = None
               ) -> Tensor:
        """tau: (..., n) joint torque [N m], within the physical limits."""
        h = self._history(history)
        window = _window(h, state, self.cfg)[..., -self.cfg.history:, :]
        tau_base = self.base.torque(command, state, h) if self.base is not None else None
        out = self.net(window, _current(command, state, self.cfg, tau_base), self._hidden)
        if self.base is None:
            tau_max = torch.as_tensor(self.cfg.tau_max, dtype=out.dtype)
            return softclip(tau_max * out, tau_max)
        tau = tau_base + self.cfg.residual_scale * torch.tanh(out)
        # the residual may not push the torque past the motor's envelope; the physical torque
        # itself (which includes friction) is never cut
        lo, hi = self.base.torque_limits(state)
        lo, hi = torch.minimum(lo, tau_base), torch.maximum(hi, tau_base)
        return torch.minimum(torch.maximum(tau, lo), hi)

    def torque_limits(self, state: ActuatorState) -> tuple[Tensor, Tensor]:
        if self.base is not None:
            return self.base.torque_limits(state)
        big = torch.full_like(state.qd, self.cfg.tau_max)
        return -big, big

    def physical_parameters(self) -> dict[str, float]:
        return self.base.physical_parameters() if self.base is not None else {}


def n_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)

