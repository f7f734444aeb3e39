"""Model inputs for NeuralActuator: channel layout per mode, windows from Trajectories, statistics.

One *token* is one time step of the telemetry history and carries every joint's channels, so a
window is ``x: (..., history, n_joints * n_channels)`` laid out joint-major
(``x[..., t, j * n_channels + c]``). The channel list is fixed by the mode:

* ``simulator`` mode sees only what a simulator has: the commands and the (simulated) state —
  ``q_goal, q, qd, pos_error`` and, if the simulator models it, ``temperature``. Nothing measured
  beyond the initial state may enter a rollout in this mode.
* ``estimator`` mode adds the real telemetry: ``q_goal, q, qd, effort, voltage, temperature,
  pos_error`` where ``effort`` is the motor current [A] or the servo's load reading [-1..1].

``pos_error = q_goal - q`` [rad] is derived, never read. Units are SI as in ``neuract.data``.

Estimator mode can also read *physics channels* computed from the rigid-body arm model at the
measured pose (:mod:`neuract.neuralactuator.physics`): the gravity torque of each joint
``tau_gravity`` [N m] and the joint's column of the end-effector linear Jacobian
``jac_x, jac_y, jac_z`` [m/rad]. With them the force head sees, in nearly linear form, what a
model-based observer uses (``J^T f = effort torque - gravity``) instead of having to learn the
arm's geometry from a few episodes.

Estimator mode can also read *context channels* (:data:`CONTEXT_CHANNELS`), causal summaries
of the telemetry before the window, computed from the whole past of the episode with a time
constant ``context_s`` [s]: ``move_dir`` (direction of the joint's last motion, +1 / -1, 0
before it first moves: where the gear friction holds a resting joint depends on it),
``effort_slow`` and ``pos_error_slow`` (exponential moving averages of the effort channel and
of the position error). They let an 8-step window see what happened seconds earlier without
more tokens.

Estimator mode can also read *identification channels* (:data:`IDENT_CHANNELS`): a running
least-squares identification of each motor over the whole past of the episode. The effort is
regressed on the joint's gravity torque, ``tanh(qd / MOVE_SPEED)`` (friction), ``qd``
(damping) and a constant (:func:`ident_channels`); the channels are the four coefficients, the
fit's RMS residual, the mean absolute position error while the joint moves and while it rests,
and the mean absolute effort (with ``ident_memory``, recent samples weigh more: exponential
forgetting). A worn motor (more friction, a weaker torque constant, more
backlash) shifts these episode-long statistics, which a window of a few samples sees only
through noise. They need the physics channels' arm model.

Estimator mode can also read *reference channels* (:data:`REFERENCE_CHANNELS`, see
:mod:`neuract.neuralactuator.reference`): the measured position against a fitted parametric
servo driven open loop by the commands from a recent measured state, and how long that
comparison has run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from neuract.errors import ConfigError, SchemaError
from neuract.neuralactuator.physics import arm_model, physics_channels
from neuract.neuralactuator.reference import reference_channels_many
from neuract.runtime.channels import (  # noqa: F401 (the channel names live here too)
    CONTEXT_CHANNELS,
    DERIVED,
    EFFORT_CHANNELS,
    IDENT_CHANNELS,
    IDENT_RIDGE,
    MOVE_SPEED,
    PHYSICS_CHANNELS,
    REFERENCE_CHANNELS,
    ident_decay,
    ident_from_sums,
    ident_regressors,
    source_channels,
)

MODES = ("simulator", "estimator")


def channels_for(mode: str, effort: str = "current", sim_temperature: bool = False,
                 physics: bool = False, context: bool = False, reference: bool = False,
                 ident: bool = False) -> tuple:
    """Per-joint channel names, in model order, for a mode.

    mode: ``"simulator"`` or ``"estimator"``; effort: ``"current"`` or ``"load"`` (estimator
    mode only); sim_temperature: simulator mode also reads a simulated ``temperature``;
    physics: estimator mode also reads :data:`PHYSICS_CHANNELS`; context: estimator mode also
    reads :data:`CONTEXT_CHANNELS`; reference: estimator mode also reads
    :data:`REFERENCE_CHANNELS`; ident: estimator mode also reads :data:`IDENT_CHANNELS` (needs
    ``physics``).
    """
    if mode not in MODES:
        raise ConfigError(f"mode={mode!r} is not a NeuralActuator mode; accepted: {list(MODES)}")
    if mode == "simulator":
        if context or reference or ident:
            raise ConfigError("context, reference and identification channels read measured "
                              "telemetry: estimator mode only")
        extra = ("temperature",) if sim_temperature else ()
        return ("q_goal", "q", "qd", "pos_error", *extra)
    if effort not in EFFORT_CHANNELS:
        raise ConfigError(f"effort={effort!r} is not an effort channel; accepted: "
                          f"{list(EFFORT_CHANNELS)}")
    if sim_temperature:
        raise ConfigError("sim_temperature=True applies to simulator mode only; estimator mode "
                          "always reads the measured temperature")
    if ident and not physics:
        raise ConfigError("identification channels regress the effort on the arm model's "
                          "gravity torque: they need the physics channels")
    extra = ((PHYSICS_CHANNELS if physics else ()) + (CONTEXT_CHANNELS if context else ())
             + (REFERENCE_CHANNELS if reference else ()) + (IDENT_CHANNELS if ident else ()))
    return ("q_goal", "q", "qd", effort, "voltage", "temperature", "pos_error", *extra)


def assemble(parts: Mapping[str, Any], channels: Sequence[str]) -> torch.Tensor:
    """Stack per-joint channels into model tokens.

    parts: channel name -> (..., T, n_joints) tensor in SI units (``pos_error`` is derived
    from ``q_goal`` and ``q`` when absent); returns x: (..., T, n_joints * len(channels)).
    Only the channels in ``channels`` are read; any other key in ``parts`` is ignored, which is
    how a mode keeps measured telemetry out of a simulator-mode model. Differentiable.
    """
    cols = []
    for name in channels:
        if name == "pos_error" and name not in parts:
            v = torch.as_tensor(parts["q_goal"]) - torch.as_tensor(parts["q"])
        elif name in parts:
            v = torch.as_tensor(parts[name])
        else:
            raise SchemaError(f"channel {name!r} is required by the model's channels "
                              f"{list(channels)} but missing; given: {sorted(parts)}")
        cols.append(v)
    shape = cols[0].shape
    for name, v in zip(channels, cols):
        if v.shape != shape:
            raise SchemaError(f"channel {name!r} has shape {tuple(v.shape)}; expected "
                              f"{tuple(shape)} like {channels[0]!r}")
    x = torch.stack(cols, dim=-1)  # (..., T, J, C)
    return x.flatten(-2)


def _channel(traj: Any, name: str, n_joints: int) -> np.ndarray:
    try:
        v = np.asarray(traj[name], dtype=np.float64)
    except (KeyError, IndexError) as exc:
        meta = getattr(traj, "meta", None)
        where = (f"episode {meta.name!r}" + (f" ({meta.source})" if meta.source else "")
                 if meta is not None else "the trajectory")
        fix = ("; compute it from q with neuract ingest --derivatives" if name in ("qd", "qdd")
               else "")
        raise SchemaError(f"{where} has no channel {name!r}, required by the model{fix}"
                          ) from exc
    if v.ndim == 1:
        v = np.repeat(v[:, None], n_joints, axis=1)  # a bus-wide channel, e.g. voltage
    if v.ndim != 2 or v.shape[1] != n_joints:
        raise SchemaError(f"channel {name!r} has shape {v.shape}; expected (T, {n_joints})")
    if not np.isfinite(v).all():
        bad = int((~np.isfinite(v)).sum())
        raise SchemaError(f"channel {name!r} has {bad} non-finite value(s); repair or drop them "
                          "before building NeuralActuator windows")
    return v


def context_channels(t: np.ndarray, qd: np.ndarray, effort: np.ndarray, pos_error: np.ndarray,
                     tau_s: float, move_speed: float = MOVE_SPEED) -> dict[str, np.ndarray]:
    """:data:`CONTEXT_CHANNELS` (each (T, n)) from t: (T,) [s] and qd, effort, pos_error:
    (T, n). Causal: sample k depends on samples 0..k only. The moving averages start at the
    first sample's value and follow ``y += (1 - exp(-dt / tau_s)) (x - y)``."""
    if not (math.isfinite(tau_s) and tau_s > 0):
        raise ConfigError(f"context_s={tau_s!r}; expected a time constant > 0 s")
    T = len(t)
    # direction of the last sample faster than move_speed (0 before the first one)
    moving = np.abs(qd) > move_speed
    last = np.maximum.accumulate(np.where(moving, np.arange(T)[:, None], -1), axis=0)
    move = np.where(last >= 0, np.sign(np.take_along_axis(qd, np.maximum(last, 0), 0)), 0.0)
    x = np.stack([effort, pos_error])  # both averages in one pass: (2, T, n)
    slow = np.empty_like(x)
    if T:
        a = 1.0 - np.exp(-np.maximum(np.diff(t), 0.0) / tau_s)
        slow[:, 0] = x[:, 0]
        for k in range(1, T):
            slow[:, k] = slow[:, k - 1] + a[k - 1] * (x[:, k] - slow[:, k - 1])
    e_slow, p_slow = slow
    return {"move_dir": move, "effort_slow": e_slow, "pos_error_slow": p_slow}


def check_ident_memory(memory: Any, field: str) -> None:
    """Raise a ConfigError naming ``field`` unless ``memory`` is 0 (the whole episode) or an
    integer >= 2 samples."""
    if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0 or memory == 1:
        raise ConfigError(f"{field}={memory!r}; expected 0 (the whole episode) or an integer "
                          ">= 2 samples")


def _running_sum(x: np.ndarray, decay: float) -> np.ndarray:
    """``y[k] = decay * y[k - 1] + x[k]`` along axis 0 (``y[-1] = 0``)."""
    x = np.asarray(x, dtype=np.float64)
    if decay == 1.0:
        return np.cumsum(x, axis=0)
    from scipy.signal import lfilter

    return lfilter([1.0], [1.0, -decay], x, axis=0)


def ident_channels(tau_gravity: np.ndarray, qd: np.ndarray, effort: np.ndarray,
                   pos_error: np.ndarray, move_speed: float = MOVE_SPEED, memory: int = 0
                   ) -> dict[str, np.ndarray]:
    """:data:`IDENT_CHANNELS` (each (T, n)) from tau_gravity, qd, effort, pos_error: (T, n).
    Causal: sample k is the identification over samples 0..k (running sums through
    :func:`ident_from_sums`; a :class:`~neuract.estimate.stream.StreamingEstimator`
    keeps the same sums). memory > 0: sample i weighs ``ident_decay(memory) ** (k - i)`` in
    them (exponential forgetting); 0: every sample weighs 1."""
    X = ident_regressors(tau_gravity, qd)  # (T, n, 4)
    moving = np.abs(qd) > move_speed
    ae = np.abs(pos_error)
    d = ident_decay(memory)
    return ident_from_sums(_running_sum(X[..., :, None] * X[..., None, :], d),
                           _running_sum(X * effort[..., None], d),
                           _running_sum(effort * effort, d), _running_sum(np.ones_like(qd), d),
                           _running_sum(moving, d), _running_sum(ae * moving, d),
                           _running_sum(ae * ~moving, d), _running_sum(np.abs(effort), d))


def trajectory_channels(traj: Any, channels: Sequence[str], n_joints: int,
                        physics: tuple[str, str] | None = None, context_s: float = 0.0,
                        reference: tuple[Any, str, int] | Mapping | None = None,
                        ident_memory: int = 0) -> dict:
    """Read the source channels a model needs from a Trajectory (or any name -> (T, J) map).

    physics: (robot name or path, end-effector site) to compute :data:`PHYSICS_CHANNELS` the
    trajectory does not carry (from its measured ``q``); context_s: time constant [s] of the
    :data:`CONTEXT_CHANNELS` (computed from the measured ``t``, ``qd``, effort and
    ``pos_error``); reference: (fitted servo SystemModel, robot name or path, segment
    length [samples]) of the :data:`REFERENCE_CHANNELS` (computed from
    :func:`reference_inputs`), or those channels computed already; ident_memory: the
    :data:`IDENT_CHANNELS`' memory [samples] (0: the whole episode; see
    :func:`ident_channels`)."""
    need = source_channels(channels)
    ctx = [c for c in need if c in CONTEXT_CHANNELS]
    ref = [c for c in need if c in REFERENCE_CHANNELS]
    ident = [c for c in need if c in IDENT_CHANNELS]
    need = [c for c in need if c not in CONTEXT_CHANNELS and c not in REFERENCE_CHANNELS
            and c not in IDENT_CHANNELS]
    if ident and "tau_gravity" not in need:
        need.append("tau_gravity")
    missing = [c for c in need if c in PHYSICS_CHANNELS and c not in traj]
    out = {c: _channel(traj, c, n_joints) for c in need if c not in missing}
    if missing:
        if physics is None:
            raise SchemaError(f"channels {missing} are computed from the arm model; give the "
                              "model's physics robot and site (NeuralActuatorConfig."
                              "physics_robot / physics_site)")

        q = out["q"] if "q" in out else _channel(traj, "q", n_joints)
        out.update({k: v for k, v in physics_channels(q, *physics).items() if k in missing})
    if ctx:
        if not context_s:
            raise SchemaError(f"channels {ctx} are computed from the telemetry's past; give "
                              "their time constant (NeuralActuatorConfig.context_s)")
    effort = next((c for c in EFFORT_CHANNELS if c in out), None)
    if (ctx or ident) and (effort is None or "qd" not in out):
        raise SchemaError(f"{'context' if ctx else 'identification'} channels need qd and an "
                          f"effort channel {list(EFFORT_CHANNELS)} among the model's channels")
    if ctx:
        t = np.asarray(traj["t"], dtype=np.float64)
        pe = out["q_goal"] - out["q"]
        c = context_channels(t, out["qd"], out[effort], pe, float(context_s))
        out.update({k: c[k] for k in ctx})
    if ident:
        c = ident_channels(out["tau_gravity"], out["qd"], out[effort], out["q_goal"] - out["q"],
                           memory=ident_memory)
        out.update({k: c[k] for k in ident})
    if ref:
        if reference is None:
            raise SchemaError(f"channels {ref} compare the telemetry with a fitted servo; give "
                              "the model's reference (NeuralActuator.reference)")
        if isinstance(reference, Mapping):  # computed already (a batch of episodes)
            r = reference
        else:

            system_model, robot, steps = reference
            r = reference_channels_many([reference_inputs(traj, n_joints)], system_model,
                                        arm_model(str(robot)), steps)[0]
        out.update({k: r[k] for k in ref})
    return out


def reference_inputs(traj: Any, n_joints: int) -> dict[str, Any]:
    """What the :data:`REFERENCE_CHANNELS` are computed from: the measured ``t``, ``q``,
    ``qd``, the commands ``q_goal`` and, when the trajectory has them, ``voltage`` and
    ``torque_enable``."""
    out = {k: _channel(traj, k, n_joints) for k in ("q", "qd", "q_goal")}
    out["t"] = np.asarray(traj["t"], dtype=np.float64)
    for k in ("voltage", "torque_enable"):
        out[k] = np.asarray(traj[k]) if k in traj else None
    return out


def windows(traj: Any, channels: Sequence[str], n_joints: int, history: int = 8,
            stride: int = 1, dtype: torch.dtype = torch.float32,
            physics: tuple[str, str] | None = None, context_s: float = 0.0,
            reference: tuple[Any, str, int] | None = None,
            ident_memory: int = 0) -> torch.Tensor:
    """All history windows of a trajectory.

    Returns x: (N, history, n_joints * len(channels)); window i covers steps
    ``[i*stride, i*stride + history)`` and its prediction refers to the last step.
    physics, context_s, reference, ident_memory: see :func:`trajectory_channels`.
    """
    parts = trajectory_channels(traj, channels, n_joints, physics, context_s, reference,
                                ident_memory)
    T = next(iter(parts.values())).shape[0]
    if T < history:
        name = getattr(getattr(traj, "meta", None), "name", "") or "a trajectory"
        raise SchemaError(f"episode {name!r} has {T} samples, fewer than the model's "
                          f"history of {history}")
    x = assemble({k: torch.tensor(v, dtype=dtype) for k, v in parts.items()}, channels)
    return x.unfold(0, history, stride).permute(0, 2, 1).contiguous()


def feature_stats(xs: Sequence[torch.Tensor] | torch.Tensor, min_std: float = 1e-3) -> tuple:
    """Per-feature mean and std over windows ``(N, T, F)`` (or a list of them).

    std is floored at ``min_std`` so constant channels (a fixed voltage) do not blow up.
    Returns (mean, std), each (F,) float32.
    """
    if isinstance(xs, torch.Tensor):
        xs = [xs]
    flat = torch.cat([x.reshape(-1, x.shape[-1]).double() for x in xs])
    if not torch.isfinite(flat).all():
        raise SchemaError("feature statistics: windows contain non-finite values")
    mean = flat.mean(0)
    std = flat.std(0, unbiased=False).clamp_min(min_std)
    return mean.float(), std.float()


__all__ = [
    "MODES",
    "PHYSICS_CHANNELS",
    "CONTEXT_CHANNELS",
    "REFERENCE_CHANNELS",
    "IDENT_CHANNELS",
    "context_channels",
    "ident_channels",
    "ident_decay",
    "check_ident_memory",
    "channels_for",
    "source_channels",
    "assemble",
    "trajectory_channels",
    "windows",
    "feature_stats",
]
