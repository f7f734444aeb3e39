"""Recorded runs as one padded tensor batch on a uniform control grid, and splits by run.

Every run is resampled (linear interpolation in time) onto ``t0 + k dt``; samples the reader
masked (``valid`` False), instants farther than ``dt`` from any kept sample (bus dropouts)
and the padding after a short run are excluded from losses via ``mask``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from neuract.errors import SchemaError


@dataclass
class RunBatch:
    """Runs on a common grid. All tensors (B, T, n) unless noted.

    q, qd: measured state [rad, rad/s] (used for initial states and losses only);
    command: commanded position [rad]; voltage: (B, T, 1) supply [V] (NaN-free; the config
    value where not logged); enable: (B, T, 1) 1.0 where the servo torque is enabled;
    mask: (B, T, n) bool, True where q is a real measurement; labels: per-run metadata
    dicts; names: run names; dt: grid step [s].
    """

    q: Tensor
    qd: Tensor
    command: Tensor
    voltage: Tensor
    enable: Tensor
    mask: Tensor
    dt: float
    labels: list[dict[str, Any]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return self.q.shape[0]

    def select(self, idx: Sequence[int] | Tensor) -> RunBatch:
        i = torch.as_tensor(idx, dtype=torch.long)
        il = i.tolist()
        return RunBatch(self.q[i], self.qd[i], self.command[i], self.voltage[i],
                        self.enable[i], self.mask[i], self.dt,
                        [self.labels[k] for k in il], [self.names[k] for k in il])

    def label_tensor(self, key: str, dtype: torch.dtype | None = None) -> Tensor:
        """(B, 1) a numeric per-run label (e.g. the firmware ``kp``)."""
        try:
            vals = [float(lab[key]) for lab in self.labels]
        except KeyError:
            raise SchemaError(f"run label {key!r} missing; labels present: "
                              f"{sorted(self.labels[0]) if self.labels else []}") from None
        return torch.tensor(vals, dtype=dtype or self.q.dtype).reshape(-1, 1)


def batch_from_trajectories(trajs: Sequence[Any], dt: float | None = None,
                            duration: float | None = None, default_voltage: float = 12.0,
                            voltage: str = "median", dtype: torch.dtype = torch.float64
                            ) -> RunBatch:
    """Resample trajectories (``t``, ``q``, ``qd``, ``q_goal``; optional ``voltage``,
    ``torque_enable``, ``valid``) onto a uniform grid of step ``dt`` [s] (default: 1 / the
    first run's rate). voltage: "median" (per-run median of the logged supply, robust to the
    odd glitched read) or "series" (the logged supply at every step)."""
    if voltage not in ("median", "series"):
        raise SchemaError(f"voltage={voltage!r}; valid: median, series")
    if not trajs:
        raise SchemaError("no runs to batch")
    if dt is None:
        rate = trajs[0].meta.rate_hz
        if not rate:
            raise SchemaError(f"{trajs[0].meta.name}: no rate_hz; pass dt")
        dt = 1.0 / rate
    spans = [float(tr["t"][-1] - tr["t"][0]) for tr in trajs]
    span = min(max(spans), duration) if duration is not None else max(spans)
    T = int(np.floor(span / dt + 1e-9)) + 1
    n = trajs[0]["q"].shape[1]
    for tr in trajs[1:]:
        if tr["q"].shape[1] != n:
            raise SchemaError(f"run {tr.meta.name!r} has {tr['q'].shape[1]} joints, run "
                              f"{trajs[0].meta.name!r} {n}; accepted: runs of one robot")
    out = {k: np.zeros((len(trajs), T, n)) for k in ("q", "qd", "command")}
    volt = np.full((len(trajs), T, 1), default_voltage)
    enable = np.ones((len(trajs), T, 1))
    mask = np.zeros((len(trajs), T, n), dtype=bool)
    for b, tr in enumerate(trajs):
        for ch in ("q", "q_goal"):
            if ch not in tr:
                raise SchemaError(f"run {tr.meta.name!r} has no {ch!r} channel; needed to "
                                  "simulate it (commands) and score it (positions)")
        t = np.asarray(tr["t"], dtype=np.float64)
        grid = t[0] + dt * np.arange(T)
        inside = grid <= t[-1] + 1e-9
        for key, ch in (("q", "q"), ("qd", "qd"), ("command", "q_goal")):
            if ch not in tr:
                continue
            x = np.asarray(tr[ch], dtype=np.float64)
            for j in range(n):
                out[key][b, :, j] = np.interp(grid, t, x[:, j])
        if "voltage" in tr:
            v = np.asarray(tr["voltage"], dtype=np.float64)[:, 0]
            volt[b, :, 0] = np.median(v) if voltage == "median" else np.interp(grid, t, v)
        if "torque_enable" in tr:  # the last value set before each grid instant
            te = np.asarray(tr["torque_enable"], dtype=np.float64)[:, 0]
            k = (np.searchsorted(t, grid + 1e-9, side="right") - 1).clip(0, len(t) - 1)
            enable[b, :, 0] = te[k]
        # a grid instant is measured if a kept, valid sample lies within dt/2 (+ jitter)
        near = np.searchsorted(t, grid).clip(1, len(t) - 1)
        left, right = near - 1, near
        pick = np.where(np.abs(t[left] - grid) <= np.abs(t[right] - grid), left, right)
        close = np.abs(t[pick] - grid) <= 0.75 * dt
        valid = np.asarray(tr["valid"], dtype=bool) if "valid" in tr else np.ones((len(t), n),
                                                                                   bool)
        mask[b] = (close & inside)[:, None] & valid[pick]
    tt = lambda a: torch.as_tensor(a, dtype=dtype)  # noqa: E731
    return RunBatch(tt(out["q"]), tt(out["qd"]), tt(out["command"]), tt(volt), tt(enable),
                    torch.as_tensor(mask), dt,
                    [dict(tr.meta.labels) for tr in trajs], [tr.meta.name for tr in trajs])


def split_runs(n_runs: int, val_fraction: float = 0.1, seed: int = 0
               ) -> tuple[list[int], list[int]]:
    """A random split by run: (train indices, validation indices), both sorted."""
    if not 0 <= val_fraction < 1:
        raise SchemaError(f"val_fraction must be in [0, 1), got {val_fraction}")
    perm = np.random.default_rng(seed).permutation(n_runs)
    n_val = int(round(val_fraction * n_runs))
    if n_runs > 1 and val_fraction > 0:
        n_val = max(1, n_val)
    return sorted(perm[n_val:].tolist()), sorted(perm[:n_val].tolist())
