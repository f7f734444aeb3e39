"""CLI audit of ``twin``, ``evaluate``, ``demo``, ``adapt`` and ``selfcheck``: bad options are
refused with one line naming the option, before anything is written or trained."""

from __future__ import annotations

import json

import numpy as np
import pytest

from neuract.cli import main
from neuract.errors import ConfigError

TINY = ["--experiment.sim-steps", "4", "--experiment.est-steps", "4",
        "--experiment.baseline-iters", "0", "--experiment.neural-baselines",
        "--experiment.sim-prior", "pd", "--experiment.horizons", "10", "--experiment.no-full",
        "--experiment.size.d-model", "16", "--experiment.size.d-ff", "16",
        "--experiment.size.d-trunk", "16", "--experiment.size.n-heads", "2",
        "--experiment.size.n-layers", "1", "--quiet"]
TWIN = ["evaluate", "--source", "twin", "--twin.minutes", "5", "--twin.units", "1", *TINY]


def _refused(args, capsys, *expected: str, absent: tuple[str, ...] = ()) -> str:
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for e in expected:
        assert e in err, err
    for a in absent:
        assert a not in err, err
    return err


@pytest.fixture
def no_generation(monkeypatch):
    """Twin data generation fails the test (a refusal must come before it)."""
    import importlib

    def generate(*a, **k):
        raise AssertionError("twin data generated before the options were refused")

    monkeypatch.setattr(importlib.import_module("neuract.twin.generate"), "generate", generate)
    monkeypatch.setattr(importlib.import_module("neuract.twin"), "generate", generate)


# ------------------------------------------------------------------ 1. negative seeds
@pytest.mark.parametrize("args, option", [
    (["twin", "--out", "OUT", "--seed", "-1"], "--seed"),
    ([*TWIN, "--out", "OUT", "--twin.seed", "-1"], "--twin.seed"),
    ([*TWIN, "--out", "OUT", "--experiment.seed", "-1"], "--experiment.seed"),
    (["demo", "--out", "OUT", "--data.seed", "-1", "--data.minutes", "0.5", *TINY],
     "--data.seed"),
    (["adapt", "--checkpoint", "CK", "--data", "DATA", "--out", "OUT", "--seed", "-1"],
     "--seed"),
    (["selfcheck", "--robot", "planar2", "--seed", "-1"], "--seed"),
])
def test_negative_seeds_are_refused_naming_the_option(args, option, tmp_path, capsys,
                                                       no_generation):
    args = [str(tmp_path / a) if a in ("OUT", "CK", "DATA") else a for a in args]
    _refused(args, capsys, f"{option} -1; expected an integer >= 0")
    assert not (tmp_path / "OUT").exists()


def test_generate_config_refuses_a_negative_seed():
    from neuract.twin import GenerateConfig

    with pytest.raises(ConfigError, match=r"GenerateConfig\.seed = -1; expected an integer >= 0"):
        GenerateConfig(seed=-1).validate()


# ------------------------------------------------------------------ 2. nothing written
@pytest.mark.parametrize("extra, option", [
    (["--twin.test-fraction", "1.5"], "--twin.test-fraction = 1.5"),
    (["--experiment.size.n-heads", "3"], "--experiment.size.n-heads = 3"),
    (["--experiment.horizons", "0"], "--experiment.horizons = (0,)"),
    (["--twin.minutes", "-1"], "--twin.minutes = -1.0; expected a finite number > 0 minutes"),
])
def test_evaluate_refuses_before_writing_or_training(extra, option, tmp_path, capsys):
    out = tmp_path / "ev"
    _refused([*TWIN, *extra, "--out", str(out)], capsys, option)
    assert not out.exists()


def test_demo_refuses_bad_minutes_before_writing(tmp_path, capsys):
    out = tmp_path / "d"
    _refused(["demo", "--out", str(out), "--data.minutes", "-1", *TINY], capsys,
             "--data.minutes = -1.0; expected a finite number > 0 minutes",
             absent=("and > 0", "minutes = -1.0; expected a finite number >= 0.0"))
    assert not out.exists()


def test_a_twin_split_without_test_episodes_writes_nothing(tmp_path, monkeypatch):
    """The split is checked once the data is generated, before config.json is written."""
    from neuract.pipeline import twin_experiment as te

    monkeypatch.setattr(te, "twin_split", lambda data, progress=None: (["ep"], [], 0))
    cfg = te.TwinExperimentConfig(tmp_path / "run", te.TwinDataConfig(minutes=5.0, units=1))
    with pytest.raises(ConfigError, match="1 for training and 0 for testing"):
        te.run_twin_experiment(cfg)
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ 3. step counts
@pytest.mark.parametrize("option, mode", [("sim-steps", "simulator"),
                                          ("est-steps", "estimator")])
def test_negative_step_counts_are_refused(option, mode, tmp_path, capsys):
    """-1 used to drop that NeuralActuator silently, as 0 does (documented: see below)."""
    out = tmp_path / "ev"
    _refused([*TWIN, f"--experiment.{option}", "-1", "--out", str(out)], capsys,
             f"--experiment.{option} = -1; expected an integer >= 0 (0: no {mode}-mode")
    assert not out.exists()


def test_step_count_help_says_zero_skips_the_mode(capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(0: no simulator-mode NeuralActuator is trained" in text
    assert "(0: no estimator-mode NeuralActuator is trained" in text


# ------------------------------------------------------------------ 4. messages
def test_twin_names_episode_s_as_its_option(tmp_path, capsys, no_generation):
    _refused(["twin", "--out", str(tmp_path / "t"), "--episode-s", "0"], capsys,
             "--episode-s = 0.0", absent=("sim.episode_s",))


def test_library_dotted_field_names_read_as_options():
    from neuract.cli import cli_names

    msg = "ExperimentConfig.size.d_model = 16 is not divisible by ExperimentConfig.size.n_heads"
    assert cli_names("evaluate", msg) == ("--experiment.size.d-model = 16 is not divisible by "
                                          "--experiment.size.n-heads")
    gen = "GenerateConfig.sim.episode_s = 0; GenerateConfig.minutes = 1"
    assert cli_names("twin", gen) == "--episode-s = 0; --minutes = 1"
    assert cli_names("evaluate", gen) == "--twin.episode-s = 0; --twin.minutes = 1"
    assert cli_names("demo", gen) == "--data.episode-s = 0; --data.minutes = 1"


def test_evaluate_with_too_few_twin_episodes_says_what_to_change(tmp_path, capsys,
                                                                 no_generation):
    out = tmp_path / "ev"
    _refused([*TWIN, "--twin.minutes", "2", "--out", str(out)], capsys,
             "--twin.minutes = 2 gives 4 episodes", "0 for testing", "more --twin.minutes")
    assert not out.exists()


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory):
    """A twin dataset of 4 episodes of 6 s, one per task."""
    out = tmp_path_factory.mktemp("ds") / "ds4"
    assert main(["twin", "--out", str(out), "--minutes", "0.4", "--episode-s", "6",
                 "--units", "1", "--tasks", "free", "lift", "pick", "push"]) == 0
    return out


def test_evaluate_on_too_few_dataset_episodes_says_what_to_change(small_dataset, tmp_path,
                                                                  capsys):
    _refused(["evaluate", "--source", "dataset", "--data", str(small_dataset), *TINY,
              "--out", str(tmp_path / "ev")], capsys, "got 4 and 0",
             "give more episodes of each task")


def test_evaluate_out_on_a_dataset_says_it_holds_a_dataset(small_dataset, capsys):
    before = sorted(p.name for p in small_dataset.iterdir())
    for source in (["--source", "twin", "--twin.minutes", "5", "--twin.units", "1"],
                   ["--source", "dataset", "--data", str(small_dataset)]):
        err = _refused(["evaluate", *source, *TINY, "--out", str(small_dataset)], capsys,
                       "holds a dataset", absent=("other options", "then,"))
        assert len(err) < 400
    assert sorted(p.name for p in small_dataset.iterdir()) == before


def test_evaluate_on_pendulum_data_says_it_needs_arm_data(tmp_path, capsys):
    from neuract.data import Trajectory, TrajectoryMeta, write_dataset

    t = np.arange(50) * 0.01
    trajs = [Trajectory({"t": t, "q": np.zeros((50, 1)), "qd": np.zeros((50, 1)),
                         "q_goal": np.zeros((50, 1))},
                        TrajectoryMeta(robot="pendulum", joint_names=("p",), rate_hz=100.0,
                                       name=f"run{i}", labels={"task": "free"}))
             for i in range(4)]
    write_dataset(trajs, tmp_path / "pend")
    out = tmp_path / "ev"
    _refused(["evaluate", "--source", "dataset", "--data", str(tmp_path / "pend"), *TINY,
              "--out", str(out)], capsys, "'pendulum'", "need arm data",
             "accepted: ['so101', 'omx']", absent=("twin experiment robot",))
    assert not out.exists()


def test_check_rerun_names_another_kind_of_run_without_listing_options(tmp_path):
    from neuract.config import check_rerun
    from neuract.pipeline.twin_experiment import TwinExperimentConfig

    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"type": "EvaluateConfig",
                                                 "config": {"source": "dataset"}}))
    (out / "results.json").write_text("{}")
    with pytest.raises(ConfigError) as e:
        check_rerun(TwinExperimentConfig(out), out)
    msg = str(e.value)
    assert "--experiment" not in msg
    # both runs are named as the commands that write them
    assert ("holds the output of neuract evaluate --source nad or --source dataset" in msg
            and "not a run of a twin experiment (neuract evaluate --source twin" in msg), msg
    (out / "config.json").write_text(json.dumps({"type": "SomethingElse", "config": {}}))
    with pytest.raises(ConfigError, match="holds the output of another kind of run"):
        check_rerun(TwinExperimentConfig(out), out)


# ------------------------------------------------------------------ 5. amounts of data
def test_twin_refuses_more_minutes_than_memory_holds(tmp_path, capsys, no_generation):
    _refused(["twin", "--out", str(tmp_path / "t"), "--minutes", "1e9"], capsys,
             "--minutes = 1e+09 needs about", "GB available")
    assert not (tmp_path / "t").exists()


def test_memory_bound_follows_the_available_memory(monkeypatch):
    import importlib

    from neuract.twin import GenerateConfig

    GenerateConfig(minutes=60.0).validate()
    monkeypatch.setattr(importlib.import_module("neuract.twin.generate"), "available_memory",
                        lambda: 100e6)  # 100 MB
    GenerateConfig(minutes=2.0).validate()
    with pytest.raises(ConfigError, match=r"GenerateConfig\.minutes = 60 needs about"):
        GenerateConfig(minutes=60.0).validate()


def test_twin_refuses_less_than_one_episode(tmp_path, capsys, no_generation):
    _refused(["twin", "--out", str(tmp_path / "t"), "--minutes", "0.001"], capsys,
             "--minutes = 0.001 is less than one episode (--episode-s = 30 s")
    assert not (tmp_path / "t").exists()


def test_twin_pretrain_refuses_less_than_one_episode():
    from neuract.pipeline.nad_experiment import TwinPretrainConfig

    with pytest.raises(ConfigError, match=r"TwinPretrainConfig\.minutes = 0\.1 is less than one"):
        TwinPretrainConfig(minutes=0.1).validate()
