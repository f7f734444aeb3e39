"""neuract.runtime: an exported estimator-mode NeuralActuator run on a robot without torch.

:class:`Runtime` reads the ONNX file ``neuract export`` writes and builds the model's
features one telemetry sample at a time (numpy), runs the network (ONNX Runtime) and computes
the physics channels (MuJoCo): nothing in this package imports torch, so that a robot's
computer needs numpy, onnxruntime and mujoco alone. The same feature builder
(:class:`~neuract.runtime.stream.StreamCore`) runs
:class:`neuract.estimate.stream.StreamingEstimator`.
"""

from neuract.runtime.runtime import Runtime

__all__ = ["Runtime"]
