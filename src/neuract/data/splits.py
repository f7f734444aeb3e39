"""Train/validation/test splits by episode (never by sample), seeded and reproducible.

``split_episodes`` shuffles episode indices with ``numpy.random.default_rng(seed)`` and cuts
them by the given fractions (largest-remainder rounding; every split with a positive fraction
gets at least one episode when there are enough). ``group_by`` keeps all episodes that share a
label value together (e.g. repetitions of one commanded trajectory), so that no group leaks
across splits. ``from_labels`` uses the split recorded by the reader (e.g. NAD's folders).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neuract.data.trajectory import TrajectoryMeta
from neuract.errors import ConfigError, SchemaError

DEFAULT_FRACTIONS = {"train": 0.8, "val": 0.1, "test": 0.1}
_ALIASES = {"validation": "val", "valid": "val"}


def _counts(n: int, fractions: Mapping[str, float]) -> dict[str, int]:
    names = list(fractions)
    f = np.array([float(fractions[k]) for k in names])
    if (f < 0).any() or not np.isfinite(f).all() or f.sum() <= 0:
        raise ConfigError(f"split fractions {dict(fractions)} must be finite, >= 0, sum > 0")
    f = f / f.sum()
    raw = f * n
    c = np.floor(raw).astype(int)
    for i in np.argsort(-(raw - c), kind="stable")[: n - c.sum()]:
        c[i] += 1
    # at least one item in every split with a positive fraction, taken from the largest
    for i in np.flatnonzero((c == 0) & (f > 0)):
        j = int(np.argmax(c))
        if c[j] > 1:
            c[j] -= 1
            c[i] += 1
    return dict(zip(names, c.tolist()))


def split_episodes(
    n_episodes: int,
    fractions: Mapping[str, float] | None = None,
    seed: int = 0,
    groups: Sequence[Any] | None = None,
) -> dict[str, list[int]]:
    """Episode indices per split name (sorted lists that partition ``range(n_episodes)``)."""
    fractions = dict(fractions or DEFAULT_FRACTIONS)
    if groups is not None and len(groups) != n_episodes:
        raise ConfigError(f"{len(groups)} group labels for {n_episodes} episodes")
    keys = list(range(n_episodes)) if groups is None else list(dict.fromkeys(groups))
    rng = np.random.default_rng(seed)
    order = [keys[i] for i in rng.permutation(len(keys))]
    counts = _counts(len(keys), fractions)
    out: dict[str, list[int]] = {}
    pos = 0
    for name, c in counts.items():
        chosen = set(order[pos : pos + c])
        pos += c
        if groups is None:
            out[name] = sorted(chosen)
        else:
            out[name] = [i for i, g in enumerate(groups) if g in chosen]
    return out


def split_metas(
    metas: Sequence[TrajectoryMeta],
    fractions: Mapping[str, float] | None = None,
    seed: int = 0,
    group_by: str | None = None,
    from_labels: bool = False,
) -> dict[str, list[int]]:
    """Split episodes given their metadata (``[t.meta for t in trajs]`` or a Dataset's)."""
    if from_labels:
        out: dict[str, list[int]] = {}
        for i, m in enumerate(metas):
            s = m.labels.get("split")
            if s is None:
                raise SchemaError(
                    f"episode {i} ({m.name}) has no 'split' label; "
                    "use from_labels=False for a seeded random split"
                )
            out.setdefault(_ALIASES.get(s, s), []).append(i)
        return out
    groups = None
    if group_by is not None:
        missing = [m.name for m in metas if group_by not in m.labels]
        if missing:
            raise SchemaError(f"episodes {missing[:3]} have no label {group_by!r} to group by")
        groups = [repr(m.labels[group_by]) for m in metas]
    return split_episodes(len(metas), fractions, seed, groups)


def split_dataset(
    ds: Any,
    fractions: Mapping[str, float] | None = None,
    seed: int = 0,
    group_by: str | None = None,
    from_labels: bool = False,
):
    """Split a :class:`~neuract.data.Dataset` (or a list of Trajectories) by episode."""
    if hasattr(ds, "episodes"):
        metas = [TrajectoryMeta.from_dict(e["meta"]) for e in ds.episodes]
    else:
        metas = [t.meta for t in ds]
    return split_metas(metas, fractions, seed, group_by, from_labels)


__all__ = ["DEFAULT_FRACTIONS", "split_dataset", "split_episodes", "split_metas"]
