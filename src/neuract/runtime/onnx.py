"""An exported NeuralActuator (:func:`~neuract.neuralactuator.export.export_onnx`) run by
ONNX Runtime on CPU, torch-free: the session, the file's metadata and the fixed-batch runner
with bound buffers that a control loop calls. ``onnxruntime`` (the ``export`` extra) is
imported when a session is opened, not with this module."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from neuract.errors import CheckpointError, SchemaError

OUTPUTS = ("tau", "force", "gate_logit", "condition_logits")
STATE_IN, STATE_OUT = "gate_state", "gate_state_out"
"""the recurrent gate's state input and output (models with ``gate_rnn`` only)"""


def gate_state_size(hidden: int, conv: int = 0) -> int:
    """Size of the recurrent gate's state: the GRU's ``hidden`` units and, with ``conv``
    convolution layers, each layer's last ``2 * dilation`` inputs (``hidden`` each)."""
    return hidden * (1 + sum(2 * 2 ** i for i in range(conv)))



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
    ``gate_logit``, ``condition_logits``. For a model with a recurrent gate
    (:attr:`gate_state_size` > 0), ``actuator(x, gate_state)`` also takes the gate's state
    (B, :attr:`gate_state_size`) after the previous sample of each stream (None: zeros, a
    stream's start) and returns the next one as ``gate_state``. A fixed-lag gate
    (:attr:`gate_lag` = D) gives ``gate_logit`` (B, D + 1), column k for the sample k back;
    the checkpoint's filter decides from column :attr:`gate_decision_lag`.
    """

    def __init__(self, path: str | os.PathLike, threads: int = 1):
        self.session = ort_session(path, threads)
        meta = self.session.get_modelmeta().custom_metadata_map
        self.config = json.loads(meta.get("neuract.config", "{}"))
        self.channels = tuple(json.loads(meta.get("neuract.channels", "[]")))
        self.quantize = meta.get("neuract.quantize", "none")
        self.extra = json.loads(meta.get("neuract.extra", "{}"))
        self._shape = (self.config.get("history"),
                       self.config.get("n_joints", 0) * len(self.channels))
        self.gate_state_size = gate_state_size(int(self.config.get("gate_rnn", 0) or 0),
                                               int(self.config.get("gate_conv", 0) or 0))
        """the recurrent gate's state size S (0: none): the GRU's units, and with a
        convolution front each layer's last inputs"""
        self.gate_lag = int(self.config.get("gate_lag", 0) or 0)
        """a fixed-lag gate's lag D (0: causal); its ``gate_logit`` is (B, D + 1)"""
        decide = int(self.config.get("gate_decide", -1))
        self.gate_decision_lag = self.gate_lag if decide == -1 else decide
        """the lag whose logit the checkpoint's calibrated filter decides from (column
        ``gate_decision_lag`` of ``gate_logit``, read that many samples after its sample;
        ``gate_lag`` unless the checkpoint sets a shorter ``gate_decide``)"""
        self.outputs = OUTPUTS + ((STATE_OUT,) if self.gate_state_size else ())

    @property
    def gate_hidden(self) -> int:
        """The older name of :attr:`gate_state_size` (kept for callers that use it)."""
        return self.gate_state_size

    def run(self, x: np.ndarray, gate_state: np.ndarray | None = None) -> list:
        """Raw session outputs, in :attr:`outputs` order (no checks: the benchmark path);
        gate_state: the recurrent gate's state (None: zeros)."""
        feed = {"x": x}
        if self.gate_state_size:
            feed[STATE_IN] = (np.zeros((x.shape[0], self.gate_state_size), np.float32)
                              if gate_state is None else gate_state)
        return self.session.run(None, feed)

    def runner(self, batch: int):
        """A fixed-batch call for control loops: ``f(x) -> [tau, force, gate_logit,
        condition_logits]`` for x of shape (batch, T, F). The input and outputs live in
        buffers bound to the session once (ONNX Runtime I/O binding), which saves the
        per-call allocation of :meth:`run`; the returned arrays are those buffers, so the next
        call overwrites them: copy what you keep. Like :meth:`run` it does not check the
        input for non-finite values (the control-loop path); the input is cast to float32.
        With a recurrent gate the callable carries its state from call to call (each row of
        the batch its own stream); ``f.reset()`` zeroes it (an episode's start),
        ``f.reset(rows)`` only those rows' streams."""
        if isinstance(batch, bool) or not (isinstance(batch, int) and batch >= 1):
            raise SchemaError(f"OnnxActuator.runner: batch={batch!r}; expected an integer >= 1")
        xin = np.zeros((batch, *self._shape), np.float32)
        outs = tuple(np.empty_like(o) for o in self.run(xin))  # held here: bound memory
        bind = self.session.io_binding()
        bind.bind_input("x", "cpu", 0, np.float32, list(xin.shape), xin.ctypes.data)
        sin = np.zeros((batch, self.gate_state_size), np.float32)
        if self.gate_state_size:
            bind.bind_input(STATE_IN, "cpu", 0, np.float32, list(sin.shape), sin.ctypes.data)
        for name, buf in zip(self.outputs, outs):
            bind.bind_output(name, "cpu", 0, np.float32, list(buf.shape), buf.ctypes.data)
        run = self.session.run_with_iobinding
        n_out = len(OUTPUTS)

        def call(x: np.ndarray) -> list:
            if x.shape != xin.shape:
                raise SchemaError(f"ONNX NeuralActuator runner input has shape {x.shape}; "
                                  f"expected {xin.shape}")
            np.copyto(xin, x)
            run(bind)
            if self.gate_state_size:
                np.copyto(sin, outs[n_out])  # the next call continues each stream
            return list(outs[:n_out])

        def reset(rows=None) -> None:  # every stream, or the batch rows given
            if rows is None:
                sin.fill(0.0)
            else:
                sin[rows] = 0.0

        call.buffers = (xin, sin, outs)  # keeps the bound memory alive with the callable
        call.reset = reset
        return call

    def __call__(self, x: np.ndarray, gate_state: np.ndarray | None = None) -> dict:
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim != 3 or x.shape[1:] != self._shape:
            raise SchemaError(f"ONNX NeuralActuator input has shape {x.shape}; expected "
                              f"(B, {self._shape[0]}, {self._shape[1]}) for channels "
                              f"{list(self.channels)}")
        if not np.isfinite(x).all():
            raise SchemaError("ONNX NeuralActuator input contains non-finite values")
        if gate_state is not None:
            if not self.gate_state_size:
                raise SchemaError("gate_state given, but this export has no recurrent gate")
            gate_state = np.ascontiguousarray(gate_state, dtype=np.float32)
            if gate_state.shape != (x.shape[0], self.gate_state_size) or not np.isfinite(
                    gate_state).all():
                raise SchemaError(f"gate_state has shape {gate_state.shape}; expected "
                                  f"({x.shape[0]}, {self.gate_state_size}) finite values")
        out = dict(zip(self.outputs, self.run(x, gate_state)))
        if self.gate_state_size:
            out["gate_state"] = out.pop(STATE_OUT)
        return out


class OrtNetwork:
    """``actuator``'s batch-1 runner (:meth:`OnnxActuator.runner`) on its bound input buffer
    :attr:`x` (1, T, F) float32, the window a streaming estimator writes its feature rows
    into; a recurrent gate's state is carried by the runner. ``net()`` gives tau (J,),
    force (3,), gate logits (lags,) and condition logits (J, K), float32."""

    def __init__(self, actuator: OnnxActuator):
        q = actuator.quantize
        self.name = "onnxruntime" if q == "none" else f"onnxruntime-{q}"
        self.run = actuator.runner(1)
        self.x = self.run.buffers[0]

    def reset(self) -> None:
        self.run.reset()

    def __call__(self) -> tuple[np.ndarray, ...]:
        tau, force, gate, cond = self.run(self.x)
        return tau[0], force[0], gate[0].reshape(-1), cond[0]


__all__ = ["OUTPUTS", "STATE_IN", "STATE_OUT", "OnnxActuator", "OrtNetwork", "gate_state_size",
           "ort_session"]
