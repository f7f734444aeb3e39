"""Paired evaluation of policies: every policy meets the same trials (unit, episode: so the
same reference, payload and initial state), success per trial, over-current stops, Wilson
95 % intervals of each success rate and Newcombe's interval of the paired difference, a
Markdown report and a trajectory plot.

Over-current stops are read from the environment's ``info['overload']`` where it reports
one; an environment that does not report it counts 0 and the report says so.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuract.atomic import atomic_path
from neuract.errors import ConfigError
from neuract.policy.rollout import Controller, ForceStream, Trace, run_episode

Z95 = 1.959963984540054


@dataclass
class PolicyRun:
    """A policy under evaluation: its name, controller and, if it reads f̂, the stream of the
    frozen estimator."""

    name: str
    act: Controller
    force: ForceStream | None = None


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``k`` successes in ``n`` trials."""
    if n <= 0 or not 0 <= k <= n:
        raise ConfigError(f"wilson: k={k!r}, n={n!r}; accepted: 0 <= k <= n, n >= 1")
    p = k / n
    den = 1.0 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def newcombe_paired(a: int, b: int, c: int, d: int, z: float = Z95
                    ) -> tuple[float, tuple[float, float]]:
    """Difference p1 - p2 of paired proportions and Newcombe's (1998, method 10) interval from
    the Wilson intervals of both margins. a: both succeed, b: only policy 1, c: only policy
    2, d: neither."""
    n = a + b + c + d
    if min(a, b, c, d) < 0 or n == 0:
        raise ConfigError(f"newcombe_paired: counts {(a, b, c, d)}; accepted: >= 0, sum >= 1")
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    den = (a + b) * (c + d) * (a + c) * (b + d)
    num = a * d - b * c
    if num > 0:
        num = max(num - n / 2.0, 0.0)
    phi = num / math.sqrt(den) if den > 0 else 0.0
    lo2 = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    hi2 = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    diff = p1 - p2
    return diff, (max(-1.0, diff - math.sqrt(max(lo2, 0.0))),
                  min(1.0, diff + math.sqrt(max(hi2, 0.0))))


def paired_trials(make_env: Callable[[], Any], runs: Sequence[PolicyRun], seed: int,
                  units: Sequence[int], episodes: Sequence[int],
                  progress: Callable[[str], None] | None = None) -> dict[str, list[Trace]]:
    """Every policy on every (unit, episode) of the environment's seed ``seed``; the trials'
    conditions (payload, release time, initial joint positions) are checked equal across
    policies."""
    if len({r.name for r in runs}) != len(runs) or not runs:
        raise ConfigError(f"policy names {[r.name for r in runs]}; accepted: distinct, >= 1")
    env = make_env()
    out: dict[str, list[Trace]] = {r.name: [] for r in runs}
    for unit in units:
        for ep in episodes:
            for r in runs:
                out[r.name].append(run_episode(env, r.act, seed, unit, ep, r.force))
            first = out[runs[0].name][-1]
            for r in runs[1:]:
                other = out[r.name][-1]
                if (other.payload_kg != first.payload_kg or other.release_t != first.release_t
                        or not np.array_equal(other.q0, first.q0)):
                    raise RuntimeError(f"trial unit {unit} episode {ep}: the policies met "
                                       "different conditions")
            if progress is not None:
                progress(f"unit {unit} episode {ep}: " + ", ".join(
                    f"{r.name} {'ok' if out[r.name][-1].success else 'fail'}" for r in runs))
    return out


def summarize(traces: dict[str, list[Trace]], first: str, second: str) -> dict[str, Any]:
    """Success rates with Wilson intervals, the paired difference ``second - first`` with
    Newcombe's interval, over-current stops and mean end-effector errors."""
    t1, t2 = traces[first], traces[second]
    if [(t.unit, t.episode) for t in t1] != [(t.unit, t.episode) for t in t2]:
        raise ConfigError("summarize: the two policies' trials are not paired")
    s1 = np.array([t.success for t in t1])
    s2 = np.array([t.success for t in t2])
    a, b = int(np.sum(s2 & s1)), int(np.sum(s2 & ~s1))
    c, d = int(np.sum(~s2 & s1)), int(np.sum(~s2 & ~s1))
    diff, ci = newcombe_paired(a, b, c, d)
    out: dict[str, Any] = {"trials": len(t1), "difference": diff, "difference_ci": list(ci),
                           "discordant": {f"only_{second}": b, f"only_{first}": c}}
    for name, tr, s in ((first, t1, s1), (second, t2, s2)):
        out[name] = {"successes": int(s.sum()), "rate": float(s.mean()),
                     "ci": list(wilson(int(s.sum()), len(s))),
                     "overloads": int(sum(t.overloads for t in tr)),
                     "overload_reported": bool(any(t.overload_reported for t in tr)),
                     "ee_error_median_mm": float(1e3 * np.median([np.median(t.err)
                                                                  for t in tr]))}
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def report_markdown(results: dict[str, dict[str, Any]], first: str, second: str) -> str:
    """Tables of the per-task summaries (:func:`summarize`)."""
    lines = ["| task | trials | policy | success [%] | 95 % CI [%] | over-current stops | "
             "median EE error [mm] |", "|---|---|---|---|---|---|---|"]
    for task, r in results.items():
        for name in (first, second):
            p = r[name]
            stops = p["overloads"] if p["overload_reported"] else "0 (not reported)"
            lines.append(f"| {task} | {r['trials']} | {name} | {_pct(p['rate'])} | "
                         f"{_pct(p['ci'][0])}-{_pct(p['ci'][1])} | {stops} | "
                         f"{p['ee_error_median_mm']:.1f} |")
    lines += ["", f"| task | difference {second} - {first} [points] | 95 % CI (Newcombe, "
              "paired) | discordant trials |", "|---|---|---|---|"]
    for task, r in results.items():
        lo, hi = r["difference_ci"]
        disc = ", ".join(f"{k}: {v}" for k, v in r["discordant"].items())
        lines.append(f"| {task} | {100 * r['difference']:+.1f} | {100 * lo:+.1f} to "
                     f"{100 * hi:+.1f} | {disc} |")
    return "\n".join(lines) + "\n"


def plot_trials(traces: dict[str, list[Trace]], index: int, path: str | os.PathLike,
                title: str = "") -> None:
    """End-effector error and shoulder-lift goal vs reference of trial ``index`` for every
    policy, one PNG (matplotlib, Agg), written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    for name, trs in traces.items():
        tr = trs[index]
        ax1.plot(tr.t, 1e3 * tr.err, label=name, lw=1)
        ax2.plot(tr.t, tr.q[:, 1], label=f"{name}: q", lw=1)
    tr = next(iter(traces.values()))[index]
    ax2.plot(tr.t, tr.ref[:, 1], "k--", lw=0.8, label="reference")
    ax1.set_ylabel("EE error [mm]")
    ax2.set_ylabel("shoulder_lift [rad]")
    ax2.set_xlabel("t [s]")
    ax1.set_title(title or f"unit {tr.unit} episode {tr.episode}, payload "
                  f"{1e3 * tr.payload_kg:.0f} g")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)


__all__ = ["PolicyRun", "newcombe_paired", "paired_trials", "plot_trials", "report_markdown",
           "summarize", "wilson"]
