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
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from neuract.errors import ConfigError
from neuract.sim.simulate import simulate

REFERENCE_CHANNELS = ("ref_error", "ref_age")


def chain_offsets(steps: int) -> tuple[int, int]:
    """The first segment start [samples] of each of the two chains."""
    return 0, steps // 2


def float64_servo(system_model: Any) -> Any:
    """``system_model`` if it is float64 already, else a float64 copy (what the reference
    servo is simulated in); its actuator's rollout state is reset first (no autograd graph
    goes into a deep copy)."""
    system_model.actuator.reset()
    if all(p.dtype == torch.float64 for p in system_model.parameters()):
        return system_model
    return copy.deepcopy(system_model).double()


def servo_series(ep: Mapping[str, Any], T: int) -> dict[str, np.ndarray]:
    """The servo's known input series of ``T`` samples, each (T, 1): the mean supply
    ``voltage`` and whether every motor's torque is enabled, where ``ep`` has them."""
    out = {}
    if ep.get("voltage") is not None:
        out["voltage"] = np.asarray(ep["voltage"], dtype=np.float64).reshape(T, -1).mean(
            -1, keepdims=True)
    if ep.get("torque_enable") is not None:
        out["torque_enable"] = np.asarray(ep["torque_enable"], bool).reshape(T, -1).all(
            -1, keepdims=True).astype(np.float64)
    return out


def reference_channels_many(episodes: Sequence[Mapping[str, Any]], system_model: Any,
                            robot: Any, steps: int, substeps: int = 2
                            ) -> list[dict[str, np.ndarray]]:
    """:func:`reference_channels` of many episodes (dicts with ``t``, ``q``, ``qd``,
    ``q_goal`` and optionally ``voltage``, ``torque_enable``), their segments simulated
    together (one batch per set of known inputs)."""
    if not (isinstance(steps, (int, np.integer)) and steps >= 2):
        raise ConfigError(f"reference_steps={steps!r}; expected an integer >= 2 samples")

    steps = int(steps)
    model = float64_servo(system_model)
    results: list[dict[str, np.ndarray]] = []
    rows: dict[tuple, list] = {}  # known-input keys -> [(episode, chain, start, dt)]
    arrays = []
    for e, ep in enumerate(episodes):
        q = np.asarray(ep["q"], dtype=np.float64)
        T, n = q.shape
        a = {"q": q, "qd": np.asarray(ep["qd"], dtype=np.float64),
             "q_goal": np.asarray(ep["q_goal"], dtype=np.float64), "series": servo_series(ep, T)}
        arrays.append(a)
        err = np.zeros((2, T, n))
        age = np.full((2, T), -1, dtype=np.int64)
        results.append({"err": err, "age": age})
        if T < 2:
            continue
        dt = float(np.median(np.diff(np.asarray(ep["t"], dtype=np.float64))))
        if not dt > 0:
            raise ConfigError(f"reference channels need increasing sample times; episode {e} "
                              f"has median spacing {dt!r} s")
        key = tuple(sorted(a["series"]))
        for chain, offset in enumerate(chain_offsets(steps)):
            for s0 in range(offset, T, steps):
                rows.setdefault(key, []).append((e, chain, s0, dt))
    f = lambda x: torch.tensor(np.asarray(x), dtype=torch.float64)  # noqa: E731
    for key, group in rows.items():
        sel = [np.minimum(s0 + np.arange(steps), len(arrays[e]["q"]) - 1)
               for e, _, s0, _ in group]

        def gather(get, group=group, sel=sel):  # (rows, steps, ...) of each row's samples
            return f(np.stack([get(arrays[e])[ix] for (e, *_), ix in zip(group, sel)]))

        q0 = f([arrays[e]["q"][s0] for e, _, s0, _ in group])
        qd0 = f([arrays[e]["qd"][s0] for e, _, s0, _ in group])
        series = {k: gather(lambda a, k=k: a["series"][k]) for k in key}
        dts = f([[d] for *_, d in group])  # per row: episodes differ slightly in spacing
        with torch.no_grad():
            q_ref = simulate(robot, model.actuator, model.joints, q0, qd0,
                             gather(lambda a: a["q_goal"]), dts, substeps, {}, series).q.numpy()
        model.actuator.reset()  # (drop the rollout's history)
        for b, (e, chain, s0, _) in enumerate(group):
            q = arrays[e]["q"]
            s1 = min(s0 + steps, len(q))
            results[e]["err"][chain, s0:s1] = q[s0:s1] - q_ref[b, :s1 - s0]
            results[e]["age"][chain, s0:s1] = np.arange(s1 - s0)
    out = []
    for r in results:
        use_a = r["age"][0] >= r["age"][1]
        err = np.where(use_a[:, None], r["err"][0], r["err"][1])
        age = np.where(use_a, r["age"][0], r["age"][1]).clip(min=0) / float(steps)
        out.append({"ref_error": err, "ref_age": np.repeat(age[:, None], err.shape[1], 1)})
    return out


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
    ep = {"t": t, "q": q, "qd": qd, "q_goal": q_goal, "voltage": voltage,
          "torque_enable": torque_enable}
    return reference_channels_many([ep], system_model, robot, steps, substeps)[0]


__all__ = ["REFERENCE_CHANNELS", "reference_channels", "reference_channels_many"]
