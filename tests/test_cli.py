"""The command-line entry point: usage, exit statuses, ``python -m neuract``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from neuract.cli import VERBS, main


def test_usage_and_unknown_verb(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert all(v in out for v in VERBS)
    assert main(["nosuch"]) == 2
    assert "unknown verb 'nosuch'" in capsys.readouterr().err


def test_python_dash_m_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "neuract", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "selfcheck" in done.stdout


def test_a_failed_selfcheck_exits_1(capsys):
    """A 0.3 s step makes the rollout check fail: the verb must say so in its exit status."""
    assert main(["selfcheck", "--robot", "planar2", "--n-states", "5", "--seconds", "3",
                 "--dt", "0.3"]) == 1
    captured = capsys.readouterr()
    assert "SOME CHECKS FAILED" in captured.out and "checks failed" in captured.err
    assert main(["selfcheck", "--robot", "planar2", "--n-states", "5", "--seconds", "0.2"]) == 0


@pytest.mark.parametrize("verb", ["fit", "twin"])
def test_ctrl_c_is_a_message_not_a_traceback(verb, monkeypatch, capsys):
    import importlib

    module = importlib.import_module(VERBS[verb][0])

    def interrupted(cfg):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "run", interrupted)
    args = {"fit": ["--data", "x"], "twin": ["--out", "x"]}[verb]
    assert main([verb, *args]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err
    assert ("resume" in err) == (verb == "fit")


@pytest.mark.parametrize("args", [
    ["evaluate", "--source", "dataset"],  # --data missing
    ["evaluate", "--source", "nosuch"],
    ["evaluate", "--source", "twin", "--experiment.lr", "-1"],
    ["evaluate", "--source", "nad", "--experiment.sim-prior", "foo"],
    ["demo", "--experiment.baseline-iters", "0", "--experiment.sim-prior", "servo",
     "--experiment.ident"],
    ["demo", "--experiment.calibration-fraction", "2"],
])
def test_bad_experiment_options_write_nothing(args, tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*args, "--out", str(out), "--quiet"]) == 1
    assert "error" in capsys.readouterr().err
    assert not out.exists()


def test_twin_refuses_an_existing_out_before_generating(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (tmp_path / "file").write_text("x")
    for out, msg in ((taken, "--overwrite"), (tmp_path / "file", "not a directory")):
        assert main(["twin", "--out", str(out), "--minutes", "30"]) == 1  # refused at once
        assert msg in capsys.readouterr().err
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize("args,match", [
    (["selfcheck", "--n-states", "0"], "--n-states"),
    (["selfcheck", "--seconds", "nan"], "--seconds"),
    (["selfcheck", "--dt", "-0.1"], "--dt"),
    (["selfcheck", "--dt", "1e-9", "--seconds", "10"], "steps"),
    (["fit", "--data", "x", "--duration", "-1"], "--duration"),
    (["fit", "--data", "x", "--val-fraction", "1.5"], "--val-fraction"),
    (["twin", "--out", "never", "--episode-s", "1e9"], "physics steps"),
])
def test_bad_numeric_options_are_named(args, match, capsys):
    assert main(args) == 1
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


def test_library_field_names_read_as_options(capsys):
    from neuract.cli import cli_names

    msg = "ExperimentConfig.sim_prior='x'; TwinDataConfig.worn_train_minutes = -1"
    assert cli_names("demo", msg) == "--experiment.sim-prior='x'; --data.worn-train-minutes = -1"
    assert cli_names("evaluate", msg).endswith("--twin.worn-train-minutes = -1")
    assert cli_names("fit", msg) == msg
    assert main(["demo", "--experiment.sim-prior", "foo", "--out", "never_written", "--quiet"]) == 1
    assert "--experiment.sim-prior='foo'" in capsys.readouterr().err
