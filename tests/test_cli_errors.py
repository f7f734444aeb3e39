"""Errors a user meets across the verbs: a robot model of another arm than the data's is
refused unless ``--force-robot``; a verb that fails leaves ``--out`` as it was; a missing
channel names the file, the episode and the fix; a dataset that lost its ``meta/info.json``
is said to be one; an ``--out`` below a file is one line."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from _tiny import tiny_episodes, tiny_model
from neuract.cli import main

TINY = ["--experiment.sim-steps", "2", "--experiment.est-steps", "2",
        "--experiment.baseline-iters", "0", "--experiment.sim-prior", "pd",
        "--experiment.horizons", "10", "--experiment.no-full",
        "--experiment.size.d-model", "16", "--experiment.size.d-ff", "16",
        "--experiment.size.d-trunk", "16", "--experiment.size.n-heads", "2",
        "--experiment.size.n-layers", "1", "--quiet"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Short SO-101 twin episodes as a dataset (``ds``), the same without ``qd`` (``noqd``),
    relabelled as another arm's (``so100``), and without ``meta/info.json`` (``noinfo``);
    tiny simulator- and estimator-mode checkpoints trained on them."""
    from neuract.data import write_dataset
    from neuract.neuralactuator import save_checkpoint
    from neuract.pipeline.setups import so101_setup

    root = tmp_path_factory.mktemp("errs")
    eps = [tr.slice(0, 100) for tr in tiny_episodes(0.2)]  # two episodes of 1.6 s: quick
    robot = so101_setup().robot
    paths = {"root": root, "ds": write_dataset(eps, root / "ds"),
             "noqd": write_dataset([tr.replace(drop=("qd",)) for tr in eps], root / "noqd"),
             "so100": write_dataset([tr.replace(robot="so100") for tr in eps],
                                    root / "so100")}
    shutil.copytree(paths["ds"], root / "noinfo")
    (root / "noinfo" / "meta" / "info.json").unlink()
    paths["noinfo"] = root / "noinfo"
    for mode in ("simulator", "estimator"):
        paths[mode] = save_checkpoint(tiny_model(eps, robot, mode, steps=1, horizon=3),
                                      root / mode)
    (root / "afile").write_text("not a folder")
    return paths


def _args(env, verb: str, data: str, out: Path, *extra: str) -> list[str]:
    d = str(env[data])
    base = {
        "fit": ["fit", "--data", d, "--train.stage-iters", "1", "--train.horizons", "0.2",
                "--train.runs-per-iter", "2", "--train.windows-per-run", "2"],
        "identify": ["identify", "--data", d],
        "simulate": ["simulate", "--checkpoint", str(env["simulator"]), "--data", d, "--quiet"],
        "estimate": ["estimate", "--checkpoint", str(env["estimator"]), "--data", d,
                     "--quiet"],
        "adapt": ["adapt", "--checkpoint", str(env["estimator"]), "--data", d, "--steps", "1",
                  "--batch", "2", "--holdout", "0", "--quiet"],
        "evaluate": ["evaluate", "--source", "dataset", "--data", d, *TINY],
    }[verb]
    return [*base, "--out", str(out), *extra]


def _one_line_error(argv: list[str], capsys) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


# ------------------------------------------------------------------ robot of another arm
@pytest.mark.parametrize("verb, data, robot", [
    ("fit", "ds", "omx"),
    ("identify", "ds", "omx"),
    ("simulate", "ds", "omx"),
    ("adapt", "ds", "omx"),
    ("evaluate", "so100", "so101"),  # evaluate fits SO-101 or OMX setups: another SO arm
])
def test_a_robot_model_of_another_arm_is_refused_unless_forced(env, verb, data, robot,
                                                                tmp_path, capsys):
    """The data name their arm (so101): a bundled model of another one with as many joints
    (omx: 6) is refused in one line naming both arms and --force-robot, before anything is
    written; with --force-robot the robot check lets it through, with no warning."""
    out = tmp_path / "out"
    err = _one_line_error(_args(env, verb, data, out, "--robot", robot), capsys)
    arm = "so100" if data == "so100" else "so101"
    assert f"--robot {robot!r} is another arm than the robot of --data" in err, err
    assert repr(arm) in err and "--force-robot" in err, err
    assert not out.exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "matched by position" warning either
        if verb == "fit":  # fit's checks, without its training
            from neuract.fit.verb import FitConfig, prepare

            prepare(FitConfig(data=str(env[data]), robot=robot, force_robot=True))
            return
        if verb == "evaluate":  # past the robot check, up to its (slow) experiment
            import neuract.pipeline.evaluate_verb as ev
            from neuract.errors import SchemaError

            def reached(setup, *a, **k):
                raise SchemaError(f"the experiment on {setup.name} reached")

            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(ev, "run_experiment", reached)
                err = _one_line_error(_args(env, verb, data, out, "--robot", robot,
                                            "--force-robot"), capsys)
            assert "the experiment on so101 reached" in err, err
            assert not out.exists()  # and nothing left of the failed run
            return
        assert main(_args(env, verb, data, out, "--robot", robot, "--force-robot")) == 0
    assert out.exists()


def test_the_arm_check_compares_arms_not_spellings():
    from neuract.errors import ConfigError
    from neuract.robot.match import arm_of, check_robot_name

    assert arm_of("so101_follower") == arm_of("SO-101") == arm_of("so_101") == "so101"
    assert arm_of("omx_arm") == arm_of("omx") == "omx"
    for data_robot in ("so101_follower", "", "unknown", None):  # same arm, or none named
        check_robot_name("so101", data_robot, "--data 'd'")
    check_robot_name("omx_arm", "omx", "--data 'd'")  # the arm without its gripper
    check_robot_name("my_arm.xml", "so101", "--data 'd'")  # a file: not compared by name
    check_robot_name("pendulum", "so101", "--data 'd'")  # not a bundled arm (joints decide)
    with pytest.raises(ConfigError, match="pass --robot omx, or add --force-robot"):
        check_robot_name("so101", "omx", "--data 'd'")
    with pytest.raises(ConfigError, match="pass a model of that arm"):
        check_robot_name("so101", "koch", "--data 'd'")
    check_robot_name("so101", "koch", "--data 'd'", force=True)


# ------------------------------------------------------------------ missing channels
@pytest.mark.parametrize("verb", ["evaluate", "estimate", "adapt", "simulate"])
def test_a_missing_qd_names_file_episode_and_the_fix_and_writes_nothing(env, verb,
                                                                         tmp_path, capsys):
    for out in (tmp_path / "new" / "out", tmp_path / "empty"):
        extra = []
        if out.name == "empty":  # evaluate runs in it; the others replace it (--overwrite)
            out.mkdir()
            extra = [] if verb == "evaluate" else ["--overwrite"]
        err = _one_line_error(_args(env, verb, "noqd", out, *extra), capsys)
        assert f"--data {str(env['noqd'])!r}: episode 0 (" in err, err
        assert str(env["noqd"] / "data" / "episode_000000.parquet") in err, err
        assert "has no channel qd, required by the" in err, err
        assert "neuract ingest" in err and "--derivatives" in err, err
        if out.name == "empty":
            assert out.is_dir() and not any(out.iterdir())  # as it was
        else:
            assert not out.parent.exists()  # nothing of the path it would have made
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_evaluate_that_fails_while_running_leaves_no_out(env, tmp_path, capsys,
                                                         monkeypatch):
    """A failure after config.json was written (here: the experiment) removes --out, or
    empties an --out that was empty, unless a training state was saved to resume from."""
    import neuract.pipeline.evaluate_verb as ev
    from neuract.errors import SchemaError

    def failing(*a, out_dir=None, **k):
        assert (Path(out_dir) / "config.json").is_file()  # written by then
        raise SchemaError("the experiment failed")

    monkeypatch.setattr(ev, "run_experiment", failing)
    monkeypatch.setattr(ev, "check_split", lambda train, test: None)  # two episodes will do
    for out in (tmp_path / "a" / "out", tmp_path / "empty"):
        if out.name == "empty":
            out.mkdir()
        err = _one_line_error(_args(env, "evaluate", "ds", out), capsys)
        assert "the experiment failed" in err
        assert (out.is_dir() and not any(out.iterdir())) if out.name == "empty" \
            else not (tmp_path / "a").exists()

    def failing_after_a_state(*a, out_dir=None, **k):
        from neuract.pipeline.experiment_config import train_state_path

        train_state_path(out_dir, "simulator").parent.mkdir(parents=True, exist_ok=True)
        train_state_path(out_dir, "simulator").write_bytes(b"state")
        raise SchemaError("the experiment failed later")

    monkeypatch.setattr(ev, "run_experiment", failing_after_a_state)
    out = tmp_path / "kept"
    _one_line_error(_args(env, "evaluate", "ds", out), capsys)
    assert (out / "config.json").is_file()  # kept to resume from


def test_undone_on_error_removes_only_what_a_first_run_made(tmp_path):
    from neuract.atomic import undone_on_error

    with pytest.raises(RuntimeError), undone_on_error(tmp_path / "a" / "b") as out:
        out.mkdir(parents=True)
        (out / "f").write_text("x")
        raise RuntimeError
    assert not (tmp_path / "a").exists()
    old = tmp_path / "old"
    old.mkdir()
    (old / "earlier.json").write_text("{}")
    with pytest.raises(RuntimeError), undone_on_error(old):
        (old / "new").write_text("x")
        raise RuntimeError
    assert sorted(p.name for p in old.iterdir()) == ["earlier.json", "new"]  # not a first run
    with pytest.raises(KeyboardInterrupt), undone_on_error(tmp_path / "c") as out:
        out.mkdir()
        raise KeyboardInterrupt  # an interrupt keeps what a rerun resumes from
    assert (tmp_path / "c").is_dir()


# ------------------------------------------------------------------ a dataset without info
@pytest.mark.parametrize("verb", ["fit", "identify", "estimate", "evaluate", "simulate",
                                  "adapt"])
def test_a_dataset_missing_its_info_json_is_named_as_one(env, verb, tmp_path, capsys):
    out = tmp_path / "out"
    err = _one_line_error(_args(env, verb, "noinfo", out), capsys)
    assert "looks like a neuract dataset (data/episode_000000.parquet" in err, err
    assert f"{env['noinfo'] / 'meta' / 'info.json'} is missing" in err, err
    for wrong in ("BAM", "*.csv", "NAD"):
        assert wrong not in err, err
    assert not out.exists()


def test_a_folder_that_is_no_dataset_is_still_read_as_logs(tmp_path):
    from neuract.data.dataset import is_dataset

    assert is_dataset(tmp_path) is False  # an empty folder: not a dataset, nothing refused
    (tmp_path / "run1.json").write_text("{}")
    assert is_dataset(tmp_path) is False
    assert is_dataset(tmp_path / "nosuch") is False


# ------------------------------------------------------------------ --out below a file
@pytest.mark.parametrize("verb", ["ingest", "twin", "fit", "estimate", "evaluate"])
def test_an_out_below_a_file_is_one_line(env, verb, capsys):
    out = env["root"] / "afile" / "sub"
    argv = {"ingest": ["ingest", str(env["ds"]), "--format", "neuract", "--quiet",
                       "--out", str(out)],
            "twin": ["twin", "--minutes", "0.1", "--episode-s", "6", "--units", "1",
                     "--out", str(out)]}.get(verb)
    err = _one_line_error(argv or _args(env, verb, "ds", out), capsys)
    assert f"{str(out)!r} cannot be created: {str(env['root'] / 'afile')!r} exists and is " \
           "not a directory" in err, err
    assert "Errno" not in err
    assert (env["root"] / "afile").read_text() == "not a folder"


def test_an_atomic_write_below_a_file_names_the_path(tmp_path):
    from neuract.atomic import write_json
    from neuract.errors import ConfigError

    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="/f' exists and is not a directory"):
        write_json(tmp_path / "f" / "g" / "x.json", {})
    assert not (tmp_path / "f" / "g").exists() and (tmp_path / "f").read_text() == "x"
