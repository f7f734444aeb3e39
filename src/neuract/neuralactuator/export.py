"""ONNX export of a NeuralActuator and ONNX Runtime inference on CPU.

The exported graph is the folded :class:`~neuract.neuralactuator.fused.FusedNeuralActuator`
(feature scaling, LayerNorm affines, positional embedding, torque limits and force scale folded
into the matrices; the feature mean is subtracted first, in the graph), with one input
``x: (B, T, F)`` raw features (float32, dynamic batch) and
outputs ``tau (B, J) [N m]``, ``force (B, 3) [N]``, ``gate_logit (B,)``,
``condition_logits (B, J, K)``. A model with a recurrent contact gate
(``NeuralActuatorConfig.gate_rnn``) has a second input, ``gate_state (B, S)`` (the gate's state
after the previous sample: the GRU state, and with ``gate_conv`` each convolution's last
inputs, :attr:`~neuract.neuralactuator.gate.RecurrentGate.state_size`; zeros at an episode's
start), ``gate_logit`` is the recurrent gate's logit for the window's last sample, and a fifth
output ``gate_state_out (B, S)`` is the state to pass with the next sample
(:class:`OnnxActuator` and its ``runner`` carry it). A fixed-lag gate
(``NeuralActuatorConfig.gate_lag`` = D) has ``gate_logit (B, D + 1)``: column k is its logit
for the sample k samples before the window's last (the decision for the sample D back, or
for the sample ``gate_decide`` back where the checkpoint sets a shorter decision lag; near
an episode's end, the smaller lags decide the last samples, as
:class:`~neuract.estimate.stream.StreamingEstimator` does). The
model config and channel list are stored in the ONNX
metadata (``neuract.config``), so the file alone says what it expects; a model that reads
the physics channels also stores its arm (``neuract.arm``: the robot, the end-effector site
and the compiled MuJoCo model, :func:`~neuract.neuralactuator.physics.arm_record`), so that
:class:`neuract.runtime.Runtime` builds the features from the file alone, without torch.
:class:`OnnxActuator` (ONNX Runtime) lives in :mod:`neuract.runtime.onnx`. For a simulator-mode
model with ``prior='servo'`` the ``tau`` output is the residual joint torque (the servo model
needs the simulated physical state and is applied by the rollouts; its configuration is in
the metadata's config).

``quantize="int8"`` stores the head trunk's matrix (the largest one: 85 % of the default
model's parameters, and at batch 1 most of the bytes a forward pass reads) as int8 (7-bit
range, so that CPUs without VNNI cannot saturate the products), one scale per output channel,
applied by ONNX Runtime's dynamic quantization (the activations are
quantized on every call); everything else stays float32. The file records it in
``neuract.quantize``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from neuract.atomic import atomic_path
from neuract.errors import ConfigError, SchemaError
from neuract.neuralactuator.fused import FusedNeuralActuator
from neuract.neuralactuator.model import NeuralActuator, check_gate_trained
from neuract.neuralactuator.physics import arm_record
from neuract.runtime.onnx import OUTPUTS, STATE_IN, STATE_OUT, OnnxActuator, ort_session

OPSET = 17
QUANTIZE = ("none", "int8")


class _RecurrentGateGraph(torch.nn.Module):
    """The folded model with the recurrent gate's logit for the window's last sample and
    its state in and out (the exported graph of a model with ``gate_rnn``)."""

    def __init__(self, fused: FusedNeuralActuator, model: NeuralActuator):
        super().__init__()
        import copy

        self.fused = fused
        self.register_buffer("x_mean", model.x_mean.clone())
        self.register_buffer("x_std", model.x_std.clone())
        self.gate = copy.deepcopy(model.gate_rnn)

    def forward(self, x: torch.Tensor, state: torch.Tensor):
        tau, force, _, cond = self.fused(x)
        logit, h = self.gate(((x[:, -1] - self.x_mean) / self.x_std)[:, None], state[None])
        return tau, force, logit[:, 0], cond, h[0]


def reference_outputs(model: NeuralActuator, x: torch.Tensor,
                      state: torch.Tensor | None = None) -> list[np.ndarray]:
    """What an export of ``model`` must compute for windows x (B, T, F): the model's outputs
    in :data:`OUTPUTS` order; with a recurrent gate, its logit for each window's last sample
    (B, D + 1 for a fixed-lag gate) from ``state`` (B, S) (zeros if None) and the state after
    it."""
    with torch.no_grad():
        out = list(model(x))
        if model.gate_rnn is not None:
            if state is None:
                state = torch.zeros(x.shape[0], model.gate_rnn.state_size)
            logit, h = model.gate_rnn(model.gate_rows(x[:, -1])[:, None], state[None])
            out = [out[0], out[1], logit[:, 0], out[3], h[0]]
    return [o.numpy() for o in out]


def export_onnx(model: NeuralActuator, path: str | os.PathLike, opset: int = OPSET,
                quantize: str = "none", extra: dict | None = None) -> Path:
    """Write ``model`` (folded) to an ONNX file atomically; returns the path.

    quantize: ``"none"`` (float32; equal to torch to about 1e-6) or ``"int8"`` (the head
    trunk's weights in int8 per output channel, dynamic quantization; see the module).
    extra: JSON-serialisable facts stored with the graph (``neuract.extra``; e.g. the
    checkpoint's calibrated gate and condition decisions), read back as
    :attr:`OnnxActuator.extra`."""
    import onnx

    if quantize not in QUANTIZE:
        raise ConfigError(f"export_onnx: quantize={quantize!r}; accepted: {list(QUANTIZE)}")
    try:
        extra_json = json.dumps(extra or {})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"export_onnx: extra is not JSON-serialisable ({exc})") from None
    path = Path(path)
    check_gate_trained(model)
    fused = FusedNeuralActuator(model.eval()).eval()
    cfg = model.cfg
    x = torch.zeros(2, cfg.history, cfg.n_features)
    graph, args, inputs, outputs = fused, (x,), ["x"], list(OUTPUTS)
    if model.gate_rnn is not None:
        graph = _RecurrentGateGraph(fused, model).eval()
        args = (x, torch.zeros(2, model.gate_rnn.state_size))
        inputs, outputs = ["x", STATE_IN], [*OUTPUTS, STATE_OUT]
    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        # the TorchScript-based exporter needs no extra dependency (onnxscript) and handles
        # this small static graph exactly; torch is pinned, so its deprecation is harmless
        warnings.simplefilter("ignore")
        torch.onnx.export(graph, args, buf, dynamo=False, input_names=inputs,
                          output_names=outputs, opset_version=opset,
                          dynamic_axes={k: {0: "batch"} for k in (*inputs, *outputs)})
    proto = onnx.load_from_string(buf.getvalue())
    if quantize == "int8":
        proto = _int8_trunk(proto, cfg.d_trunk, cfg.history * cfg.d_model)
    meta = {"neuract.kind": "neuralactuator",
            "neuract.config": json.dumps(dataclasses.asdict(cfg)),
            "neuract.channels": json.dumps(list(cfg.channels)),
            "neuract.quantize": quantize,
            "neuract.extra": extra_json}
    if cfg.physics is not None:  # what neuract.runtime computes the physics channels with
        meta["neuract.arm"] = json.dumps(arm_record(*cfg.physics))
    for k, v in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.checker.check_model(proto)
    with atomic_path(path) as tmp:
        onnx.save(proto, str(tmp))
    return path


@contextlib.contextmanager
def _root_logger_untouched():
    """ONNX Runtime's quantizer logs through the module-level ``logging`` functions, which
    configure the root logger (a stderr handler) when it has none. A NullHandler while it
    runs, removed afterwards, leaves the user's logging as it was."""
    root = logging.getLogger()
    guard = logging.NullHandler() if not root.handlers else None
    if guard is not None:
        root.addHandler(guard)
    try:
        yield
    finally:
        if guard is not None:
            root.removeHandler(guard)


def _int8_trunk(proto, d_trunk: int, d_in: int):
    """``proto`` with the head trunk's weight quantized to int8 per output channel for ONNX
    Runtime's dynamic quantization. The quantizer writes every plain Gemm as MatMul + Add (in
    float32) and quantizes only the trunk's, named ``<gemm>_MatMul``."""
    import onnx
    from onnx import helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    weights = {i.name: i for i in proto.graph.initializer}

    def attrs(n) -> dict:
        return {a.name: helper.get_attribute_value(a) for a in n.attribute}

    def shape(n) -> tuple:  # the weight as (in, out)
        dims = tuple(weights[n.input[1]].dims)
        return dims[::-1] if attrs(n).get("transB", 0) else dims

    # the folded model's trunk weight is the initializer ``w_trunk`` (``fused.w_trunk`` in
    # the graph of a model with a recurrent gate); its shape is checked too
    hits = [n for n in proto.graph.node if n.op_type == "Gemm" and len(n.input) == 3
            and n.input[1] in ("w_trunk", "fused.w_trunk") and shape(n) == (d_in, d_trunk)]
    if len(hits) != 1 or not hits[0].name:
        raise SchemaError(f"int8 export: expected one named head-trunk Gemm with the {d_in} x "
                          f"{d_trunk} weight 'w_trunk' in the folded graph; found {len(hits)}")
    gemm = hits[0]
    a = attrs(gemm)
    if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
        raise SchemaError(f"int8 export: the head-trunk Gemm has attributes {a}; expected "
                          "a plain x W + b (the form the quantizer rewrites as MatMul + Add)")
    # the graph needs none of the quantizer's shape pre-processing (static shapes but the
    # batch); saying so keeps its advice to run it out of the log
    entry = proto.metadata_props.add()
    entry.key, entry.value = "onnx.quant.pre_process", "onnxruntime.quant"
    with tempfile.TemporaryDirectory() as td, _root_logger_untouched():
        src, dst = Path(td) / "float.onnx", Path(td) / "int8.onnx"
        onnx.save(proto, str(src))
        # reduce_range: 7-bit weights, so that AVX2's pairwise 16-bit sums (CPUs without
        # VNNI) cannot saturate
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=True, nodes_to_quantize=[gemm.name + "_MatMul"])
        out = onnx.load(str(dst))
    if not any(n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") for n in out.graph.node):
        raise SchemaError("int8 export: ONNX Runtime's quantizer left the head trunk in float32")
    return out


def output_deviation(ref, got) -> dict[str, dict[str, float]]:
    """How far outputs ``got`` are from ``ref`` (two sequences in :data:`OUTPUTS` order,
    arrays or tensors; a recurrent gate's state last), per output: ``max_abs_diff``, and
    the mean and max |difference| over the reference output's standard deviation
    (``mean_abs_over_std``, ``max_abs_over_std``; the spread floored at 1e-12 for a constant
    output)."""
    out = {}
    names = OUTPUTS if len(ref) == len(OUTPUTS) else (*OUTPUTS, STATE_OUT)
    for k, a, b in zip(names, ref, got, strict=True):
        a = np.asarray(a)
        d = np.abs(a - np.asarray(b))
        spread = max(float(a.std()), 1e-12)
        out[k] = {"max_abs_diff": float(d.max()), "mean_abs_over_std": float(d.mean() / spread),
                  "max_abs_over_std": float(d.max() / spread)}
    return out


__all__ = ["export_onnx", "ort_session", "output_deviation", "OnnxActuator", "OUTPUTS",
           "QUANTIZE", "STATE_IN", "STATE_OUT", "reference_outputs"]
