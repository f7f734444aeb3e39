"""Estimator mode one telemetry sample at a time, for a running robot, from a model in memory
(:class:`neuract.runtime.Runtime` does the same from an exported ONNX file, without torch).

:func:`neuract.estimate.neural.estimate` reads a whole recorded episode;
:class:`StreamingEstimator` gives the same outputs sample by sample, keeping only what the
causal features need: the last ``history`` feature rows, the context channels' moving averages
and last direction of motion, the identification channels' running sums (since the last
:meth:`StreamingEstimator.reset`: call it where an episode starts), the condition smoothing's
running average, the contact gate filter's state and a recurrent gate's GRU state. Each
:meth:`StreamingEstimator.step` writes one feature row into a preallocated window and costs
one forward pass of the network (ONNX Runtime where installed, else torch), plus the arm's
gravity torques and site Jacobian from MuJoCo when the model reads physics channels (the
demo's estimator's time per step on one CPU thread: ``stream_step_p50_ms`` of
``benchmarks/bench_inference.py``)::

    est = StreamingEstimator(load_checkpoint("runs/demo/checkpoints/neuralactuator_estimator"))
    for sample in telemetry:  # t [s], q, qd, q_goal, current or load, voltage, temperature
        out = est.step(sample)
        if out["valid"] and out["contact_prob"] >= 0.5:
            ...

Models that read the servo-reference channels (``reference_steps > 0``) need
``reference_dt``, the telemetry's sample period, which their servo is simulated on (offline,
``estimate`` uses the episode's median sample spacing: the outputs agree at that spacing).
"""

from __future__ import annotations

from collections.abc import Sequence

from neuract.estimate.filters import resolve_filters
from neuract.estimate.stream_parts import (
    NETWORKS,
    PHYSICS_BACKENDS,
    OnnxNetwork,
    TorchNetwork,
    check_stream_args,
    onnxruntime_available,
    reference_stream,
)
from neuract.neuralactuator.model import NeuralActuator, check_gate_trained
from neuract.neuralactuator.physics import PoseChannels
from neuract.runtime.stream import StreamCore


class StreamingEstimator(StreamCore):
    """Estimator-mode outputs of ``model`` for one telemetry sample at a time.

    The thresholds and filters are :func:`~neuract.estimate.neural.estimate`'s, with
    the same defaults (the checkpoint's calibrated values). :meth:`step` takes a mapping with
    the sample's time ``t`` [s] and the model's source channels (each (n,) per joint, or one
    value for a bus-wide channel such as ``voltage``), and returns ``tau`` (n,) [N m],
    ``ee_force`` (3,) [N], ``contact_prob``, ``condition_prob_joint`` (n,),
    ``condition_prob`` and ``valid`` (False, with NaN outputs, until ``history`` samples have
    arrived), and ``contact_t``, the time [s] of the sample ``contact_prob`` decides: ``t``
    itself for a causal gate (NaN while not valid). A fixed-lag gate deciding at lag D
    (``cfg.gate_decision_lag``: ``gate_lag``, or a shorter ``gate_decide``)
    decides each sample once it has read the D samples after it: ``contact_prob`` then belongs
    to the valid sample D steps back (``contact_t`` its time; NaN for the first D valid
    samples), and :meth:`finish`, where the episode ends, decides its last D samples from the
    lags they allow, so that a streamed episode gets ``estimate``'s decisions. :meth:`reset`
    starts a new episode (a recurrent gate's state included). reference_dt: the sample
    period [s] the servo-reference channels are simulated on (required for models that read
    them).

    Each step writes the sample's feature row into a preallocated window (numpy, float32,
    as ``estimate``'s windows hold it) and runs the network once on it:

    * network ``"auto"`` (default): ONNX Runtime on one thread (the folded model exported when
      the estimator is built: build a new estimator after changing the model's weights)
      where ``onnx`` and ``onnxruntime`` are installed (the ``export`` extra), else
      ``"torch"``: the model itself in torch (eager, inference mode). Both compute
      ``estimate``'s float32 network to float32 rounding (the batch-1 products sum in
      another order than ``estimate``'s batches): streamed outputs equal the offline ones
      to about 1e-6. ``"onnxruntime-int8"`` runs the export with the head trunk in int8
      (``export_onnx(..., quantize="int8")``): faster, and an approximation of the model, not
      equal to ``estimate``;
    * physics_backend ``"auto"`` (default): the physics channels from MuJoCo's C functions
      (:class:`~neuract.neuralactuator.physics.PoseChannels`) where the arm's MJCF gives the
      torch model's numbers (checked when the estimator is built), else, or with ``"torch"``,
      from the torch arm model at batch 1;
    * the servo-reference channels' servo is simulated in torch, one control step per sample
      (float64; there is no faster path for it).

    :attr:`backend` and :attr:`physics_backend` say what runs.
    """

    def __init__(self, model: NeuralActuator, condition_tau_s: float | None = None,
                 condition_threshold: float | Sequence[float] | None = None,
                 gate_threshold: float | None = None, gate_tau_s: float | None = None,
                 gate_release: float | None = None, reference_dt: float | None = None,
                 network: str = "auto", physics_backend: str = "auto"):
        check_stream_args(model.cfg, network, physics_backend)
        check_gate_trained(model)
        ref = reference_stream(model, reference_dt)
        self.model = model.eval()
        decisions = resolve_filters(model, condition_tau_s, condition_threshold,
                                    gate_threshold, gate_tau_s, gate_release)
        use_mujoco = physics_backend == "auto"
        self._build(model.cfg, decisions, lambda: self._network(model, network),
                    lambda robot, site: PoseChannels(robot, site, use_mujoco=use_mujoco), ref)

    @staticmethod
    def _network(model: NeuralActuator, network: str) -> OnnxNetwork | TorchNetwork:
        """The network runner (:attr:`backend` names it)."""
        if network == "auto":
            network = "onnxruntime" if onnxruntime_available() else "torch"
        if network.startswith("onnxruntime"):
            return OnnxNetwork(model, "int8" if network.endswith("int8") else "none")
        return TorchNetwork(model)


__all__ = ["NETWORKS", "PHYSICS_BACKENDS", "StreamingEstimator", "onnxruntime_available"]
