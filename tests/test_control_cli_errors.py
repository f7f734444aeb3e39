"""`neuract identify` / `neuract control`: bad input is refused with a one-line error naming
the option or file, the value and what is accepted (exit 1, no traceback); degenerate
results (every episode failed, never settled) are explained and written as strict JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from neuract.cli import main

torch.set_num_threads(1)

SHORT = ["--duration", "0.1", "--speeds", "1", "--payloads", "0"]  # one 25-step episode


def _strict_json(path):
    """Parse ``path`` as strict JSON (bare NaN/Infinity rejected)."""
    def bad(c):
        raise ValueError(f"non-JSON constant {c} in {path}")

    return json.loads(path.read_text(), parse_constant=bad)


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


def _npz(path, n=60, dof=2, seed=0, **override):
    rng = np.random.default_rng(seed)
    arrs = {k: rng.standard_normal((n, dof)) for k in ("q", "qd", "qdd", "tau")}
    arrs.update(override)
    np.savez(path, **{k: v for k, v in arrs.items() if v is not None})
    return path


@pytest.fixture()
def so101_ident(tmp_path):
    """A least-squares model identified on (random) SO-101 data."""
    out = tmp_path / "so101_ls"
    assert main(["identify", "--data", str(_npz(tmp_path / "so.npz", dof=6)),
                 "--robot", "so101", "--out", str(out)]) == 0
    return out


# --- control: a model from another robot ---------------------------------------------------

@pytest.mark.parametrize("option", ["--model", "--plant"])
def test_control_refuses_model_identified_on_another_robot(so101_ident, tmp_path, capsys,
                                                           option):
    out = tmp_path / "ctrl"
    rc = main(["control", option, str(so101_ident), "--out", str(out), *SHORT])
    err = _err(capsys)
    assert rc == 1 and not out.exists()
    assert f"{option} '{so101_ident}'" in err
    assert "6 joints" in err and "'so101'" in err and "--robot 'planar2' has 2" in err


def test_control_refuses_learned_model_of_other_dof(tmp_path, capsys):
    ident = tmp_path / "mlp"
    assert main(["identify", "--data", str(_npz(tmp_path / "d.npz", dof=3)), "--model", "mlp",
                 "--epochs", "1", "--out", str(ident)]) == 0
    capsys.readouterr()
    rc = main(["control", "--model", str(ident), "--out", str(tmp_path / "c"), *SHORT])
    err = _err(capsys)
    assert rc == 1 and "3 joints" in err and "has 2" in err


def test_control_refuses_model_with_other_joint_names(tmp_path, capsys):
    ident = tmp_path / "ls"
    assert main(["identify", "--data", str(_npz(tmp_path / "d.npz")), "--robot", "planar2",
                 "--out", str(ident)]) == 0
    params = json.loads((ident / "params.json").read_text())
    assert params["n_dof"] == 2 and params["joint_names"] == ["joint1", "joint2"]
    params["joint_names"] = ["a", "b"]
    (ident / "params.json").write_text(json.dumps(params))
    capsys.readouterr()
    rc = main(["control", "--model", str(ident), "--out", str(tmp_path / "c"), *SHORT])
    err = _err(capsys)
    assert rc == 1 and "['a', 'b']" in err and "['joint1', 'joint2']" in err


@pytest.mark.parametrize("option", ["--model", "--plant"])
def test_control_unknown_model_dir_names_the_option(tmp_path, capsys, option):
    rc = main(["control", option, "nope", "--out", str(tmp_path / "c"), *SHORT])
    err = _err(capsys)
    assert rc == 1 and f"{option} 'nope'" in err and "accepted" in err


# --- control: numeric options ----------------------------------------------------------------

@pytest.mark.parametrize("args, needle", [
    (["--payloads", "-5"], "--payloads -5"),
    (["--payloads", "nan"], "--payloads nan"),
    (["--amplitude", "nan"], "--amplitude nan"),
    (["--noise-q", "-1"], "--noise-q -1"),
    (["--noise-q", "nan"], "--noise-q nan"),
    (["--noise-qd", "inf"], "--noise-qd inf"),
    (["--fail-tol", "0"], "--fail-tol 0"),
    (["--settle-tol", "-1"], "--settle-tol -1"),
    (["--speeds", "0"], "--speeds 0"),
    (["--speeds", "1000"], "--speeds 1000"),
    (["--dt", "nan"], "--dt nan"),
    (["--dt", "0"], "--dt 0"),
    (["--dt", "-0.01"], "--dt -0.01"),
    (["--duration", "nan"], "--duration nan"),
    (["--duration", "-1"], "--duration -1"),
    (["--dt", "1e-9", "--duration", "1e3"], "control steps per episode"),
    (["--kp", "-1"], "--kp -1"),
    (["--tau-limit", "nan"], "--tau-limit nan"),
    (["--controller", "nope"], "--controller 'nope'"),
    (["--home", "nope"], "--home 'nope'"),
    (["--plant", "x", "--payloads", "0.5"], "--payloads 0.5"),
])
def test_control_rejects_bad_numbers_up_front(tmp_path, capsys, args, needle):
    out = tmp_path / "c"
    base = {"--duration": "0.1", "--speeds": "1", "--payloads": "0"}
    for k in args[::2]:
        base.pop(k, None)
    rc = main(["control", "--out", str(out), *args, *[x for kv in base.items() for x in kv]])
    err = _err(capsys)
    assert rc == 1 and not out.exists()
    assert needle in err and "accepted" in err
    assert "noise_q" not in err  # CLI spelling, not the field name


def test_control_existing_out_asks_for_overwrite_flag(tmp_path, capsys):
    out = tmp_path / "c"
    out.mkdir()
    rc = main(["control", "--out", str(out), *SHORT])
    err = _err(capsys)
    assert rc == 1 and "--overwrite" in err and "overwrite=True" not in err


# --- control: degenerate results -------------------------------------------------------------

def test_control_all_failed_is_explained_and_strict_json(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["control", "--out", str(out), "--fail-tol", "1e-12", *SHORT]) == 0
    stdout = capsys.readouterr().out
    assert "all 1 episodes failed" in stdout and "--fail-tol 1e-12" in stdout
    assert "nan" not in stdout.lower()
    rep = _strict_json(out / "report.json")
    assert rep["summary"]["failure_rate"] == 1.0 and rep["summary"]["rms"] is None
    assert rep["by_payload"]["0 kg"]["settling_time"] is None
    md = (out / "report.md").read_text()
    assert "all failed" in md and "nan" not in md.lower()


def test_control_never_settled_is_explained(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["control", "--out", str(out), "--settle-tol", "1e-12", *SHORT]) == 0
    stdout = capsys.readouterr().out
    assert "never settled" in stdout and "nan" not in stdout.lower()
    rep = _strict_json(out / "report.json")
    assert rep["episodes"][0]["settling_time"] is None
    assert rep["summary"]["failure_rate"] == 0.0 and rep["summary"]["rms"] > 0
    md = (out / "report.md").read_text()
    assert "never settled" in md and "nan" not in md.lower()


# --- identify: bad files ---------------------------------------------------------------------

def _identify(path, tmp_path, *extra):
    return main(["identify", "--data", str(path), "--model", "mlp", "--epochs", "1",
                 "--out", str(tmp_path / "ident"), *extra])


def test_identify_rejects_empty_and_truncated_npz(tmp_path, capsys):
    good = _npz(tmp_path / "good.npz")
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    trunc = tmp_path / "trunc.npz"
    trunc.write_bytes(good.read_bytes()[:300])
    single = tmp_path / "single.npz"
    with open(single, "wb") as f:
        np.save(f, np.zeros((10, 2)))
    for path in (empty, trunc, single):
        rc = _identify(path, tmp_path)
        err = _err(capsys)
        assert rc == 1 and f"--data '{path}'" in err and "q, qd, tau" in err
        assert not (tmp_path / "ident").exists()


@pytest.mark.parametrize("override, needle", [
    ({"qd": np.zeros((40, 2))}, "channel 'qd' has shape (40, 2) but 'q' has (60, 2)"),
    ({"tau": np.zeros((60, 3))}, "channel 'tau' has shape (60, 3)"),
    ({"q": np.zeros((60, 2, 2))}, "channel 'q' has shape (60, 2, 2)"),
    ({"qd": None}, "channel 'qd' missing"),
    ({"tau": np.full((60, 2), np.nan)}, "channel 'tau' holds NaN/inf"),
    ({"q": np.array([["a", "b"]] * 60)}, "channel 'q' has dtype"),
    ({"t": np.r_[np.arange(30), np.arange(30)] * 0.01}, "'t' is not strictly increasing"),
    ({"t": np.arange(10) * 0.01}, "'t' has 10 samples but 'q' has 60"),
])
def test_identify_rejects_bad_npz_contents(tmp_path, capsys, override, needle):
    path = _npz(tmp_path / "bad.npz", **override)
    rc = _identify(path, tmp_path)
    err = _err(capsys)
    assert rc == 1 and needle in err and f"--data '{path}'" in err


def test_identify_rejects_too_few_samples(tmp_path, capsys):
    path = _npz(tmp_path / "one.npz", n=1)
    assert _identify(path, tmp_path) == 1
    err = _err(capsys)
    assert "1 samples" in err and "--test-fraction" in err and "at least 2" in err
    # no qdd: the Savitzky-Golay differentiation needs 5 samples
    path = _npz(tmp_path / "four.npz", n=4, qdd=None, t=np.arange(4) * 0.01)
    assert _identify(path, tmp_path, "--test-fraction", "0.5") == 1
    err = _err(capsys)
    assert "--sg-window" in err and "at least 5 samples" in err


def test_identify_without_qdd_differentiates_short_episode(tmp_path, capsys):
    path = _npz(tmp_path / "ok.npz", n=12, qdd=None, t=np.arange(12) * 0.01)
    assert _identify(path, tmp_path) == 0
    rep = _strict_json(tmp_path / "ident" / "report.json")
    assert rep["n_train"] + rep["n_test"] == 12


@pytest.mark.parametrize("args, needle", [
    (["--epochs", "0"], "--epochs 0"),
    (["--max-samples", "0"], "--max-samples 0"),
    (["--sg-window", "-5"], "--sg-window -5"),
    (["--test-fraction", "nan"], "--test-fraction nan"),
    (["--test-fraction", "1"], "--test-fraction 1"),
    (["--rate-hz", "-1"], "--rate-hz -1"),
    (["--model", "nope"], "--model 'nope'"),
])
def test_identify_rejects_bad_options(tmp_path, capsys, args, needle):
    path = _npz(tmp_path / "d.npz")
    rc = main(["identify", "--data", str(path), "--out", str(tmp_path / "ident"), *args])
    err = _err(capsys)
    assert rc == 1 and needle in err and "accepted" in err
    assert "model=" not in err


def test_identify_missing_data_and_existing_out(tmp_path, capsys):
    rc = main(["identify", "--data", str(tmp_path / "nope.npz"), "--out", str(tmp_path / "o")])
    err = _err(capsys)
    assert rc == 1 and "--data" in err and "no such file" in err
    out = tmp_path / "o"
    out.mkdir()
    rc = main(["identify", "--data", str(_npz(tmp_path / "d.npz")), "--model", "mlp",
               "--out", str(out)])
    err = _err(capsys)
    assert rc == 1 and "--overwrite" in err and "overwrite=True" not in err


def test_identify_robot_of_other_dof(tmp_path, capsys):
    rc = main(["identify", "--data", str(_npz(tmp_path / "d.npz", dof=6)), "--robot",
               "planar2", "--out", str(tmp_path / "o")])
    err = _err(capsys)
    assert rc == 1 and "--robot 'planar2' has 2 joint(s)" in err and "has 6" in err


def test_identify_refuses_another_arms_model_unless_forced(tmp_path, capsys):
    """A dataset of one arm (so101) identified with another arm's model of as many joints
    (omx): refused in one line, as simulate, adapt, fit and evaluate do; with --force-robot
    matched by position, without a warning (it was asked for)."""
    data = tmp_path / "tw"
    assert main(["twin", "--minutes", "0.5", "--units", "1", "--out", str(data)]) == 0
    capsys.readouterr()
    argv = ["identify", "--data", str(data), "--robot", "omx", "--model", "least_squares"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 1
    err = _err(capsys)
    assert "'omx' is another arm than the robot of --data" in err and "'so101'" in err
    assert "--force-robot" in err and not (tmp_path / "o").exists()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main([*argv, "--force-robot", "--out", str(tmp_path / "o")]) == 0

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the arm the data were logged on: no warning
        assert main(["identify", "--data", str(data), "--robot", "so101", "--model",
                     "least_squares", "--out", str(tmp_path / "o2")]) == 0
