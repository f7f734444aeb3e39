"""An exported estimator-mode NeuralActuator run on a robot without torch.

``neuract export`` writes the network to ONNX together with what its feature builder needs:
the model config and channel list (``neuract.config``, ``neuract.channels``), the calibrated
gate and condition decisions (``neuract.extra``) and, for a model that reads the physics
channels, the arm's compiled MuJoCo model (``neuract.arm``); the feature normalisation is
folded into the graph. :class:`Runtime` reads the file and gives, one telemetry sample at a
time, what :class:`~neuract.estimate.stream.StreamingEstimator` gives for the model itself
(the same feature builder, :class:`~neuract.runtime.stream.StreamCore`), with numpy, ONNX
Runtime and MuJoCo alone::

    rt = Runtime("neuralactuator.onnx")
    for sample in telemetry:  # t [s], and the channels rt.inputs names
        out = rt.step(sample)
        if out["valid"] and out["contact_prob"] >= 0.5:
            ...

Models that read the servo-reference channels (``reference_steps > 0``) are refused: their
servo is simulated in torch (run them with ``StreamingEstimator``).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import mujoco

from neuract.errors import ConfigError, SchemaError
from neuract.runtime.decide import resolve_decisions
from neuract.runtime.onnx import OnnxActuator, OrtNetwork
from neuract.runtime.pose import MjPose, arm_from_binary
from neuract.runtime.stream import StreamCore


class Runtime(StreamCore):
    """The estimator's outputs for one telemetry sample at a time, from the ONNX file
    ``path`` that ``neuract export`` (:func:`~neuract.neuralactuator.export.export_onnx`)
    wrote: :meth:`step`, :meth:`reset` and :meth:`finish` as
    :class:`~neuract.runtime.stream.StreamCore` describes; :attr:`inputs` names the channels
    a sample carries besides ``t``.

    The decision thresholds and filters default to the file's calibrated values (as
    ``estimate``'s default to the checkpoint's); give one to override it. threads: ONNX
    Runtime's intra-op threads (1: the control-loop setting). mjcf: the arm's MJCF file, for
    a model that reads the physics channels, in place of the compiled MuJoCo model the file
    stores (needed where this MuJoCo does not read the stored one's binary format, or for a
    file exported without it).
    """

    def __init__(self, path: str | os.PathLike, condition_tau_s: float | None = None,
                 condition_threshold: float | Sequence[float] | None = None,
                 gate_threshold: float | None = None, gate_tau_s: float | None = None,
                 gate_release: float | None = None, threads: int = 1,
                 mjcf: str | os.PathLike | None = None):
        if importlib.util.find_spec("onnxruntime") is None:
            raise ConfigError("neuract.runtime runs the network with ONNX Runtime: install "
                              "onnxruntime (pip install onnxruntime)")
        if isinstance(threads, bool) or not (isinstance(threads, int) and threads >= 1):
            raise ConfigError(f"Runtime threads={threads!r}; expected an integer >= 1")
        act = OnnxActuator(path, threads)
        meta = act.session.get_modelmeta().custom_metadata_map
        if meta.get("neuract.kind") != "neuralactuator" or not act.config:
            raise SchemaError(f"{str(path)!r} is not an ONNX file neuract export wrote "
                              "(no neuract.kind / neuract.config metadata)")
        c = act.config
        if c.get("mode") != "estimator":
            raise ConfigError(f"Runtime runs estimator-mode models; {str(path)!r} holds "
                              f"mode={c.get('mode')!r}")
        if c.get("reference_steps"):
            raise ConfigError(f"{str(path)!r} reads the servo-reference channels "
                              f"(reference_steps={c['reference_steps']}), whose servo is "
                              "simulated in torch; run it with "
                              "neuract.estimate.stream.StreamingEstimator")
        self.path = str(path)
        self.config: dict[str, Any] = c
        """the model config stored in the file (``neuract.config``)"""
        self.extra: dict[str, Any] = act.extra
        """the calibrated decisions stored in the file (``neuract.extra``)"""
        self.arm: dict[str, Any] | None = json.loads(meta.get("neuract.arm", "null"))
        """the arm stored in the file (``neuract.arm``: robot, site, MuJoCo model), or None"""
        robot = c.get("physics_robot") or ""
        cfg = SimpleNamespace(channels=act.channels, n_joints=int(c["n_joints"]),
                              history=int(c["history"]), context_s=c.get("context_s") or 0.0,
                              ident_memory=int(c.get("ident_memory") or 0),
                              physics=(robot, c.get("physics_site")) if robot else None,
                              gate_decision_lag=act.gate_decision_lag)
        decisions = resolve_decisions(self.extra, cfg.n_joints, condition_tau_s,
                                      condition_threshold, gate_threshold, gate_tau_s,
                                      gate_release)
        self._build(cfg, decisions, lambda: OrtNetwork(act),
                    lambda _robot, site: MjPose(self._arm_model(mjcf, cfg.n_joints), site))

    def _arm_model(self, mjcf: str | os.PathLike | None, n: int) -> mujoco.MjModel:
        """The MuJoCo arm model: ``mjcf`` where given, else the one the file stores."""
        arm = self.arm or {}
        if mjcf is not None:
            try:
                mj = mujoco.MjModel.from_xml_path(str(mjcf))
            except Exception as exc:  # noqa: BLE001 (MuJoCo raises ValueError, OSError...)
                raise ConfigError(f"Runtime mjcf={str(mjcf)!r} does not load ({exc})") from None
        elif not arm.get("mjb"):
            why = arm.get("reason") or "the file was exported without its arm model"
            raise ConfigError(f"{self.path!r} reads the physics channels of the arm "
                              f"{self.config.get('physics_robot')!r} but stores no MuJoCo model "
                              f"for it ({why}); give mjcf=, the arm's MJCF file")
        else:
            try:
                mj = arm_from_binary(arm["mjb"])
            except Exception as exc:  # noqa: BLE001 (a binary of another MuJoCo version)
                raise ConfigError(f"the MuJoCo arm model stored in {self.path!r} (written by "
                                  f"mujoco {arm.get('mujoco')}) does not load with mujoco "
                                  f"{mujoco.__version__} ({exc}); give mjcf=, the arm's MJCF "
                                  "file") from None
        if not (mj.nq == mj.nv == n):
            raise ConfigError(f"the MuJoCo arm model has nq={mj.nq}, nv={mj.nv}; the model "
                              f"reads {n} joints")
        return mj


__all__ = ["Runtime"]
