"""ONNX export of a NeuralActuator and ONNX Runtime inference on CPU.

The exported graph is the folded :class:`~neuract.neuralactuator.fused.FusedNeuralActuator`
(normalisation, LayerNorm affines, positional embedding, torque limits and force scale folded
into the matrices), with one input ``x: (B, T, F)`` raw features (float32, dynamic batch) and
outputs ``tau (B, J) [N m]``, ``force (B, 3) [N]``, ``gate_logit (B,)``,
``condition_logits (B, J, K)``. The model config and channel list are stored in the ONNX
metadata (``neuract.config``), so the file alone says what it expects. For a simulator-mode
model with ``prior='servo'`` the ``tau`` output is the residual joint torque (the servo model
needs the simulated physical state and is applied by the rollouts; its configuration is in
the metadata's config).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import warnings
from pathlib import Path

import numpy as np
import torch

from neuract.atomic import atomic_path
from neuract.errors import CheckpointError, SchemaError
from neuract.neuralactuator.fused import FusedNeuralActuator
from neuract.neuralactuator.model import NeuralActuator

OUTPUTS = ("tau", "force", "gate_logit", "condition_logits")
OPSET = 17


def export_onnx(model: NeuralActuator, path: str | os.PathLike, opset: int = OPSET) -> Path:
    """Write ``model`` (folded) to an ONNX file atomically; returns the path."""
    import onnx

    path = Path(path)
    fused = FusedNeuralActuator(model.eval()).eval()
    cfg = model.cfg
    x = torch.zeros(2, cfg.history, cfg.n_features)
    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        # the TorchScript-based exporter needs no extra dependency (onnxscript) and handles
        # this small static graph exactly; torch is pinned, so its deprecation is harmless
        warnings.simplefilter("ignore")
        torch.onnx.export(fused, (x,), buf, dynamo=False, input_names=["x"],
                          output_names=list(OUTPUTS), opset_version=opset,
                          dynamic_axes={"x": {0: "batch"}, **{k: {0: "batch"} for k in OUTPUTS}})
    proto = onnx.load_from_string(buf.getvalue())
    meta = {"neuract.kind": "neuralactuator",
            "neuract.config": json.dumps(dataclasses.asdict(cfg)),
            "neuract.channels": json.dumps(list(cfg.channels))}
    for k, v in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.checker.check_model(proto)
    with atomic_path(path) as tmp:
        onnx.save(proto, str(tmp))
    return path


def ort_session(path: str | os.PathLike, threads: int = 1):
    """An ONNX Runtime CPU session: all graph optimisations, ``threads`` intra-op threads,
    sequential execution (the settings the inference benchmark uses)."""
    import onnxruntime as ort

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"ONNX file {str(path)!r} not found")
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


class OnnxActuator:
    """Run an exported NeuralActuator with ONNX Runtime.

    ``actuator(x)`` with x: (B, T, F) raw features -> dict of numpy arrays ``tau``, ``force``,
    ``gate_logit``, ``condition_logits``.
    """

    def __init__(self, path: str | os.PathLike, threads: int = 1):
        self.session = ort_session(path, threads)
        meta = self.session.get_modelmeta().custom_metadata_map
        self.config = json.loads(meta.get("neuract.config", "{}"))
        self.channels = tuple(json.loads(meta.get("neuract.channels", "[]")))
        self._shape = (self.config.get("history"),
                       self.config.get("n_joints", 0) * len(self.channels))

    def run(self, x: np.ndarray) -> list:
        """Raw session outputs, in ``OUTPUTS`` order (no checks: the benchmark path)."""
        return self.session.run(None, {"x": x})

    def __call__(self, x: np.ndarray) -> dict:
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim != 3 or x.shape[1:] != self._shape:
            raise SchemaError(f"ONNX NeuralActuator input has shape {x.shape}; expected "
                              f"(B, {self._shape[0]}, {self._shape[1]}) for channels "
                              f"{list(self.channels)}")
        if not np.isfinite(x).all():
            raise SchemaError("ONNX NeuralActuator input contains non-finite values")
        return dict(zip(OUTPUTS, self.run(x)))


__all__ = ["export_onnx", "ort_session", "OnnxActuator", "OUTPUTS"]
