"""Servo-reference channels for estimator-mode NeuralActuator.

A push that deflects the arm and then holds it still reads, sample by sample, like a joint
parked by gear friction a few encoder steps off its goal; what tells them apart is how the arm
got there. These channels give the estimator that history as a comparison with a physical
model: a fitted parametric servo (the experiment's best pose-only fit, frozen in the
checkpoint) is driven open loop by the recorded commands from a recent measured state, and the
channels are

* ``ref_error`` (T, n): measured position minus the servo model's position [rad];
* ``ref_age`` (T, n): samples since that open-loop segment started, as a fraction of
  ``steps`` (the same value for every joint).

Segments are ``steps`` samples long and start every ``steps`` samples in two chains offset by
half a segment; each sample takes the chain whose segment started longer ago, so a sample's
reference has run between ``steps / 2`` and ``steps`` samples open loop (fewer over the first
``steps / 2`` samples of an episode). Causal: the value at sample k depends on the measured
state at its segment's start and on the commands (and supply voltage, torque enable) before k.
The servo is simulated in float64 on the episode's median sample spacing with ``substeps``
physics steps per sample, as the identification rollouts do.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from neuract.errors import ConfigError

REFERENCE_CHANNELS = ("ref_error", "ref_age")


def _segments(plant, model, q, qd, q_goal, series, dt: float, steps: int, offset: int,
              substeps: int) -> tuple[np.ndarray, np.ndarray]:
    """One chain: open-loop segments starting at offset, offset + steps, ...; returns the
    position error (T, n) and the samples since the segment start (T,) (-1 before the
    chain's first segment)."""
    from neuract.fit.simulate import simulate

    T = len(q)
    err = np.zeros_like(q)
    age = np.full(T, -1, dtype=np.int64)
    starts = np.arange(offset, T, steps)
    if not len(starts):
        return err, age
    idx = np.minimum(starts[:, None] + np.arange(steps)[None], T - 1)  # (B, steps)
    f = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    with torch.no_grad():
        out = simulate(plant, model.actuator, model.joints, f(q[starts]), f(qd[starts]),
                       f(q_goal[idx]), dt, substeps, {},
                       {k: f(v[idx]) for k, v in series.items()})
    q_ref = out.q.numpy()  # (B, steps, n): state before command k of the segment
    for b, s in enumerate(starts):
        e = min(s + steps, T)
        err[s:e] = q[s:e] - q_ref[b, :e - s]
        age[s:e] = np.arange(e - s)
    return err, age


def reference_channels(t: np.ndarray, q: np.ndarray, qd: np.ndarray, q_goal: np.ndarray,
                       system_model: Any, robot: Any, steps: int,
                       voltage: np.ndarray | None = None,
                       torque_enable: np.ndarray | None = None,
                       substeps: int = 2) -> dict[str, np.ndarray]:
    """:data:`REFERENCE_CHANNELS` of one episode.

    t: (T,) [s]; q, qd, q_goal: (T, n) measured position, velocity and commands; system_model:
    a fitted servo (:class:`neuract.fit.trainer.SystemModel`; simulated in float64, a float32
    model in a float64 copy; its actuator's rollout state is reset); robot: the rigid-body
    arm (float64, ``mass_matrix`` / ``bias_forces``); steps: segment length [samples]
    (>= 2); voltage: (T,) or (T, k) supply voltage [V] and torque_enable: (T, n) bool, fed
    to the servo when given.
    """
    if not (isinstance(steps, (int, np.integer)) and steps >= 2):
        raise ConfigError(f"reference_steps={steps!r}; expected an integer >= 2 samples")
    q = np.asarray(q, dtype=np.float64)
    T, n = q.shape
    if T < 2:
        z = np.zeros((T, n))
        return {"ref_error": z, "ref_age": z.copy()}
    dt = float(np.median(np.diff(np.asarray(t, dtype=np.float64))))
    if not dt > 0:
        raise ConfigError(f"reference channels need increasing sample times; median spacing "
                          f"{dt!r} s")
    system_model.actuator.reset()  # (the rollout resets it too) no graph in a deepcopy
    model = (system_model if all(p.dtype == torch.float64 for p in system_model.parameters())
             else copy.deepcopy(system_model).double())
    series = {}
    if voltage is not None:
        series["voltage"] = np.asarray(voltage, dtype=np.float64).reshape(T, -1).mean(
            -1, keepdims=True)
    if torque_enable is not None:
        series["torque_enable"] = np.asarray(torque_enable, bool).all(
            -1, keepdims=True).astype(np.float64)
    args = (robot, model, q, np.asarray(qd, dtype=np.float64),
            np.asarray(q_goal, dtype=np.float64), series, dt, int(steps))
    err_a, age_a = _segments(*args, 0, substeps)
    err_b, age_b = _segments(*args, int(steps) // 2, substeps)
    use_a = age_a >= age_b
    err = np.where(use_a[:, None], err_a, err_b)
    age = np.where(use_a, age_a, age_b) / float(steps)
    return {"ref_error": err, "ref_age": np.repeat(age[:, None], n, axis=1)}


__all__ = ["REFERENCE_CHANNELS", "reference_channels"]
