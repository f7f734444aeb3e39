"""Benchmark recipes as ``neuract fit`` options: --split.test (a rule on run labels, or run
names), --init, --init-from, --base.fit / --base.freeze (a residual network on a fitted
servo), --preset; and ``benchmarks/bench_sts3215.py`` computing the same held-out figure as
the command line (same code path, tiny size)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from neuract.cli import main
from neuract.data import Trajectory, TrajectoryMeta, write_dataset
from neuract.data.splits import select_by_labels
from neuract.errors import ConfigError
from neuract.fit.batch import split_runs
from neuract.fit.recipe import (
    SplitConfig,
    apply_init,
    load_init,
    split_indices,
    start_model,
)
from neuract.fit.verb import FitConfig
from neuract.presets import PRESETS, default_for, preset_options

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
RULE = "kp == 16 or mass == 0.969"
TINY = ["--train.stage-iters", "2", "2", "--train.val-every", "2", "--train.runs-per-iter",
        "4"]
"""a tiny schedule over any preset (2 + 2 iterations, 4 runs each)"""


def _runs(n: int = 12, T: int = 61, rate: float = 100.0) -> list[Trajectory]:
    """Pendulum-bench runs in the K-Scale layout (mass, length, kp, trajectory labels) whose
    positions lag smooth goals: enough to fit on, no physical truth."""
    t = np.arange(T) / rate
    out = []
    for e in range(n):
        goal = 0.4 * np.sin(2 * np.pi * (0.7 + 0.1 * e) * t)[:, None]
        q = 0.8 * np.concatenate([np.zeros((3, 1)), goal[:-3]])
        ch = {"t": t, "q": q, "qd": np.gradient(q, t, axis=0), "q_goal": goal,
              "voltage": np.full((T, 1), 12.0), "torque_enable": np.ones((T, 1))}
        lab = {"mass": [0.535, 0.969][(e // 3) % 2], "length": 0.1, "kp": [8, 16, 32][e % 3],
               "arm_mass": 0.036, "trajectory": ["sin_sin", "brutal"][e % 2],
               "motor": "othermotor"}
        out.append(Trajectory(ch, TrajectoryMeta(robot="pendulum", joint_names=("pendulum",),
                                                 name=f"run{e:02d}", rate_hz=rate,
                                                 labels=lab)))
    return out


@pytest.fixture(scope="module")
def bench_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bench") / "ds"
    write_dataset(_runs(), path)
    return path


def _fit(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["fit", *args])
    return rc, capsys.readouterr().err


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


# ------------------------------------------------------------ --split.test ---------------
LABELS = [{"kp": kp, "mass": m, "trajectory": tr}
          for kp in (4, 16, 32) for m in (0.535, 0.969) for tr in ("brutal", "sin_sin")]
NAMES = [f"r{i}" for i in range(len(LABELS))]


@pytest.mark.parametrize("rule, want", [
    ("kp == 16 or mass == 0.969", lambda l: l["kp"] == 16 or l["mass"] == 0.969),
    ("kp >= 16 and not trajectory == 'brutal'",
     lambda l: l["kp"] >= 16 and l["trajectory"] != "brutal"),
    ("trajectory in ('brutal',) and kp < 16", lambda l: l["trajectory"] == "brutal"
     and l["kp"] < 16),
    ("kp not in [4, 32]", lambda l: l["kp"] == 16),
    ("4 < kp <= 32 and mass != 0.535", lambda l: 4 < l["kp"] <= 32 and l["mass"] != 0.535),
    ("16 == kp", lambda l: l["kp"] == 16),
    ("kp > -1 and (mass == 0.969000001)", lambda l: l["mass"] == 0.969),  # 1 ppm: equal
])
def test_a_label_rule_selects_the_runs_it_says(rule, want):
    got = select_by_labels(LABELS, NAMES, rule, option="--split.test")
    assert got == [i for i, lab in enumerate(LABELS) if want(lab)] and got


def test_labels_compare_as_numbers_where_both_read_as_numbers():
    labels = [{"kp": "16"}, {"kp": 16.0}, {"kp": "sixteen"}]
    assert select_by_labels(labels, ["a", "b", "c"], "kp == 16") == [0, 1]
    assert select_by_labels(labels, ["a", "b", "c"], "kp == 'sixteen'") == [2]


@pytest.mark.parametrize("rule, says", [
    ("kp = 16", "not a rule"),
    ("kp + 1 == 17", "does not compare a run label"),
    ("kp", "alone is not a test"),
    ("kp == abs(-16)", "is not a number or a quoted string"),
    ("kp.real == 16", "does not compare a run label"),
    ("__import__('os').system('touch HACKED') == 0", "does not compare a run label"),
    ("(lambda: 1)() == 1", "does not compare a run label"),
    ("kp is 16", "is not allowed"),
    ("kp == (4, 16)", "compares with one value"),
    ("trajectory < 3", "needs numbers"),
])
def test_a_rule_that_is_not_a_label_test_is_refused_never_run(rule, says, tmp_path,
                                                             monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        select_by_labels(LABELS, NAMES, rule, option="--split.test")
    msg = str(e.value)
    assert msg.startswith("--split.test ") and says in msg and "\n" not in msg, msg
    assert not (tmp_path / "HACKED").exists()


def test_an_unknown_or_partial_label_is_refused_listing_the_runs_labels():
    with pytest.raises(ConfigError) as e:
        select_by_labels(LABELS, NAMES, "firmware_kp == 16", option="--split.test")
    msg = str(e.value)
    assert "no run carries the label 'firmware_kp'" in msg
    assert "kp (4, 16, 32)" in msg and "mass (0.535, 0.969)" in msg and "trajectory (" in msg
    part = [dict(lab) for lab in LABELS]
    del part[3]["mass"]
    with pytest.raises(ConfigError, match=r"1 of 12 runs lack the label 'mass' \(e.g. 'r3'\)"):
        select_by_labels(part, NAMES, "mass == 0.969", option="--split.test")


def test_test_episodes_by_name_and_unknown_names(bench_data):
    assert select_by_labels(LABELS, NAMES, "kp == 4", ["r11", "r0"]) == sorted(
        {0, 1, 2, 3, 11})
    with pytest.raises(ConfigError, match=r"--split.test-episodes: no run named 'x9' \(and 1 "
                                          r"more\); the runs are named like 'r0'"):
        select_by_labels(LABELS, NAMES, "", ["x9", "r1", "x8"],
                         episodes_option="--split.test-episodes")


def test_split_indices_hold_out_the_rule_and_split_the_rest_as_before(bench_data):
    from neuract.fit.identify import load_batch

    _, batch = load_batch(bench_data)
    tr, va, te = split_indices(batch, SplitConfig(test=RULE), 0.1, 0)
    held = [i for i, lab in enumerate(batch.labels) if lab["kp"] == 16 or lab["mass"] == 0.969]
    rest = [i for i in range(len(batch)) if i not in held]
    a, b = split_runs(len(rest), 0.1, 0)  # the benchmark's protocol, written out
    assert te == held and tr == [rest[i] for i in a] and va == [rest[i] for i in b]
    # no rule: every run trains or validates, as fit always split
    assert split_indices(batch, SplitConfig(), 0.1, 0)[:2] == tuple(split_runs(12, 0.1, 0))
    for rule, says in (("kp == 99", "holds out no run of the 12"),
                       ("kp > 0", "holds out all 12 runs")):
        with pytest.raises(ConfigError, match=says):
            split_indices(batch, SplitConfig(test=rule), 0.1, 0)


def test_fit_holds_out_the_test_runs_and_scores_them(bench_data, tmp_path, capsys):
    out = tmp_path / "o"
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(out), "--split.test", RULE,
                   "--split.test-episodes", "run00", "--train.horizons", "0.2",
                   "--train.stage-iters", "2", "--train.val-every", "2")
    assert rc == 0, err
    rep = _report(out)
    want = sorted(f"run{e:02d}" for e in range(12) if e % 3 == 1 or (e // 3) % 2 or e == 0)
    assert rep["test_runs"] == want and rep["n_test_runs"] == len(want)
    assert not set(rep["val_runs"]) & set(want)
    assert rep["n_train_runs"] + rep["n_val_runs"] + rep["n_test_runs"] == 12
    assert 0 < rep["test_mae_rad"] < 1 and "held-out test MAE" in (out / "report.md").read_text()
    # a rerun with another test split does not resume this run's checkpoint
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(out), "--split.test",
                   "kp == 8", "--train.horizons", "0.2", "--train.stage-iters", "2",
                   "--train.val-every", "2")
    assert rc == 1 and "--split" in err and "not resumed" in err, err


def test_fit_refuses_an_unknown_label_before_writing(bench_data, tmp_path, capsys):
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(tmp_path / "o"),
                   "--split.test", "payload == 1")
    assert rc == 1 and "no run carries the label 'payload'" in err and "kp (8, 16, 32)" in err
    assert not (tmp_path / "o").exists() and "Traceback" not in err


# ------------------------------------------------------------------- --init ---------------
def _cfg(*args: str) -> FitConfig:
    import tyro

    return tyro.cli(FitConfig, args=["--data", "x", *args])


def test_init_values_reach_the_model_by_short_or_full_name(tmp_path):
    cfg = _cfg("--actuator.friction", "m1", "--init", "friction-viscous=0.07",
               "actuator.friction.friction_base=0.04", "armature=0.031")
    p = start_model(cfg, 1).physical_parameters()
    assert p["actuator.friction.friction_viscous"] == pytest.approx(0.07, rel=1e-9)
    assert p["actuator.friction.friction_base"] == pytest.approx(0.04, rel=1e-9)
    assert p["joints.armature"] == pytest.approx(0.031, rel=1e-9)
    # a JSON file of values, or an earlier fit's report.json (its "parameters")
    (tmp_path / "v.json").write_text(json.dumps({"parameters": {
        "actuator.friction.friction_base": 0.09}}))
    p = start_model(dataclasses.replace(cfg, init=(str(tmp_path / "v.json"),)), 1)
    assert p.physical_parameters()["actuator.friction.friction_base"] == pytest.approx(0.09)
    # on a residual, the servo's parameters are its base's
    res = start_model(_cfg("--actuator.residual", "mlp", "--init", "friction_base=0.08"), 1)
    assert res.physical_parameters()["actuator.base.friction.friction_base"] == pytest.approx(
        0.08)


@pytest.mark.parametrize("item, says", [
    ("stiction=0.1", "no such parameter; accepted: "),
    ("friction_base=-0.1", "accepted: a value in [0, inf]"),
    ("friction_base=abc", "is not a number"),
    ("friction_base=0.1,0.2", "2 values for a parameter of 1"),
    ("nofile.json", "not NAME=VALUE and not a readable JSON file"),
])
def test_bad_init_values_are_refused_naming_the_option(item, says):
    model = start_model(_cfg(), 1)
    with pytest.raises(ConfigError) as e:
        apply_init(model, [item])
    assert str(e.value).startswith("--init ") and says in str(e.value), str(e.value)


def test_an_ambiguous_short_name_lists_the_parameters_it_names():
    from torch import nn

    from neuract.actuators.param import Param
    from neuract.fit.trainer import SystemModel
    from neuract.sim.simulate import JointParams

    act = nn.Module()
    act.a, act.b = nn.Module(), nn.Module()
    act.a.gain, act.b.gain = Param(1.0, lo=0.0), Param(2.0, lo=0.0)
    model = SystemModel(act, JointParams(1))
    with pytest.raises(ConfigError, match=r"--init gain: names 2 parameters \(actuator.a.gain, "
                                          r"actuator.b.gain\); give the full name"):
        apply_init(model, ["gain=3"])
    apply_init(model, ["a.gain=3"])
    assert model.physical_parameters()["actuator.a.gain"] == pytest.approx(3.0)


def test_fit_refuses_an_unknown_init_name_before_writing(bench_data, tmp_path, capsys):
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(tmp_path / "o"),
                   "--init", "stiction=0.1")
    assert rc == 1 and "--init stiction: this model has no such parameter" in err, err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------- --init-from, --base ---------------
@pytest.fixture(scope="module")
def servo_run(bench_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("servo") / "servo"
    assert main(["fit", "--data", str(bench_data), "--out", str(out), "--actuator.friction",
                 "m1", "--train.horizons", "0.2", "--train.stage-iters", "3",
                 "--train.val-every", "3", "--split.test", RULE]) == 0
    return out


def test_init_from_starts_from_the_earlier_fit(servo_run, bench_data, tmp_path, capsys):
    fitted = load_init(str(servo_run)).physical_parameters()
    same = _cfg("--actuator.friction", "m1", "--init", "friction_base=0.5")
    started = start_model(same, 1, load_init(str(servo_run))).physical_parameters()
    assert started == fitted  # a warm start's values win over --init
    assert fitted["actuator.friction.friction_base"] != pytest.approx(0.05)  # it moved
    # the fit from it starts there: its first validation is no worse than the run it came from
    out = tmp_path / "o"
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(out), "--actuator.friction",
                   "m1", "--init-from", str(servo_run), "--train.horizons", "0.2",
                   "--train.stage-iters", "1", "--train.val-every", "1", "--train.lr", "1e-9",
                   "--split.test", RULE)
    assert rc == 0, err
    before, after = _report(servo_run), _report(out)
    assert after["val_mae_rad"] == pytest.approx(before["val_mae_rad"], rel=1e-6)
    assert after["init_from"] == str(servo_run)
    # another model than the earlier fit's is refused before anything is written
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(tmp_path / "p"),
                   "--actuator.friction", "m6", "--init-from", str(servo_run))
    assert rc == 1 and "--init-from: its model does not match this fit's" in err, err
    assert not (tmp_path / "p").exists()
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(tmp_path / "p"),
                   "--init-from", str(tmp_path / "nothing"))
    assert rc == 1 and "--init-from" in err and "no such directory" in err


def test_a_residual_on_a_fitted_servo_keeps_the_fitted_servo_when_frozen(
        servo_run, bench_data, tmp_path, capsys):
    out = tmp_path / "r"
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(out), "--actuator.friction",
                   "m1", "--actuator.residual", "gru", "--init-from", str(servo_run),
                   "--base.freeze", "--train.horizons", "0.2", "--train.stage-iters", "3",
                   "--train.val-every", "3", "--split.test", RULE)
    assert rc == 0, err
    servo = load_init(str(servo_run))
    res = load_init(str(out))
    assert {k.replace("actuator.base.", "actuator."): v
            for k, v in res.physical_parameters().items()} == servo.physical_parameters()
    fresh = start_model(_cfg("--actuator.friction", "m1", "--actuator.residual", "gru"), 1)
    net = {k: v for k, v in res.state_dict().items() if k.startswith("actuator.net.")}
    assert net and any(not torch.equal(v, fresh.state_dict()[k]) for k, v in net.items())
    assert _report(out)["base_frozen"] is True


def test_base_fit_fits_the_servo_then_the_residual_on_it(bench_data, tmp_path, capsys):
    out = tmp_path / "b"
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(out), "--actuator.friction",
                   "m1", "--actuator.residual", "mlp", "--base.fit", "--base.stage-iters", "3",
                   "--base.lr", "0.05", "--train.horizons", "0.2", "--train.stage-iters", "2",
                   "--train.val-every", "1", "--train.lr", "1e-9", "--train.lr-net", "1e-9",
                   "--split.test", RULE)
    assert rc == 0, err
    base = load_init(str(out / "base"))  # the servo stage is a fit output of its own
    base_cfg = json.loads((out / "base" / "config.json").read_text())["config"]
    assert base_cfg["actuator"]["residual"] == "none" and base_cfg["train"]["stage_iters"] == [3]
    assert base_cfg["train"]["lr"] == 0.05 and base_cfg["out"] == str(out / "base")
    res = load_init(str(out))  # lr ~ 0: the residual's servo is still the fitted one
    for k, v in base.physical_parameters().items():
        assert res.physical_parameters()[k.replace("actuator.", "actuator.base.", 1)] == \
            pytest.approx(v, rel=1e-6), k
    rep = _report(out)
    assert rep["base"]["val_mae_rad"] == _report(out / "base")["val_mae_rad"]
    assert rep["test_mae_rad"] > 0 and "servo stage" in (out / "report.md").read_text()


@pytest.mark.parametrize("args, says", [
    (["--base.fit"], "needs --actuator.residual mlp or gru"),
    (["--actuator.residual", "gru", "--base.freeze"], "needs --actuator.residual mlp|gru and "
                                                       "--base.fit or --init-from"),
    (["--base.lr", "0.1"], "add --base.fit"),
    (["--actuator.residual", "gru", "--base.fit", "--base.stage-iters", "1", "2"],
     "--base.stage-iters 1 2; accepted: one iteration count"),
])
def test_base_options_that_do_not_go_together_are_refused(bench_data, tmp_path, capsys, args,
                                                          says):
    rc, err = _fit(capsys, "--data", str(bench_data), "--out", str(tmp_path / "o"), *args)
    assert rc == 1 and says in err, err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ presets ---------------
def test_a_preset_is_options_and_explicit_options_override_it():
    import tyro

    default = default_for("fit", FitConfig, ["--preset", "sts3215-best"])
    cfg = tyro.cli(FitConfig, args=["--preset", "sts3215-best", "--data", "d",
                                    "--train.seed", "3", "--actuator.neural.hidden", "8"],
                   default=default)
    assert cfg.train.seed == 3 and cfg.actuator.neural.hidden == 8
    assert cfg.actuator.residual == "gru" and cfg.base.fit and cfg.train.substeps == 2
    # the preset written out as options parses to the same config
    spelled = tyro.cli(FitConfig, args=["--data", "d",
                                        *preset_options("fit", "sts3215-best", FitConfig)])
    assert spelled == dataclasses.replace(tyro.cli(FitConfig, args=["--data", "d",
                                                                    "--preset", "sts3215-best"],
                                                   default=default), preset="")


def test_an_unknown_preset_is_refused_listing_the_presets(capsys):
    rc, err = _fit(capsys, "--preset", "sts9999", "--data", "x")
    assert rc == 2 and "--preset 'sts9999'; valid presets of neuract fit: sts3215-best, " \
                       "sts3215-servo" in err, err


def test_every_preset_is_in_the_help_and_the_docs():
    from neuract.cli_help import verb_help

    text = " ".join(verb_help("fit").split())
    docs = (ROOT / "docs" / "cli.md").read_text()
    for verb, presets in PRESETS.items():
        for name in presets:
            assert name in text and f"`{name}`" in docs, (verb, name)
    assert "--split.test" in text and "--init-from" in text and "--base.fit" in text


# ------------------------------------------------------ the benchmark, same figure ---------
@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    return importlib.import_module


def test_the_benchmark_models_are_the_presets(bench):
    common, b = bench("common"), bench("bench_sts3215")
    best = "ours_m6_delay_punch_gain_backlash_elim_slew_sub2"
    servo = common.sts3215_config(common.STS3215_VARIANTS[best], "D")
    assert b.fit_command(servo, "D") == ("neuract fit --data D --preset sts3215-servo "
                                         f"--split.test '{RULE}'")
    res = common.sts3215_config({**common.STS3215_VARIANTS[best],
                                 **common.sts3215_residual("gru")}, "D")
    one = dataclasses.replace(res, base=dataclasses.replace(
        res.base, fit=True, lr=servo.train.lr, stage_iters=servo.train.stage_iters))
    assert b.fit_command(one, "D") == ("neuract fit --data D --preset sts3215-best "
                                       f"--split.test '{RULE}'")


def test_cli_and_benchmark_give_the_same_held_out_figure(bench, bench_data, tmp_path,
                                                         capsys):
    out = tmp_path / "cli"
    rc, err = _fit(capsys, "--preset", "sts3215-best", "--data", str(bench_data), "--out",
                   str(out), "--split.test", RULE, *TINY, "--base.stage-iters", "2", "2")
    assert rc == 0, err
    cli = _report(out)
    b = bench("bench_sts3215")
    assert b.main(["--data", str(bench_data), "--out-dir", str(tmp_path / "res"),
                   "--fit-options", " ".join(TINY), "--models",
                   "ours_m6_delay_punch_gain_backlash_elim_slew_sub2", "ours_residual_gru",
                   "menagerie_mujoco", "kscale_m1_published_ours_sim_15V"]) == 0
    res = json.loads(next((tmp_path / "res").glob("pendulum_bench_*.json")).read_text())
    got = res["models"]["ours_residual_gru"]
    assert got["heldout_mae_rad"] == pytest.approx(cli["test_mae_rad"], rel=1e-6)
    assert got["val_mae_rad"] == pytest.approx(cli["val_mae_rad"], rel=1e-6)
    servo = res["models"]["ours_m6_delay_punch_gain_backlash_elim_slew_sub2"]
    assert servo["heldout_mae_rad"] == pytest.approx(_report(out / "base")["test_mae_rad"],
                                                     rel=1e-6)
    assert res["split"]["n_test"] == cli["n_test_runs"] and res["split"]["test_rule"] == RULE
    # another bench than the STS3215's: the STS3215's own models are not applicable
    for name in ("menagerie_mujoco", "kscale_m1_published_ours_sim_15V"):
        assert res["models"][name]["status"] == "not applicable", name
    assert "--preset" not in got["neuract_fit"] and "--base.fit" in got["neuract_fit"]


@pytest.mark.realdata
def test_the_published_fits_apply_to_the_sts3215_bench_only(bench, shared_data, tmp_path):
    common = bench("common")
    sts = shared_data / "kscale_sts3215_12v"
    assert common.kscale_fits_dir(sts, [{"motor": "sts3215"}]) == sts / "orig_docs" / \
        "friction_params"
    assert common.kscale_fits_dir(sts, [{"motor": "sts3250"}]) is None
    assert common.kscale_fits_dir(tmp_path) is None


def test_a_run_stopped_in_its_servo_stage_resumes_it_or_refuses_other_options(
        bench_data, tmp_path, capsys, monkeypatch):
    import neuract.fit.identify as ident

    real = ident.identify

    def stop_at_the_residual(*a, **k):
        if a[1].residual != "none":
            raise KeyboardInterrupt
        return real(*a, **k)

    args = ["--data", str(bench_data), "--out", str(tmp_path / "o"), "--actuator.friction",
            "m1", "--actuator.residual", "mlp", "--base.fit", "--base.stage-iters", "2",
            "--train.horizons", "0.2", "--train.stage-iters", "1", "--train.val-every", "1"]
    with monkeypatch.context() as m:
        m.setattr(ident, "identify", stop_at_the_residual)
        assert _fit(capsys, *args)[0] == 130
    assert (tmp_path / "o" / "base" / "checkpoint" / "last.safetensors").is_file()
    assert not (tmp_path / "o" / "checkpoint").exists()
    rc, err = _fit(capsys, *args[:-2], "--base.lr", "0.2", *args[-2:])
    assert rc == 1 and "--base.lr: 0.0 (checkpoint) -> 0.2 (this run)" in err, err
    rc, err = _fit(capsys, *args)
    assert rc == 0 and "at step 2 of 2" in err, err  # the servo stage resumed, done
