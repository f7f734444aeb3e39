"""The recurrent contact gate of a NeuralActuator estimator and its fixed-lag decisions.

:class:`RecurrentGate` reads each sample's normalised feature row and carries its state over an
episode; :func:`lagged_probability` and :func:`decision_delay` turn a fixed-lag gate's logits
into one decision per sample.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from neuract.errors import ConfigError
from neuract.runtime.onnx import gate_state_size


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


__all__ = ["gate_state_size", "RecurrentGate", "lagged_probability", "decision_delay"]
