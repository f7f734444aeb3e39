"""Replay test: push logged command sequences through a plant model under a controller.

Each ``Episode`` carries a reference (q_d, qd_d, qdd_d) and a context (payload, speed band,
...). ``replay`` simulates every episode and reports, per episode and grouped by any context
key: tracking RMS and max error [rad], settling time [s] (first time after which the
worst-joint error stays below ``settle_tol``), effort (RMS torque [N m]) and failure rate
(diverged, or worst-joint error above ``fail_tol``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from neuract.control.simulate import simulate
from neuract.models.base import DynamicsModel


def speed_band(qd_d: np.ndarray, edges: tuple[float, float] = (0.5, 1.5)) -> str:
    """'slow' / 'medium' / 'fast' from the peak desired joint speed [rad/s]."""
    peak = float(np.abs(qd_d).max())
    return "slow" if peak < edges[0] else "medium" if peak < edges[1] else "fast"


@dataclass
class Episode:
    """q_d, qd_d, qdd_d: (T, n_dof) reference; plant: overrides the default plant (e.g. with
    a payload); context: labels used to group results (``speed`` is filled in if absent)."""

    q_d: np.ndarray
    qd_d: np.ndarray
    qdd_d: np.ndarray
    context: dict[str, str] = field(default_factory=dict)
    plant: DynamicsModel | None = None


def episode_metrics(q, q_d, tau, dt, settle_tol, fail_tol) -> dict[str, float]:
    """Metrics of one run; q, q_d, tau: (T, n_dof)."""
    if not np.isfinite(q).all():
        return {"rms": float("nan"), "max": float("nan"), "settling_time": float("nan"),
                "effort": float("nan"), "failed": True}
    err = np.abs(q_d - q).max(axis=1)
    outside = np.nonzero(err > settle_tol)[0]
    settle = 0.0 if outside.size == 0 else (
        float("nan") if outside[-1] == len(err) - 1 else (outside[-1] + 1) * dt)
    return {
        "rms": float(np.sqrt(((q_d - q) ** 2).mean())),
        "max": float(err.max()),
        "settling_time": settle,
        "effort": float(np.sqrt((tau ** 2).mean())),
        "failed": bool(err.max() > fail_tol),
    }


def _nanmean(xs: list[float]) -> float:
    x = np.asarray(xs, dtype=float)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else float("nan")


@dataclass
class ReplayReport:
    episodes: list[dict]

    def by_context(self, key: str) -> dict[str, dict[str, float]]:
        """Mean metrics and failure rate per value of context ``key``."""
        groups: dict[str, list[dict]] = {}
        for ep in self.episodes:
            groups.setdefault(ep["context"].get(key, "?"), []).append(ep)
        out = {}
        for val, eps in sorted(groups.items()):
            ok = [e for e in eps if not e["failed"]]
            mean = {m: _nanmean([e[m] for e in ok])
                    for m in ("rms", "max", "settling_time", "effort")}
            out[val] = {**mean, "failure_rate": 1 - len(ok) / len(eps), "n": len(eps)}
        return out

    def summary(self) -> dict[str, float]:
        return self.by_context("__all__")["?"]


def json_safe(obj):
    """``obj`` with every non-finite float (NaN, inf) replaced by ``None``, so that it can be
    written as strict JSON (``null``; bare ``NaN`` is not JSON)."""
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def replay(
    episodes: list[Episode],
    make_controller: Callable[[], Callable[..., torch.Tensor]],
    plant: DynamicsModel,
    dt: float,
    settle_tol: float = 0.01,
    fail_tol: float = 0.5,
    noise_q: float = 0.0,
    noise_qd: float = 0.0,
    tau_limit: float | None = None,
    seed: int = 0,
) -> ReplayReport:
    """Simulate every episode from its first reference state with a fresh controller."""
    rows = []
    for i, ep in enumerate(episodes):
        ctx = dict(ep.context)
        ctx.setdefault("speed", speed_band(ep.qd_d))
        ref = [torch.as_tensor(x, dtype=torch.float64)[:, None] for x in
               (ep.q_d, ep.qd_d, ep.qdd_d)]
        res = simulate(ep.plant or plant, make_controller(), *ref, dt=dt, noise_q=noise_q,
                       noise_qd=noise_qd, tau_limit=tau_limit, seed=seed + i)
        m = episode_metrics(res["q"][:, 0], ep.q_d, res["tau"][:, 0], dt, settle_tol, fail_tol)
        rows.append({"episode": i, "context": ctx, **m})
    return ReplayReport(rows)


__all__ = ["Episode", "ReplayReport", "episode_metrics", "json_safe", "replay",
           "speed_band"]
