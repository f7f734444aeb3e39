"""The package's import structure: subpackages form layers, no import runs back up a layer and
no module import cycle exists anywhere in ``neuract`` (imports inside functions included).

The layers, lowest first; a module may import its own subpackage and any lower layer. A new
subpackage must be placed here (the test names the unplaced ones).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "neuract"

LAYERS: list[set[str]] = [
    {"errors"},
    {"atomic", "registry", "lbfgs"},
    {"config"},
    {"runtime"},
    {"robot"},
    {"actuators"},
    {"sim"},
    {"data"},
    {"io"},
    {"models"},
    {"fit"},
    {"eval"},
    {"neuralactuator"},
    {"estimate"},
    {"twin", "control"},
    {"envs"},
    {"policy"},
    {"touch"},
    {"pipeline"},
    {"demo", "cli", "__main__", "__init__"},
]
"""``estimate`` (classical estimators and NeuralActuator's estimator mode) sits on the network
(``neuralactuator``); ``runtime`` (an exported estimator run without torch: numpy, ONNX
Runtime, MuJoCo) sits low so that both build on it; ``__init__`` (the package's lazy
top-level names) sits on top."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """module -> the neuract modules it imports (a ``from pkg import name`` of a submodule
    counts as that submodule)."""
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        out: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(node, mod, path.name == "__init__.py")
                names = [f"{target}.{a.name}" if f"{target}.{a.name}" in files else target
                         for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in files:
                    name = name.rpartition(".")[0]
                if name.startswith("neuract") and name != mod:
                    out.add(name)
        graph[mod] = out
    return graph


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(top: str) -> int:
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise KeyError(top)


GRAPH = import_graph()


def test_every_subpackage_has_a_layer():
    unplaced = sorted({_top(m) for m in GRAPH} - set().union(*LAYERS))
    assert not unplaced, f"place these in LAYERS: {unplaced}"


def test_no_import_runs_back_up_a_layer():
    bad = [f"{a} -> {b}" for a, deps in sorted(GRAPH.items()) for b in sorted(deps)
           if _top(a) != _top(b) and _layer(_top(b)) > _layer(_top(a))
           and _top(a) != "__init__"]
    assert not bad, "imports that run back up a layer:\n" + "\n".join(bad)


def test_same_layer_packages_do_not_import_each_other_both_ways():
    edges = {(_top(a), _top(b)) for a, deps in GRAPH.items() for b in deps
             if _top(a) != _top(b)}
    both = sorted((a, b) for a, b in edges if (b, a) in edges and a < b)
    assert not both, f"packages importing each other: {both}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_module_import_cycles():
    # a package's __init__ re-exporting its submodules is not a cycle of behaviour: leave the
    # edges from a package to its own submodules out
    graph = {m: {d for d in deps if not (d.startswith(m + ".") and (PKG.parent / (
        m.replace(".", "/") + "/__init__.py")).exists())} for m, deps in GRAPH.items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checks_catch_what_they_claim():
    """The cycle finder and the layer order are not vacuous."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert _layer("sim") > _layer("actuators") > _layer("robot")
    assert len(GRAPH) > 100 and any(GRAPH.values())
    with pytest.raises(KeyError):
        _layer("no_such_package")
