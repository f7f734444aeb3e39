"""Inference-only NeuralActuator with every constant folded: the fast path for CPU.

:class:`FusedNeuralActuator` computes exactly what :class:`NeuralActuator` computes (up to
float rounding) with fewer, larger operations:

* feature scaling and the positional embedding are folded into the input projection (the mean
  is subtracted first, in the graph: folding it too loses float32 precision on channels that
  barely varied in training);
* LayerNorm scales/shifts are folded into the following projection, the attention scale into
  the query weights, the force scale and ``1 / tau_max`` into the output head;
* the PD servo prior is one small matrix product on the raw last-step features;
* activations stay 2-D ``(B * T, d)``; all heads come out of one matrix product;
* a motor condition head (``condition_head="motor"`` / ``"both"``) has the feature scaling
  and the joint one-hot folded into one first-layer map and bias per joint.

It is what ``export.py`` writes to ONNX and what the ``torch-fused`` benchmark backend runs
(optionally frozen with TorchScript). :meth:`FusedNeuralActuator.quantize_trunk` stores the
head trunk's weights in int8 for ``compile_aot(..., quantize="int8")``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from neuract.neuralactuator.int8op import quantize_rows
from neuract.neuralactuator.model import NeuralActuator


def _fold_ln(weight: torch.Tensor, bias: torch.Tensor, ln: nn.LayerNorm) -> tuple:
    """Fold LayerNorm affine (g, b) into a following linear y = W ln(x) + c."""
    return weight * ln.weight, bias + weight @ ln.bias


class FusedNeuralActuator(nn.Module):
    """Folded copy of a trained :class:`NeuralActuator`; same inputs and outputs.

    ``forward(x)``: x: (B, T, F) raw features -> (tau [N m] (B, J), force [N] (B, 3),
    gate_logit (B,), condition_logits (B, J, K)).
    """

    def __init__(self, model: NeuralActuator):
        super().__init__()
        cfg = model.cfg
        self.cfg = cfg
        self.J, self.T, self.K = cfg.n_joints, cfg.history, cfg.n_conditions
        self.d, self.H = cfg.d_model, cfg.n_heads
        self.Fdim = cfg.n_features
        self.relu = False
        self.trunk_int8 = False
        m = model
        with torch.no_grad():
            # the mean is subtracted in the graph, not folded into the bias: a channel that
            # barely varied in training (std at its floor) times a large raw value (a
            # temperature register) would cancel in float32 against a folded bias
            W = m.inp.weight / m.x_std  # (d, F)
            self.x_mean = nn.Parameter(m.x_mean.clone(), requires_grad=False)  # (F,)
            self.w_in = nn.Parameter(W.t().contiguous(), requires_grad=False)  # (F, d)
            self.b_tok = nn.Parameter((m.inp.bias + m.pos).contiguous(),
                                      requires_grad=False)  # (T, d)
            self.layers = nn.ModuleList()
            dh = self.d // self.H
            for layer in m.layers:
                L = nn.Module()
                wq, bq = _fold_ln(layer.qkv.weight, layer.qkv.bias, layer.ln1)
                wq, bq = wq.clone(), bq.clone()
                wq[: self.d] *= dh**-0.5
                bq[: self.d] *= dh**-0.5
                w1, b1 = _fold_ln(layer.ff1.weight, layer.ff1.bias, layer.ln2)
                for name, t in (("w_qkv", wq.t()), ("b_qkv", bq), ("w_out", layer.out.weight.t()),
                                ("b_out", layer.out.bias), ("w_ff1", w1.t()), ("b_ff1", b1),
                                ("w_ff2", layer.ff2.weight.t()), ("b_ff2", layer.ff2.bias)):
                    setattr(L, name, nn.Parameter(t.contiguous(), requires_grad=False))
                self.layers.append(L)
            # trunk reads the flattened ln_f output: fold ln_f's affine (tiled over T)
            g = m.ln_f.weight.repeat(self.T)
            beta = m.ln_f.bias.repeat(self.T)
            wt = m.trunk.weight * g
            bt = m.trunk.bias + m.trunk.weight @ beta
            self.w_trunk = nn.Parameter(wt.t().contiguous(), requires_grad=False)
            self.b_trunk = nn.Parameter(bt.contiguous(), requires_grad=False)
            # head: tau pre-activation scaled by 1/tau_max, force by force_scale
            J = self.J
            scale = torch.ones(cfg.n_outputs)
            scale[:J] = 1.0 / m.tau_max
            scale[J:J + 3] = m.force_scale
            self.w_head = nn.Parameter((m.head.weight * scale[:, None]).t().contiguous(),
                                       requires_grad=False)
            self.b_head = nn.Parameter((m.head.bias * scale).contiguous(), requires_grad=False)
            # PD prior as a (T*F, J) map from the raw flattened window, already / tau_max
            P = torch.zeros(self.T * self.Fdim, J)
            if cfg.prior == "pd":
                ar = torch.arange(J)
                P[m.idx_err, ar] = m.log_kp.exp() / m.tau_max
                P[m.idx_qd, ar] = -m.log_kd.exp() / m.tau_max
            self.w_prior = nn.Parameter(P, requires_grad=False)
            self.tau_max = nn.Parameter(m.tau_max.clone(), requires_grad=False)
            # motor condition head: its first layer reads each joint's normalised last-sample
            # channels and the joint's one-hot; both fold into one (C, h) map and bias per
            # joint applied to the raw channels
            self.motor = m.cond_motor is not None
            if self.motor:
                C = len(cfg.channels)
                l1, l2, l3 = m.cond_motor[0], m.cond_motor[2], m.cond_motor[4]
                wc, wo = l1.weight[:, :C], l1.weight[:, C:]  # (h, C), (h, J)
                std = m.x_std.reshape(J, C)
                wj = wc[None] / std[:, None, :]  # (J, h, C), applied to centred channels
                bj = l1.bias[None] + wo.t()  # (J, h)
                for name, t in (("w_m1", wj.transpose(1, 2)), ("b_m1", bj),
                                ("w_m2", l2.weight.t()), ("b_m2", l2.bias),
                                ("w_m3", l3.weight.t()), ("b_m3", l3.bias)):
                    setattr(self, name, nn.Parameter(t.contiguous(), requires_grad=False))

    def quantize_trunk(self) -> FusedNeuralActuator:
        """In place: store the head trunk's weights in int8 per output channel and compute
        the trunk with ``torch.ops.neuract.linear_w8`` (load it first:
        :func:`neuract.neuralactuator.int8op.load_op`). Returns ``self``."""

        if self.trunk_int8:
            return self
        q, s = quantize_rows(self.w_trunk.t())
        del self.w_trunk
        self.register_buffer("w_trunk_q", q)
        self.register_buffer("trunk_scale", s)
        self.trunk_int8 = True
        return self

    def forward(self, x: torch.Tensor):
        T, d, H, J = self.T, self.d, self.H, self.J
        act = F.relu if self.cfg.activation == "relu" else F.gelu
        # every reshape uses -1 for the batch so the exported graph has no shape arithmetic
        xc = x - self.x_mean
        h = (torch.matmul(xc, self.w_in) + self.b_tok).reshape(-1, d)  # (B*T, d)
        for L in self.layers:
            qkv = torch.addmm(L.b_qkv, F.layer_norm(h, (d,)), L.w_qkv)
            qkv = qkv.reshape(-1, T, 3 * H, d // H).transpose(1, 2)  # (B, 3H, T, dh)
            q, k, v = qkv.split(H, dim=1)
            att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1)
            a = torch.matmul(att, v).transpose(1, 2).reshape(-1, d)
            h = h + torch.addmm(L.b_out, a, L.w_out)
            f = act(torch.addmm(L.b_ff1, F.layer_norm(h, (d,)), L.w_ff1))
            h = h + torch.addmm(L.b_ff2, f, L.w_ff2)
        z = F.layer_norm(h, (d,)).reshape(-1, T * d)
        if self.trunk_int8:
            z = act(torch.ops.neuract.linear_w8(z, self.w_trunk_q, self.trunk_scale, self.b_trunk))
        else:
            z = act(torch.addmm(self.b_trunk, z, self.w_trunk))
        out = torch.addmm(self.b_head, z, self.w_head)
        pre = out[:, :J] + torch.matmul(x.reshape(-1, T * self.Fdim), self.w_prior)
        tau = self.tau_max * torch.tanh(pre)
        cond = out[:, J + 4:].reshape(-1, J, self.K)
        if self.motor:
            hm = self.cfg.d_motor
            own = xc[:, -1].reshape(-1, J, 1, self.Fdim // J)  # each joint's centred channels
            z = act(torch.matmul(own, self.w_m1).reshape(-1, J, hm) + self.b_m1)
            z = act(torch.addmm(self.b_m2, z.reshape(-1, hm), self.w_m2))
            mc = torch.addmm(self.b_m3, z, self.w_m3).reshape(-1, J, self.K)
            cond = mc + cond if self.cfg.condition_head == "both" else mc
        return tau, out[:, J:J + 3], out[:, J + 3], cond

__all__ = ["FusedNeuralActuator"]
