"""``neuract VERB --help`` reads well and comes fast; ``--version``; a closed output pipe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import neuract
from neuract import cli_help
from neuract.cli import VERBS, main

VERB_LIST = sorted(VERBS)
ROOT = Path(__file__).resolve().parents[1]


def _help(verb: str, width: int = 80) -> str:
    return cli_help.verb_help(verb, width)


def _blocks(text: str) -> list[str]:
    """The rendered help of each option: its lines from the option to the next one, joined."""
    blocks, cur = [], None
    for line in text.splitlines():
        if re.match(r"  (-|[A-Z]+\b)", line) and not line.startswith("  neuract"):
            cur = [line]
            blocks.append(cur)
        elif cur is not None and line.startswith("      "):
            cur.append(line)
        else:
            cur = None
    return [" ".join(" ".join(b).split()) for b in blocks]


def _common_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("options:")
    end = next((i for i, x in enumerate(lines) if x.startswith("expert options")), len(lines))
    return lines[start:end]


# ------------------------------------------------------------------ the stored descriptions
def test_stored_help_matches_the_parsers():
    """cli_help.json is what tyro's parsers hold now (options, help text, source digests)."""
    stored = json.loads(cli_help.CACHE.read_text())
    built = cli_help.build_cache()
    stale = sorted(v for v in built if stored.get(v) != built[v])
    assert not stale, (f"src/neuract/cli_help.json is out of date for {stale}: run "
                       "PYTHONPATH=src python -m neuract.cli_help --write")
    assert sorted(stored) == VERB_LIST


def test_a_stale_description_is_read_from_the_parser(tmp_path, monkeypatch):
    text = _help("selfcheck")
    stored = json.loads(cli_help.CACHE.read_text())
    rel = next(iter(stored["selfcheck"]["sources"]))
    stored["selfcheck"]["sources"][rel] = "0" * 64  # the source changed since
    stored["selfcheck"]["groups"][0]["options"][0]["help"] = "STALE TEXT"
    path = tmp_path / "cli_help.json"
    path.write_text(json.dumps(stored))
    monkeypatch.setattr(cli_help, "CACHE", path)
    assert cli_help.cached("selfcheck") is None
    assert cli_help.cached("twin") is not None
    assert _help("selfcheck") == text and "STALE" not in text


def test_verb_help_imports_neither_torch_nor_tyro():
    code = ("import json, sys; from neuract import cli, cli_help; "
            "texts = {v: cli_help.verb_help(v) for v in cli.VERBS}; "
            "print(json.dumps(sorted(m for m in ('torch', 'tyro', 'mujoco', 'numpy') "
            "if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert json.loads(done.stdout) == [], done.stderr


def test_the_command_prints_help_without_importing_torch():
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "neuract", "evaluate",
                           "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: neuract evaluate")
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "neuract.cli_help" in imported
    assert not {m for m in imported if m.split(".")[0] in ("torch", "tyro", "mujoco")}


# ------------------------------------------------------------------ what a person reads
@pytest.mark.parametrize("verb", VERB_LIST)
def test_help_is_plain_text(verb):
    text = _help(verb)
    assert "`" not in text
    assert not re.search(r":(func|class|mod|data|attr|meth|obj):", text)
    assert not re.search(r"\b[A-Z]\w*Config\.[a-z]", text), "a config class's field"
    assert "{None}" not in text and "(default: None)" not in text and "%%" not in text
    assert all(len(line) <= 80 or line.endswith("\\") or " " not in line.strip()
               for line in text.splitlines() if not line.startswith("  neuract"))


@pytest.mark.parametrize("verb", VERB_LIST)
def test_each_default_is_said_once(verb):
    for block in _blocks(_help(verb)):
        assert block.count("(default:") <= 1, block
        if "(default:" in block:
            assert not re.search(r"\bdefaults?\b", block.split("(default:")[0]), block


@pytest.mark.parametrize("verb", VERB_LIST)
def test_examples_first_and_every_option_listed_once(verb):
    text = _help(verb)
    lines = text.splitlines()
    heading = next(i for i, x in enumerate(lines) if x in ("example:", "examples:"))
    assert heading < lines.index("options:")
    assert lines[heading + 1].startswith(f"  neuract {verb}")
    spec = cli_help.cached(verb)
    flags = {f for g in spec["groups"] for o in g["options"] for f in o["flags"]}
    for example in cli_help.EXAMPLES[verb]:  # only options the verb has
        bare = re.sub(r'"[^"]*"', '""', example)  # a quoted value (sweep --base) is a value
        used = set(re.findall(r"(?<!\S)(--[a-z][\w.-]*)", bare))
        assert used <= flags, used - flags
    heads = [x.split()[0].rstrip(",") for x in lines if re.match(r"  (-|[A-Z]+\b)", x)
             and not x.startswith("  neuract")]
    listed = [o for g in spec["groups"] for o in g["options"]]
    assert len(heads) == len(listed) + 1  # and -h
    for o in listed:
        first = o["flags"][0] if o["flags"] else o["metavar"]
        assert heads.count(first) == 1, first


@pytest.mark.parametrize("verb", VERB_LIST)
def test_common_options_first_expert_ones_under_one_heading(verb):
    spec = cli_help.cached(verb)
    dests = {o["dest"] for g in spec["groups"] for o in g["options"]}
    common = cli_help.COMMON[verb]
    assert common is None or set(common) <= dests, set(common) - dests
    text = _help(verb)
    if len(dests) > 12:
        assert common is not None
        assert text.count("\nexpert options (") == 1
        assert len(_common_lines(text)) < 45
    else:
        assert "expert options" not in text or common is not None


def test_evaluate_help_reads_well():
    text = _help("evaluate")
    assert len(_common_lines(text)) < 40
    joined = " ".join(text.split())
    # a field named in another option's help is written as that option
    assert "in whole episodes of --twin.episode-s (rounded up)" in joined
    assert "needs --experiment.baseline-iters > 0" in joined
    assert "--twin.gate-train-minutes" in joined.split("--experiment.gate-rnn INT")[1]
    # references to library internals are gone with their clause
    assert "NeuralActuator contact-gate loss weight (binary cross-entropy) (default: 0.5)" \
        in joined
    assert "Jacobian at the measured pose --experiment.context-s" in joined
    # hard-wrapped docstrings are paragraphs again
    assert "(episodes labelled split=test are the test set, else 25 % of each task's " \
           "episodes)" in joined


def test_docstring_markup_to_plain_text():
    spec = {"groups": [{"options": [{"dest": "twin.episode-s"}, {"dest": "twin.units"},
                                    {"dest": "out"}]}],
            "classes": {"TwinDataConfig": "twin."}}
    ctx = cli_help._Context(spec)

    def plain(s):
        return cli_help.plain(s, ctx, "twin.")

    assert plain("whole episodes of ``episode_s``\n(rounded up)") == \
        "whole episodes of --twin.episode-s (rounded up)"
    assert plain("see ``TwinDataConfig.units``, into ``out``") == "see --twin.units, into --out"
    assert plain("weight (binary; ``TrainConfig.gate_weight``)") == "weight (binary)"
    assert plain("weight (``TrainConfig.gate_weight``)") == "weight"
    assert plain("smoothing (hysteresis; :func:`neuract.estimate.f`); empty") == \
        "smoothing (hysteresis); empty"
    assert plain("names of :class:`neuract.twin.config.Nonidealities` fields") == \
        "names of Nonidealities fields"
    assert plain("``servo`` or ``pd``; a `neuract fit` output") == \
        "servo or pd; a neuract fit output"
    assert plain("as TwinDataConfig.units; TwinDataConfig.nosuch") == \
        "as --twin.units; TwinDataConfig.nosuch"
    assert plain("first paragraph\nwrapped\n\nsecond") == "first paragraph wrapped\nsecond"


def test_defaults_are_not_doubled():
    base = {"flags": ["--robot"], "dest": "robot", "metavar": "{None}|STR", "required": False,
            "switch": False}
    spec = {"description": "", "groups": [{"title": "", "description": "", "options": [
        {**base, "help": "robot name; default: inferred by the reader", "default": "None"},
        {**base, "flags": ["--n"], "dest": "n", "metavar": "INT", "help": "count",
         "default": "3"},
        {**base, "flags": ["--full", "--no-full"], "dest": "full", "metavar": None,
         "help": "score all", "default": "True", "switch": True},
        {**base, "flags": ["--fast", "--no-fast"], "dest": "fast", "metavar": None,
         "help": "go fast", "default": "False", "switch": True}]}]}
    text = " ".join(cli_help.render("selfcheck", spec, 80).split())
    assert "--robot STR robot name; default: inferred by the reader --n" in text
    assert "--n INT count (default: 3)" in text
    assert "--full score all (default: on; --no-full turns it off)" in text
    assert "--fast go fast" in text and "--no-fast" not in text


# ------------------------------------------------------------------ through main()
def test_main_prints_the_verb_help(capsys):
    for args in (["evaluate", "--help"], ["evaluate", "--source", "nad", "-h"]):
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 0
        assert capsys.readouterr().out == cli_help.verb_help("evaluate")


def test_help_without_a_readable_parser_is_tyros(monkeypatch, capsys):
    """A tyro whose parser cannot be read (get_parser removed) still gives help: its own."""
    import tyro

    monkeypatch.setattr(cli_help, "cached", lambda verb: None)
    monkeypatch.delattr(tyro.extras, "get_parser")
    with pytest.raises(SystemExit) as exc:
        main(["selfcheck", "--help"])
    assert exc.value.code == 0
    assert "--n-states" in capsys.readouterr().out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"neuract {neuract.__version__}\n"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == neuract.__version__
    assert main([]) == 0 and "--version" in capsys.readouterr().out


# ------------------------------------------------------------------ a reader that went away
def _closed_stdout(args: list[str], code: str | None = None) -> subprocess.CompletedProcess:
    """Run neuract with stdout a pipe whose reader has gone (as ``| head -1`` once head
    exits): every write to it fails."""
    read, write = os.pipe()
    os.close(read)
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "neuract", *args]
    try:
        return subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=300)
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [["--help"], ["evaluate", "--help"], ["--version"]])
def test_closed_pipe_is_quiet(args):
    done = _closed_stdout(args)
    assert (done.returncode, done.stderr) == (141, "")


def test_ingest_into_a_closed_pipe_is_quiet_and_leaves_nothing_partial(tmp_path):
    from test_io_ingest import _csv_source

    src, mapping = _csv_source(tmp_path)
    out = tmp_path / "ds"
    done = _closed_stdout(["ingest", str(src), "--format", "csv", "--mapping", str(mapping),
                           "--out", str(out)])
    # progress goes to stderr (never stdout), so the only stdout write is the closing summary:
    # the dataset is complete or absent, never partial, and the exit is quiet
    assert done.returncode == 141
    assert "Traceback" not in done.stderr and "error" not in done.stderr.lower()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names in (["logs", "map.json"], ["ds", "logs", "map.json"])
    if "ds" in names:
        assert (out / "meta" / "info.json").is_file()


def test_output_into_a_closed_pipe_after_the_dataset_is_written(tmp_path):
    """The pipe found closed only once the dataset is written (a summary printed at the end):
    the dataset stays, exit 141, quietly."""
    from test_io_ingest import _csv_source

    src, mapping = _csv_source(tmp_path)
    out = tmp_path / "ds"
    code = ("import dataclasses, sys; from neuract import cli; import neuract.io.ingest as m\n"
            "orig = m.run\n"
            "def run(cfg):\n"
            "    orig(dataclasses.replace(cfg, quiet=True)); print('summary')\n"
            "m.run = run\n"
            f"sys.exit(cli.main(['ingest', {str(src)!r}, '--format', 'csv', "
            f"'--mapping', {str(mapping)!r}, '--out', {str(out)!r}]))")
    done = _closed_stdout([], code)
    assert (done.returncode, done.stderr) == (141, "")
    assert (out / "meta" / "info.json").is_file()


def test_another_broken_pipe_is_an_error_message():
    """A broken pipe that is not the output's (a worker's, say) stays an error, exit 1."""
    code = ("import sys; from neuract import cli; import neuract.twin.verb as m\n"
            "def run(cfg): raise BrokenPipeError(32, 'Broken pipe')\n"
            "m.run = run; sys.exit(cli.main(['twin', '--out', 'x']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1
    assert "neuract twin: error:" in done.stderr and "Traceback" not in done.stderr
