"""NeuralActuator training on a tiny synthetic planar-arm dataset generated with a known
saturated PD servo: pose-only training recovers the servo (no torque label is read),
supervised heads learn, fine-tuning adapts to a new unit, the adapters plug into the
protocol. (Twin-data tests of the same code: test_neuralactuator_train_pipeline.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from neuract.data import Trajectory, TrajectoryMeta
from neuract.estimate import filters
from neuract.eval.metrics import decision_f1
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
from neuract.neuralactuator.data import flatten
from neuract.neuralactuator.rollout import sim_rollout, simulator
from neuract.neuralactuator.train import NeuralActuatorTrainConfig as TrainConfig
from neuract.neuralactuator.train import fine_tune, init_model, train_neuralactuator
from neuract.robot import load_robot
from neuract.sim import step

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=32, d_trunk=32, history=4)
KP, KD, TAU_MAX = 6.0, 0.4, 4.0


@pytest.fixture(scope="module")
def robot():
    return load_robot("planar2", dtype=torch.float32)


def synth(robot, n_eps=3, T=120, rate=50.0, substeps=4, seed=0, payload=True, kp=KP):
    """Episodes of planar2 driven by tau = TAU_MAX tanh((kp e - KD qd) / TAU_MAX) + J^T f."""
    rng = np.random.default_rng(seed)
    dt = 1.0 / rate
    out = []
    for e in range(n_eps):
        t = np.arange(T) * dt
        f1, f2 = rng.uniform(0.3, 1.0, 2)
        goal = np.stack([0.6 * np.sin(2 * np.pi * f1 * t + e), 0.5 * np.sin(2 * np.pi * f2 * t)],
                        1)
        contact = (t > t[T // 2]) if (payload and e % 2 == 0) else np.zeros(T, bool)
        force = np.where(contact[:, None], np.array([0.0, 0.0, -2.0]), 0.0)
        q = torch.tensor(goal[0:1], dtype=torch.float32)
        qd = torch.zeros(1, 2)
        qs, qds, taus = [], [], []
        site = robot.site_names[-1]
        for k in range(T):
            qs.append(q[0].numpy().copy())
            qds.append(qd[0].numpy().copy())
            g = torch.tensor(goal[k:k + 1], dtype=torch.float32)
            fk = torch.tensor(force[k:k + 1], dtype=torch.float32)
            ext = 0.0
            if contact[k]:
                J = robot.site_jacobian(q, site)[..., :3, :]
                ext = (J.transpose(-1, -2) @ fk.unsqueeze(-1)).squeeze(-1)
            taus.append((TAU_MAX * torch.tanh((kp * (g - q) - KD * qd) / TAU_MAX))[0].numpy())
            for _ in range(substeps):
                tau = TAU_MAX * torch.tanh((kp * (g - q) - KD * qd) / TAU_MAX)
                q, qd = step(robot, q, qd, tau + ext, dt / substeps)
        tau = np.array(taus)
        ch = {"t": t, "q": np.array(qs), "qd": np.array(qds), "q_goal": goal, "tau": tau,
              "current": tau / 1.5, "voltage": np.full((T, 2), 12.0),
              "temperature": 30.0 + 0.01 * np.arange(T)[:, None] * np.ones((1, 2)),
              "ee_force": force, "ee_force_mask": np.ones(T, bool), "contact": contact,
              "condition": np.full(T, e % 2, np.int8)}
        labels = {"condition_per_joint": [e % 2, 0]}
        out.append(Trajectory(ch, TrajectoryMeta(robot="planar2", joint_names=("j1", "j2"),
                                                 name=f"ep{e}", labels=labels)))
    return out


def test_flat_data_keeps_episodes_apart(robot):
    trajs = synth(robot, n_eps=2, T=40)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2)
    data = flatten(trajs, robot, robot.site_names[-1], cfg.channels, None)
    assert data.n_samples == 80 and data.starts.tolist() == [0, 40]
    np.testing.assert_allclose(data.q[40:].numpy(), trajs[1]["q"], atol=1e-6)
    a = data.anchors(history=4, horizon=6)
    # every window (3 samples back, 6 ahead) stays inside one episode
    assert a.tolist() == list(range(3, 34)) + list(range(43, 74))
    assert data.cond[0].tolist() == [0, 0] and data.cond[40].tolist() == [1, 0]
    # J^T f of the labelled payload force at the measured pose
    site = robot.site_names[-1]
    k = int(np.argmax(trajs[0]["contact"]))
    J = robot.site_jacobian(data.q[k:k + 1], site)[0, :3, :]
    torch.testing.assert_close(data.tau_ext[k], J.T @ data.force[k])


def test_simulator_rollout_first_step_uses_forward_torque(robot):
    """With one substep, the rollout's first step applies exactly model(x)'s torque."""
    trajs = synth(robot, n_eps=1, T=30)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, mode="simulator", tau_max=(TAU_MAX,))
    data = flatten(trajs, robot, None, None, cfg.channels)
    model = init_model(cfg, data)
    from neuract.neuralactuator import assemble

    with torch.no_grad():
        model.head.weight.normal_(0, 0.1)
        t0 = torch.tensor([3, 9])
        idx = t0[:, None] + torch.arange(-3, 1)
        past = {k: getattr(data, k)[idx] for k in ("q_goal", "q", "qd")}
        fut = t0[:, None] + torch.arange(3)
        dt = torch.full((2, 3), 0.02)
        q_sim = sim_rollout(model, robot, past, data.q[t0], data.qd[t0], data.q_goal[fut], dt,
                            substeps=1)
        tau = model(assemble(past, cfg.channels))[0]
        q1, _ = step(robot, data.q[t0], data.qd[t0], tau, dt[:, :1])
    torch.testing.assert_close(q_sim[:, 0], q1)


def torque_rmse(model, trajs):
    """RMSE [N m] of the model's torque against the true (never used) torque."""
    from neuract.neuralactuator import windows

    errs = []
    with torch.no_grad():
        for tr in trajs:
            x = windows(tr, model.cfg.channels, 2, model.cfg.history)
            tau = model(x)[0].numpy()
            errs.append(tau - tr["tau"][model.cfg.history - 1:])
    return float(np.sqrt(np.mean(np.concatenate(errs) ** 2)))


POSE_ONLY = dict(force_weight=0.0, gate_weight=0.0, condition_weight=0.0, substeps=2,
                 pose_scale=0.01, prior_lr_scale=10.0)


def test_pose_only_training_learns_the_true_torque(robot):
    """No torque labels: the servo's torque is learned from positions through the simulator."""
    trajs = synth(robot, n_eps=3, T=80, payload=False)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, mode="simulator", tau_max=(TAU_MAX,),
                               kp_init=2.0, kd_init=0.1)
    before = torque_rmse(init_model(cfg, flatten(trajs, robot, None, None, cfg.channels)), trajs)
    tc = TrainConfig(steps=60, batch=8, horizon=6, lr=3e-2, **POSE_ONLY)
    model, rep = train_neuralactuator(trajs, robot, cfg, tc)
    after = torque_rmse(model, trajs)
    assert after < 0.25 * before, (before, after)


def head_errors(model, trajs) -> dict:
    """Force MAE [N], gate and per-motor condition Brier scores over all valid samples."""
    from neuract.estimate import estimate

    f, g, c = [], [], []
    for tr in trajs:
        o = estimate(model, tr, condition_tau_s=1e-9, condition_threshold=0.5)
        v = o["valid"]
        f.append(np.abs(o["ee_force"][v] - tr["ee_force"][v]).mean())
        g.append(((o["contact_prob"][v] - tr["contact"][v]) ** 2).mean())
        y = np.asarray(tr.meta.labels["condition_per_joint"])
        c.append(((o["condition_prob_joint"][v] - y) ** 2).mean())
    return {"force": np.mean(f), "gate": np.mean(g), "condition": np.mean(c)}


def test_supervised_heads_learn_and_fine_tune_keeps_stats(robot):
    trajs = synth(robot, n_eps=4, T=60)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, mode="estimator", tau_max=(TAU_MAX,))
    site = robot.site_names[-1]
    tc = TrainConfig(steps=60, batch=16, horizon=4, lr=1e-2, substeps=2)
    model0 = init_model(cfg, flatten(trajs, robot, site, cfg.channels, None))
    model, _ = train_neuralactuator(trajs, robot, cfg, tc, site=site)
    a, b = head_errors(model0, trajs), head_errors(model, trajs)
    # (the force head is not checked here: on 4 tiny episodes it does not learn a force that
    # only shows through the arm's dynamics; the twin benchmark scores it)
    for k in ("gate", "condition"):
        assert b[k] < 0.8 * a[k], (k, a[k], b[k])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    new_unit = synth(robot, n_eps=1, T=40, seed=5)
    fine_tune(model, new_unit, robot, TrainConfig(steps=3, horizon=4, freeze_encoder=True),
              site=site)
    after = model.state_dict()
    torch.testing.assert_close(model.x_mean, before["x_mean"])
    torch.testing.assert_close(model.x_std, before["x_std"])
    # frozen encoder (input projection, positions, attention layers): exactly as it was;
    # the head trunk and the heads were trained
    enc = [k for k in before if k.startswith(("inp.", "pos", "layers."))]
    assert "inp.weight" in enc and "pos" in enc and any(k.startswith("layers.") for k in enc)
    for k in enc:
        assert torch.equal(after[k], before[k]), k
    for k in ("trunk.weight", "head.weight"):
        assert not torch.equal(after[k], before[k]), k


def test_aux_windows_train_the_labelled_heads_without_simulation(robot):
    """Extra labelled-head windows: their losses are reported and fall as training goes on;
    they leave simulator-mode training untouched (it has no labelled heads)."""
    trajs = synth(robot, n_eps=4, T=60)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, mode="estimator", tau_max=(TAU_MAX,))
    site = robot.site_names[-1]
    base = dict(steps=40, batch=2, horizon=2, lr=1e-2, substeps=1)
    hist = []
    train_neuralactuator(trajs, robot, cfg, TrainConfig(**base, aux_batch=64), site=site,
                         progress=lambda s, t, info: hist.append(info))
    assert {"aux_gate_bce", "aux_cond_ce", "aux_force_mae"} <= set(hist[-1])
    for k in ("aux_gate_bce", "aux_cond_ce"):
        first = np.mean([h[k] for h in hist[:5]])
        last = np.mean([h[k] for h in hist[-5:]])
        assert last < 0.8 * first, (k, first, last)
    sim = cfg.replace(mode="simulator")
    short = {**base, "steps": 5}
    s0, _ = train_neuralactuator(trajs, robot, sim, TrainConfig(**short), site=site)
    s1, _ = train_neuralactuator(trajs, robot, sim, TrainConfig(**short, aux_batch=64), site=site)
    for (k, x), y in zip(s0.state_dict().items(), s1.state_dict().values()):
        torch.testing.assert_close(x, y, msg=k, rtol=0, atol=0)


def test_simulator_adapter_runs_the_rollout_protocol(robot):
    from neuract.eval.protocol import evaluate_rollouts

    trajs = synth(robot, n_eps=1, T=60, payload=False)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, mode="simulator", tau_max=(TAU_MAX,),
                               kp_init=KP, kd_init=KD)
    model = init_model(cfg, flatten(trajs, robot, None, None, cfg.channels))
    with torch.no_grad():
        model.head.weight.zero_()
    recs = evaluate_rollouts(simulator(model, robot, substeps=4), trajs, "na", horizons=(10,),
                             history=cfg.history, gripper=None)
    # the model is the true servo (zero residual): its rollouts track the data closely
    (rec,) = [r for r in recs if r.get("horizon") == 10]
    mae = list(rec["joint_mae_deg"].values()) if isinstance(rec["joint_mae_deg"], dict) \
        else list(rec["joint_mae_deg"])
    assert rec["n_samples"] > 0 and rec["mode"] == "simulator"
    assert all(math.isfinite(v) and v < 0.5 for v in mae), rec


def test_estimates_align_with_samples_and_score_with_the_protocol(robot):
    from neuract.estimate import estimate, estimator
    from neuract.eval.estimation import evaluate_estimator
    from neuract.neuralactuator import assemble

    trajs = synth(robot, n_eps=2, T=40)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, tau_max=(TAU_MAX,), n_conditions=2)
    model = NeuralActuator(cfg)
    with torch.no_grad():
        model.head.weight.normal_(0, 0.1)
    out = estimate(model, trajs[0], chunk=7, condition_tau_s=1e-9)
    h = cfg.history
    assert out["valid"].tolist() == [False] * (h - 1) + [True] * (40 - h + 1)
    assert np.isnan(out["tau"][: h - 1]).all() and np.isfinite(out["tau"][h - 1:]).all()
    # sample 20's estimate is the model on the window ending at sample 20
    tr = trajs[0]
    x = assemble({k: torch.tensor(tr[k][20 - h + 1:21], dtype=torch.float32)[None]
                  for k in ("q_goal", "q", "qd", "current", "voltage", "temperature")},
                 cfg.channels)
    with torch.no_grad():
        tau, force, gate, cond = model(x)
    np.testing.assert_allclose(out["tau"][20], tau[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["ee_force"][20], force[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["contact_prob"][20], torch.sigmoid(gate)[0].item(), rtol=1e-5)
    # no smoothing (tau_s -> 0): per-motor degraded probability, episode = most degraded motor
    p_deg = 1 - torch.softmax(cond[0], -1)[:, 0]
    np.testing.assert_allclose(out["condition_prob_joint"][20], p_deg.numpy(), rtol=1e-5)
    np.testing.assert_allclose(out["condition_prob"][20], p_deg.max().item(), rtol=1e-5)
    rec = evaluate_estimator(estimator(model), trajs, "na")
    assert rec["mode"] == "estimator" and np.isfinite(rec["torque_rmse_mean"])


def test_fine_tuning_adapts_to_a_new_unit(robot):
    """Train on one unit, then a few fine-tuning steps on a stiffer unit's data (positions
    only) cut the torque error on that unit."""
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, mode="simulator", tau_max=(TAU_MAX,),
                               kp_init=KP, kd_init=KD)
    tc = TrainConfig(steps=20, batch=8, horizon=6, lr=1e-2, **POSE_ONLY)
    model, _ = train_neuralactuator(synth(robot, n_eps=2, T=60, payload=False), robot, cfg, tc)
    new_unit = synth(robot, n_eps=2, T=60, payload=False, seed=3, kp=2.0 * KP)
    before = torque_rmse(model, new_unit)
    fine_tune(model, new_unit, robot, TrainConfig(steps=40, batch=8, horizon=6, lr=1e-2,
                                                  **POSE_ONLY))
    after = torque_rmse(model, new_unit)
    assert after < 0.5 * before, (before, after)


def test_focal_gate_loss():
    import torch.nn.functional as F

    from neuract.neuralactuator.train import gate_loss

    logit = torch.tensor([-3.0, -0.2, 0.0, 0.4, 2.5, 5.0], dtype=torch.float64)
    y = torch.tensor([0, 1, 1, 0, 1, 1], dtype=torch.bool)
    bce = F.binary_cross_entropy_with_logits(logit, y.double(), reduction="none")
    torch.testing.assert_close(gate_loss(logit, y), bce.mean())
    # by hand: p_true = sigmoid(logit) for contact, 1 - sigmoid(logit) otherwise
    p = torch.sigmoid(logit)
    pt = torch.where(y, p, 1 - p)
    focal = (1 - pt) ** 2 * -torch.log(pt)
    torch.testing.assert_close(gate_loss(logit, y, 2.0), focal.mean())
    # confident right samples lose more weight than ambiguous ones: each sample's focal
    # term over its cross-entropy, from the code one sample at a time
    w = torch.stack([gate_loss(logit[i:i + 1], y[i:i + 1], 2.0) / bce[i] for i in range(6)])
    torch.testing.assert_close(w, (1 - pt) ** 2)
    assert w[5] < 0.01 * w[2] and float(w[2]) == 0.25
    logit.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: gate_loss(z, y, 1.5), (logit,))
    # saturated logits (a per-sample loss of exactly 0) keep finite gradients for gamma < 1
    z = torch.tensor([-200.0, 200.0, 0.3], requires_grad=True)
    gate_loss(z, torch.tensor([False, True, True]), 0.5).backward()
    assert torch.isfinite(z.grad).all() and z.grad[2] != 0


def test_train_rejects_bad_configs_and_mismatched_robots(robot):
    from neuract.errors import ConfigError, SchemaError

    for bad in ({"steps": 0}, {"batch": 0}, {"horizon": 0}, {"force_huber_delta": 0.0},
                {"force_huber_delta": float("nan")}, {"aux_batch": -1}, {"aux_batch": 2.5},
                {"gate_weight": -0.1}, {"force_weight": float("inf")},
                {"condition_weight": "1"}, {"gate_weight": True},
                {"gate_focal_gamma": -1.0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            TrainConfig(**bad).validate()
    trajs = synth(robot, n_eps=1, T=30, payload=False)
    with pytest.raises(ConfigError, match="n_joints"):
        train_neuralactuator(trajs, robot, NeuralActuatorConfig(**TINY, n_joints=6),
                             TrainConfig(steps=1))
    two = NeuralActuatorConfig(**TINY, n_joints=2)
    with pytest.raises(SchemaError, match="long enough"):
        train_neuralactuator(trajs, robot, two, TrainConfig(steps=1, horizon=40))
    with pytest.raises(ConfigError, match="simulator-mode"):
        simulator(NeuralActuator(two), robot)  # an estimator cannot be scored as a simulator


def test_training_resumes_after_a_kill_with_the_same_result(robot, tmp_path):
    """A run killed after its step-4 checkpoint and started again ends with exactly the
    weights of an uninterrupted run (optimizer, schedule and random streams restored)."""
    from neuract.errors import CheckpointError

    trajs = synth(robot, n_eps=2, T=40)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, mode="estimator", tau_max=(TAU_MAX,))
    site = robot.site_names[-1]
    base = dict(steps=7, batch=4, horizon=3, lr=1e-2, substeps=1, aux_batch=4)
    ref, _ = train_neuralactuator(trajs, robot, cfg, TrainConfig(**base), site=site)

    ck = tmp_path / "state.safetensors"
    tc = TrainConfig(**base, checkpoint=str(ck), checkpoint_every=4)

    def kill(step, total, info):
        if step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_neuralactuator(trajs, robot, cfg, tc, site=site, progress=kill)
    assert ck.is_file()
    steps = []
    model, rep = train_neuralactuator(trajs, robot, cfg, tc, site=site,
                                      progress=lambda s, t, i: steps.append(s))
    assert steps == [5, 6, 7] and rep["final"]["step"] == 7
    for (k, a), b in zip(ref.state_dict().items(), model.state_dict().values()):
        torch.testing.assert_close(a, b, msg=k, rtol=0, atol=0)
    # a checkpoint from another run is refused, not silently mixed in
    with pytest.raises(CheckpointError, match="different run") as err:
        train_neuralactuator(trajs, robot, cfg, TrainConfig(**{**base, "lr": 2e-2},
                             checkpoint=str(ck)), site=site)
    # the message names only what differs, with both values
    msg = str(err.value)
    assert f"lr: {base.get('lr', TrainConfig().lr)!r} then, 0.02 now" in msg and len(msg) < 400


def test_condition_smoothing_is_a_causal_average_without_start_up_bias():
    from neuract.estimate.filters import smooth_causal

    t = np.arange(0, 20, 0.02)
    p = np.zeros((len(t), 2))
    p[0] = 1.0  # one outlier at the start
    sm = smooth_causal(p, t, tau_s=5.0)
    assert sm[0].tolist() == [1.0, 1.0]
    # after 1 s the outlier is one sample among 51 (older ones weighted down by the forgetting),
    # not exp(-1/5) = 0.82 as in an average started at the first sample
    a = 1 - np.exp(-0.02 / 5.0)
    np.testing.assert_allclose(sm[50], a * (1 - a) ** 50 / (1 - (1 - a) ** 51), rtol=1e-9)
    assert 0.5 / 51 < sm[50, 0] < 1.0 / 51
    # causal: changing a later sample leaves earlier outputs untouched
    q = p.copy()
    q[600:] = 1.0
    np.testing.assert_array_equal(smooth_causal(q, t, 5.0)[:600], sm[:600])
    # after a step the average forgets the past with time constant tau_s: 5 s after a step at
    # 10 s it holds (1 - e^-1) of the new value, over the weight of 15 s of samples (1 - e^-3)
    step = np.where(t[:, None] >= 10.0, 1.0, 0.0) * np.ones((1, 2))
    out = smooth_causal(step, t, 5.0)
    k = np.searchsorted(t, 15.0)
    np.testing.assert_allclose(out[k], (1 - np.exp(-1.0)) / (1 - np.exp(-3.0)), rtol=0.01)
    # a constant is returned unchanged
    np.testing.assert_allclose(smooth_causal(np.full((100, 3), 0.3), t[:100], 5.0), 0.3)


def _raw_fixture(monkeypatch, reader: str):
    import importlib

    est_mod = importlib.import_module("neuract.estimate.calibrate")

    def use(raw):
        monkeypatch.setattr(est_mod, reader, lambda model, trajs, m: raw)

    return est_mod, use


@pytest.fixture
def raw_condition(monkeypatch):
    """The estimate module, and ``use(raw)``: its calibrations read the given (t, per-motor
    probability, per-motor label) episodes instead of running a model."""
    return _raw_fixture(monkeypatch, "_raw_condition")


@pytest.fixture
def raw_gate(monkeypatch):
    """The estimate module, and ``use(raw)``: its gate calibrations read the given (t,
    contact probability, contact label) episodes instead of running a model."""
    return _raw_fixture(monkeypatch, "_raw_gate")


def test_condition_smoothing_selection_prefers_the_time_constant_that_scores_best(raw_condition):
    """Known truth: per-motor probabilities are noisy around a level that separates degraded
    from normal episodes only on average, so a long average decides better than a short one;
    the selected pair's threshold is the one calibrate_condition finds for that time
    constant."""
    from neuract.errors import ConfigError

    est_mod, use = raw_condition
    rng = np.random.default_rng(0)
    t = np.arange(0, 30, 0.02)
    raw = []
    for i in range(8):
        y = np.zeros((len(t), 2), bool)
        y[:, 1] = i % 2 == 1
        p = np.clip(0.4 + 0.2 * y + rng.normal(0, 0.3, y.shape), 0.01, 0.99)
        raw.append((t, p, y))
    use(raw)
    tau, th, scores = est_mod.select_condition_smoothing(None, [], taus_s=(0.1, 1.0, 20.0))
    assert tau == 20.0 and scores[20.0] > scores[1.0] > scores[0.1]
    assert 0.4 < th < 0.6
    assert th == est_mod._condition_threshold(est_mod._smoothed(raw, 20.0), "episode")[0]
    # a single class: nothing to choose
    one = [(t, p, np.zeros_like(y)) for t, p, y in raw]
    use(one)
    assert est_mod.select_condition_smoothing(None, []) == (5.0, 0.5, {})
    with pytest.raises(ConfigError, match="time"):
        est_mod.select_condition_smoothing(None, [], taus_s=(0.0,))


def test_per_motor_condition_thresholds_fit_each_motors_own_level(raw_condition):
    """Known truth: motor 0's probabilities sit higher than motor 1's in every episode, so no
    common threshold on the largest one separates 'some motor degraded' episodes; one threshold
    per motor does, and estimate() applies a per-motor threshold to each motor's column."""
    est_mod, use = raw_condition
    rng = np.random.default_rng(1)
    t = np.arange(0, 10, 0.05)
    raw = []
    for i in range(8):
        y = np.zeros((len(t), 2), bool)
        y[:, i % 2] = i % 4 < 2  # episodes 0, 1, 4, 5 have a degraded motor
        base = np.array([0.6, 0.1]) + np.where(y, 0.25, 0.0)
        raw.append((t, np.clip(base + rng.normal(0, 0.02, y.shape), 0.01, 0.99), y))
    use(raw)
    _, g, common = est_mod.select_condition_smoothing(None, [], taus_s=(1.0,))
    _, gm, per = est_mod.select_condition_smoothing(None, [], taus_s=(1.0,), per_motor=True)
    assert np.ndim(g) == 0 and len(gm) == 2
    assert per[1.0] == 1.0 and common[1.0] < 0.9
    assert 0.6 < gm[0] < 0.85 and 0.1 < gm[1] < 0.35
    # shift_threshold maps each motor's own threshold to 0.5
    p = np.array([[0.7, 0.3]])
    np.testing.assert_allclose(filters.shift_threshold(p, np.array([0.7, 0.3])), 0.5)
    from neuract.runtime.decide import check_condition_threshold

    with pytest.raises(Exception, match="per-motor"):
        check_condition_threshold((0.5, 0.5, 0.5), 2)


@pytest.mark.parametrize("steps", [1, 2, 10, 11])
def test_any_number_of_steps_trains(robot, steps):
    """The one-cycle schedule works for every step count (torch divides by zero when its
    warm-up is exactly one step, i.e. 10 steps at the default 10 % warm-up)."""
    trajs = synth(robot, n_eps=1, T=40)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, mode="simulator", tau_max=(TAU_MAX,))
    _, rep = train_neuralactuator(trajs, robot, cfg, TrainConfig(steps=steps, batch=2,
                                                                 horizon=3))
    assert rep["steps"] == steps and math.isfinite(rep["final"]["loss"])


def test_gate_hysteresis_holds_a_contact_until_the_release_threshold():
    from neuract.errors import ConfigError
    from neuract.estimate.filters import gate_filter, hysteresis

    p = np.array([0.1, 0.7, 0.5, 0.35, 0.2, 0.5, 0.65, np.nan, 0.9])
    on = hysteresis(p, 0.6, 0.3)
    # on at 0.7, held through 0.5 and 0.35 (>= 0.3), off at 0.2, not back on at 0.5 (< 0.6),
    # on at 0.65, off at NaN (counts as below), on at 0.9
    assert on.tolist() == [False, True, True, True, False, False, True, False, True]
    # a new sequence starts off: the contact of the first one does not carry over
    assert hysteresis(p[:4], 0.6, 0.3, starts=[0, 2]).tolist() == [False, True, False, False]
    # equal thresholds: a plain threshold
    np.testing.assert_array_equal(hysteresis(p, 0.5, 0.5), p >= 0.5)
    with pytest.raises(ConfigError, match="release"):
        hysteresis(p, 0.3, 0.6)
    # gate_filter returns probabilities whose >= 0.5 decision is the hysteresis decision
    t = np.arange(len(p)) * 0.02
    q = gate_filter(np.nan_to_num(p), t, 0.0, 0.6, 0.3)
    np.testing.assert_array_equal(q >= 0.5, hysteresis(np.nan_to_num(p), 0.6, 0.3))
    # without hysteresis and smoothing it is the plain threshold shift
    np.testing.assert_allclose(gate_filter(np.nan_to_num(p), t, 0.0, 0.6),
                               est_shift(np.nan_to_num(p), 0.6))
    # smoothing first: a one-sample spike no longer fires
    spike = np.zeros(50)
    spike[20] = 0.9
    assert (gate_filter(spike, np.arange(50) * 0.02, 0.0, 0.5) >= 0.5).sum() == 1
    assert (gate_filter(spike, np.arange(50) * 0.02, 0.1, 0.5) >= 0.5).sum() == 0
    for kw in ({"tau_s": -1.0}, {"threshold": 1.5}, {"release": -0.1}, {"release": 0.6}):
        args = {"tau_s": 0.0, "threshold": 0.5, "release": 0.4, **kw}
        with pytest.raises(ConfigError):
            gate_filter(spike, np.arange(50) * 0.02, **args)


def est_shift(p, th):
    from neuract.estimate.filters import shift_threshold

    return shift_threshold(p, th)


def test_gate_filter_selection_bridges_dropouts_inside_contacts(raw_gate):
    """Known truth: contacts last 2 s, and inside each the probability drops below 0.5 for
    short spells (as where friction carries part of a push); outside, isolated short false
    alarms. A hysteresis (detect high, release low) or a smoothing bridges both, so the
    selected filter scores a higher F1 than any plain threshold; a single class selects the
    plain default."""
    est_mod, use = raw_gate
    rng = np.random.default_rng(0)
    t = np.arange(0, 10, 0.02)
    raw = []
    for _ in range(6):
        y = (t % 5 >= 1) & (t % 5 < 3)
        p = np.where(y, 0.8, 0.1) + rng.normal(0, 0.05, len(t))
        dips = y & (rng.random(len(t)) < 0.03)
        for i in np.flatnonzero(dips):  # 0.1 s at the no-contact level
            p[i:i + 5] = np.where(y[i:i + 5], 0.1 + rng.normal(0, 0.05, 5), p[i:i + 5])
        alarms = ~y & (rng.random(len(t)) < 0.01)
        p[alarms] = 0.7
        raw.append((t, np.clip(p, 0.01, 0.99), y))
    use(raw)
    tau, on, off, scores = est_mod.select_gate_filter(None, [], taus_s=(0.0, 0.1))
    y = np.concatenate([c for _, _, c in raw])
    p = np.concatenate([q for _, q, _ in raw])
    plain = max(decision_f1(p >= g, y) for g in est_mod._GRID)
    assert max(scores.values()) > plain + 0.03
    assert (tau, on, off) != (0.0, on, on)  # some filtering chosen
    assert 0.0 <= off <= on < 1
    use([(a, b, np.zeros_like(c)) for a, b, c in raw])
    assert est_mod.select_gate_filter(None, []) == (0.0, 0.5, 0.5, {})
    from neuract.errors import ConfigError

    with pytest.raises(ConfigError, match="time"):
        est_mod.select_gate_filter(None, [], taus_s=(-1.0,))


def test_estimate_applies_the_models_gate_filter_only_with_its_threshold():
    """A model's calibrated gate filter (smoothing, release threshold) is applied with the
    model's own threshold; a caller that sets the threshold gets a plain threshold, which is
    what the calibrations read."""
    from neuract.estimate.filters import gate_filter
    from neuract.estimate.neural import estimate
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    tr = generate(GenerateConfig(robot="so101", tasks=("push",), minutes=0.1, units=1, seed=1,
                                 sim=SimConfig(episode_s=6.0)))[0]
    torch.manual_seed(0)
    model = NeuralActuator(NeuralActuatorConfig(n_joints=6, effort="load", **TINY))
    raw = estimate(model, tr, gate_threshold=0.5)["contact_prob"]
    model.gate_threshold, model.gate_tau_s, model.gate_release = 0.6, 0.1, 0.3
    v = ~np.isnan(raw)
    t = np.asarray(tr["t"], dtype=np.float64)[v]
    own = estimate(model, tr)["contact_prob"]
    np.testing.assert_allclose(own[v], gate_filter(raw[v], t, 0.1, 0.6, 0.3), rtol=1e-9)
    np.testing.assert_allclose(estimate(model, tr, gate_threshold=0.5)["contact_prob"][v],
                               raw[v], rtol=1e-12)
    # a model with only a calibrated threshold (no filter): the plain log-odds shift
    from neuract.estimate.filters import shift_threshold

    del model.gate_tau_s, model.gate_release
    np.testing.assert_array_equal(estimate(model, tr)["contact_prob"][v],
                                  shift_threshold(raw[v], 0.6))
    # a release above the threshold is refused, not clamped
    with pytest.raises(Exception, match="gate_release"):
        estimate(model, tr, gate_release=0.7)


def test_gate_filter_selection_keeps_the_contacts_a_plain_threshold_detects(raw_gate):
    """Known truth: long contacts whose probability dips to 0.5, short contacts seen at 0.55,
    a noisy background. A high detection threshold with a release at 0.5 scores the best
    per-sample F1 (it bridges the dips, no background spike reaches it) but misses every
    short contact; the best plain threshold (0.5) detects them all. The selection keeps every
    event the plain threshold detects and still beats its F1."""
    from neuract.eval.metrics import true_runs

    est_mod, use = raw_gate
    rng = np.random.default_rng(3)
    t = np.arange(0, 10, 0.02)
    raw = []
    for _ in range(6):
        long_ = (t % 5 >= 1) & (t % 5 < 3)
        short = (t % 5 >= 4) & (t % 5 < 4.04)
        p = np.where(long_, 0.9, 0.1 + rng.normal(0, 0.25, len(t)))
        p[short] = 0.55
        for i in np.flatnonzero(long_ & (rng.random(len(t)) < 0.05)):
            p[i:i + 4] = np.where(long_[i:i + 4], 0.5, p[i:i + 4])
        raw.append((t, np.clip(p, 0.01, 0.99), long_ | short))
    use(raw)

    def scores(on, off):
        f1, hit, total = [], 0, 0
        for tt, q, c in raw:
            fire = filters.gate_filter(q, tt, 0.0, on, off) >= 0.5
            runs = true_runs(c)
            hit += sum(bool(fire[a:b].any()) for a, b in runs)
            total += len(runs)
            f1.append(fire)
        return decision_f1(np.concatenate(f1), np.concatenate([c for *_, c in raw])), hit, total

    tau, on, off, _ = est_mod.select_gate_filter(None, [], taus_s=(0.0,))
    f_sel, hit_sel, total = scores(on, off)
    f_plain, hit_plain, _ = scores(0.5, 0.5)
    f_high, hit_high, _ = scores(0.9, 0.5)
    assert hit_plain == hit_sel == total and hit_high < total  # the trap exists and is avoided
    assert f_high > f_sel > f_plain
    # only slow smoothing offered, under which a one-sample contact never reaches any
    # threshold: the best plain threshold is returned instead of a filter that loses it
    p = np.full(len(t), 0.01)
    p[250] = 0.9
    use([(t, p, np.arange(len(t)) == 250)])
    assert est_mod.select_gate_filter(None, [], taus_s=(5.0,)) == (0.0, 0.02, 0.02, {})


@pytest.mark.parametrize("lr", [-1.0, 0.0, float("nan"), float("inf")])
def test_train_config_refuses_a_bad_learning_rate(lr):
    from neuract.errors import ConfigError

    with pytest.raises(ConfigError, match="TrainConfig.lr.*--experiment.lr"):
        TrainConfig(lr=lr).validate()
