"""The streaming estimator's torch parts: the network runners (the model exported to ONNX
Runtime, or torch itself), the servo-reference simulation and the checks of a streaming
estimator's arguments (the causal averages and log-odds shifts are
:mod:`neuract.runtime.decide`'s, the feature builder :mod:`neuract.runtime.stream`'s)."""

from __future__ import annotations

import importlib.util
import math
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neuract.actuators.param import cached_params
from neuract.errors import ConfigError
from neuract.neuralactuator.export import OnnxActuator, export_onnx
from neuract.neuralactuator.model import NeuralActuator
from neuract.neuralactuator.physics import arm_model
from neuract.neuralactuator.reference import (
    chain_offsets,
    float64_servo,
    servo_series,
)
from neuract.runtime.onnx import OrtNetwork
from neuract.sim.simulate import control_step


class ReferenceStream:
    """The servo-reference channels (:mod:`neuract.neuralactuator.reference`) one sample at
    a time: the two chains' servo states advance one control step ``dt`` per sample, and a
    chain restarts from the measured state where its next segment starts. ``dt`` is the
    control step the servo is simulated on (the offline channels use the episode's median
    sample spacing)."""

    def __init__(self, system_model: Any, robot: str, steps: int, dt: float,
                 substeps: int = 2):
        if not (math.isfinite(dt) and dt > 0):
            raise ConfigError(f"reference dt={dt!r}; expected the sample period > 0 s")
        self.model = float64_servo(system_model)
        self.robot = arm_model(str(robot))
        self.steps, self.dt, self.substeps = int(steps), float(dt), int(substeps)
        self.reset()

    def reset(self) -> None:
        self.i = 0
        self.q = self.qd = None
        self.age = np.full(2, -1, dtype=np.int64)
        self.model.actuator.reset()

    def update(self, q: np.ndarray, qd: np.ndarray, q_goal: np.ndarray,
               series: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        f = lambda x: torch.tensor(np.asarray(x), dtype=torch.float64)  # noqa: E731
        if self.q is None:
            self.q, self.qd = f(np.stack([q, q])), f(np.stack([qd, qd]))
        for chain, offset in enumerate(chain_offsets(self.steps)):
            if self.i >= offset and (self.i - offset) % self.steps == 0:  # a segment starts
                self.q[chain], self.qd[chain] = f(q), f(qd)
                self.age[chain] = 0
                if self.model.actuator.history is not None:
                    self.model.actuator.reset([chain])
        use = 0 if self.age[0] >= self.age[1] else 1
        err = q - self.q[use].numpy()
        age = max(int(self.age[use]), 0) / float(self.steps)
        # advance both chains by one control step on the sample's commands and inputs
        h = self.dt / self.substeps
        cmd = f(np.stack([q_goal, q_goal]))
        now = {k: f(np.stack([v, v])) for k, v in series.items()}
        with torch.no_grad(), cached_params():
            self.q, self.qd = control_step(self.robot, self.model.actuator, self.model.joints,
                                           cmd, self.q, self.qd, h, now, self.substeps)
        self.age[self.age >= 0] += 1
        self.i += 1
        n = len(q)
        return {"ref_error": err, "ref_age": np.full(n, age)}

    def step(self, q: np.ndarray, qd: np.ndarray, q_goal: np.ndarray,
             sample: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """:meth:`update` with the supply voltage and torque enable of the streamed
        ``sample`` as the servo reads them."""
        return self.update(q, qd, q_goal, {k: v[0] for k, v in servo_series(sample, 1).items()})


NETWORKS = ("auto", "onnxruntime", "torch", "onnxruntime-int8")
"""the network backends of :class:`StreamingEstimator` (``onnxruntime-int8``: the head
trunk in int8, an approximation of the model, never chosen by ``auto``)"""


PHYSICS_BACKENDS = ("auto", "torch")
"""the physics-channel backends of :class:`StreamingEstimator` (``auto``: MuJoCo where it
gives the torch model's numbers, :class:`~neuract.neuralactuator.physics.PoseChannels`)"""


def onnxruntime_available() -> bool:
    """Whether ONNX export and ONNX Runtime (the ``export`` extra) are installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


class TorchNetwork:
    """The model itself, in torch at batch 1 (inference mode), on its window buffer
    :attr:`x` (1, T, F) float32; a recurrent gate's state carried from call to call."""

    name = "torch-eager"

    def __init__(self, model: NeuralActuator):
        cfg = model.cfg
        self.x = np.zeros((1, cfg.history, cfg.n_features), np.float32)
        self.model, self._xt = model, torch.from_numpy(self.x)
        self.state = None

    def reset(self) -> None:
        self.state = None

    def __call__(self) -> tuple[np.ndarray, ...]:
        """(tau (J,), force (3,), gate logits (lags,), condition logits (J, K)), float32."""
        with torch.inference_mode():
            tau, force, gate, cond = self.model(self._xt)
            if self.model.gate_rnn is not None:  # carried from the first valid sample on
                gate, self.state = self.model.recurrent_gate(self._xt[:, -1], self.state)
        return tau[0].numpy(), force[0].numpy(), gate[0].reshape(-1).numpy(), cond[0].numpy()


class OnnxNetwork(OrtNetwork):
    """The model folded and exported to ONNX (:func:`~neuract.neuralactuator.export.
    export_onnx`), run by ONNX Runtime on one thread through a batch-1 runner whose bound
    input buffer is the window (:attr:`x`, (1, T, F) float32); a recurrent gate's state is
    carried by the runner."""

    def __init__(self, model: NeuralActuator, quantize: str = "none"):
        with tempfile.TemporaryDirectory() as td:  # the session holds the graph in memory
            ort = OnnxActuator(export_onnx(model, Path(td) / "estimator.onnx",
                                           quantize=quantize), threads=1)
        super().__init__(ort)


def check_stream_args(cfg: Any, network: str, physics_backend: str) -> None:
    """Refuse a model or backend the streaming estimator cannot run."""
    if cfg.mode != "estimator":
        raise ConfigError(f"StreamingEstimator needs an estimator-mode model; got "
                          f"{cfg.mode!r}")
    if network not in NETWORKS:
        raise ConfigError(f"StreamingEstimator network={network!r}; accepted: "
                          f"{list(NETWORKS)}")
    if physics_backend not in PHYSICS_BACKENDS:
        raise ConfigError(f"StreamingEstimator physics_backend={physics_backend!r}; "
                          f"accepted: {list(PHYSICS_BACKENDS)}")
    if network.startswith("onnxruntime") and not onnxruntime_available():
        raise ConfigError(f"StreamingEstimator network={network!r} needs the onnx and "
                          "onnxruntime packages (pip install 'neuract[export]'); "
                          "network='auto' uses torch without them")


def reference_stream(model: NeuralActuator,
                     reference_dt: float | None) -> ReferenceStream | None:
    """The servo-reference channels' simulation, or None for a model without them."""
    cfg = model.cfg
    if not cfg.reference_steps:
        return None
    if reference_dt is None:
        raise ConfigError(f"this model reads the servo-reference channels "
                          f"(reference_steps={cfg.reference_steps}), whose servo is "
                          "simulated on a fixed control step: give reference_dt, the "
                          "telemetry's sample period [s]")
    if not getattr(model, "servo_loaded", False):
        raise ConfigError("the model's reference servo holds no fitted values (load "
                          "the checkpoint, or set_servo)")
    servo, robot, steps = model.reference
    return ReferenceStream(servo, robot, steps, float(reference_dt))
