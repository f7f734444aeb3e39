"""The NeuralActuator evaluation protocol, simulator mode: windowed open-loop rollouts.

Simulator mode (``mode="simulator"``)
-------------------------------------
For each horizon ``H`` in (10, 50, 100, 300, 600) samples, and for the full trajectory,
windows start every ``stride`` samples (default ``H``) at ``t0 = 0, stride, 2 stride, ...``
while ``t0 + H <= T - 1``. The simulator receives a :class:`SimBatch`: the measured initial
state ``(q[t0], qd[t0])``, the commands ``q_goal[t0 : t0 + H]`` and the sample times. It
returns the simulated positions at samples ``t0 + 1 .. t0 + H``, shape (B, H, n), which are
compared with the measured ``q[t0 + 1 : t0 + H + 1]``. The joint MAE [deg] pools every
predicted sample of every window (windows of one horizon have equal weight); the full
trajectory is one window from ``t0 = 0`` to the end.

Models with a telemetry history (NeuralActuator: 8 steps) ask for ``history = h``: the batch
then also carries the measured past ``q``, ``qd`` and commands at samples ``t0 - h + 1 .. t0``
(``batch.past``), and windows start at ``t0 = h - 1, h - 1 + stride, ...``. Use one
``history`` for every model compared in a run so that their windows coincide.

The simulation rule is enforced by construction: the protocol builds every :class:`SimBatch`
itself from the trajectory, and a batch can hold only the initial state (with its past) and
the channels in :data:`SIM_INPUTS` (commands and exogenous conditions a simulator is
given). Measured positions, velocities, currents, loads, temperatures, torques, contact and
condition labels after t0 cannot be put into a batch (``SimBatch`` raises
:class:`SchemaError`), and the arrays are read-only copies.

Estimator mode is scored by :func:`neuract.eval.estimation.evaluate_estimator`. Every result
record carries ``mode``, ``model`` and ``protocol`` keys.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from neuract.errors import ConfigError, SchemaError
from neuract.eval import metrics

__all__ = [
    "HORIZONS",
    "HIDDEN_LABELS",
    "SIM_INPUTS",
    "SimBatch",
    "Simulator",
    "evaluate_rollouts",
    "goal_simulator",
    "hold_simulator",
    "per_window",
    "simulate_full",
    "window_starts",
]

HORIZONS: tuple[int, ...] = (10, 50, 100, 300, 600)
"""Rollout horizons [samples] of the NeuralActuator release; plus ``"full"``."""

SIM_INPUTS: frozenset[str] = frozenset({"q_goal", "torque_enable", "voltage", "ee_force"})
"""Channels a simulator may receive over a window: the commands (``q_goal``,
``torque_enable``) and exogenous conditions (supply ``voltage``, an applied ``ee_force``).
Everything the robot's response determines is excluded."""

HIDDEN_LABELS: frozenset[str] = frozenset({"hidden", "condition_per_joint", "degraded_joints"})
"""Trajectory labels that hold a twin's hidden ground truth (servo and bus parameters, which
motors are degraded): never given to a simulator, since a rollout metric scores what a model
predicts from the commands and known facts alone."""


def _refuse_hidden(labels, error: type[Exception]) -> None:
    hidden = sorted(set(labels) & HIDDEN_LABELS)
    if hidden:
        raise error(f"labels {hidden} hold hidden ground truth and may not be given to a "
                    f"simulator; refused: {sorted(HIDDEN_LABELS)}")


@dataclass(frozen=True)
class SimBatch:
    """What a simulator is given for B windows of H steps (nothing measured after t0).

    q0, qd0: (B, n) measured state at the window start [rad, rad/s].
    inputs: channel -> (B, H, ...) commands at samples t0 .. t0 + H - 1 (see SIM_INPUTS).
    t: (B, H + 1) sample times relative to the window start [s] (t[:, 0] = 0).
    joint_names, robot: from the trajectory metadata.
    past: channel -> (B, h, ...) measured ``q``, ``qd`` and the inputs at samples
    t0 - h + 1 .. t0 (empty unless a history was requested); past["q"][:, -1] == q0.
    t_past: (B, h) their times relative to the window start [s] (<= 0).
    labels: the trajectory labels requested with ``evaluate_rollouts(labels=...)`` (firmware
    gains, payload mass, ...): known facts a simulator may be configured with. None by
    default (twin labels also hold the hidden ground truth). A batch never mixes trajectories.
    """

    q0: np.ndarray
    qd0: np.ndarray
    inputs: Mapping[str, np.ndarray]
    t: np.ndarray
    joint_names: tuple[str, ...]
    robot: str
    past: Mapping[str, np.ndarray] = field(default_factory=dict)
    t_past: np.ndarray | None = None
    labels: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = sorted(set(self.inputs) - SIM_INPUTS)
        if bad:
            raise SchemaError(f"simulator inputs {bad} are not allowed in simulator mode; "
                              f"allowed: {sorted(SIM_INPUTS)} (plus the initial q0, qd0)")
        if "q_goal" not in self.inputs:
            raise SchemaError("simulator inputs must contain the commands 'q_goal'")
        b, n = self.q0.shape
        h = self.t.shape[1] - 1
        if self.qd0.shape != (b, n) or self.t.shape[0] != b:
            raise SchemaError(f"SimBatch: q0 {self.q0.shape}, qd0 {self.qd0.shape}, t "
                              f"{self.t.shape} are inconsistent")
        for k, v in self.inputs.items():
            if v.shape[:2] != (b, h):
                raise SchemaError(f"SimBatch input {k!r} has shape {v.shape}; expected "
                                  f"({b}, {h}, ...)")
        bad = sorted(set(self.past) - SIM_INPUTS - {"q", "qd"})
        if bad:
            raise SchemaError(f"past channels {bad} are not allowed in simulator mode; "
                              f"allowed: {sorted(SIM_INPUTS | {'q', 'qd'})}")
        for k, v in self.past.items():
            if v.shape[0] != b or (self.t_past is None or v.shape[1] != self.t_past.shape[1]):
                raise SchemaError(f"SimBatch past {k!r} has shape {v.shape}; expected ({b}, h, "
                                  "...) matching t_past")
        for field_name in ("inputs", "past"):
            frozen = {}
            for k, v in getattr(self, field_name).items():
                v = np.array(v, copy=True)
                v.setflags(write=False)
                frozen[k] = v
            object.__setattr__(self, field_name, MappingProxyType(frozen))
        _refuse_hidden(self.labels, SchemaError)
        object.__setattr__(self, "labels", MappingProxyType(copy.deepcopy(dict(self.labels))))
        if self.t_past is None:
            object.__setattr__(self, "t_past", np.zeros((b, 0)))
        for name in ("q0", "qd0", "t", "t_past"):
            v = np.array(getattr(self, name), dtype=np.float64, copy=True)
            v.setflags(write=False)
            object.__setattr__(self, name, v)

    @property
    def batch_size(self) -> int:
        return int(self.q0.shape[0])

    @property
    def horizon(self) -> int:
        return int(self.t.shape[1] - 1)

    @property
    def q_goal(self) -> np.ndarray:
        """(B, H, n) commanded positions [rad]."""
        return self.inputs["q_goal"]


Simulator = Callable[[SimBatch], Any]
"""``q_sim = simulator(batch)``: (B, H, n) simulated positions [rad] at t0+1 .. t0+H
(numpy array or torch tensor)."""


def per_window(fn: Callable[..., Any]) -> Simulator:
    """Adapt an unbatched ``fn(q0 (n,), qd0 (n,), q_goal (H, n), t (H+1,), **inputs) ->
    (H, n)`` into a batched :data:`Simulator`."""

    def sim(batch: SimBatch) -> np.ndarray:
        out = []
        for i in range(batch.batch_size):
            extra = {k: v[i] for k, v in batch.inputs.items() if k != "q_goal"}
            out.append(np.asarray(fn(batch.q0[i], batch.qd0[i], batch.q_goal[i], batch.t[i],
                                     **extra), dtype=np.float64))
        return np.stack(out)

    return sim


def hold_simulator(batch: SimBatch) -> np.ndarray:
    """Trivial reference: the arm stays where it starts (q = q0 over the window)."""
    return np.repeat(batch.q0[:, None, :], batch.horizon, axis=1)


def goal_simulator(batch: SimBatch) -> np.ndarray:
    """Command-following reference: an ideal servo reaching each goal one sample later
    (q[t0 + k + 1] = q_goal[t0 + k]); uses nothing but the commands."""
    return np.array(batch.q_goal, dtype=np.float64)


def window_starts(n_samples: int, horizon: int, stride: int) -> np.ndarray:
    """Start indices t0 = 0, stride, ... with t0 + horizon <= n_samples - 1."""
    if horizon < 1 or stride < 1:
        raise ConfigError(f"horizon ({horizon}) and stride ({stride}) must be >= 1")
    last = n_samples - 1 - horizon
    return np.arange(0, last + 1, stride) if last >= 0 else np.zeros(0, dtype=np.int64)


def _initial_qd(traj) -> np.ndarray:
    """Measured qd, or a backward difference of q (never a future sample).

    A ``qd`` that :func:`neuract.data.derivatives.add_derivatives` computed from ``q`` (label
    ``derivatives["qd"]``) comes from a centred Savitzky-Golay window that reads samples after
    t0, so it is replaced by the backward difference as well.
    """
    deriv = traj.meta.labels.get("derivatives")
    derived = isinstance(deriv, Mapping) and bool(deriv.get("qd"))
    if "qd" in traj and not derived:
        return np.asarray(traj["qd"], dtype=np.float64)
    q, t = np.asarray(traj["q"], dtype=np.float64), np.asarray(traj["t"], dtype=np.float64)
    qd = np.zeros_like(q)
    if len(t) > 1:
        qd[1:] = np.diff(q, axis=0) / np.diff(t)[:, None]
    return qd


def _run_batch(simulator: Simulator, batch: SimBatch, name: str) -> np.ndarray:
    out = simulator(batch)
    if hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    out = np.asarray(out, dtype=np.float64)
    want = (batch.batch_size, batch.horizon, batch.q0.shape[1])
    if out.shape != want:
        raise SchemaError(f"simulator {name!r} returned shape {out.shape}; expected {want} "
                          "(B windows, H steps, n joints)")
    if not np.isfinite(out).all():
        raise SchemaError(f"simulator {name!r} returned {int((~np.isfinite(out)).sum())} "
                          "non-finite positions")
    return out


def evaluate_rollouts(simulator: Simulator, trajs: Iterable, name: str,
                      horizons: Sequence[int | str] = (*HORIZONS, "full"),
                      stride: int | Mapping[int, int] | None = None,
                      inputs: Sequence[str] = ("q_goal",), batch_size: int = 256,
                      gripper: str | None = "gripper", history: int = 0,
                      labels: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Open-loop rollout joint MAE [deg] per horizon (simulator mode).

    simulator: see :data:`Simulator`; trajs: :class:`~neuract.data.Trajectory` objects of one
    robot (same joints) with ``t``, ``q``, ``q_goal``; name: model name for the records.
    stride: window stride [samples] (default: the horizon, i.e. non-overlapping windows), an
    int for all horizons or a dict horizon -> stride. inputs: channels given to the
    simulator (subset of :data:`SIM_INPUTS`). history: number of measured samples up to and
    including t0 given as ``batch.past`` (see the module docstring). labels: trajectory label
    keys passed as ``batch.labels`` (e.g. ``("kp",)``). Samples with ``valid``
    False are left out of the error, and windows starting on such a sample are skipped.

    Returns one record per horizon: ``mode``, ``model``, ``protocol``, ``horizon``,
    ``stride``, ``n_windows``, ``n_samples``, ``inputs``, ``joint_mae_deg`` (per joint),
    ``arm_mean_deg``, ``arm_max_deg``, ``gripper_deg`` (None where no window fits).
    """
    inputs = tuple(dict.fromkeys(("q_goal", *inputs)))
    bad = sorted(set(inputs) - SIM_INPUTS)
    if bad:
        raise ConfigError(f"inputs {bad} are not allowed in simulator mode; allowed: "
                          f"{sorted(SIM_INPUTS)}")
    _refuse_hidden(labels, ConfigError)
    trajs = list(trajs)
    if not trajs:
        raise ConfigError("evaluate_rollouts needs at least one trajectory")
    if history < 0:
        raise ConfigError(f"history = {history}; expected >= 0 samples")
    joint_names = tuple(trajs[0].meta.joint_names)
    for tr in trajs:
        if tuple(tr.meta.joint_names) != joint_names:
            raise SchemaError(f"trajectory {tr.meta.name!r} has joints {tr.meta.joint_names}; "
                              f"expected {list(joint_names)} like the first one")
        for ch in ("q", *inputs):
            if ch not in tr:
                raise SchemaError(f"trajectory {tr.meta.name!r} lacks channel {ch!r} needed "
                                  "by the rollout protocol")
        for k in labels:
            if k not in tr.meta.labels:
                raise SchemaError(f"trajectory {tr.meta.name!r} has no label {k!r}; labels: "
                                  f"{sorted(tr.meta.labels)}")
    tagged = [(tr, {k: tr.meta.labels[k] for k in labels}) for tr in trajs]
    records = []
    for h in horizons:
        if h == "full":
            rec = _evaluate_full(simulator, tagged, name, inputs, joint_names, gripper, history)
        elif isinstance(h, int | np.integer) and h >= 1:
            s = stride.get(h, h) if isinstance(stride, Mapping) else (stride or int(h))
            rec = _evaluate_horizon(simulator, tagged, name, int(h), int(s), inputs,
                                    joint_names, batch_size, gripper, history)
        else:
            raise ConfigError(f"horizon {h!r} must be a positive int or 'full'")
        rec["history"] = history
        rec["labels"] = list(labels)
        records.append(rec)
    return records


def _batch(traj, starts: np.ndarray, h: int, inputs: Sequence[str], qd: np.ndarray,
           history: int = 0, labels: Mapping[str, Any] | None = None) -> SimBatch:
    idx = starts[:, None] + np.arange(h)[None, :]
    t = np.asarray(traj["t"], dtype=np.float64)
    tw = t[starts[:, None] + np.arange(h + 1)[None, :]]
    past, t_past = {}, None
    if history:
        pidx = starts[:, None] + np.arange(-history + 1, 1)[None, :]  # never after t0
        past = {k: np.asarray(traj[k])[pidx] for k in inputs}
        past["q"] = np.asarray(traj["q"])[pidx]
        past["qd"] = qd[pidx]
        t_past = t[pidx] - tw[:, :1]
    return SimBatch(q0=np.asarray(traj["q"])[starts], qd0=qd[starts],
                    inputs={k: np.asarray(traj[k])[idx] for k in inputs},
                    t=tw - tw[:, :1], joint_names=tuple(traj.meta.joint_names),
                    robot=traj.meta.robot, past=past, t_past=t_past,
                    labels=labels or {})


def _valid(traj) -> np.ndarray:
    v = traj.get("valid")
    return np.ones(np.shape(traj["q"]), bool) if v is None else np.asarray(v, bool)


def _record(name, h, s, inputs, joint_names, preds, trues, masks, n_windows, gripper):
    rec: dict[str, Any] = {"mode": "simulator", "model": name, "protocol": "open_loop_rollout",
                           "horizon": h, "stride": s, "n_windows": n_windows,
                           "inputs": list(inputs)}
    if n_windows == 0:
        rec.update(n_samples=0, joint_mae_deg=None, arm_mean_deg=None, arm_max_deg=None,
                   gripper_deg=None)
        return rec
    p, t, m = (np.concatenate(x, axis=0) for x in (preds, trues, masks))
    summ = metrics.joint_mae_summary(p, t, joint_names, mask=m, gripper=gripper)
    rec.update(n_samples=int(m.all(-1).sum()), joint_mae_deg=summ["per_joint"],
               arm_mean_deg=summ["arm_mean"], arm_max_deg=summ["arm_max"],
               gripper_deg=summ["gripper"])
    return rec


def _evaluate_horizon(simulator, trajs, name, h, s, inputs, joint_names, batch_size, gripper,
                      history):
    preds, trues, masks, n_windows = [], [], [], 0
    first = max(history - 1, 0)
    for tr, labels in trajs:
        valid = _valid(tr)
        starts = window_starts(len(tr) - first, h, s) + first
        starts = starts[valid[starts].all(-1)]
        qd = _initial_qd(tr)
        q = np.asarray(tr["q"], dtype=np.float64)
        for i in range(0, len(starts), batch_size):
            st = starts[i:i + batch_size]
            out = _run_batch(simulator, _batch(tr, st, h, inputs, qd, history, labels), name)
            idx = st[:, None] + np.arange(1, h + 1)[None, :]
            preds.append(out.reshape(-1, out.shape[-1]))
            trues.append(q[idx].reshape(-1, q.shape[-1]))
            masks.append(valid[idx].reshape(-1, q.shape[-1]))
            n_windows += len(st)
    return _record(name, h, s, inputs, joint_names, preds, trues, masks, n_windows, gripper)


def _evaluate_full(simulator, trajs, name, inputs, joint_names, gripper, history):
    preds, trues, masks, n_windows = [], [], [], 0
    first = max(history - 1, 0)
    for tr, labels in trajs:
        h = len(tr) - 1 - first
        valid = _valid(tr)
        if h < 1 or not valid[first].all():
            continue
        st = np.full(1, first, dtype=np.int64)
        out = _run_batch(simulator, _batch(tr, st, h, inputs, _initial_qd(tr), history, labels),
                         name)
        preds.append(out[0])
        trues.append(np.asarray(tr["q"], dtype=np.float64)[first + 1:])
        masks.append(valid[first + 1:])
        n_windows += 1
    return _record(name, "full", None, inputs, joint_names, preds, trues, masks, n_windows,
                   gripper)


def simulate_full(simulator: Simulator, traj, name: str = "simulator",
                  inputs: Sequence[str] = ("q_goal",), history: int = 0,
                  labels: Sequence[str] = ()) -> np.ndarray:
    """Open-loop simulation of a whole trajectory, (T, n) aligned with ``traj["q"]`` (the
    first ``max(history, 1)`` samples are the measured initial state), e.g. for plots."""
    inputs = tuple(dict.fromkeys(("q_goal", *inputs)))
    bad = sorted(set(inputs) - SIM_INPUTS)
    if bad:
        raise ConfigError(f"inputs {bad} are not allowed in simulator mode; allowed: "
                          f"{sorted(SIM_INPUTS)}")
    first = max(history - 1, 0)
    h = len(traj) - 1 - first
    if h < 1:
        raise SchemaError(f"trajectory {traj.meta.name!r} has {len(traj)} samples; too short "
                          f"for a rollout with history {history}")
    lab = {k: traj.meta.labels[k] for k in labels}
    batch = _batch(traj, np.full(1, first, dtype=np.int64), h, inputs, _initial_qd(traj),
                   history, lab)
    q = np.array(traj["q"], dtype=np.float64)
    q[first + 1:] = _run_batch(simulator, batch, name)[0]
    return q
