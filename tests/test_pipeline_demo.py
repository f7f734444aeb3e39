"""End-to-end: the demo with a tiny config, and the evaluate / estimate verbs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from neuract.pipeline.experiment_config import ExperimentConfig, ModelSize
from neuract.pipeline.splits import split_by_task
from neuract.pipeline.twin_data import TwinDataConfig

TINY_SIZE = ModelSize(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16)


def _tiny_experiment() -> ExperimentConfig:
    return ExperimentConfig(size=TINY_SIZE, sim_steps=3, est_steps=3, batch=4, sim_horizon=3,
                            est_horizon=3, baseline_iters=2, parametric_friction=("none",),
                            neural_baselines=("mlp",), horizons=(10, 50), full=False,
                            figure_samples=60)


def _tiny_data() -> TwinDataConfig:
    return TwinDataConfig(minutes=0.6, units=2, tasks=("push", "degraded"), episode_s=6.0)


def test_split_by_task_holds_out_whole_episodes_of_every_task():
    class M:
        def __init__(self, task, i):
            self.labels, self.name = {"task": task}, f"{task}{i}"

    class T:
        def __init__(self, task, i, cond=0):
            self.meta, self.cond = M(task, i), cond

        def get(self, key, default=None):
            return [self.cond] if key == "condition" else default

    eps = [T(t, i) for t in ("a", "b") for i in range(4)]
    eps += [T("c", i, cond=i % 2) for i in range(4)]
    train, test = split_by_task(eps, 0.25)
    # the last episode of each task, and of each task's degraded / normal groups apart
    assert {e.meta.name for e in test} == {"a3", "b3", "c2", "c3"}
    assert not {e.meta.name for e in train} & {e.meta.name for e in test}
    assert len(train) + len(test) == len(eps)


def test_relabel_contact_keeps_only_forces_above_the_threshold():
    from neuract.pipeline.twin_data import generate_twin, relabel_contact

    tr = generate_twin(TwinDataConfig(minutes=0.2, units=1, tasks=("push",), episode_s=12.0))[0]
    f = np.linalg.norm(tr["ee_force"], axis=1)
    raw = np.asarray(tr["contact"], bool)
    new = np.asarray(relabel_contact(tr, 0.5)["contact"], bool)
    assert raw.any() and (f[raw] < 0.5).any()  # smooth pushes start and end below 0.5 N
    np.testing.assert_array_equal(new, raw & (f >= 0.5))
    assert new.sum() < raw.sum() and not (new & ~raw).any()


def test_twin_ablation_switches_off_the_named_effect_only():
    from neuract.errors import ConfigError
    from neuract.pipeline.twin_data import generate_twin

    cfg = TwinDataConfig(minutes=0.1, units=1, tasks=("push",), episode_s=6.0, seed=3)
    full = generate_twin(cfg)[0]
    again = generate_twin(cfg)[0]
    nofric = generate_twin(TwinDataConfig(**{**cfg.__dict__, "ideal": ("friction",)}))[0]
    # same plan (goals, pushes), different hidden physics: the measured motion differs
    np.testing.assert_array_equal(full["q"], again["q"])
    np.testing.assert_array_equal(full["q_goal"], nofric["q_goal"])
    np.testing.assert_array_equal(full["ee_force"], nofric["ee_force"])
    assert np.abs(full["q"] - nofric["q"]).max() > 1e-3
    with pytest.raises(ConfigError, match="fricton.*accepted"):
        generate_twin(TwinDataConfig(**{**cfg.__dict__, "ideal": ("fricton",)}))
    with pytest.raises(ConfigError, match="ideal"):
        generate_twin(TwinDataConfig(**{**cfg.__dict__, "ideal": "friction"}))


def test_worn_training_episodes_are_new_episodes_of_the_same_units_all_degraded():
    from neuract.errors import ConfigError
    from neuract.pipeline.twin_data import generate_twin

    cfg = TwinDataConfig(minutes=0.2, units=2, tasks=("push", "degraded"), episode_s=3.0,
                         seed=5, worn_train_minutes=0.1)
    main = generate_twin(cfg)
    worn = generate_twin(cfg, worn=True)
    # the main data is the same with or without the worn episodes
    plain = generate_twin(TwinDataConfig(**{**cfg.__dict__, "worn_train_minutes": 0.0}))
    assert [tr.meta.name for tr in plain] == [tr.meta.name for tr in main]
    for a, b in zip(plain, main):
        np.testing.assert_array_equal(a["q"], b["q"])
    assert generate_twin(TwinDataConfig(**{**cfg.__dict__, "worn_train_minutes": 0.0}),
                         worn=True) == []
    assert len(worn) == 2
    names = {tr.meta.name for tr in main}
    for tr in worn:
        assert tr.meta.name not in names and tr.meta.labels["task"] == "degraded"
        assert tr.meta.labels["degraded_joints"] and np.asarray(tr["condition"]).any()
        assert tr.meta.labels["episode"] >= 2  # numbered past the unit's 2 main episodes
    # the same units: a unit's hidden motor constants agree except on its degraded motors
    by_unit = {tr.meta.labels["unit"]: tr for tr in main}
    for tr in worn:
        ok = ~np.asarray(tr.meta.labels["condition_per_joint"], bool)
        ref = by_unit[tr.meta.labels["unit"]].meta.labels["hidden"]["servo"]["resistance"]
        got = tr.meta.labels["hidden"]["servo"]["resistance"]
        np.testing.assert_allclose(np.asarray(got)[ok], np.asarray(ref)[ok])
    for bad in (-1.0, True, "5", float("inf"), float("nan")):
        with pytest.raises(ConfigError, match="worn_train_minutes"):
            generate_twin(TwinDataConfig(**{**cfg.__dict__, "worn_train_minutes": bad}),
                          worn=True)


def test_worn_training_episodes_of_another_task_carry_its_contacts_and_worn_motors():
    from neuract.errors import ConfigError
    from neuract.pipeline.twin_data import generate_twin

    cfg = TwinDataConfig(minutes=0.2, units=2, tasks=("push", "degraded"), episode_s=3.0,
                         seed=5, worn_train_minutes=0.1, worn_train_tasks=("push",))
    worn = generate_twin(cfg, worn=True)
    assert len(worn) == 2
    for tr in worn:
        lab = tr.meta.labels
        assert lab["task"] == "push" and lab["pushes"] and np.asarray(tr["contact"]).any()
        assert lab["degraded_joints"] and np.asarray(tr["condition"]).any()
        assert sum(lab["condition_per_joint"]) == len(lab["degraded_joints"])
    for bad in ((), "push", ("push", "swim"), None, ("free",), ("lift",)):
        with pytest.raises(ConfigError, match="worn_train_tasks"):
            generate_twin(TwinDataConfig(**{**cfg.__dict__, "worn_train_tasks": bad}),
                          worn=True)
    with pytest.raises(ConfigError, match="worn_train_tasks"):  # refused with 0 minutes too
        generate_twin(TwinDataConfig(**{**cfg.__dict__, "worn_train_minutes": 0.0,
                                        "worn_train_tasks": ("swim",)}), worn=True)


def test_demo_end_to_end_tiny(tmp_path):
    import dataclasses

    from neuract.demo import DemoConfig, run

    # enough episodes that both thresholds can be calibrated (two of each class)
    data = dataclasses.replace(_tiny_data(), contact_min_force_n=0.5, minutes=1.8,
                               tasks=("free", "push", "degraded"), degraded_fraction=0.5)
    exp = dataclasses.replace(_tiny_experiment(), physics=True, calibration_fraction=0.3,
                              context_s=1.0, condition_tau_grid=(2.0, 10.0),
                              condition_per_motor_threshold=True, gate_tau_grid=(0.0, 0.1))
    res = run(DemoConfig(out=tmp_path / "demo", data=data, experiment=exp, quiet=True))
    out = tmp_path / "demo"
    for f in ("report.md", "report.html", "results.json", "config.json",
              "checkpoints/neuralactuator_simulator/config.json",
              "checkpoints/neuralactuator_estimator/model.safetensors"):
        assert (out / f).is_file(), f
    saved = json.loads((out / "results.json").read_text())
    # every number states its mode: rollouts simulator, estimates estimator
    assert saved["rollouts"] and all(r["mode"] == "simulator" for r in saved["rollouts"])
    assert saved["estimation"] and all(r["mode"] == "estimator" for r in saved["estimation"])
    models = {r["model"] for r in saved["rollouts"]}
    assert {"NeuralActuator", "MuJoCo default servo", "MLP actuator net"} <= models
    est = {r["model"]: r for r in saved["estimation"]}
    assert est["NeuralActuator"]["torque_rmse_mean"] is not None
    assert est["NeuralActuator"]["force"]["all"] is not None
    assert est["NeuralActuator"]["condition"] is not None
    # where the gate is wrong: per task, near label changes, per true force band
    na_est = est["NeuralActuator"]
    assert set(na_est["gate_by_task"]) <= {"free", "push", "degraded"}
    assert sum(v["n_samples"] for v in na_est["gate_by_task"].values()) == \
        na_est["gate"]["n_samples"]
    assert len(na_est["gate"]["label_changes"]["f1_away"]) == 3
    assert sum(b["n_contact"] for b in na_est["gate_recall_by_force"]) > 0
    report = (out / "report.md").read_text()
    assert "Gate errors near contact label changes" in report
    # the report says at what scale it ran, against the benchmark that scores the targets
    assert ("This run's scale: 1.8 min of twin data, "
            f"{exp.sim_steps} simulator and {exp.est_steps} estimator training steps, the "
            "gate head.") in report
    assert "benchmarks/bench_neuralactuator_twin.py" in report
    for name, m in saved["models"].items():
        assert m["params"] is not None, name
    html = (out / "report.html").read_text()
    assert "data:image/png;base64" in html and "simulator mode" in html
    assert res["wall_s"] > 0
    # the estimator reads the arm model's physics channels; the gate is also scored on the
    # twin's raw (any-force) contact label
    ck = json.loads((out / "checkpoints/neuralactuator_estimator/config.json").read_text())
    assert ck["config"]["physics_robot"] == "so101" and "tau_gravity" in ck["channels"]
    assert ck["config"]["context_s"] == 1.0 and "move_dir" in ck["channels"]
    assert "n_events" in saved["gate_raw_label"]
    # gate and condition thresholds calibrated on episodes held out of the estimator's training
    est_model = saved["models"]["NeuralActuator[estimator]"]
    assert set(est_model["calibration_episodes"]) == {"condition", "gate"}
    assert ck["extra"]["gate_threshold"] == est_model["gate_threshold"]
    # the condition smoothing is chosen from the grid with its threshold, and travels with the
    # checkpoint (a checkpoint reloaded by the verbs uses it)
    assert est_model["condition_tau_s"] in (2.0, 10.0)
    assert ck["extra"]["condition_tau_s"] == est_model["condition_tau_s"]
    from neuract.pipeline.checkpoints import load_model

    m = load_model(out / "checkpoints/neuralactuator_estimator")
    assert m.condition_tau_s == est_model["condition_tau_s"] and m.cfg.context_s == 1.0
    assert len(est_model["condition_threshold"]) == 6  # one per motor
    assert m.condition_threshold == tuple(est_model["condition_threshold"])
    # the gate filter is chosen from its grid on the same episodes and travels too
    assert est_model["gate_tau_s"] in (0.0, 0.1)
    assert 0 < est_model["gate_release"] <= est_model["gate_threshold"] < 1
    for k in ("gate_tau_s", "gate_release", "gate_threshold"):
        assert getattr(m, k) == est_model[k] == ck["extra"][k]
    # the same model with one plain threshold (calibrated on the same episodes) beside it
    assert saved["gate_plain"]["threshold"] == est_model["gate_plain_threshold"]
    assert saved["gate_plain"]["n_samples"] == est["NeuralActuator"]["gate"]["n_samples"]
    # the simulator sits on the run's best parametric servo, which travels with its checkpoint
    sim_ck = json.loads((out / "checkpoints/neuralactuator_simulator/config.json").read_text())
    servo = json.loads(sim_ck["config"]["servo"])
    assert sim_ck["config"]["prior"] == "servo"
    assert saved["best_parametric"]["name"] == f"parametric sts3215+{servo['actuator']['friction']}"
    sim = load_model(out / "checkpoints/neuralactuator_simulator")
    assert sim.servo_model is not None and sim.cfg.prior == "servo"


def test_experiment_killed_during_training_resumes_to_the_same_models(tmp_path):
    import dataclasses

    import torch

    from neuract.errors import CheckpointError
    from neuract.neuralactuator import load_checkpoint
    from neuract.pipeline.experiment import run_experiment
    from neuract.pipeline.setups import so101_setup
    from neuract.pipeline.twin_data import generate_twin

    train, test = split_by_task(generate_twin(_tiny_data()), 0.25)
    exp = dataclasses.replace(_tiny_experiment(), sim_steps=4, est_steps=6, checkpoint_every=2,
                              baseline_iters=0, neural_baselines=(), physics=True,
                              sim_prior="pd")
    setup = so101_setup()

    class Killed(Exception):
        pass

    def kill_at_estimator_step_3(stage, done, total):
        if stage.startswith("NeuralActuator (estimator") and done == 3:
            raise Killed

    killed = tmp_path / "killed"
    with pytest.raises(Killed):
        run_experiment(setup, train, test, exp, out_dir=killed, progress=kill_at_estimator_step_3)
    states = sorted(p.name for p in (killed / "checkpoints").glob("train_*.safetensors"))
    assert states == ["train_neuralactuator_estimator.safetensors",
                      "train_neuralactuator_simulator.safetensors"]
    # other data under the same run directory: refused, not silently resumed
    with pytest.raises(CheckpointError, match="different run"):
        run_experiment(setup, train[1:], test, exp, out_dir=killed)
    steps: dict[str, list] = {}

    def record(stage, done, total):
        if stage.startswith("NeuralActuator ("):
            steps.setdefault(stage.split()[1][1:], []).append(done)

    run_experiment(setup, train, test, exp, out_dir=killed, progress=record)
    # simulator training had finished (nothing redone); the estimator's went on after step 2
    assert "simulator" not in steps and steps["estimator"] == [3, 4, 5, 6]
    assert not list((killed / "checkpoints").glob("train_*"))  # completed: nothing to resume
    whole = tmp_path / "whole"
    run_experiment(setup, train, test, exp, out_dir=whole)
    for mode in ("simulator", "estimator"):
        a = load_checkpoint(killed / "checkpoints" / f"neuralactuator_{mode}").state_dict()
        b = load_checkpoint(whole / "checkpoints" / f"neuralactuator_{mode}").state_dict()
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), (mode, k)


def test_estimate_verb_writes_per_step_parquet(tmp_path):
    import pyarrow.parquet as pq
    import torch

    from neuract.cli import main
    from neuract.data import write_dataset
    from neuract.neuralactuator import NeuralActuatorTrainConfig as TrainConfig
    from neuract.neuralactuator import save_checkpoint, train_neuralactuator
    from neuract.pipeline.twin_data import generate_twin
    from neuract.robot import load_robot

    trajs = generate_twin(_tiny_data())
    ds = write_dataset(trajs[:2], tmp_path / "ds")
    from neuract.pipeline.experiment_config import na_config
    from neuract.pipeline.setups import so101_setup

    setup = so101_setup()
    model, _ = train_neuralactuator(trajs, load_robot("so101", dtype=torch.float32),
                                    na_config(setup, "estimator", TINY_SIZE, 6),
                                    TrainConfig(steps=2, batch=4, horizon=3), site=setup.site)
    save_checkpoint(model, tmp_path / "ckpt")
    assert main(["estimate", "--checkpoint", str(tmp_path / "ckpt"), "--data", str(ds),
                 "--out", str(tmp_path / "est"), "--quiet"]) == 0
    files = sorted((tmp_path / "est").glob("*.parquet"))
    assert len(files) == 2
    tab = pq.read_table(files[0]).to_pydict()
    T = len(trajs[0])
    assert len(tab["t"]) == T
    for col in ("tau.gripper", "ee_force.z", "contact_prob", "degraded_prob.elbow_flex"):
        assert col in tab
    valid = np.asarray(tab["valid"])
    assert not valid[:7].any() and valid[7:].all()
    summary = json.loads((tmp_path / "est" / "summary.json").read_text())
    assert summary["mode"] == "estimator" and len(summary["episodes"]) == 2
    # --stream: the same outputs, one sample at a time
    assert main(["estimate", "--checkpoint", str(tmp_path / "ckpt"), "--data", str(ds),
                 "--out", str(tmp_path / "est_s"), "--stream", "--quiet"]) == 0
    streamed = pq.read_table(tmp_path / "est_s" / files[0].name).to_pydict()
    assert streamed.keys() == tab.keys()
    for col in ("tau.gripper", "ee_force.z", "contact_prob", "degraded_prob.elbow_flex"):
        np.testing.assert_allclose(np.asarray(streamed[col], float)[valid],
                                   np.asarray(tab[col], float)[valid], rtol=1e-4, atol=1e-5)
    # a simulator-mode checkpoint is refused
    sim, _ = train_neuralactuator(trajs[:2], load_robot("so101", dtype=torch.float32),
                                  na_config(setup, "simulator", TINY_SIZE, 6),
                                  TrainConfig(steps=1, batch=2, horizon=2))
    save_checkpoint(sim, tmp_path / "sim")
    assert main(["estimate", "--checkpoint", str(tmp_path / "sim"), "--data", str(ds),
                 "--out", str(tmp_path / "est2"), "--quiet"]) == 1


@pytest.mark.slow
def test_evaluate_verb_on_a_dataset_with_pretrained_checkpoints(tmp_path):
    from neuract.cli import main
    from neuract.data import write_dataset
    from neuract.pipeline.twin_data import generate_twin

    trajs = generate_twin(_tiny_data())
    ds = write_dataset(trajs, tmp_path / "ds")
    first = tmp_path / "first"
    tiny = ["--experiment.size.d-model", "16", "--experiment.size.n-layers", "1",
            "--experiment.size.n-heads", "2", "--experiment.size.d-ff", "16",
            "--experiment.size.d-trunk", "16", "--experiment.sim-steps", "2",
            "--experiment.est-steps", "2", "--experiment.batch", "4",
            "--experiment.baseline-iters", "0", "--experiment.sim-prior", "pd",
            "--experiment.horizons", "10",
            "--experiment.no-full", "--experiment.figure-samples", "40", "--quiet"]
    assert main(["evaluate", "--source", "dataset", "--data", str(ds), "--out", str(first),
                 *tiny]) == 0
    assert (first / "report.html").is_file() and (first / "results.json").is_file()
    second = tmp_path / "second"
    assert main(["evaluate", "--source", "dataset", "--data", str(ds), "--out", str(second),
                 "--checkpoints", str(first / "checkpoints"), *tiny]) == 0
    res = json.loads((second / "results.json").read_text())
    assert res["models"]["NeuralActuator[simulator]"]["train"] == "pretrained checkpoint"
    a = json.loads((first / "results.json").read_text())["estimation"][0]
    b = res["estimation"][0]
    assert a["model"] == b["model"] == "NeuralActuator"
    assert a["torque_rmse_mean"] == pytest.approx(b["torque_rmse_mean"], rel=1e-6)


def test_thresholds_are_calibrated_on_held_out_episodes_only_with_both_classes():
    from neuract.pipeline.splits import calibration_set as _calibration_set

    train, degraded = ["bad_t1", "bad_t2", "t1", "t2"], lambda e: e.startswith("bad")
    held = ["bad1", "bad2", "ok1", "ok2"]
    assert _calibration_set(held, train, degraded) is held
    for thin in (["bad1", "ok1", "ok2"], ["ok1", "ok2"], []):  # one episode of a class: no
        assert _calibration_set(thin, train, degraded) is train
        # nor from training episodes with one episode of a class: the default is kept
        assert _calibration_set(thin, ["bad_t1", "t1", "t2"], degraded) is None
        assert _calibration_set(thin, ["t1", "t2"], degraded) is None


def test_twin_experiment_on_the_openmanipulator(tmp_path):
    """The OMX twin (4 arm joints, XM430 servos, current telemetry) runs the same experiment
    on the bundled arm model; the simulator sits on an XM430 fit."""
    import dataclasses

    from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment

    data = dataclasses.replace(_tiny_data(), robot="omx")
    res = run_twin_experiment(TwinExperimentConfig(tmp_path / "omx", data, _tiny_experiment()))
    assert res["robot"] == "omx"
    assert res["best_parametric"]["name"].startswith("parametric xm430")
    models = {r["model"] for r in res["rollouts"]}
    assert {"NeuralActuator", "MuJoCo default servo"} <= models
    est = {r["model"]: r for r in res["estimation"]}
    assert est["NeuralActuator"]["torque_rmse_mean"] is not None
    assert "OpenManipulator-X" in (tmp_path / "omx" / "report.md").read_text()


def test_twin_experiment_refuses_unknown_robots(tmp_path):
    from neuract.errors import ConfigError
    from neuract.pipeline.setups import setup_for

    with pytest.raises(ConfigError, match="accepted: \\['so101', 'omx'\\]"):
        setup_for("ur5")


NAD_TINY = ["--experiment.size.d-model", "16", "--experiment.size.n-layers", "1",
            "--experiment.size.n-heads", "2", "--experiment.size.d-ff", "16",
            "--experiment.size.d-trunk", "16", "--experiment.sim-steps", "2",
            "--experiment.est-steps", "2", "--experiment.batch", "4",
            "--experiment.baseline-iters", "1", "--experiment.neural-baselines",
            "--experiment.horizons", "10", "--experiment.no-full",
            "--experiment.figure-samples", "40", "--quiet"]


@pytest.mark.realdata
def test_evaluate_nad_with_twin_pretraining(shared_data, tmp_path, monkeypatch):
    """`--twin-pretrain.minutes` adds the sim-to-real estimator to an NAD evaluation: pretrained
    on that many twin minutes of the same robot, fine-tuned on the train files, scored on the
    test files, in results.json and the report."""
    from neuract.cli import main
    from neuract.pipeline import nad_experiment

    seen = {}
    real = nad_experiment.twin_pretrained

    def spy(robot, setup, train, test, exp, pre, out, progress=None, data=None):
        seen.update(robot=robot, n_train=len(train), n_test=len(test), pre=pre, out=out)
        return real(robot, setup, train, test, exp, pre, out, progress, data)

    monkeypatch.setattr(nad_experiment, "twin_pretrained", spy)
    out = tmp_path / "nad_s2r"
    assert main(["evaluate", "--source", "nad", "--nad", str(shared_data / "nad"), "--robot",
                 "omx", "--out", str(out), *NAD_TINY, "--twin-pretrain.minutes", "3",
                 "--twin-pretrain.units", "1", "--twin-pretrain.steps", "2",
                 "--twin-pretrain.fine-tune-steps", "2"]) == 0
    assert seen["robot"] == "omx" and seen["out"] == out
    assert (seen["pre"].minutes, seen["pre"].steps, seen["pre"].fine_tune_steps) == (3, 2, 2)
    res = json.loads((out / "results.json").read_text())
    tp = res["twin_pretrained"]
    assert {"zero_shot", "fine_tuned"} <= set(tp)
    assert (out / "twin_pretrained" / "fine_tuned" / "checkpoints").is_dir()
    report = (out / "report.md").read_text()
    assert "Sim-to-real: estimator pretrained on the twin" in report
    assert "fine-tuned on the train files (2 steps)" in report


def test_twin_pretraining_needs_the_nad_source(tmp_path, capsys):
    from neuract.cli import main

    assert main(["evaluate", "--source", "twin", "--out", str(tmp_path / "x"),
                 "--twin-pretrain.minutes", "5", "--quiet"]) == 1
    assert "--twin-pretrain.minutes 5 applies to --source nad" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert main(["evaluate", "--source", "nad", "--out", str(tmp_path / "x"),
                 "--twin-pretrain.units", "0", "--quiet"]) == 1
    assert "--twin-pretrain.units = 0" in capsys.readouterr().err  # the option as typed


@pytest.mark.realdata
def test_evaluate_on_the_nad_omx_files(shared_data, tmp_path):
    """`neuract evaluate --source nad --robot omx` on the real files, tiny sizes: checkpoints
    name the bundled arm model, the simulator sits on an XM430 fit, every record has its
    mode."""
    from neuract.cli import main

    out = tmp_path / "nad_omx"
    tiny = ["--experiment.size.d-model", "16", "--experiment.size.n-layers", "1",
            "--experiment.size.n-heads", "2", "--experiment.size.d-ff", "16",
            "--experiment.size.d-trunk", "16", "--experiment.sim-steps", "4",
            "--experiment.est-steps", "4", "--experiment.batch", "4",
            "--experiment.baseline-iters", "2", "--experiment.neural-baselines",
            "--experiment.parametric-friction", "stribeck", "--experiment.horizons", "10",
            "--experiment.no-full", "--experiment.figure-samples", "40", "--experiment.physics",
            "--quiet"]
    assert main(["evaluate", "--source", "nad", "--nad", str(shared_data / "nad"), "--robot",
                 "omx", "--out", str(out), *tiny]) == 0
    res = json.loads((out / "results.json").read_text())
    est_cfg = json.loads((out / "checkpoints/neuralactuator_estimator/config.json").read_text())
    assert est_cfg["config"]["physics_robot"] == "omx_arm"  # a name that travels
    assert res["best_parametric"]["name"] == "parametric xm430+stribeck"
    assert {r["mode"] for r in res["rollouts"]} == {"simulator"}
    sim_ck = json.loads((out / "checkpoints/neuralactuator_simulator/config.json").read_text())
    assert sim_ck["config"]["prior"] == "servo" and sim_ck["config"]["n_joints"] == 4
    # one training file: no threshold can be calibrated, the default 0.5 is kept and said
    est = res["models"]["NeuralActuator[estimator]"]
    assert est["calibration_episodes"]["gate"].startswith("none")
    assert "gate_threshold" not in est
    est_ck = json.loads((out / "checkpoints/neuralactuator_estimator/config.json").read_text())
    assert "gate_threshold" not in est_ck["extra"]
