"""CLI audit of ``neuract fit`` (and the joint check ``identify`` is to share): where --out may
lie, what a failed run leaves, options refused up front with one line naming the option, the
value and what is accepted, the robot's joints against the data's, --arm-mass."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from neuract.cli import main
from neuract.data import Trajectory, TrajectoryMeta, write_dataset

QUICK = ["--train.horizons", "0.2", "--train.stage-iters", "2", "--train.val-every", "2"]


def _runs(n_runs: int = 2, joints: tuple[str, ...] = ("pendulum",), robot: str = "pendulum",
          labels: dict | None = None, T: int = 40, rate: float = 100.0) -> list[Trajectory]:
    """Runs whose positions lag smooth goals (enough to fit on, not a physical truth)."""
    t = np.arange(T) / rate
    out = []
    for e in range(n_runs):
        goal = np.stack([0.3 * np.sin(2 * np.pi * (0.5 + 0.2 * j + 0.1 * e) * t)
                         for j in range(len(joints))], 1)
        q = np.concatenate([goal[:1], goal[:-1]])
        ch = {"t": t, "q": q, "qd": np.gradient(q, t, axis=0), "q_goal": goal}
        lab = {"mass": 0.5, "length": 0.1, "kp": 32} if labels is None else labels
        out.append(Trajectory(ch, TrajectoryMeta(robot=robot, joint_names=joints,
                                                 name=f"run{e}", rate_hz=rate,
                                                 labels=dict(lab))))
    return out


@pytest.fixture
def pend(tmp_path):
    """A 1-joint pendulum dataset (mass, length 0.1 m, kp labels)."""
    write_dataset(_runs(), tmp_path / "ds")
    return tmp_path / "ds"


def _fit(capsys, data, out, *extra) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["fit", "--data", str(data), "--out", str(out), *QUICK, *extra])
    return rc, capsys.readouterr().err


def _tree(path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


# 1. --out may not be, hold or lie inside the data; nor a non-empty directory of another kind
@pytest.mark.parametrize("where", ["is", "inside", "holds"])
@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_fit_refuses_an_out_that_is_holds_or_lies_inside_its_data(pend, capsys, where,
                                                                  overwrite):
    before = _tree(pend.parent)
    out = {"is": pend, "inside": pend / "fit", "holds": pend.parent}[where]
    rc, err = _fit(capsys, pend, out, *overwrite)
    assert rc == 1 and f"--out {str(out)!r} " in err and "--data" in err, err
    assert _tree(pend.parent) == before  # the dataset's files (config.json too) untouched
    assert not (pend / "fit").exists() and "Traceback" not in err


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_fit_refuses_a_non_empty_directory_that_is_not_a_fit_run(pend, tmp_path, capsys,
                                                                 overwrite):
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    rc, err = _fit(capsys, pend, out, *overwrite)
    assert rc == 1 and "not a fit's output" in err and "--out" in err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    (out / "keep.txt").unlink()  # empty: a fit may write there, and rerun into its own run
    assert _fit(capsys, pend, out)[0] == 0
    assert _fit(capsys, pend, out)[0] == 0


# 2. a failed run writes nothing (checked up front) or removes what it wrote
def test_fit_with_data_the_pendulum_cannot_take_writes_nothing(tmp_path, capsys):
    write_dataset(_runs(labels={"kp": 32}), tmp_path / "nolabels")
    write_dataset(_runs(joints=("a", "b"), robot="planar2"), tmp_path / "arm")
    for data, says in (("nolabels", "lacks 'mass'"), ("arm", "--robot planar2")):
        rc, err = _fit(capsys, tmp_path / data, tmp_path / "o")
        assert rc == 1 and says in err and "--robot 'pendulum'" in err, err
        assert not (tmp_path / "o").exists()


def test_fit_failing_while_training_removes_what_it_wrote(pend, tmp_path, capsys,
                                                          monkeypatch):
    import neuract.fit.identify as ident
    from neuract.errors import ConfigError

    def fails(*a, **k):
        raise ConfigError("non-finite training loss at iteration 1; lower train.lr or raise "
                          "train.substeps")

    monkeypatch.setattr(ident, "fit", fails)
    rc, err = _fit(capsys, pend, tmp_path / "new" / "o")
    assert rc == 1 and not (tmp_path / "new").exists()
    # 5. fit's own library messages name its options
    assert "lower --train.lr or raise --train.substeps" in err, err
    (tmp_path / "empty").mkdir()
    assert _fit(capsys, pend, tmp_path / "empty")[0] == 1
    assert not list((tmp_path / "empty").iterdir())

    def interrupted(*a, **k):  # an interrupt keeps its state to resume from
        raise KeyboardInterrupt

    monkeypatch.setattr(ident, "fit", interrupted)
    assert _fit(capsys, pend, tmp_path / "o")[0] == 130
    assert (tmp_path / "o" / "config.json").is_file()


def test_fit_refuses_a_label_only_some_runs_carry_before_writing(tmp_path, capsys):
    runs = _runs(3)
    runs[1] = runs[1].replace(labels={"mass": 0.5, "length": 0.1})  # no kp
    write_dataset(runs, tmp_path / "ds")
    rc, err = _fit(capsys, tmp_path / "ds", tmp_path / "o")
    assert rc == 1 and "--train.label-inputs kp" in err, err
    assert not (tmp_path / "o").exists()


# 3. + 4. bad numbers: one line naming the option, the value and what is accepted
@pytest.mark.parametrize("args,option,value", [
    (["--train.horizons", "nan"], "--train.horizons", "nan"),
    (["--train.horizons", "0"], "--train.horizons", "0.0"),
    (["--train.horizons", "-1"], "--train.horizons", "-1.0"),
    (["--train.checkpoint-every", "0"], "--train.checkpoint-every", "0"),
    (["--train.val-every", "0", "--val-fraction", "0.5"], "--train.val-every", "0"),
    (["--train.stage-iters", "0"], "--train.stage-iters", "0"),
    (["--train.stage-iters", "-3"], "--train.stage-iters", "-3"),
    (["--train.horizons", "0.2", "0.3"], "--train.stage-iters", "2"),
    (["--train.lr", "-0.03"], "--train.lr", "-0.03"),
    (["--train.lr-net", "nan"], "--train.lr-net", "nan"),
    (["--train.patience", "0"], "--train.patience", "0"),
    (["--actuator.backlash", "-1"], "--actuator.backlash", "-1.0"),
    (["--actuator.backlash", "0.5"], "--actuator.backlash", "0.5"),
    (["--actuator.delay", "nan"], "--actuator.delay", "nan"),
    (["--actuator.delay", "-0.1"], "--actuator.delay", "-0.1"),
    (["--actuator.delay", "0.5"], "--actuator.delay", "0.5"),
    (["--actuator.goal-slew", "-1"], "--actuator.goal-slew", "-1.0"),
    (["--actuator.goal-slew", "nan"], "--actuator.goal-slew", "nan"),
    (["--actuator.error-limit", "-0.2"], "--actuator.error-limit", "-0.2"),
    (["--actuator.punch", "-0.1"], "--actuator.punch", "-0.1"),
    (["--actuator.kp", "-5"], "--actuator.kp", "-5.0"),
    (["--actuator.kp", "nan", "--train.label-inputs"], "--actuator.kp", "nan"),
    (["--actuator.kt", "0"], "--actuator.kt", "0.0"),
    (["--actuator.kd", "-1"], "--actuator.kd", "-1.0"),
    (["--actuator.control-dt", "0"], "--actuator.control-dt", "0.0"),
    (["--actuator.type", "mlp", "--actuator.neural.hidden", "0"],
     "--actuator.neural.hidden", "0"),
    (["--actuator.type", "transformer", "--actuator.neural.hidden", "7"],
     "--actuator.neural.hidden", "7"),
    (["--actuator.type", "mlp", "--actuator.neural.tau-max", "-1"],
     "--actuator.neural.tau-max", "-1.0"),
    (["--actuator.residual", "foo"], "--actuator.residual", "'foo'"),
    (["--joints.armature", "-1"], "--joints.armature", "-1.0"),
    (["--joints.damping", "nan"], "--joints.damping", "nan"),
    (["--joints.offset", "0.5"], "--joints.offset", "0.5"),
])
def test_bad_fit_numbers_are_refused_naming_the_option(pend, tmp_path, capsys, args, option,
                                                       value):
    rc, err = _fit(capsys, pend, tmp_path / "o", *args)
    assert rc == 1, err
    line = err.strip()
    assert "\n" not in line and "Traceback" not in err
    assert f"{option} {value}; accepted: " in line, line
    assert not (tmp_path / "o").exists()


def test_library_configs_name_fields_and_fit_names_options():
    from neuract.actuators import ActuatorConfig
    from neuract.errors import ConfigError
    from neuract.fit.trainer import TrainConfig
    from neuract.fit.verb import _cli_names
    from neuract.sim.simulate import JointParamsConfig

    with pytest.raises(ConfigError, match=r"^train\.checkpoint_every 0; accepted"):
        TrainConfig(checkpoint_every=0).validate()
    with pytest.raises(ConfigError, match=r"^--train\.checkpoint-every 0; accepted"):
        TrainConfig(checkpoint_every=0).validate("--train.")
    with pytest.raises(ConfigError, match=r"^actuator\.goal_slew -1"):
        ActuatorConfig(goal_slew=-1.0).validate()
    with pytest.raises(ConfigError, match=r"^joints\.armature -1"):
        JointParamsConfig(armature=-1.0).validate()
    assert (_cli_names("train.lr_net and actuator.neural.hidden, not 'train.tgz'")
            == "--train.lr-net and --actuator.neural.hidden, not 'train.tgz'")
    assert _cli_names("--train.lr 1") == "--train.lr 1"


def test_fit_checks_the_robot_joint_count_against_the_data(pend, tmp_path, capsys):
    rc, err = _fit(capsys, pend, tmp_path / "o", "--robot", "so101")
    assert rc == 1 and "--robot 'so101' has 6 joint(s)" in err and "has 1" in err, err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


# 5. --arm-mass: the option the pendulum's message points to
def test_fit_arm_mass_for_a_bench_arm_of_unknown_length(tmp_path, capsys):
    write_dataset(_runs(labels={"mass": 1.13, "length": 0.12, "kp": 32}), tmp_path / "ds")
    rc, err = _fit(capsys, tmp_path / "ds", tmp_path / "o")
    assert rc == 1 and "--arm-mass" in err and "pass arm_mass explicitly" not in err, err
    assert not (tmp_path / "o").exists()
    for bad, says in ((["--arm-mass", "-1"], "--arm-mass -1.0; accepted"),
                      (["--arm-mass", "nan"], "--arm-mass nan; accepted"),
                      (["--arm-mass", "0.1", "--robot", "planar2"], "applies to --robot")):
        rc, err = _fit(capsys, tmp_path / "ds", tmp_path / "o", *bad)
        assert rc == 1 and says in err, err
    assert _fit(capsys, tmp_path / "ds", tmp_path / "o", "--arm-mass", "0.04")[0] == 0
    cfg = json.loads((tmp_path / "o" / "config.json").read_text())["config"]
    assert cfg["arm_mass"] == 0.04 and (tmp_path / "o" / "model.safetensors").is_file()


# 6. a robot model whose joints are named otherwise than the data's: warned (identify too)
def test_check_joints_warns_on_other_names_and_refuses_other_counts_or_orders():
    from neuract.errors import ConfigError
    from neuract.robot import load_robot
    from neuract.robot.match import check_joints

    so101 = list(load_robot("so101").joint_names)
    omx = list(load_robot("omx").joint_names)
    with pytest.warns(UserWarning, match="matched by position; check that it is the same arm"):
        check_joints("omx", omx, so101, "--data 'd'")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_joints("so101", so101, so101, "--data 'd'")
    with pytest.raises(ConfigError, match=r"--robot 'so101' has 6 joint\(s\).*has 1"):
        check_joints("so101", so101, ["pendulum"], "--data 'd'")
    with pytest.raises(ConfigError, match="orders its joints"):
        check_joints("so101", so101, so101[::-1], "--data 'd'")
    with pytest.raises(ConfigError, match="has 4"):
        check_joints("so101", so101, 4)
    # the OpenManipulator-X model's two finger joints against a log's one gripper: the
    # message names the shared arm joints and what differs (not "another arm")
    logged = omx[:4] + ["gripper"]
    with pytest.raises(ConfigError, match=r"they share \['joint1', 'joint2', 'joint3', "
                       r"'joint4'\], the rest differs") as e:
        check_joints("omx", omx, logged, "--data 'd'")
    assert "not the same arm" not in str(e.value)


def test_fit_warns_when_the_robot_names_its_joints_otherwise(tmp_path, capsys):
    # the data's arm (planar2), its joints named their own way
    write_dataset(_runs(joints=("shoulder", "elbow"), robot="planar2"), tmp_path / "ds")
    with pytest.warns(UserWarning, match="'planar2' names its joints"):
        rc, err = _fit(capsys, tmp_path / "ds", tmp_path / "o", "--robot", "planar2",
                       "--train.label-inputs")
    assert rc == 0, err


def test_an_actuator_for_other_joints_than_the_plant_is_a_schema_error():
    import torch

    from neuract.actuators import ActuatorConfig
    from neuract.errors import SchemaError
    from neuract.fit.identify import build_model, plant_factory
    from neuract.sim.simulate import JointParamsConfig, simulate

    model = build_model(ActuatorConfig(), JointParamsConfig(), 1)
    cmd = torch.zeros(1, 3, 1, dtype=torch.float64)  # 1-joint data, a 6-joint plant
    with pytest.raises(SchemaError, match="one shape"):  # was a RuntimeError from torch.stack
        simulate(plant_factory("so101")([]), model.actuator, model.joints, cmd[:, 0],
                 cmd[:, 0], cmd, 0.01)


def test_fit_failing_after_training_keeps_its_state_to_resume(pend, tmp_path, capsys,
                                                              monkeypatch):
    """A first run that fails once a training state is saved (a full disk writing the model)
    keeps --out with its checkpoint: the rerun resumes instead of training from scratch."""
    import errno

    import neuract.fit.verb as verb

    real = verb.save_weights

    def full_disk(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(verb, "save_weights", full_disk)
    out = tmp_path / "o"
    assert _fit(capsys, pend, out)[0] == 1
    assert list((out / "checkpoint").glob("*.safetensors")), "the training state was removed"
    monkeypatch.setattr(verb, "save_weights", real)
    capsys.readouterr()
    assert main(["fit", "--data", str(pend), "--out", str(out), *QUICK]) == 0
    assert "resumed from" in capsys.readouterr().err  # progress goes to stderr
