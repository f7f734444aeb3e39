"""``neuract score``: any saved model open loop on any episodes, MAE per episode and per label
beside the repetition noise floor; the baseline checkpoints ``neuract evaluate`` saves, read
back by score, simulate and ``evaluate --checkpoints``; model/data mismatches refused in one
line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neuract.cli import main
from neuract.errors import ConfigError

FEETECH = "bam_feetech_2024"  # 4 BAM-format pendulum runs (STS3250), real data
EVAL_TINY = ["--experiment.sim-steps", "0", "--experiment.est-steps", "0",
             "--experiment.baseline-iters", "2", "--experiment.neural-baselines", "mlp",
             "--experiment.parametric-friction", "coulomb_viscous",
             "--experiment.sim-prior", "pd", "--experiment.horizons", "10",
             "--experiment.no-full", "--quiet"]


def _one_line(args, capsys, *expected: str) -> str:
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for e in expected:
        assert e in err, err
    return err


def _scores(out: Path) -> dict:
    return json.loads((out / "scores.json").read_text())


# ------------------------------------------------------------------- the noise floor
def test_noise_floor_of_constructed_repeats_is_the_hand_computed_one():
    from neuract.eval.repeats import repeat_floor, repeat_groups, repeat_keys

    rng = np.random.default_rng(0)
    T = 50
    goal = np.sin(np.linspace(0, 3, T))
    q = np.stack([goal + 0.01 * rng.standard_normal(T) for _ in range(5)])[..., None]
    goals = np.stack([goal, goal + 0.5, goal, goal, goal])[..., None]
    mask = np.ones_like(q, bool)
    mask[2, 10:20] = False  # invalid samples of a repeat are left out of its pairs
    labels = [{"kp": 16, "trajectory": "sin", "episode": i, "split": "test" if i else "train"}
              for i in range(5)]
    labels[3]["kp"] = 32  # another configuration
    # episode 1: same labels, another goal; 3: another kp; 0, 2, 4: repeats
    assert repeat_keys(labels) == ["kp", "trajectory"]  # episode numbers and splits left out
    assert repeat_groups(labels, goals, mask) == [[0, 2, 4]]
    pairs = [(0, 2), (0, 4), (2, 4)]
    s = sum(np.abs(q[a] - q[b])[mask[a] & mask[b]].sum() for a, b in pairs)
    n = sum((mask[a] & mask[b]).sum() for a, b in pairs)
    f = repeat_floor(q, mask, labels, per=("kp", "trajectory"), goals=goals)
    assert f["pairs"] == 3 and f["samples"] == n
    assert f["all"] == pytest.approx(s / n, rel=1e-12)
    assert f["kp"] == {"16": pytest.approx(s / n, rel=1e-12)}
    assert f["groups"][0]["episodes"] == [0, 2, 4]
    # a pair is counted under a label's value only where both repeats carry it: episode 0 is
    # 'train', 2 and 4 'test'
    m24 = mask[2] & mask[4]
    by_split = repeat_floor(q, mask, labels, per=("split",), goals=goals)["split"]
    assert by_split == {"test": pytest.approx(np.abs(q[2] - q[4])[m24].sum() / m24.sum())}
    # the goals ignored: episode 1 joins the repeats
    assert repeat_groups(labels, goals, mask, goal_tol=None) == [[0, 1, 2, 4]]
    # no repeats at all: no floor
    none = repeat_floor(q[:2], mask[:2], [{"kp": 1}, {"kp": 2}])
    assert none["all"] is None and none["pairs"] == 0


def test_the_benchmark_floor_is_the_library_floor():
    """bench_sts3215's repeat floor (labels only, per kp / trajectory / mass) is the
    library's, on a constructed batch."""
    import sys

    import torch

    from neuract.eval.repeats import repeat_floor
    from neuract.fit.batch import RunBatch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    bench = pytest.importorskip("bench_sts3215")
    rng = np.random.default_rng(1)
    B, T = 6, 30
    q = torch.as_tensor(rng.standard_normal((B, T, 1)))
    mask = torch.as_tensor(rng.random((B, T, 1)) > 0.1)
    labels = [{"mass": 0.5, "length": 0.1, "kp": 16 if i < 4 else 8,
               "trajectory": "sin" if i % 2 else "brutal"} for i in range(B)]
    z = torch.zeros_like(q)
    b = RunBatch(q, z, z, z[..., :1], z[..., :1], mask, 0.01, labels, [str(i) for i in range(B)])
    got = bench.repeat_floor(b)
    ref = repeat_floor(q.numpy(), mask.numpy(), labels, keys=bench.REPEAT_KEYS,
                       per=("kp", "trajectory", "mass"), goal_tol=None)
    assert got["all"] == ref["all"] and got["kp"] == ref["kp"]
    a, c = 0, 2  # the one pair of kp 16 / brutal: episodes 0 and 2
    m = mask[a] & mask[c]
    pair = float((q[a] - q[c]).abs()[m].sum() / m.sum())
    assert set(got["trajectory"]) == {"brutal", "sin"}
    assert ref["groups"][0] == {"episodes": [0, 2], "floor_rad": pytest.approx(pair)}


# --------------------------------------------------------------- episode selection
def test_episode_selection_expressions():
    from neuract.data import Trajectory, TrajectoryMeta
    from neuract.data.select import select_episodes

    t = np.arange(5) * 0.1
    labs = [{"kp": 16, "mass": 0.5, "trajectory": "sin_sin"},
            {"kp": 8.0, "mass": 0.969, "trajectory": "brutal"},
            {"kp": 32, "trajectory": "up and down"}]
    trajs = [Trajectory({"t": t, "q": np.zeros((5, 1))},
                        TrajectoryMeta(robot="pendulum", joint_names=("p",), name=f"u{i}/r",
                                       labels=lab)) for i, lab in enumerate(labs)]
    pick = lambda e: [tr.meta.name for tr in select_episodes(trajs, e)]  # noqa: E731
    assert pick("kp==16 or mass==0.969") == ["u0/r", "u1/r"]
    assert pick("kp==8,32") == ["u1/r", "u2/r"]  # 8.0 is 8
    assert pick("kp>=10 and not trajectory=='up and down'") == ["u0/r"]
    assert pick("name==u2/*") == ["u2/r"]
    assert pick("(mass<0.6 or kp>20) and trajectory!=brutal") == ["u0/r", "u2/r"]
    assert pick("") == ["u0/r", "u1/r", "u2/r"]
    for expr, msg in (("kp 16", "unexpected 'kp'"), ("(kp==1", "ends too early"),
                      ("kp<abc", "compares with a number"), ("kpp==1", "has the label 'kpp'"),
                      ("kp==99", "selects none of the 3 episodes")):
        with pytest.raises(ConfigError, match=msg):
            select_episodes(trajs, expr)


# ------------------------------------------------------- twin data, evaluate baselines
@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """8 free-motion twin episodes (+ a constructed repeat of episode 0: its positions
    shifted by a known 0.4 mrad, labels and goals the same), and a tiny evaluate run on the
    8 whose baselines are saved as checkpoints."""
    from neuract.data import load_dataset, write_dataset

    root = tmp_path_factory.mktemp("score")
    ds = root / "tw8"
    assert main(["twin", "--out", str(ds), "--minutes", "0.8", "--episode-s", "6", "--units",
                 "1", "--tasks", "free"]) == 0
    ev = root / "ev"
    assert main(["evaluate", "--source", "dataset", "--data", str(ds), "--out", str(ev),
                 *EVAL_TINY]) == 0
    eps = [e for e in load_dataset(ds)]
    e0 = eps[0]
    rep = e0.replace(channels={"q": e0["q"] + 4e-4}, name=e0.meta.name + "_repeat",
                     labels={**e0.meta.labels, "episode": 99, "index": 99})
    reps = write_dataset([*eps, rep], root / "tw_rep")
    write_dataset(eps[:2], root / "tw2")  # 2 episodes, for the slower simulators
    return root, ds, ev, reps


def test_evaluate_saves_its_baselines_as_checkpoints(twin):
    from neuract.fit.saved import load_fit
    from neuract.pipeline import baselines as bl
    from neuract.pipeline.baseline_checkpoints import load_mujoco
    from neuract.robot.bundled import bundled_path

    _, _, ev, _ = twin
    res = json.loads((ev / "results.json").read_text())
    saved = res["baseline_checkpoints"]
    assert set(saved) == {"MuJoCo default servo", "parametric sts3215+coulomb_viscous",
                          "MLP actuator net"}
    assert saved["MLP actuator net"] == "checkpoints/baseline_mlp_actuator_net"
    for name, rel in saved.items():
        if name.startswith("MuJoCo"):
            ms = load_mujoco(ev / rel)
            assert ms.robot == "so101" and len(ms.joint_names) == 6
            assert ms.params == bl.mujoco_servo_params(str(bundled_path("so101")),
                                                       ms.joint_names)
        else:
            fm = load_fit(ev / rel)
            assert fm.robot == "so101" and fm.n_dof == 6
            assert json.loads((ev / rel / "report.json").read_text())["baseline"] == name


def test_score_per_episode_and_per_label_on_twin_data(twin, capsys):
    root, ds, ev, _ = twin
    out = root / "s_par"
    assert main(["score", "--model", str(ev / "checkpoints" /
                                         "baseline_parametric_sts3215_coulomb_viscous"),
                 "--data", str(ds), "--out", str(out)]) == 0
    assert "neuract score" in capsys.readouterr().out  # the closing table
    s = _scores(out)
    assert s["verb"] == "score" and s["model"]["kind"] == "fit"
    assert s["model"]["robot"] == "so101" and len(s["episodes"]) == 8
    for key in ("task", "split", "unit", "payload_mass_kg"):
        assert key in s["per_label"], s["per_label"].keys()
    assert "hidden" not in s["per_label"] and "episode" not in s["per_label"]
    assert s["per_label"]["task"]["free"]["episodes"] == 8
    assert s["per_label"]["task"]["free"]["mae_rad"] == pytest.approx(s["overall"]["mae_rad"])
    # the overall figure pools the episodes' samples
    w = np.array([e["samples"] for e in s["episodes"]], float)
    m = np.array([e["mae_rad"] for e in s["episodes"]])
    assert s["overall"]["mae_rad"] == pytest.approx((w * m).sum() / w.sum(), rel=1e-6)
    assert 0 < s["overall"]["mae_deg"] < 30
    assert s["noise_floor"]["all_rad"] is None and "no repeats" in s["noise_floor"]["note"]
    for f in ("report.md", "report.html"):
        assert "Per label" in (out / f).read_text()
    # --episodes picks the episodes scored
    one = s["episodes"][0]["episode"]
    sel = root / "s_sel"
    assert main(["score", "--model", str(ev / "checkpoints" / "baseline_mlp_actuator_net"),
                 "--data", str(ds), "--out", str(sel), "--episodes", f"name=={one}",
                 "--quiet"]) == 0
    assert [e["episode"] for e in _scores(sel)["episodes"]] == [one]


def test_score_finds_the_noise_floor_of_a_repeated_episode(twin):
    root, _, ev, reps = twin
    out = root / "s_rep"
    assert main(["score", "--model", str(ev / "checkpoints" / "baseline_mujoco_default_servo"),
                 "--data", str(reps), "--out", str(out), "--quiet"]) == 0
    fl = _scores(out)["noise_floor"]
    assert fl["pairs"] == 1 and len(fl["groups"]) == 1
    a, b = fl["groups"][0]["episodes"]
    assert b == a + "_repeat"
    assert fl["all_rad"] == pytest.approx(4e-4, rel=1e-9)  # the shift, on every sample
    assert _scores(out)["per_label"]["task"]["free"]["noise_floor_rad"] == pytest.approx(4e-4)


def test_saved_mujoco_servo_scores_as_the_experiments_servo(twin):
    """The MuJoCo baseline read back from its checkpoint simulates exactly what the
    experiment's servo does (same parameters), at the recorded samples."""
    from neuract.data import load_dataset
    from neuract.eval.protocol import simulate_full
    from neuract.pipeline import baselines as bl
    from neuract.pipeline.score import load_scorable, rollouts
    from neuract.robot.bundled import bundled_path

    root, ds, ev, _ = twin
    m = load_scorable(ev / "checkpoints" / "baseline_mujoco_default_servo")
    trajs = list(load_dataset(ds))[:2]
    rolls = rollouts(m, trajs, str(ds))
    ref = bl.mujoco_servo_simulator(str(bundled_path("so101")), trajs[0].meta.joint_names)
    for r, tr in zip(rolls, trajs):
        np.testing.assert_array_equal(r.q_sim, simulate_full(ref, tr, inputs=("q_goal",)))
        assert not r.scored[0].any() and r.scored[1:].all()


def test_simulate_accepts_the_baseline_checkpoints(twin):
    root, _, ev, _ = twin
    for name in ("baseline_mujoco_default_servo", "baseline_mlp_actuator_net"):
        out = root / f"sim_{name}"
        assert main(["simulate", "--checkpoint", str(ev / "checkpoints" / name), "--data",
                     str(root / "tw2"), "--out", str(out), "--quiet"]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["mode"] == "simulator" and len(summary["episodes"]) == 2
        assert all(np.isfinite(e["mean_mae_deg"]) for e in summary["episodes"])


def test_evaluate_checkpoints_takes_the_saved_baselines(twin):
    """evaluate --checkpoints RUN scores the saved baselines instead of fitting them again:
    the same rollout errors as the run that fitted them."""
    root, ds, ev, _ = twin
    again = root / "ev_again"
    assert main(["evaluate", "--source", "dataset", "--data", str(ds), "--out", str(again),
                 "--checkpoints", str(ev), *EVAL_TINY]) == 0
    res = json.loads((again / "results.json").read_text())
    first = json.loads((ev / "results.json").read_text())
    for name in ("parametric sts3215+coulomb_viscous", "MLP actuator net",
                 "MuJoCo default servo"):
        assert res["models"][name]["train"] == "pretrained checkpoint"
        assert "fit_" + name not in res["timings_s"]
        r1 = [r["arm_mean_deg"] for r in first["rollouts"] if r["model"] == name]
        r2 = [r["arm_mean_deg"] for r in res["rollouts"] if r["model"] == name]
        assert r1 == pytest.approx(r2, rel=1e-9, abs=1e-12)


def test_score_equals_simulate_for_a_neuralactuator(twin):
    """A NeuralActuator checkpoint scores per episode what neuract simulate reports."""
    from _tiny import tiny_episodes, tiny_model
    from neuract.neuralactuator import save_checkpoint
    from neuract.pipeline.setups import so101_setup

    root, _, _, _ = twin
    ds = root / "tw2"
    ck = save_checkpoint(tiny_model(tiny_episodes(0.2), so101_setup().robot, "simulator",
                                    steps=2, horizon=3), root / "na_sim")
    assert main(["score", "--model", str(ck), "--data", str(ds), "--out", str(root / "s_na"),
                 "--quiet"]) == 0
    assert main(["simulate", "--checkpoint", str(ck), "--data", str(ds), "--out",
                 str(root / "sim_na"), "--quiet"]) == 0
    s = _scores(root / "s_na")
    sim = json.loads((root / "sim_na" / "summary.json").read_text())
    assert s["model"]["kind"] == "neuralactuator"
    for e, f in zip(s["episodes"], sim["episodes"]):
        assert e["episode"] == f["episode"]
        assert e["mae_deg"] == pytest.approx(f["mean_mae_deg"], rel=1e-9)


def test_model_and_data_mismatches_are_refused_in_one_line(twin, tmp_path, capsys):
    from neuract.data import Trajectory, TrajectoryMeta, write_dataset

    root, ds, ev, _ = twin
    t = np.arange(60) * 0.01
    pend = write_dataset([Trajectory({"t": t, "q": np.zeros((60, 1)), "qd": np.zeros((60, 1)),
                                      "q_goal": np.zeros((60, 1))},
                                     TrajectoryMeta(robot="pendulum", joint_names=("p",),
                                                    rate_hz=100.0, name=f"r{i}",
                                                    labels={"mass": 0.5, "length": 0.1}))
                          for i in range(2)], tmp_path / "pend")
    par = ev / "checkpoints" / "baseline_parametric_sts3215_coulomb_viscous"
    out = tmp_path / "o"
    _one_line(["score", "--model", str(par), "--data", str(pend), "--out", str(out)], capsys,
              "was fitted on 'so101' (6 joints)", "bench pendulum episodes with 1 joint(s)")
    _one_line(["score", "--model", str(ev / "checkpoints" / "baseline_mujoco_default_servo"),
               "--data", str(pend), "--out", str(out)], capsys, "MuJoCo position servo",
              "bench pendulum")
    omx = tmp_path / "omx"  # the right joint count is not enough: another arm
    assert main(["twin", "--robot", "omx", "--out", str(omx), "--minutes", "0.1",
                 "--episode-s", "6", "--units", "1", "--tasks", "free"]) == 0
    capsys.readouterr()
    _one_line(["score", "--model", str(par), "--data", str(omx), "--out", str(out)], capsys,
              "'so101' (6 joints)", "'omx' episodes with")
    ident = tmp_path / "ident"
    ident.mkdir()
    (ident / "config.json").write_text(json.dumps({"type": "IdentifyConfig", "config": {}}))
    _one_line(["score", "--model", str(ident), "--data", str(ds), "--out", str(out)], capsys,
              "neuract identify output", "not a simulator")
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"kind": "something"}))
    _one_line(["score", "--model", str(other), "--data", str(ds), "--out", str(out)], capsys,
              "kind='something'", "accepted: a neuract fit output")
    _one_line(["score", "--model", str(par), "--data", str(ds), "--out", str(out),
               "--episodes", "task==nothing"], capsys, "selects none of the 8 episodes")
    _one_line(["score", "--model", str(par), "--data", str(ds), "--out", str(ds)], capsys,
              "holds")  # --out is the data
    assert not out.exists()


# -------------------------------------------------------------- real pendulum runs
@pytest.mark.realdata
def test_score_and_simulate_a_pendulum_fit_on_bam_logs(shared_data, tmp_path, capsys):
    """A fit on 4 BAM-format pendulum runs, scored on them per kp / mass / trajectory and
    simulated by neuract simulate (the same per-episode errors); a pendulum model on arm data
    and arm checks on pendulum data refused."""
    data = shared_data / FEETECH
    fit = tmp_path / "fit"
    assert main(["fit", "--data", str(data), "--actuator.type", "servo",
                 "--train.stage-iters", "1", "1", "1", "--val-fraction", "0",
                 "--arm-mass", "0.05", "--out", str(fit)]) == 0
    out = tmp_path / "score"
    assert main(["score", "--model", str(fit), "--data", str(data), "--out", str(out),
                 "--quiet"]) == 0
    s = _scores(out)
    assert s["model"]["robot"] == "pendulum" and len(s["episodes"]) == 4
    for key in ("kp", "mass", "trajectory"):
        assert key in s["per_label"]
    assert set(s["per_label"]["trajectory"]) == {"sin_sin", "lift_and_drop", "sin_time_square",
                                                 "up_and_down"}
    assert "motor_params" not in s["per_label"]  # not a plain value
    # neuract fit's own training MAE (the start sample included) is the score's, nearly
    train = json.loads((fit / "report.json").read_text())["train_mae_rad"]
    assert s["overall"]["episode_mean_mae_rad"] == pytest.approx(train, rel=0.02)
    sim = tmp_path / "sim"
    assert main(["simulate", "--checkpoint", str(fit), "--data", str(data), "--out", str(sim),
                 "--quiet"]) == 0
    summary = json.loads((sim / "summary.json").read_text())
    for e, f in zip(s["episodes"], summary["episodes"]):
        assert e["mae_deg"] == pytest.approx(f["mean_mae_deg"], rel=1e-9)
    sel = tmp_path / "sel"
    assert main(["score", "--model", str(fit), "--data", str(data), "--out", str(sel),
                 "--episodes", "trajectory==sin_sin,up_and_down", "--quiet"]) == 0
    assert len(_scores(sel)["episodes"]) == 2
    capsys.readouterr()
    _one_line(["score", "--model", str(fit), "--data", str(data), "--out", str(tmp_path / "x"),
               "--robot", "so101"], capsys, "--robot 'so101' applies to arm models")


@pytest.mark.realdata
def test_a_pendulum_fit_on_arm_data_is_refused(shared_data, twin, tmp_path, capsys):
    root, ds, _, _ = twin
    fit = tmp_path / "fit"
    assert main(["fit", "--data", str(shared_data / FEETECH), "--actuator.type", "servo",
                 "--train.stage-iters", "1", "0", "0", "--val-fraction", "0",
                 "--arm-mass", "0.05", "--out", str(fit)]) == 0
    capsys.readouterr()
    for verb, opt in (("score", "--model"), ("simulate", "--checkpoint")):
        _one_line([verb, opt, str(fit), "--data", str(ds), "--out", str(tmp_path / verb)],
                  capsys, "was fitted on the bench pendulum (1 joint)",
                  "'so101' episodes with 6 joint(s)")
