"""Benchmark results record how they were measured (``benchmarks/common.py``: provenance,
write_result) and the summary marks a figure whose measured code has changed since
(``benchmarks/summarize.py``: measured, import_closure)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    return importlib.import_module


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _commit(repo: Path, files: dict[str, str], msg: str) -> str:
    for name, text in files.items():
        p = repo / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", msg)
    return _git(repo, "rev-parse", "HEAD")


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


@pytest.fixture
def repo(tmp_path):
    """A tiny repository laid out like this one: two neuract modules (one of them a package
    with a data folder), the shared benchmark module and a script importing one module inside
    a function."""
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q")
    _commit(r, {
        "README.md": "intro\n",
        "src/neuract/__init__.py": "",
        "src/neuract/mod.py": "from .robot import load\nX = 1\n",
        "src/neuract/other.py": "Y = 2\n",
        "src/neuract/robot/__init__.py": "def load():\n    return 0\n",
        "src/neuract/robot/assets/arm.xml": "<mujoco/>\n",
        "benchmarks/common.py": ("def a():\n    from neuract import mod\n    return mod.X\n\n\n"
                                 "def b():\n    from neuract.other import Y\n    return Y\n"),
        "benchmarks/bench_x.py": ("import json\n\nfrom common import a\n\n\n"
                                  "def main():\n    import neuract.mod\n    return a()\n"),
    }, "A")
    return r


# ------------------------------------------------------------------ recording it ---
@needs_git
def test_provenance_records_commit_torch_cpu_and_modules(bench):
    common = bench("common")
    import torch

    p = common.provenance(BENCH / "bench_dynamics.py")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert p["commit"] == head.stdout.strip() and len(p["commit"]) == 40
    assert p["script"] == "benchmarks/bench_dynamics.py"
    assert isinstance(p["dirty"], bool) and isinstance(p["dirty_files"], list)
    assert not [f for f in p["dirty_files"] if f.startswith(("benchmarks/results/", "runs/"))]
    assert p["measured_utc"].endswith("Z") and p["measured_utc"][:2] == "20"
    assert p["torch"]["version"] == torch.__version__
    assert p["torch"]["threads"] == torch.get_num_threads()
    assert p["torch"]["interop_threads"] == torch.get_num_interop_threads()
    assert p["cpu"]["name"] == common.cpu_name() and p["cpu"]["flags"] == common.cpu_flags()
    assert p["cpu"]["cores"] == os.cpu_count() and p["python"].count(".") == 2
    assert "neuract.atomic" in p["modules"] and p["modules"] == sorted(p["modules"])
    assert all(m == "neuract" or m.startswith("neuract.") for m in p["modules"])


@needs_git
def test_changed_files_leave_out_results_and_runs(bench, repo):
    common = bench("common")
    assert common.changed_files(repo) == []
    (repo / "benchmarks" / "results").mkdir()
    (repo / "benchmarks" / "results" / "x.json").write_text("{}")
    (repo / "runs").mkdir()
    (repo / "runs" / "r.txt").write_text("")
    assert common.changed_files(repo) == []
    (repo / "src" / "neuract" / "other.py").write_text("Y = 3\n")
    (repo / "src" / "neuract" / "new.py").write_text("")
    assert common.changed_files(repo) == ["src/neuract/new.py", "src/neuract/other.py"]
    assert common.changed_files(repo.parent) is None  # not a checkout
    assert common.head_commit(repo.parent) is None


def test_write_result_adds_provenance_and_read_result_takes_it_off(bench, tmp_path):
    common = bench("common")
    path = tmp_path / "r.json"
    out = common.write_result(path, {"a": 1, "provenance": "stale copy"}, script="x.py")
    saved = json.loads(path.read_text())
    assert saved == out and saved["a"] == 1 and set(saved) == {"a", "provenance"}
    prov = saved["provenance"]
    assert {"commit", "dirty", "measured_utc", "torch", "cpu", "python", "script",
            "modules"} <= set(prov)
    assert "parts" not in prov and "keys" not in prov
    data, p = common.read_result(path)
    assert data == {"a": 1} and p == prov
    path.write_text('{"b": 2}')
    assert common.read_result(path) == ({"b": 2}, None)


def test_write_result_keeps_the_provenance_of_what_it_carries_over(bench, tmp_path):
    common = bench("common")
    path = tmp_path / "r.json"
    old = {"commit": "a" * 40, "dirty": False, "dirty_files": [], "measured_utc": "2026-01-01T"
           "00:00:00Z", "script": "benchmarks/bench_a.py", "modules": ["neuract.old"]}
    path.write_text(json.dumps({"a": 1, "b": 2, "provenance": old}))
    # a run that measured "b" only: "a" keeps the earlier run's provenance
    out = common.write_result(path, {"a": 1, "b": 3}, measured=["b"])
    prov = out["provenance"]
    assert prov["keys"] == ["b"] and "neuract.old" in prov["modules"]
    assert prov["parts"] == [{"commit": "a" * 40, "dirty": False, "dirty_files": [],
                              "measured_utc": "2026-01-01T00:00:00Z",
                              "script": "benchmarks/bench_a.py", "keys": ["a"]}]
    # measuring "b" again keeps "a"'s; measuring "a" too leaves nothing carried over
    again = common.write_result(path, {"a": 1, "b": 4}, measured=["b"])["provenance"]
    assert [p["commit"] for p in again["parts"]] == ["a" * 40]
    assert "parts" not in common.write_result(path, {"a": 5, "b": 4},
                                              measured=["a", "b"])["provenance"]
    # carried over from a file written without provenance: said so
    path.write_text(json.dumps({"a": 1}))
    p = common.write_result(path, {"a": 1, "c": 2}, measured=["c"])["provenance"]
    assert p["parts"] == [{"commit": None, "note": "recorded without provenance",
                           "keys": ["a"]}]
    # a summary of per-seed records keeps each one's commit and modules
    s = common.write_result(tmp_path / "s.json", {"seeds": [1, 2]},
                            parts=[None, {**old, "parts": [{"commit": "b" * 40}]}])
    assert [p["commit"] for p in s["provenance"]["parts"]] == [None, "a" * 40, "b" * 40]
    assert "neuract.old" in s["provenance"]["modules"]


def test_dynamics_result_keeps_its_ratio_and_adds_the_commit(bench):
    """bench_dynamics writes ``rollout_ratio_vs_mujoco`` and the commit at the top level."""
    src = (BENCH / "bench_dynamics.py").read_text()
    assert 'out["rollout_ratio_vs_mujoco"] = ' in src and 'out["commit"] = head_commit()' in src
    assert 'write_result(args.out / "dynamics.json", out)' in src


def test_result_files_are_written_with_write_result():
    """Every benchmark script writes its results/*.json through write_result (the one
    exception writes into a run directory it is given)."""
    plain = {p.relative_to(BENCH).as_posix() for p in BENCH.rglob("*.py")
             if p.name != "summarize.py"  # it writes no result file (it names the call)
             and ("write_json(" in p.read_text() or ".json\").write_text(" in p.read_text())}
    assert plain == {"common.py", "studies/gate_plain.py"}
    common = (BENCH / "common.py").read_text()
    assert common.count("write_json(") == 1  # inside write_result


# ------------------------------------------------------------- reading it back ---
def test_import_closure_follows_function_level_and_relative_imports(bench, repo):
    summ = bench("summarize")
    files = summ.import_closure(repo / "benchmarks" / "bench_x.py", repo)
    assert files == {"benchmarks/bench_x.py", "benchmarks/common.py",
                     "src/neuract/__init__.py", "src/neuract/mod.py",
                     "src/neuract/robot/__init__.py", "src/neuract/robot/assets"}
    # only what the names imported from common reach: b's import of neuract.other is not
    assert "src/neuract/other.py" not in files
    (repo / "benchmarks" / "bench_y.py").write_text("from common import b\n")
    assert "src/neuract/other.py" in summ.import_closure(repo / "benchmarks" / "bench_y.py",
                                                         repo)


def test_writer_script_prefers_the_benchmark_named_after_the_file(bench, repo):
    summ = bench("summarize")
    b = repo / "benchmarks"
    (b / "check_z.py").write_text('import json\nX = json.loads(open("z.json").read())\n')
    (b / "bench_w.py").write_text('OUT = "z"\n\n\ndef main():\n    write_result(OUT, {})\n')
    assert summ.writer_script("x", repo) == b / "bench_x.py"
    assert summ.writer_script("z", repo) == b / "bench_w.py"  # it writes; check_z only reads
    assert summ.writer_script("nothing", repo) is None
    assert summ.writer_script("sts3215_pendulum", ROOT) == BENCH / "bench_sts3215.py"
    assert summ.writer_script("sts3215_diagnostics", ROOT) == \
        BENCH / "studies" / "diagnose_sts3215.py"


def _result(repo: Path, name: str, prov: dict | None) -> None:
    d = {"figure": 1.0} | ({"provenance": prov} if prov else {})
    p = repo / "benchmarks" / "results" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(d))


@needs_git
def test_a_result_goes_stale_when_the_code_it_measured_changes(bench, repo):
    summ = bench("summarize")
    a = _git(repo, "rev-parse", "HEAD")
    prov = {"commit": a, "dirty_files": [], "measured_utc": "2026-11-29T10:00:00Z",
            "script": "benchmarks/bench_x.py", "modules": ["neuract", "neuract.mod",
                                                           "neuract.robot"]}
    _result(repo, "x.json", prov)
    _commit(repo, {}, "results")
    m = summ.measured("x.json", repo)
    assert (m.how, m.commit, m.status, m.date) == ("provenance", a, "current", "2026-11-29")
    assert m.cell() == f"2026-11-29 @ {a[:7]}"
    _commit(repo, {"README.md": "more\n", "src/neuract/other.py": "Y = 3\n"}, "unrelated")
    assert summ.measured("x.json", repo).status == "current"
    _commit(repo, {"src/neuract/robot/assets/arm.xml": "<mujoco model='b'/>\n"}, "asset")
    m = summ.measured("x.json", repo)
    assert m.status == "stale" and m.cell() == f"2026-11-29 @ {a[:7]}; stale: code changed since"
    # the same for the module itself, the script and the shared module
    for path in ("src/neuract/mod.py", "benchmarks/bench_x.py", "benchmarks/common.py"):
        head = _git(repo, "rev-parse", "HEAD")
        _result(repo, "x.json", {**prov, "commit": head})
        assert summ.measured("x.json", repo).status == "current"
        _commit(repo, {path: (repo / path).read_text() + "\n# changed\n"}, f"change {path}")
        assert summ.measured("x.json", repo).status == "stale", path


@needs_git
def test_measured_says_dirty_or_unknown_where_it_cannot_tell(bench, repo, tmp_path):
    summ = bench("summarize")
    a = _git(repo, "rev-parse", "HEAD")
    base = {"commit": a, "measured_utc": "2026-11-29T10:00:00Z",
            "script": "benchmarks/bench_x.py", "modules": ["neuract.mod"]}
    _result(repo, "x.json", {**base, "dirty_files": ["src/neuract/mod.py"]})
    m = summ.measured("x.json", repo)
    assert m.status == "dirty" and m.cell().endswith("; measured with uncommitted changes")
    _result(repo, "x.json", {**base, "dirty_files": ["README.md"]})  # not measured code
    assert summ.measured("x.json", repo).status == "current"
    _result(repo, "x.json", {**base, "commit": "f" * 40})  # a commit this clone lacks
    assert summ.measured("x.json", repo).status == "unknown"
    _result(repo, "x.json", {**base, "neuract_in_checkout": False})
    assert summ.measured("x.json", repo).status == "unknown"
    # a summary of runs: the oldest run is named, and any stale run makes it stale
    old = _git(repo, "rev-parse", "HEAD")
    _commit(repo, {"src/neuract/mod.py": "X = 2\n"}, "change mod")
    new = _git(repo, "rev-parse", "HEAD")
    _result(repo, "x.json", {**base, "commit": new, "measured_utc": "2026-11-30T00:00:00Z",
                             "parts": [{"commit": old, "measured_utc": "2026-11-28T00:00:00Z"},
                                       {"commit": None}]})
    m = summ.measured("x.json", repo)
    assert (m.status, m.commit, m.runs, m.unrecorded) == ("stale", old, 3, 1)
    assert m.cell() == (f"2026-11-28 @ {old[:7]} (oldest of 3 runs, 1 without provenance); "
                        "stale: code changed since")
    # no git: unknown, the date still shown
    copy = tmp_path / "nogit"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    m = summ.measured("x.json", copy)
    assert m.status == "unknown" and m.cell().startswith("2026-11-28 @ ")
    assert summ.measured("missing.json", copy).cell() == "unknown (no provenance; not in git)"


@needs_git
def test_a_result_without_provenance_falls_back_on_its_last_commit(bench, repo):
    summ = bench("summarize")
    _result(repo, "x.json", None)
    b = _commit(repo, {}, "results without provenance")
    m = summ.measured("x.json", repo)
    assert (m.how, m.commit, m.status) == ("committed", b, "current")
    assert m.cell().startswith("committed 20") and m.cell().endswith(f"@ {b[:7]} (no provenance)")
    assert "src/neuract/robot/assets" in m.files and "src/neuract/other.py" not in m.files
    _commit(repo, {"src/neuract/other.py": "Y = 5\n"}, "not imported by bench_x")
    assert summ.measured("x.json", repo).status == "current"
    _commit(repo, {"src/neuract/robot/__init__.py": "def load():\n    return 1\n"}, "imported")
    assert summ.measured("x.json", repo).status == "stale"


def test_make_bench_quick_reruns_the_short_benchmarks_then_summarizes():
    text = (ROOT / "Makefile").read_text()
    quick = next(ln for ln in text.splitlines() if ln.startswith("BENCH_QUICK :="))
    scripts = quick.split(":=", 1)[1].split()
    assert scripts == ["bench_dynamics.py", "bench_inference.py", "bench_twin.py"]
    assert all((BENCH / s).is_file() for s in scripts)
    recipe = text.split("\nbench-quick:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert recipe[0].strip().startswith("for s in $(BENCH_QUICK); do $(BIN)/python benchmarks/")
    assert recipe[-1].strip() == "$(BIN)/python benchmarks/summarize.py"
    assert "bench-quick" in next(ln for ln in text.splitlines() if ln.startswith(".PHONY"))
