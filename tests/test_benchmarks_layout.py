"""The layout of ``benchmarks/``: the scripts share code only through ``benchmarks/common.py``
(and ``neuract``'s public names), never by importing each other, and the studies live in
``benchmarks/studies/``."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SHARED = {"common"}
"""the benchmark modules the scripts may import"""


def bench_modules() -> set[str]:
    """The module names of every Python file under ``benchmarks/`` (each directory is put on
    ``sys.path`` when its scripts run, so a file is importable by its stem)."""
    return {p.stem for p in BENCH.rglob("*.py") if p.stem != "__init__"}


def import_violations(source: str, scripts: set[str], shared: set[str] = SHARED) -> list[str]:
    """What ``source`` imports that a benchmark script may not: another benchmark script
    (a name of ``scripts`` not in ``shared``, also through ``benchmarks.`` or importlib), or a
    private (underscore) name of any module, imported or read as a module's attribute."""
    tree = ast.parse(source)
    out: list[str] = []
    modules: set[str] = set()  # local names bound to imported modules

    def script(name: str) -> str | None:
        parts = name.split(".")
        if parts[0] == "benchmarks":
            parts = [p for p in parts[1:] if p != "studies"]
        return parts[0] if parts and parts[0] in scripts - shared else None

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if script(a.name):
                    out.append(f"line {node.lineno}: import {a.name}")
                modules.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if script(node.module):
                out.append(f"line {node.lineno}: from {node.module} import ...")
            for a in node.names:
                if private(a.name):
                    out.append(f"line {node.lineno}: from {node.module} import {a.name}")
                if node.module == "benchmarks" or node.module.startswith("benchmarks."):
                    if script(f"{node.module}.{a.name}"):
                        out.append(f"line {node.lineno}: from {node.module} import {a.name}")
        elif isinstance(node, ast.Call):
            f = node.func
            name = (f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name)
                    else "")
            if name in ("import_module", "__import__"):
                out.append(f"line {node.lineno}: {name}(...)")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and private(node.attr)):
            out.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return sorted(out, key=lambda s: int(s.split(":")[0][5:]))  # by line (stable)


def test_import_violations_finds_each_kind():
    scripts = {"bench_a", "bench_b", "common"}
    assert import_violations("import common\nfrom common import x\nimport numpy as np\n"
                             "np.linalg.norm\nfrom neuract.x import y\n", scripts) == []
    bad = import_violations(
        "import bench_a\n"
        "import bench_b as twin\n"
        "from bench_a import figures\n"
        "from neuract.pipeline.experiment import _calibration_set\n"
        "from common import _hidden\n"
        "from benchmarks.studies import bench_b\n"
        "import neuract.twin.generate as g\n"
        "def f():\n"
        "    import importlib\n"
        "    importlib.import_module('bench_a')\n"
        "    return twin._progress(), g._model\n", scripts)
    assert len(bad) == 9 and set(bad) == {"line 1: import bench_a", "line 2: import bench_b",
        "line 3: from bench_a import ...",
        "line 4: from neuract.pipeline.experiment import _calibration_set",
        "line 5: from common import _hidden", "line 6: from benchmarks.studies import bench_b",
        "line 10: import_module(...)", "line 11: twin._progress", "line 11: g._model"}


def test_benchmark_scripts_import_only_common_and_public_names():
    scripts = bench_modules()
    assert "common" in scripts and "bench_neuralactuator_twin" in scripts
    found = {str(p.relative_to(BENCH)): import_violations(p.read_text(), scripts)
             for p in sorted(BENCH.rglob("*.py"))}
    assert {k: v for k, v in found.items() if v} == {}


def test_studies_live_in_studies():
    """The contact-gate studies and diagnostics are in ``benchmarks/studies/``; every study
    script puts ``benchmarks/`` on ``sys.path`` itself, so it runs as
    ``python benchmarks/studies/<name>.py``."""
    top = {p.stem for p in BENCH.glob("*.py")}
    assert not {n for n in top if n.startswith(("bench_gate_", "probe_", "gate_", "diagnose_"))}
    studies = sorted((BENCH / "studies").glob("*.py"))
    assert studies
    for p in studies:
        assert "sys.path.insert(0, str(Path(__file__).resolve().parents[1]))" in p.read_text(), p
