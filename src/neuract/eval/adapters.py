"""Adapters from neuract's models to the protocol's :data:`~neuract.eval.Simulator`.

``system_model_simulator(model, plant_fn)`` wraps an identified actuator + joint parameters
(:class:`neuract.fit.trainer.SystemModel`, any actuator family) and a plant (robot or
pendulum) so that :func:`~neuract.eval.evaluate_rollouts` can score it window by window. torch
and the rollout are imported when an adapter is built, so ``neuract.eval`` stays importable
without torch (tests/test_package.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from neuract.errors import SchemaError
from neuract.eval.protocol import SimBatch, Simulator

__all__ = ["system_model_simulator"]


def system_model_simulator(model: Any, plant_fn: Callable[[list[dict[str, Any]]], Any],
                           substeps: int = 2, label_inputs: Sequence[str] = (),
                           use_voltage: bool = False, dtype: Any = None,
                           progress: Callable[[int, int], None] | None = None) -> Simulator:
    """A simulator that rolls out ``model`` (actuator + joint parameters) on ``plant_fn``.

    plant_fn: run labels (a list, one dict per window) -> plant with ``mass_matrix`` and
    ``bias_forces`` (e.g. ``neuract.fit.identify.plant_factory("so101")``); label_inputs:
    per-run constant actuator inputs taken from ``batch.labels`` (pass the same keys as
    ``evaluate_rollouts(labels=...)``); use_voltage: feed the supply voltage (needs
    ``evaluate_rollouts(inputs=("q_goal", "voltage"))``); a ``torque_enable`` input is used
    when given. The control step is the window's median sample spacing (the identification
    pipeline's uniform grid); non-uniform telemetry is thus simulated on a uniform clock.
    dtype: torch dtype of the rollout (default float64). progress: ``progress(k, H)`` after
    each step k of each call's H-step rollout.
    """
    import torch

    from neuract.sim.simulate import simulate

    dtype = torch.float64 if dtype is None else dtype

    def sim(batch: SimBatch) -> np.ndarray:
        b, h = batch.batch_size, batch.horizon
        dt = float(np.median(np.diff(batch.t, axis=1)))

        def pad(x: np.ndarray):  # H inputs -> H + 1 control instants
            x = np.concatenate([x, x[:, -1:]], axis=1)
            return torch.as_tensor(x, dtype=dtype)

        cmd = pad(np.asarray(batch.q_goal, dtype=np.float64))
        series: dict[str, Any] = {}
        if "torque_enable" in batch.inputs:
            en = np.asarray(batch.inputs["torque_enable"], bool).all(-1, keepdims=True)
            series["torque_enable"] = pad(en.astype(np.float64))
        if use_voltage:
            if "voltage" not in batch.inputs:
                raise SchemaError("use_voltage=True needs the 'voltage' input: call "
                                  "evaluate_rollouts(..., inputs=('q_goal', 'voltage'))")
            v = np.asarray(batch.inputs["voltage"], dtype=np.float64).mean(-1, keepdims=True)
            series["voltage"] = pad(v)
        inputs = {}
        for k in label_inputs:
            if k not in batch.labels:
                raise SchemaError(f"label input {k!r} not in the batch labels "
                                  f"{sorted(batch.labels)}; pass evaluate_rollouts(labels=...)")
            inputs[k] = torch.full((b, 1), float(batch.labels[k]), dtype=dtype)
        plant = plant_fn([dict(batch.labels)] * b)
        q0 = torch.tensor(np.array(batch.q0), dtype=dtype)
        qd0 = torch.tensor(np.array(batch.qd0), dtype=dtype)
        with torch.no_grad():
            out = simulate(plant, model.actuator, model.joints, q0, qd0, cmd, dt, substeps,
                           inputs, series, None if progress is None
                           else lambda t, n: progress(min(t, h), h))
        return out.q[:, 1:h + 1].numpy()

    return sim
