"""Episodes chosen by their labels: a small expression language, parsed without ``eval``.

>>> sel = parse_selection("kp==16 or mass==0.969")
>>> keep = [tr for tr in trajs if sel(tr.meta.labels, tr.meta.name)]

Grammar (keywords ``and``, ``or``, ``not`` and parentheses as usual, ``and`` before ``or``)::

    KEY==VALUE[,VALUE...]    the label equals one of the values (``=`` works too; a text
                             value may hold the wildcards * and ?, e.g. name==unit000/*)
    KEY!=VALUE[,VALUE...]    the label is none of them
    KEY<N  KEY<=N  KEY>N  KEY>=N    numeric comparison

``KEY`` is a label of the episodes (``kp``, ``mass``, ``trajectory``, ``task``, ``split``, ...)
or ``name``, the episode's name. Numbers compare as numbers (``kp==16`` matches a label 16 or
16.0), anything else as text; a value with spaces or commas is quoted ('...' or "...").
An episode that lacks the label fails a condition on it (``!=`` too).
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from neuract.errors import ConfigError

Selection = Callable[[Mapping[str, Any], str], bool]
"""``sel(labels, name) -> bool``"""

_TOKEN = re.compile(r"""\s*(?:(?P<par>[()])|(?P<cond>[A-Za-z_][\w.]*\s*(?:==|!=|<=|>=|=|<|>)\s*
                         (?:'[^']*'|"[^"]*"|[^\s()'",]+)(?:\s*,\s*(?:'[^']*'|"[^"]*"|[^\s()'",]+))*)
                         |(?P<word>[^\s()]+))""", re.VERBOSE)
_COND = re.compile(r"([A-Za-z_][\w.]*)\s*(==|!=|<=|>=|=|<|>)\s*(.*)", re.DOTALL)
_VALUE = re.compile(r"""\s*('[^']*'|"[^"]*"|[^\s,'"]+)\s*(?:,|$)""")
SYNTAX = ("KEY==V[,V...], KEY!=V, KEY<N, KEY<=N, KEY>N, KEY>=N joined by and / or / not and "
          "parentheses, e.g. 'kp==16 or mass==0.969'")


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _values(text: str, expr: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _VALUE.match(text, pos)
        if not m or m.end() == pos:
            raise ConfigError(f"--episodes {expr!r}: cannot read the value(s) {text!r}; "
                              f"accepted: {SYNTAX}")
        v = m.group(1)
        out.append(v[1:-1] if v[:1] in "'\"" else v)
        pos = m.end()
    if not out:
        raise ConfigError(f"--episodes {expr!r}: a condition without a value; accepted: {SYNTAX}")
    return out


def _equal(label: Any, value: str) -> bool:
    a, b = _number(label), _number(value)
    if a is not None and b is not None:
        return a == b
    text = str(label).lower() if isinstance(label, bool) else str(label)
    return fnmatch.fnmatchcase(text, value) if any(c in value for c in "*?[") else text == value


def _condition(text: str, expr: str) -> tuple[str, Selection]:
    m = _COND.fullmatch(text.strip())
    if not m:
        raise ConfigError(f"--episodes {expr!r}: cannot read {text!r}; accepted: {SYNTAX}")
    key, op, rest = m.group(1), m.group(2), m.group(3)
    values = _values(rest, expr)

    def get(labels: Mapping[str, Any], name: str) -> tuple[bool, Any]:
        if key == "name":
            return True, name
        return (key in labels and labels[key] is not None), labels.get(key)

    if op in ("==", "=", "!="):
        want = op != "!="

        def sel(labels: Mapping[str, Any], name: str) -> bool:
            has, v = get(labels, name)
            return has and any(_equal(v, x) for x in values) == want

        return key, sel
    if len(values) != 1 or _number(values[0]) is None:
        raise ConfigError(f"--episodes {expr!r}: {key}{op}{rest.strip()} compares with a "
                          f"number; accepted: one number after {op}")
    limit = float(values[0])
    cmp = {"<": lambda a: a < limit, "<=": lambda a: a <= limit, ">": lambda a: a > limit,
           ">=": lambda a: a >= limit}[op]

    def num_sel(labels: Mapping[str, Any], name: str) -> bool:
        has, v = get(labels, name)
        x = _number(v) if has else None
        return x is not None and cmp(x)

    return key, num_sel


class _Parser:
    def __init__(self, expr: str):
        self.expr = expr
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(expr):
            m = _TOKEN.match(expr, pos)
            if not m or m.end() == pos:
                if expr[pos:].strip() == "":
                    break
                raise ConfigError(f"--episodes {expr!r}: cannot read it from "
                                  f"{expr[pos:].strip()!r}; accepted: {SYNTAX}")
            kind = m.lastgroup or "word"
            self.tokens.append((kind, m.group(kind).strip()))
            pos = m.end()
        self.i = 0
        self.keys: list[str] = []

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise ConfigError(f"--episodes {self.expr!r} ends too early; accepted: {SYNTAX}")
        self.i += 1
        return tok

    def word(self, w: str) -> bool:
        tok = self.peek()
        if tok and tok[0] == "word" and tok[1].lower() == w:
            self.i += 1
            return True
        return False

    def parse(self) -> Selection:
        sel = self.disjunction()
        if self.peek() is not None:
            raise ConfigError(f"--episodes {self.expr!r}: unexpected {self.peek()[1]!r}; "
                              f"accepted: {SYNTAX}")
        return sel

    def disjunction(self) -> Selection:
        parts = [self.conjunction()]
        while self.word("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (
            lambda lab, name: any(p(lab, name) for p in parts))

    def conjunction(self) -> Selection:
        parts = [self.negation()]
        while self.word("and"):
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else (
            lambda lab, name: all(p(lab, name) for p in parts))

    def negation(self) -> Selection:
        if self.word("not"):
            inner = self.negation()
            return lambda lab, name: not inner(lab, name)
        kind, text = self.take()
        if kind == "par" and text == "(":
            inner = self.disjunction()
            if self.take() != ("par", ")"):
                raise ConfigError(f"--episodes {self.expr!r}: a '(' is not closed; accepted: "
                                  f"{SYNTAX}")
            return inner
        if kind != "cond":
            raise ConfigError(f"--episodes {self.expr!r}: unexpected {text!r}; accepted: "
                              f"{SYNTAX}")
        key, sel = _condition(text, self.expr)
        self.keys.append(key)
        return sel


def parse_selection(expr: str) -> tuple[Selection, list[str]]:
    """(selection, the keys it reads) of an ``--episodes`` expression (see the module
    docstring); ConfigError naming the expression for one it cannot read."""
    if not expr.strip():
        raise ConfigError("--episodes '': an empty selection; accepted: " + SYNTAX)
    p = _Parser(expr)
    return p.parse(), p.keys


def select_episodes(trajs: Sequence[Any], expr: str, data: str = "--data") -> list[Any]:
    """The trajectories of ``trajs`` that ``expr`` selects (all with an empty ``expr``), in
    their order. Refused (ConfigError naming the expression): a key no episode carries, or a
    selection that keeps no episode."""
    if not expr:
        return list(trajs)
    sel, keys = parse_selection(expr)
    present = {k for tr in trajs for k in tr.meta.labels} | {"name"}
    unknown = [k for k in keys if k not in present]
    if unknown:
        raise ConfigError(f"--episodes {expr!r}: no episode of {data} has the label "
                          f"{unknown[0]!r}; labels: {sorted(present)}")
    kept = [tr for tr in trajs if sel(tr.meta.labels, tr.meta.name)]
    if not kept:
        raise ConfigError(f"--episodes {expr!r} selects none of the {len(trajs)} episodes of "
                          f"{data}")
    return kept


__all__ = ["SYNTAX", "Selection", "parse_selection", "select_episodes"]
