"""Rollout protocol: window bookkeeping, exact-model check, the simulation rule, estimator mode."""

from __future__ import annotations

import numpy as np
import pytest

from neuract.data import Trajectory
from neuract.data.trajectory import TrajectoryMeta
from neuract.errors import ConfigError, SchemaError
from neuract.eval import evaluate_estimator
from neuract.eval import protocol as P

ALPHA = 0.2  # first-order servo lag of the synthetic arm


def _lag_traj(n=700, seed=0, name="ep", valid=None):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.uniform(0.01, 0.02, n))
    goal = np.cumsum(rng.normal(0, 0.05, (n, 2)), axis=0)
    q = np.zeros((n, 2))
    for k in range(n - 1):
        q[k + 1] = q[k] + ALPHA * (goal[k] - q[k])
    ch = {"t": t, "q": q, "q_goal": goal, "qd": np.gradient(q, t, axis=0)}
    if valid is not None:
        ch["valid"] = valid
    return Trajectory(ch, TrajectoryMeta(robot="toy", joint_names=("j1", "gripper"), name=name))


def _lag_sim(batch: P.SimBatch) -> np.ndarray:
    q = batch.q0.copy()
    out = []
    for k in range(batch.horizon):
        q = q + ALPHA * (batch.q_goal[:, k] - q)
        out.append(q)
    return np.stack(out, axis=1)


def test_window_starts():
    assert P.window_starts(1000, 10, 10).tolist() == list(range(0, 990, 10))
    assert len(P.window_starts(600, 600, 600)) == 0
    assert P.window_starts(601, 600, 1).tolist() == [0]
    with pytest.raises(ConfigError):
        P.window_starts(100, 0, 1)


def test_exact_model_scores_zero_and_hold_does_not():
    trajs = [_lag_traj(seed=0), _lag_traj(n=400, seed=1, name="b")]
    recs = P.evaluate_rollouts(_lag_sim, trajs, "exact")
    hold = P.evaluate_rollouts(P.hold_simulator, trajs, "hold")
    assert [r["horizon"] for r in recs] == [10, 50, 100, 300, 600, "full"]
    for r, h in zip(recs, hold):
        assert r["mode"] == "simulator" and r["model"] == "exact"
        if r["n_windows"] == 0:
            assert r["joint_mae_deg"] is None
            continue
        assert r["arm_max_deg"] < 1e-9 and r["gripper_deg"] < 1e-9
        assert h["arm_mean_deg"] > 0.1
    n = {r["horizon"]: r["n_windows"] for r in recs}
    assert n[10] == len(P.window_starts(700, 10, 10)) + len(P.window_starts(400, 10, 10))
    assert n[600] == 1 and n["full"] == 2  # only the 700-sample episode fits 600 steps


def test_mae_equals_brute_force_loop():
    tr = _lag_traj(n=300, seed=3)
    rng = np.random.default_rng(5)
    noise = {}

    def noisy(batch):
        out = _lag_sim(batch) + rng.normal(0, 0.01, (batch.batch_size, batch.horizon, 2))
        noise[batch.horizon] = out
        return out

    rec = P.evaluate_rollouts(noisy, [tr], "noisy", horizons=[50], stride=20)[0]
    starts = P.window_starts(300, 50, 20)
    q = tr["q"]
    errs = [abs(noise[50][i, k, j] - q[s + 1 + k, j])
            for i, s in enumerate(starts) for k in range(50) for j in [0]]
    assert rec["joint_mae_deg"]["j1"] == pytest.approx(np.degrees(np.mean(errs)), rel=1e-12)
    assert rec["n_windows"] == len(starts) and rec["stride"] == 20


def test_simulator_never_sees_measured_future_positions():
    tr = _lag_traj(n=250, seed=4)
    seen = []

    def spy(batch):
        seen.append(batch)
        with pytest.raises(ValueError):
            batch.q_goal[0, 0, 0] = 1.0  # read-only copy
        return P.hold_simulator(batch)

    P.evaluate_rollouts(spy, [tr], "spy", horizons=[10, "full"], stride=7)
    q = tr["q"]
    for b in seen:
        assert set(b.inputs) == {"q_goal"}
        # q0 rows are measured window starts; no other array holds a measured position
        assert np.isclose(b.q0[:, None, :], q[None]).all(-1).any(1).all()
        for a in (b.qd0, *b.inputs.values()):
            flat = a.reshape(-1, 2)
            assert not np.isclose(flat[:, None, :], q[None]).all(-1).any()
    with pytest.raises(SchemaError, match="not allowed"):
        P.SimBatch(q0=np.zeros((1, 2)), qd0=np.zeros((1, 2)),
                   inputs={"q_goal": np.zeros((1, 3, 2)), "q": np.zeros((1, 3, 2))},
                   t=np.zeros((1, 4)), joint_names=("a", "b"), robot="toy")
    with pytest.raises(ConfigError, match="not allowed"):
        P.evaluate_rollouts(spy, [tr], "cheat", inputs=("current",))
    assert all(dict(b.labels) == {} for b in seen)  # no labels unless asked for
    seen.clear()
    tr = tr.replace(labels={"kp": 32.0, "hidden": {"friction": 0.1}})
    P.evaluate_rollouts(spy, [tr], "kp", horizons=[10], labels=("kp",))
    assert all(dict(b.labels) == {"kp": 32.0} for b in seen)
    with pytest.raises(SchemaError, match="no label 'payload'"):
        P.evaluate_rollouts(spy, [tr], "x", labels=("payload",))
    # a twin's hidden ground truth never reaches a simulator, asked for or smuggled in
    with pytest.raises(ConfigError, match="hidden ground truth"):
        P.evaluate_rollouts(spy, [tr], "x", labels=("kp", "hidden"))
    with pytest.raises(SchemaError, match=r"\['condition_per_joint'\] hold hidden"):
        P.SimBatch(q0=np.zeros((1, 2)), qd0=np.zeros((1, 2)),
                   inputs={"q_goal": np.zeros((1, 3, 2))}, t=np.zeros((1, 4)),
                   joint_names=("a", "b"), robot="toy", labels={"condition_per_joint": [0, 1]})


def test_simulate_full_matches_full_horizon_record():
    tr = _lag_traj(n=150, seed=8)
    q_sim = P.simulate_full(P.hold_simulator, tr)
    assert q_sim.shape == tr["q"].shape and np.array_equal(q_sim[0], tr["q"][0])
    assert (q_sim == tr["q"][0]).all()
    rec = P.evaluate_rollouts(P.hold_simulator, [tr], "hold", horizons=["full"])[0]
    want = np.degrees(np.abs(q_sim[1:] - tr["q"][1:]).mean(0))
    assert np.allclose(list(rec["joint_mae_deg"].values()), want)
    assert np.allclose(P.simulate_full(_lag_sim, tr, history=8), tr["q"])


def test_bad_simulator_output_is_rejected():
    tr = _lag_traj(n=100)
    with pytest.raises(SchemaError, match="shape"):
        P.evaluate_rollouts(lambda b: np.zeros((1, 1, 2)), [tr], "bad", horizons=[10])
    with pytest.raises(SchemaError, match="non-finite"):
        P.evaluate_rollouts(lambda b: np.full((b.batch_size, b.horizon, 2), np.nan), [tr],
                            "nan", horizons=[10])


def test_invalid_samples_are_masked_and_skip_windows():
    valid = np.ones((200, 2), bool)
    valid[30] = False
    tr = _lag_traj(n=200, valid=valid)
    rec = P.evaluate_rollouts(P.hold_simulator, [tr], "hold", horizons=[10])[0]
    assert rec["n_windows"] == len(P.window_starts(200, 10, 10)) - 1  # start 30 skipped
    assert rec["n_samples"] == rec["n_windows"] * 10 - 1  # sample 30 inside window 20


def test_per_window_adapter_matches_batched():
    tr = _lag_traj(n=200)

    def single(q0, qd0, q_goal, t):
        q, out = q0.copy(), []
        for g in q_goal:
            q = q + ALPHA * (g - q)
            out.append(q)
        return np.array(out)

    a = P.evaluate_rollouts(P.per_window(single), [tr], "a", horizons=[10, 50])
    b = P.evaluate_rollouts(_lag_sim, [tr], "b", horizons=[10, 50])
    assert [r["joint_mae_deg"] for r in a] == [r["joint_mae_deg"] for r in b]


def test_estimator_records():
    n = 120
    t = np.arange(n) * 0.01
    contact = np.zeros(n, bool)
    contact[40:80] = True
    f = np.zeros((n, 3))
    f[contact, 2] = -5.0
    tau = np.ones((n, 2))
    cond = np.zeros(n, np.int8)
    cond[60:] = 1
    tr = Trajectory({"t": t, "q": np.zeros((n, 2)), "tau": tau, "ee_force": f,
                     "ee_force_mask": np.ones(n, bool), "contact": contact, "condition": cond},
                    TrajectoryMeta(robot="toy", joint_names=("j1", "j2"), name="e"))

    def est(traj):
        return {"tau": traj["tau"] + 0.5, "ee_force": traj["ee_force"] + [0.0, 0.2, 0.0],
                "contact_prob": np.roll(traj["contact"], 2).astype(float),
                "condition_prob": traj["condition"].astype(float) * 0.8 + 0.1}

    r = evaluate_estimator(est, [tr], "oracle")
    assert r["mode"] == "estimator"
    assert r["torque_rmse"]["j1"] == pytest.approx(0.5)
    assert r["force"]["contact"] == pytest.approx(0.2)
    assert r["gate"]["latency_mean_s"] == pytest.approx(0.02)
    assert r["condition"]["accuracy"] == 1.0 and r["condition"]["auc"] == 1.0
    # recall per true force band: the 40 contact samples are at 5 N, the first two missed
    bands = {tuple(b["force_n"]): b for b in r["gate_recall_by_force"]}
    assert bands[(4.0, None)]["n_contact"] == 40
    assert bands[(4.0, None)]["recall"] == pytest.approx(38 / 40)
    assert bands[(0.5, 1.0)]["n_contact"] == 0 and bands[(0.5, 1.0)]["recall"] is None
    assert "gate_by_task" not in r  # no task label

    def warmup(traj):  # no output for the first 8 samples (NaN there)
        out = {k: np.array(v, dtype=float) for k, v in est(traj).items()}
        for v in out.values():
            v[:8] = np.nan
        out["tau"][8:] += 1.0
        return {**out, "valid": np.arange(len(traj)) >= 8}

    w = evaluate_estimator(warmup, [tr], "warmup")
    assert w["torque_rmse"]["j1"] == pytest.approx(1.5)
    assert w["force"]["n_all"] == n - 8 and w["gate"]["n_samples"] == n - 8
    assert w["condition"]["accuracy"] == 1.0


def test_estimator_gate_per_task():
    n = 50
    t = np.arange(n) * 0.01
    eps = []
    for task, on in (("push", slice(10, 20)), ("push", slice(30, 40)), ("free", slice(0, 0))):
        c = np.zeros(n, bool)
        c[on] = True
        eps.append(Trajectory({"t": t, "q": np.zeros((n, 1)), "contact": c},
                              TrajectoryMeta(robot="toy", joint_names=("j",), name=task,
                                             labels={"task": task})))

    def est(traj):  # right on push episodes, 5 false alarms on the free one
        p = traj["contact"].astype(float)
        if traj.meta.labels["task"] == "free":
            p[:5] = 1.0
        return {"contact_prob": p}

    r = evaluate_estimator(est, eps, "toy")
    assert r["gate_by_task"]["push"]["f1"] == 1.0
    assert r["gate_by_task"]["free"]["precision"] == 0.0
    assert r["gate_by_task"]["free"]["n_events"] == 0
    assert r["gate_by_task"]["free"]["n_false_alarms"] == 5
    assert r["gate_by_task"]["push"]["n_missed_samples"] == 0
    assert r["gate"]["precision"] == pytest.approx(20 / 25)
    assert "gate_recall_by_force" not in r  # no force labels


def test_gate_recall_per_force_counts_labelled_contact_only():
    n = 40
    t = np.arange(n) * 0.01
    c = np.zeros(n, bool)
    c[10:30] = True
    f = np.zeros((n, 3))
    f[10:30, 0] = 1.5
    mask = np.ones(n, bool)
    mask[20:30] = False  # contact without a force label
    f[~mask] = 0.0  # the readers store 0 where there is no label
    tr = Trajectory({"t": t, "q": np.zeros((n, 1)), "contact": c, "ee_force": f,
                     "ee_force_mask": mask},
                    TrajectoryMeta(robot="toy", joint_names=("j",), name="e"))
    r = evaluate_estimator(lambda traj: {"contact_prob": c.astype(float)}, [tr], "toy")
    bands = {tuple(b["force_n"]): b for b in r["gate_recall_by_force"]}
    assert bands[(1.0, 2.0)]["n_contact"] == 10 and bands[(1.0, 2.0)]["recall"] == 1.0
    assert sum(b["n_contact"] for b in bands.values()) == 10


def test_condition_decision_at_the_end_of_each_episode():
    """Beside the per-sample accuracy, the decision each trajectory ends with: an estimator
    that is unsure for most of an episode but right at its end scores low per sample and
    full marks at the end; one wrong at the end of one of two episodes scores 1/2."""
    n = 100
    t = np.arange(n) * 0.01
    eps = [Trajectory({"t": t, "q": np.zeros((n, 1)), "condition": np.full(n, c, np.int8)},
                      TrajectoryMeta(robot="toy", joint_names=("j",), name=f"e{c}"))
           for c in (0, 1)]

    def late(traj):  # right only over the last 20 samples
        c = float(traj["condition"][0])
        p = np.full(n, 1.0 - c) * 0.8 + 0.1
        p[-20:] = c * 0.8 + 0.1
        return {"condition_prob": p}

    r = evaluate_estimator(late, eps, "late")["condition"]
    assert r["accuracy"] == pytest.approx(0.2)
    assert r["episode_end"]["accuracy"] == 1.0 and r["episode_end"]["n"] == 2
    wrong = evaluate_estimator(lambda tr: {"condition_prob": np.full(n, 0.9)}, eps, "w")
    assert wrong["condition"]["episode_end"]["accuracy"] == 0.5
    assert wrong["condition"]["episode_end"]["balanced_accuracy"] == 0.5


def test_history_gives_only_past_samples():
    tr = _lag_traj(n=300, seed=6)
    q, t = tr["q"], tr["t"]
    seen = []

    def spy(batch):
        seen.append(batch)
        return _lag_sim(batch)

    recs = P.evaluate_rollouts(spy, [tr], "spy", horizons=[10, "full"], history=8)
    assert recs[0]["n_windows"] == len(P.window_starts(300 - 7, 10, 10))
    assert recs[0]["arm_max_deg"] < 1e-9 and recs[0]["history"] == 8
    assert recs[1]["n_windows"] == 1
    for b in seen:
        assert b.past["q"].shape == (b.batch_size, 8, 2) and set(b.past) == {"q", "qd", "q_goal"}
        assert np.array_equal(b.past["q"][:, -1], b.q0)
        assert (b.t_past <= 0).all() and (b.t_past[:, -1] == 0).all()
        for i in range(b.batch_size):
            t0 = int(np.flatnonzero(np.isclose(q, b.q0[i]).all(-1))[0])
            assert t0 >= 7
            assert np.array_equal(b.past["q"][i], q[t0 - 7:t0 + 1])  # nothing after t0
            assert np.allclose(b.t_past[i], t[t0 - 7:t0 + 1] - t[t0])
    with pytest.raises(SchemaError, match="past channels"):
        P.SimBatch(q0=np.zeros((1, 2)), qd0=np.zeros((1, 2)),
                   inputs={"q_goal": np.zeros((1, 3, 2))}, t=np.zeros((1, 4)),
                   joint_names=("a", "b"), robot="toy", past={"current": np.zeros((1, 2, 2))},
                   t_past=np.zeros((1, 2)))


@pytest.mark.realdata
def test_reference_simulators_on_nad_test_files(shared_data):
    from neuract.io import iter_nad

    trajs = [t for t in iter_nad(shared_data / "nad") if t.meta.labels.get("split") == "test"]
    assert {t.meta.robot for t in trajs} == {"omx", "so101"}
    for robot in ("omx", "so101"):
        tt = [t for t in trajs if t.meta.robot == robot]
        hold = P.evaluate_rollouts(P.hold_simulator, tt, "hold")
        goal = P.evaluate_rollouts(P.goal_simulator, tt, "goal")
        for rec in hold + goal:
            assert rec["mode"] == "simulator"
            h = rec["horizon"]
            if h != "full":
                assert rec["n_windows"] == sum(len(P.window_starts(len(t), h, h)) for t in tt)
        arm = [r["arm_mean_deg"] for r in hold if r["n_windows"] and r["horizon"] != "full"]
        assert arm == sorted(arm)  # holding still drifts further from the arm over time
        assert goal[-1]["arm_mean_deg"] < hold[-1]["arm_mean_deg"]  # full trajectory


def test_filter_derived_qd_never_reads_samples_after_t0():
    from neuract.data.derivatives import add_derivatives

    n = 200
    t = np.arange(n) * 0.016
    rng = np.random.default_rng(7)
    q = np.cumsum(rng.normal(0, 0.01, (n, 2)), axis=0)
    meta = TrajectoryMeta(robot="toy", joint_names=("j1", "gripper"), name="sg")
    tr = add_derivatives(Trajectory({"t": t, "q": q, "q_goal": q.copy()}, meta), window_s=0.1)
    assert tr.meta.labels["derivatives"]["qd"]  # centred filter: qd[k] reads q[k + 1 ...]
    seen = []

    def spy(batch):
        seen.append(batch)
        return P.hold_simulator(batch)

    P.evaluate_rollouts(spy, [tr], "spy", horizons=[10], history=4)
    q2 = q.copy()
    t0 = int(np.flatnonzero(np.isclose(q, seen[0].q0[1]).all(-1))[0])
    q2[t0 + 1:] += 1.0  # change only the future of the second window's start
    tr2 = add_derivatives(Trajectory({"t": t, "q": q2, "q_goal": q.copy()}, meta), window_s=0.1)
    seen2 = []
    P.evaluate_rollouts(lambda b: seen2.append(b) or P.hold_simulator(b), [tr2], "spy",
                        horizons=[10], history=4)
    assert np.array_equal(seen[0].qd0[1], seen2[0].qd0[1])
    # the filter's qd is replaced by backward differences of the measured positions
    back = np.diff(q[t0 - 4:t0 + 1], axis=0) / np.diff(t[t0 - 4:t0 + 1])[:, None]
    np.testing.assert_allclose(seen[0].qd0[1], back[-1], rtol=1e-12)
    np.testing.assert_allclose(seen[0].past["qd"][1], back, rtol=1e-12)  # samples t0-3..t0
    assert np.array_equal(seen[0].past["qd"][1], seen2[0].past["qd"][1])
    assert not np.array_equal(tr["qd"][t0], tr2["qd"][t0])  # the stored qd did read the future
