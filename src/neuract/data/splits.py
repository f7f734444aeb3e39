"""Train/validation/test splits by episode (never by sample), seeded and reproducible.

``split_episodes`` shuffles episode indices with ``numpy.random.default_rng(seed)`` and cuts
them by the given fractions (largest-remainder rounding; every split with a positive fraction
gets at least one episode when there are enough). ``group_by`` keeps all episodes that share a
label value together (e.g. repetitions of one commanded trajectory), so that no group leaks
across splits. ``from_labels`` uses the split recorded by the reader (e.g. NAD's folders).

``select_by_labels`` picks episodes by a rule on their labels (``"kp == 16 or mass == 0.969"``,
:func:`label_rule`) and/or by name: how ``neuract fit --split.test`` holds out a test set. The
rule is parsed with :mod:`ast` and interpreted (comparisons, ``and``/``or``/``not``, names of
labels, number and string constants): never evaluated as Python.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
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


# ------------------------------------------------------------- selection by labels ------
_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
            ast.GtE: ">=", ast.In: "in", ast.NotIn: "not in"}
RULE_SYNTAX = ("comparisons (==, !=, <, <=, >, >=, in, not in) of run labels with numbers or "
               "quoted strings, joined by and / or / not and parentheses, e.g. "
               "\"kp == 16 or mass == 0.969\"")
"""what :func:`label_rule` accepts, as error messages say it"""

LabelRule = Callable[[Mapping[str, Any]], bool]


def _constant(node: ast.AST, rule: str, option: str) -> Any:
    """A number, string or boolean constant (a negative number too), or a tuple/list of them
    (the right side of ``in``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float, str)):
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, (int, float))
            and not isinstance(node.operand.value, bool)):
        v = node.operand.value
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_constant(e, rule, option) for e in node.elts)
    raise ConfigError(f"{option} {rule!r}: {ast.unparse(node)!r} is not a number or a quoted "
                      f"string; accepted: {RULE_SYNTAX}")


def _number(x: Any) -> float | None:
    if isinstance(x, bool):
        return float(x)
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return None
    return None


def _equal(label: Any, value: Any) -> bool:
    """Labels and constants compare as numbers where both read as numbers (within one part in
    a million: a mass logged as 0.969 and one stored in single precision are equal), else as
    text."""
    a, b = _number(label), _number(value)
    if a is not None and b is not None and not (isinstance(label, str)
                                                and isinstance(value, str)):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
    return str(label) == str(value)


def _order(label: Any, op: str, value: Any, rule: str, option: str) -> bool:
    a, b = _number(label), _number(value)
    if a is None or b is None:
        raise ConfigError(f"{option} {rule!r}: {op} needs numbers, got the label value "
                          f"{label!r} and {value!r}; accepted: {RULE_SYNTAX}")
    return {"<": a < b, "<=": a <= b or _equal(a, b), ">": a > b,
            ">=": a >= b or _equal(a, b)}[op]


def _compile(node: ast.AST, rule: str, option: str, names: set[str]) -> LabelRule:
    if isinstance(node, ast.BoolOp):
        parts = [_compile(v, rule, option, names) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda lab: all(p(lab) for p in parts)
        return lambda lab: any(p(lab) for p in parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _compile(node.operand, rule, option, names)
        return lambda lab: not inner(lab)
    if isinstance(node, ast.Compare):
        terms = [node.left, *node.comparators]
        tests = []
        for left, op, right in zip(terms[:-1], node.ops, terms[1:]):
            if type(op) not in _COMPARE:
                break
            tests.append(_comparison(left, _COMPARE[type(op)], right, rule, option, names))
        else:
            return lambda lab: all(t(lab) for t in tests)
    if isinstance(node, ast.Name):
        raise ConfigError(f"{option} {rule!r}: the label {node.id!r} alone is not a test; "
                          f"compare it with a value; accepted: {RULE_SYNTAX}")
    raise ConfigError(f"{option} {rule!r}: {ast.unparse(node)!r} is not allowed; accepted: "
                      f"{RULE_SYNTAX}")


def _comparison(left: ast.AST, op: str, right: ast.AST, rule: str, option: str,
                names: set[str]) -> LabelRule:
    """One ``label OP constant`` (or ``constant OP label``) test."""
    flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
    if isinstance(right, ast.Name) and not isinstance(left, ast.Name) and op in flipped:
        left, right, op = right, left, flipped[op]
    if not isinstance(left, ast.Name):
        raise ConfigError(f"{option} {rule!r}: {ast.unparse(left)!r} {op} ... does not compare "
                          f"a run label; accepted: {RULE_SYNTAX}")
    key = left.id
    names.add(key)
    value = _constant(right, rule, option)
    if op in ("in", "not in"):
        if not isinstance(value, tuple):
            value = (value,)
        inside = lambda lab: any(_equal(lab[key], v) for v in value)  # noqa: E731
        return inside if op == "in" else (lambda lab: not inside(lab))
    if isinstance(value, tuple):
        raise ConfigError(f"{option} {rule!r}: {op} compares with one value, not a list "
                          f"(use in); accepted: {RULE_SYNTAX}")
    if op == "==":
        return lambda lab: _equal(lab[key], value)
    if op == "!=":
        return lambda lab: not _equal(lab[key], value)
    return lambda lab: _order(lab[key], op, value, rule, option)


def label_rule(rule: str, option: str = "rule") -> tuple[LabelRule, set[str]]:
    """(test, label names) of a rule on an episode's labels such as
    ``"kp == 16 or mass == 0.969"`` (:data:`RULE_SYNTAX`). Raises :class:`ConfigError` naming
    ``option`` for anything else: the rule is parsed, never evaluated as Python."""
    try:
        tree = ast.parse(rule.strip(), mode="eval")
    except SyntaxError as e:
        raise ConfigError(f"{option} {rule!r}: not a rule ({e.msg}); accepted: "
                          f"{RULE_SYNTAX}") from None
    names: set[str] = set()
    return _compile(tree.body, rule, option, names), names


def _label_summary(labels: Sequence[Mapping[str, Any]], most: int = 6) -> str:
    """``kp (4, 8, 12, ...), mass (0.535, ...)``: the labels the episodes carry, with values."""
    values: dict[str, list[str]] = {}
    for lab in labels:
        for k, v in lab.items():
            if isinstance(v, (dict, list)):
                continue
            seen = values.setdefault(k, [])
            if len(seen) <= most and repr(v) not in seen:
                seen.append(repr(v))
    parts = []
    for k in sorted(values):
        vals = values[k]
        more = ", ..." if len(vals) > most else ""
        parts.append(f"{k} ({', '.join(vals[:most])}{more})")
    return "; ".join(parts) if parts else "none"


def select_by_labels(labels: Sequence[Mapping[str, Any]], names: Sequence[str],
                     rule: str = "", episodes: Sequence[str] = (),
                     option: str = "rule", episodes_option: str = "episodes") -> list[int]:
    """Sorted indices of the episodes whose labels satisfy ``rule`` (:func:`label_rule`) or
    whose name is in ``episodes`` (either may be empty; the union of both).

    Raises :class:`ConfigError` naming the option: for a label no episode carries (listing
    the labels they carry, with values), a label some episodes lack, and a name of no episode.
    """
    chosen: set[int] = set()
    if rule.strip():
        test, keys = label_rule(rule, option)
        for key in sorted(keys):
            lacking = [n for n, lab in zip(names, labels) if key not in lab]
            if len(lacking) == len(labels):
                raise ConfigError(f"{option} {rule!r}: no run carries the label {key!r}; the "
                                  f"runs' labels: {_label_summary(labels)}")
            if lacking:
                raise ConfigError(f"{option} {rule!r}: {len(lacking)} of {len(labels)} runs "
                                  f"lack the label {key!r} (e.g. {lacking[0]!r}); accepted: "
                                  "labels every run carries")
        chosen.update(i for i, lab in enumerate(labels) if test(lab))
    if episodes:
        index = {n: i for i, n in enumerate(names)}
        unknown = [e for e in episodes if e not in index]
        if unknown:
            shown = ", ".join(repr(n) for n in list(names)[:4])
            raise ConfigError(f"{episodes_option}: no run named {unknown[0]!r}"
                              + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
                              + f"; the runs are named like {shown}"
                              + (f" ({len(names)} runs)" if len(names) > 4 else ""))
        chosen.update(index[e] for e in episodes)
    return sorted(chosen)


__all__ = ["DEFAULT_FRACTIONS", "RULE_SYNTAX", "label_rule", "select_by_labels",
           "split_dataset", "split_episodes", "split_metas"]
