"""The repetition noise floor: how much repeated runs of the same experiment differ.

Two episodes are repeats when they carry the same labels (every label they share, less the
ones that name an episode rather than describe it, :data:`IDENTITY_LABELS`, and hidden twin
truth) and, where the goals are given, the same goal trajectory (mean
absolute difference of the goals on their common valid samples at most ``goal_tol``). The floor
is the mean absolute difference of the repeats' measured positions over their common valid
samples, pooled over every pair of repeats: a deterministic model, driven only by the
commands, cannot be expected to score much below it. With independent run-to-run noise of
mean absolute size ``a``, two repeats differ by about ``sqrt(2) a``, so the pairwise figure
over-states the model floor by up to that factor.

The episodes are given on one time grid (``q``, ``mask``: (B, T, n), e.g. a
:class:`neuract.fit.batch.RunBatch`'s, each run from its first sample), numpy only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neuract.eval.protocol import HIDDEN_LABELS

IDENTITY_LABELS: frozenset[str] = frozenset({
    "episode", "index", "name", "split", "repetition", "rep", "run", "file", "source", "date",
    "time", "timestamp"})
"""labels that name an episode (or where it was filed) rather than describe the experiment:
left out when repeats are matched"""

GOAL_TOL = 0.01
"""default largest mean absolute goal difference [rad] of two repeats"""


def _key(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)


def repeat_keys(labels: Sequence[Mapping[str, Any]]) -> list[str]:
    """The labels that decide repeats: those every episode carries, less
    :data:`IDENTITY_LABELS` and hidden twin truth. (A label that names each episode apart,
    such as a time stamp, leaves no repeats: no floor rather than a wrong one.)"""
    if not labels:
        return []
    common = set(labels[0]).intersection(*labels[1:])
    return sorted(common - IDENTITY_LABELS - HIDDEN_LABELS)


def _mean_abs(a: np.ndarray, b: np.ndarray, m: np.ndarray) -> tuple[float, float]:
    """(sum of |a - b| over m, count of m)."""
    return float(np.abs(a - b)[m].sum()), float(m.sum())


def repeat_groups(labels: Sequence[Mapping[str, Any]], goals: np.ndarray | None = None,
                  mask: np.ndarray | None = None, keys: Sequence[str] | None = None,
                  goal_tol: float | None = GOAL_TOL) -> list[list[int]]:
    """Groups (episode indices, >= 2 each, in order) of repeats. keys: the labels that must
    agree (default :func:`repeat_keys`); goals: (B, T, n) commands on the common grid (None
    or ``goal_tol`` None: labels only); mask: (B, T, n) valid samples (default all)."""
    keys = repeat_keys(labels) if keys is None else list(keys)
    by_label: dict[tuple, list[int]] = {}
    for i, lab in enumerate(labels):
        if all(k in lab for k in keys):
            by_label.setdefault(tuple(_key(lab[k]) for k in keys), []).append(i)
    groups: list[list[int]] = []
    for idx in by_label.values():
        if goals is None or goal_tol is None:
            clusters = [idx]
        else:
            clusters = []
            for i in idx:  # the first cluster whose first member has the same goals
                for c in clusters:
                    m = np.ones(goals.shape[1:], bool) if mask is None else mask[c[0]] & mask[i]
                    s, n = _mean_abs(goals[c[0]], goals[i], m)
                    if n > 0 and s / n <= goal_tol:
                        c.append(i)
                        break
                else:
                    clusters.append([i])
        groups += [c for c in clusters if len(c) >= 2]
    return sorted(groups)


def repeat_floor(q: np.ndarray, mask: np.ndarray, labels: Sequence[Mapping[str, Any]],
                 keys: Sequence[str] | None = None, per: Sequence[str] = (),
                 goals: np.ndarray | None = None, goal_tol: float | None = GOAL_TOL
                 ) -> dict[str, Any]:
    """The noise floor [rad] of the episodes (see the module docstring).

    q, mask: (B, T, n) positions and valid samples on one grid (a (B, T) pair is one joint);
    labels: one dict per episode; keys, goals, goal_tol: see :func:`repeat_groups`; per:
    labels to break the floor down by (a pair counts under the value both carry; a pair that
    differs in it, or lacks it, under none).

    Returns ``all`` (None without repeats), ``pairs``, ``samples`` (compared samples x
    joints), ``keys`` (the labels matched), ``groups`` (episode indices of each group with
    its own floor) and one entry per ``per`` label: value (as text) -> floor.
    """
    q = np.asarray(q, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    if q.ndim == 2:
        q, mask = q[..., None], mask[..., None]
    if goals is not None:
        goals = np.asarray(goals, dtype=np.float64)
        goals = goals[..., None] if goals.ndim == 2 else goals
    keys = repeat_keys(labels) if keys is None else list(keys)
    groups = repeat_groups(labels, goals, mask, keys, goal_tol)
    acc: dict[str, dict[str, list[float]]] = {k: {} for k in per}
    tot = cnt = 0.0
    pairs = 0
    out_groups = []
    for idx in groups:
        gs = gn = 0.0
        for a in range(len(idx)):
            for c in range(a + 1, len(idx)):
                s, n = _mean_abs(q[idx[a]], q[idx[c]], mask[idx[a]] & mask[idx[c]])
                gs, gn, pairs = gs + s, gn + n, pairs + 1
                tot, cnt = tot + s, cnt + n
                for k in per:  # under the value both repeats carry
                    la, lc = labels[idx[a]], labels[idx[c]]
                    if k in la and k in lc and _key(la[k]) == _key(lc[k]):
                        sn = acc[k].setdefault(str(la[k]), [0.0, 0.0])
                        sn[0], sn[1] = sn[0] + s, sn[1] + n
        out_groups.append({"episodes": list(idx), "floor_rad": gs / gn if gn else None})
    out: dict[str, Any] = {"all": tot / cnt if cnt else None, "pairs": pairs,
                           "samples": int(cnt), "keys": keys, "groups": out_groups}
    for k in per:
        out[k] = {g: s / max(n, 1.0) for g, (s, n) in sorted(acc[k].items())}
    return out


__all__ = ["GOAL_TOL", "IDENTITY_LABELS", "repeat_floor", "repeat_groups", "repeat_keys"]
