"""Trajectories flattened for NeuralActuator training: per-sample tokens, states and labels.

Every episode's samples are concatenated into flat arrays (N = total samples); windows are
gathered by index and never cross an episode boundary. Tokens are the model's per-step raw
features (:func:`neuract.neuralactuator.features.assemble`) for the estimator and the
simulator mode. Labels that a trajectory lacks are masked (force) or taken as "normal"
(condition) / "no contact" (gate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from neuract.errors import SchemaError
from neuract.neuralactuator.features import (
    REFERENCE_CHANNELS,
    assemble,
    reference_inputs,
    trajectory_channels,
)
from neuract.neuralactuator.physics import arm_model
from neuract.neuralactuator.reference import reference_channels_many


def smooth_velocity(q: np.ndarray, t: np.ndarray, window: int = 7) -> np.ndarray:
    """qd (T, n) [rad/s] from positions by a Savitzky-Golay derivative (training targets only:
    it looks at future samples, so it is used for initial states when fitting, never in an
    evaluation rollout)."""
    from scipy.signal import savgol_filter

    if len(t) < 2:  # no time step: no velocity to tell (np.gradient needs 2 samples)
        return np.zeros_like(np.asarray(q, dtype=np.float64))
    if len(t) < window + 2:
        return np.gradient(q, t, axis=0)
    dt = float(np.median(np.diff(t)))
    return savgol_filter(q, window, 3, deriv=1, delta=dt, axis=0, mode="interp")


def per_joint_condition(traj: Any, n: int) -> np.ndarray:
    """(T, n) int condition per motor: twin labels ``condition_per_joint`` where present, else
    the trajectory's ``condition`` channel broadcast to every motor, else 0 (normal)."""
    T = len(traj)
    lab = traj.meta.labels.get("condition_per_joint")
    if lab is not None and len(lab) == n:
        return np.repeat(np.asarray(lab, dtype=np.int64)[None, :], T, axis=0)
    if "condition" in traj:
        c = np.asarray(traj["condition"], dtype=np.int64).reshape(T, -1)[:, :1]
        return np.repeat(c, n, axis=1)
    return np.zeros((T, n), dtype=np.int64)


@dataclass
class FlatData:
    """Samples of many episodes, concatenated. Shapes: (N, ...) per sample.

    tok_est, tok_sim: per-step model features for each mode (None if the mode is unused);
    q, qd (measured register), qd_s (smoothed, training only), q_goal: (N, n);
    t: (N,) [s]; ep: (N,) episode index; force: (N, 3) [N]; fmask, contact: (N,) bool;
    cond: (N, n) int; tau_ext: (N, n) J^T force label at the measured pose [N m] (0 where
    unlabelled); starts, ends: first and one-past-last sample of each episode; voltage: (N,)
    supply voltage [V] (mean over the servos; a known simulator input), None unless every
    episode has it.
    """

    tok_est: torch.Tensor | None
    tok_sim: torch.Tensor | None
    q: torch.Tensor
    qd: torch.Tensor
    qd_s: torch.Tensor
    q_goal: torch.Tensor
    t: torch.Tensor
    ep: torch.Tensor
    force: torch.Tensor
    fmask: torch.Tensor
    contact: torch.Tensor
    cond: torch.Tensor
    tau_ext: torch.Tensor
    starts: np.ndarray
    ends: np.ndarray
    voltage: torch.Tensor | None = None

    @property
    def n_samples(self) -> int:
        return int(self.q.shape[0])

    def anchors(self, history: int, horizon: int) -> np.ndarray:
        """Sample indices t0 with ``history - 1`` samples before and ``horizon`` after them
        inside the same episode."""
        out = [np.arange(s + history - 1, e - horizon) for s, e in zip(self.starts, self.ends)]
        out = [a for a in out if len(a)]
        if not out:
            raise SchemaError(f"no episode is long enough for history {history} + horizon "
                              f"{horizon} samples")
        return np.concatenate(out)


def flatten(trajs: Sequence[Any], robot, site: str | None, est_channels: Sequence[str] | None,
            sim_channels: Sequence[str] | None, physics: tuple[str, str] | None = None,
            context_s: float = 0.0, reference: tuple[Any, str, int] | None = None,
            ident_memory: int = 0) -> FlatData:
    """Flatten trajectories (all of one robot) into :class:`FlatData` (float32); physics:
    (robot, site) computing the estimator's physics channels, context_s: time constant of its
    context channels, reference: (servo, robot, steps) of its reference channels, if it
    reads them; ident_memory: its identification channels' memory [samples]."""
    if not trajs:
        raise SchemaError("no trajectories to train on")
    n = len(trajs[0].meta.joint_names)
    cols: dict[str, list] = {k: [] for k in ("tok_est", "tok_sim", "q", "qd", "qd_s", "q_goal",
                                             "t", "ep", "force", "fmask", "contact", "cond",
                                             "voltage")}
    refs = [None] * len(trajs)
    if reference is not None and est_channels is not None and any(
            c in REFERENCE_CHANNELS for c in est_channels):  # every episode in one batch
        system_model, robot_name, steps = reference
        refs = reference_channels_many([reference_inputs(tr, n) for tr in trajs],
                                       system_model, arm_model(str(robot_name)), steps)
    starts, ends, pos = [], [], 0
    for i, tr in enumerate(trajs):
        T = len(tr)
        q = np.asarray(tr["q"], dtype=np.float64)
        t = np.asarray(tr["t"], dtype=np.float64)
        qd = (np.asarray(tr["qd"], dtype=np.float64) if "qd" in tr
              else np.gradient(q, t, axis=0) if T > 1 else np.zeros_like(q))
        for key, chans in (("tok_est", est_channels), ("tok_sim", sim_channels)):
            if chans is not None:
                parts = trajectory_channels(tr, chans, n, physics, context_s,
                                            refs[i] if key == "tok_est" else None,
                                            ident_memory)
                cols[key].append(assemble({k: torch.tensor(v, dtype=torch.float32)
                                           for k, v in parts.items()}, chans))
        cols["q"].append(q)
        cols["qd"].append(qd)
        cols["qd_s"].append(smooth_velocity(q, t))
        cols["q_goal"].append(np.asarray(tr["q_goal"], dtype=np.float64))
        cols["t"].append(t)
        cols["ep"].append(np.full(T, i))
        f = np.asarray(tr["ee_force"], dtype=np.float64) if "ee_force" in tr else np.zeros((T, 3))
        fm = (np.asarray(tr["ee_force_mask"], bool) if "ee_force_mask" in tr
              else np.full(T, "ee_force" in tr))
        cols["force"].append(np.where(fm[:, None], f, 0.0))
        cols["fmask"].append(fm)
        cols["contact"].append(np.asarray(tr["contact"], bool) if "contact" in tr
                               else np.zeros(T, bool))
        cols["cond"].append(per_joint_condition(tr, n))
        if "voltage" in tr:
            cols["voltage"].append(np.asarray(tr["voltage"], dtype=np.float64).reshape(T, -1)
                                   .mean(-1))
        starts.append(pos)
        pos += T
        ends.append(pos)
    f32 = lambda k: torch.tensor(np.concatenate(cols[k]), dtype=torch.float32)  # noqa: E731
    tok = {k: (torch.cat(cols[k]) if cols[k] else None) for k in ("tok_est", "tok_sim")}
    force = f32("force")
    q = f32("q")
    tau_ext = torch.zeros_like(q)
    if site is not None and bool(np.concatenate(cols["fmask"]).any()):
        with torch.no_grad():
            for s in range(0, len(q), 4096):
                J = robot.site_jacobian(q[s:s + 4096].to(robot.dtype), site)[..., :3, :]
                tau_ext[s:s + 4096] = (J.transpose(-1, -2)
                                       @ force[s:s + 4096, :, None].to(robot.dtype))[..., 0]
    return FlatData(
        tok_est=tok["tok_est"], tok_sim=tok["tok_sim"], q=q, qd=f32("qd"), qd_s=f32("qd_s"),
        q_goal=f32("q_goal"), t=torch.tensor(np.concatenate(cols["t"]), dtype=torch.float64),
        ep=torch.tensor(np.concatenate(cols["ep"])), force=force,
        fmask=torch.tensor(np.concatenate(cols["fmask"])),
        contact=torch.tensor(np.concatenate(cols["contact"])),
        cond=torch.tensor(np.concatenate(cols["cond"])), tau_ext=tau_ext,
        starts=np.asarray(starts), ends=np.asarray(ends),
        voltage=f32("voltage") if len(cols["voltage"]) == len(trajs) else None)


__all__ = ["FlatData", "flatten", "per_joint_condition", "smooth_velocity"]
