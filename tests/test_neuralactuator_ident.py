"""Identification channels of estimator-mode NeuralActuator: a running least-squares
identification of each motor over the episode so far, offline and streamed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.errors import ConfigError
from neuract.estimate import estimate
from neuract.estimate.neural import stream_trajectory
from neuract.estimate.stream import StreamingEstimator
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig, windows
from neuract.neuralactuator.features import (
    IDENT_CHANNELS,
    IDENT_RIDGE,
    MOVE_SPEED,
    channels_for,
    ident_channels,
    ident_decay,
)
from neuract.neuralactuator.physics import physics_channels

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4)


def signals(T=300, n=3, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(T, n))
    qd = rng.normal(scale=1.0, size=(T, n))
    qd[: T // 3, 0] = 0.0  # joint 0 rests first
    pe = rng.normal(scale=0.01, size=(T, n))
    return g, qd, pe, rng


def test_coefficients_are_the_ridge_fit_over_the_past():
    g, qd, pe, rng = signals()
    true = np.array([0.3, 0.05, 0.1, -0.02])
    X = np.stack([g, np.tanh(qd / MOVE_SPEED), qd, np.ones_like(g)], -1)
    effort = X @ true + rng.normal(scale=0.01, size=g.shape)
    c = ident_channels(g, qd, effort, pe)
    for k in (0, 5, 120, 299):  # reference: the normal equations written out per prefix
        for j in range(3):
            A, y = X[: k + 1, j], effort[: k + 1, j]
            b = np.linalg.solve(A.T @ A + IDENT_RIDGE * np.eye(4), A.T @ y)
            got = [c[name][k, j] for name in IDENT_CHANNELS[:4]]
            np.testing.assert_allclose(got, b, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(c["id_resid"][k, j], np.sqrt(np.mean((y - A @ b) ** 2)),
                                       rtol=1e-7, atol=1e-12)
            mov = np.abs(qd[: k + 1, j]) > MOVE_SPEED
            ae = np.abs(pe[: k + 1, j])
            np.testing.assert_allclose(c["id_err_move"][k, j], ae[mov].mean() if mov.any() else 0)
            np.testing.assert_allclose(c["id_err_still"][k, j],
                                       ae[~mov].mean() if (~mov).any() else 0)
            np.testing.assert_allclose(c["id_effort"][k, j], np.abs(y).mean())
    # over the whole episode the fit finds the coefficients the effort was made with
    np.testing.assert_allclose([c[name][-1] for name in IDENT_CHANNELS[:4]],
                               np.repeat(true[:, None], 3, 1), atol=0.02)


def test_memory_weighs_recent_samples_and_tracks_a_change():
    g, qd, pe, rng = signals(T=600)
    X = np.stack([g, np.tanh(qd / MOVE_SPEED), qd, np.ones_like(g)], -1)
    fric = np.where(np.arange(600)[:, None] < 300, 0.05, 0.15)  # the motor wears at 300
    effort = (X[..., 0] * 0.3 + X[..., 1] * fric + X[..., 2] * 0.1
              + rng.normal(scale=0.01, size=g.shape))
    m = 60
    c = ident_channels(g, qd, effort, pe, memory=m)
    lam = ident_decay(m)
    assert lam == 1 - 1 / 60 and ident_decay(0) == 1.0
    for k in (0, 7, 250, 599):  # reference: the weighted normal equations per prefix
        w = lam ** (k - np.arange(k + 1))
        for j in range(3):
            A, y = X[: k + 1, j], effort[: k + 1, j]
            b = np.linalg.solve(A.T @ (w[:, None] * A) + IDENT_RIDGE * np.eye(4),
                                A.T @ (w * y))
            np.testing.assert_allclose([c[name][k, j] for name in IDENT_CHANNELS[:4]], b,
                                       rtol=1e-7, atol=1e-10)
            r = y - A @ b
            np.testing.assert_allclose(c["id_resid"][k, j], np.sqrt(w @ r**2 / w.sum()),
                                       rtol=1e-6, atol=1e-10)
            mov = np.abs(qd[: k + 1, j]) > MOVE_SPEED
            ae = np.abs(pe[: k + 1, j])
            if mov.any():
                np.testing.assert_allclose(c["id_err_move"][k, j],
                                           (w * ae * mov).sum() / (w * mov).sum(), rtol=1e-7)
            np.testing.assert_allclose(c["id_effort"][k, j], w @ np.abs(y) / w.sum(),
                                       rtol=1e-7)
    # a joint that moved, then rests for many memories: its mean error while moving stays the
    # (weighted) mean, not a sum decaying towards zero; likewise the resting mean of a joint
    # that keeps moving
    qd2 = np.zeros_like(qd)
    qd2[:100, 0] = 1.0
    qd2[:, 1] = 1.0
    c2 = ident_channels(g, qd2, effort, np.full_like(pe, 0.05), memory=m)
    np.testing.assert_allclose(c2["id_err_move"][[150, 599], 0], 0.05, rtol=1e-9)
    np.testing.assert_allclose(c2["id_err_still"][[150, 599], 0], 0.05, rtol=1e-9)
    np.testing.assert_allclose(c2["id_err_move"][599, 1], 0.05, rtol=1e-9)
    assert c2["id_err_still"][599, 1] == 0.0
    # 300 samples after the change the forgetting fit has the new friction; the whole-episode
    # fit is still between the two
    np.testing.assert_allclose(c["id_friction"][-1], 0.15, atol=0.01)
    whole = ident_channels(g, qd, effort, pe)["id_friction"][-1]
    assert (np.abs(whole - 0.1) < 0.03).all() and (0.15 - whole > 0.025).all()


def test_channels_are_causal():
    g, qd, pe, rng = signals()
    effort = rng.normal(size=g.shape)
    c = ident_channels(g, qd, effort, pe)
    g2, qd2, e2, pe2 = g.copy(), qd.copy(), effort.copy(), pe.copy()
    for a in (g2, qd2, e2, pe2):
        a[150:] = rng.normal(size=a[150:].shape)
    c2 = ident_channels(g2, qd2, e2, pe2)
    for name in IDENT_CHANNELS:
        np.testing.assert_array_equal(c[name][:150], c2[name][:150], err_msg=name)
        assert not np.allclose(c[name][150:], c2[name][150:]), name


def test_config_needs_physics_and_estimator_mode():
    assert channels_for("estimator", "load", physics=True, ident=True)[-8:] == IDENT_CHANNELS
    with pytest.raises(ConfigError, match="physics"):
        channels_for("estimator", "load", ident=True)
    with pytest.raises(ConfigError, match="estimator mode only"):
        channels_for("simulator", ident=True)
    with pytest.raises(ConfigError, match="ident"):
        NeuralActuatorConfig(n_joints=6, effort="load", physics_robot="so101",
                             physics_site="gripperframe", ident=1).validate()
    phys = dict(n_joints=6, effort="load", physics_robot="so101", physics_site="gripperframe")
    for bad in (1, -5, 2.5, True):
        with pytest.raises(ConfigError, match="ident_memory"):
            NeuralActuatorConfig(**phys, ident=True, ident_memory=bad).validate()
    with pytest.raises(ConfigError, match="set ident=True"):
        NeuralActuatorConfig(**phys, ident_memory=100).validate()


@pytest.fixture(scope="module")
def episodes():
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    return generate(GenerateConfig(robot="so101", tasks=("degraded",), minutes=0.2, units=1,
                                   seed=4, sim=SimConfig(episode_s=6.0)))


@pytest.mark.parametrize("memory", [0, 50])
def test_streamed_estimator_equals_estimate_with_ident(episodes, memory):
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", physics_robot="so101",
                               physics_site="gripperframe", context_s=0.5, ident=True,
                               ident_memory=memory, **TINY).validate()
    assert cfg.n_features == 6 * (7 + 4 + 3 + 8)
    torch.manual_seed(0)
    m = NeuralActuator(cfg).eval()
    with torch.no_grad():  # outputs that move with the inputs
        m.head.weight.mul_(30.0)
    est = StreamingEstimator(m)
    assert set(est.inputs) == {"q_goal", "q", "qd", "load", "voltage", "temperature"}
    keys = ("tau", "ee_force", "contact_prob", "condition_prob_joint")
    for tr in episodes[:2]:  # one estimator, reset: the running sums restart with the episode
        est.reset()
        ref = estimate(m, tr)
        outs = [est.step({"t": float(np.asarray(tr["t"])[k]),
                          **{c: np.asarray(tr[c])[k] for c in est.inputs}})
                for k in range(len(tr))]
        v = ref["valid"]
        for k in keys:
            got = np.array([o[k] for o in outs])
            np.testing.assert_allclose(got[v], ref[k][v], rtol=1e-4, atol=1e-5, err_msg=k)
    got = stream_trajectory(m, episodes[1])
    for k in keys:
        np.testing.assert_allclose(got[k][v], ref[k][v], rtol=1e-4, atol=1e-5, err_msg=k)
    # the model's windows carry the channels, per joint, as ident_channels computes them
    tr = episodes[0]
    x = windows(tr, cfg.channels, 6, cfg.history, physics=cfg.physics, context_s=cfg.context_s,
                ident_memory=memory)
    last = x[:, -1].reshape(len(x), 6, len(cfg.channels)).double().numpy()
    q = np.asarray(tr["q"], dtype=np.float64)
    g = physics_channels(q, "so101", "gripperframe")["tau_gravity"]
    want = ident_channels(g, np.asarray(tr["qd"]), np.asarray(tr["load"]),
                          np.asarray(tr["q_goal"]) - q, memory=memory)
    for name in IDENT_CHANNELS:
        np.testing.assert_allclose(last[:, :, cfg.channels.index(name)],
                                   want[name][cfg.history - 1:], rtol=1e-5, atol=1e-6)
    # and training reads them with the same memory
    from neuract.neuralactuator.train import _flat
    from neuract.robot import load_robot

    tok = _flat([tr], load_robot("so101"), cfg, "gripperframe").tok_est
    np.testing.assert_array_equal(tok[cfg.history - 1:].numpy(), x[:, -1].numpy())


MOTOR = dict(n_joints=6, effort="load", physics_robot="so101", physics_site="gripperframe",
             context_s=0.5, ident=True, condition_head="motor", **TINY)


def test_motor_condition_head_judges_each_motor_by_its_own_channels():
    cfg = NeuralActuatorConfig(**MOTOR).validate()
    torch.manual_seed(1)
    m = NeuralActuator(cfg).eval()
    C = len(cfg.channels)
    x = torch.randn(2, cfg.history, cfg.n_features)
    y = x.clone()
    y[:, -1, 2 * C:3 * C] += 1.0  # joint 2's channels of the last sample
    z = x.clone()
    z[:, :-1] += 1.0  # earlier samples: the motor head reads the last one only
    with torch.no_grad():
        cx, cy, cz = m(x)[3], m(y)[3], m(z)[3]
    changed = (cx - cy).abs().amax((0, 2)) > 1e-6
    assert changed.tolist() == [False, False, True, False, False, False]
    torch.testing.assert_close(cx, cz, rtol=0, atol=0)
    # the same channels on two joints get different logits through the joint one-hot
    w = x.clone()
    w[:, -1, 0:C] = w[:, -1, C:2 * C]
    with torch.no_grad():
        cw = m(w)[3]
    assert not torch.allclose(cw[:, 0], cw[:, 1])
    with pytest.raises(ConfigError, match="condition_head"):
        NeuralActuatorConfig(**{**MOTOR, "condition_head": "mlp"}).validate()


def test_both_heads_add_the_motor_and_trunk_logits():
    cfg = NeuralActuatorConfig(**{**MOTOR, "condition_head": "both"}).validate()
    torch.manual_seed(2)
    m = NeuralActuator(cfg).eval()
    with torch.no_grad():
        m.head.weight.mul_(30.0)  # trunk logits of a visible size
    x = torch.randn(3, cfg.history, cfg.n_features)
    with torch.no_grad():
        cond = m(x)[3]
        m.cfg = NeuralActuatorConfig(**MOTOR).validate()  # the same weights, motor head only
        motor = m(x)[3]
        m.cond_motor = None  # no motor head: the trunk's logits
        trunk = m(x)[3]
    torch.testing.assert_close(cond, motor + trunk, rtol=1e-5, atol=1e-6)
    assert (trunk.abs() > 1e-3).any() and (motor.abs() > 1e-3).any()


def test_motor_head_flops_and_checkpoint(tmp_path):
    from torch.utils.flop_counter import FlopCounterMode

    from neuract.neuralactuator import load_checkpoint, save_checkpoint
    from neuract.neuralactuator.model import count_flops

    cfg = NeuralActuatorConfig(**MOTOR).validate()
    m = NeuralActuator(cfg).eval()
    x = torch.randn(3, cfg.history, cfg.n_features)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        m(x)
    assert fc.get_total_flops() == 3 * count_flops(cfg)
    save_checkpoint(m, tmp_path / "ck")
    back = load_checkpoint(tmp_path / "ck")
    assert back.cfg == cfg
    with torch.no_grad():
        for u, v in zip(m(x), back(x)):
            torch.testing.assert_close(u, v, rtol=0, atol=0)



@pytest.mark.parametrize("head", ["motor", "both"])
def test_fused_and_onnx_paths_fold_the_motor_head(tmp_path, head):
    from neuract.neuralactuator.fused import FusedNeuralActuator

    cfg = NeuralActuatorConfig(**{**MOTOR, "condition_head": head}).validate()
    torch.manual_seed(3)
    m = NeuralActuator(cfg).eval()
    C = len(cfg.channels)
    with torch.no_grad():  # per-joint statistics that differ, and logits of a visible size
        m.x_mean.copy_(torch.randn(cfg.n_features))
        m.x_std.copy_(0.5 + torch.rand(cfg.n_features))
        m.cond_motor[0].weight.mul_(5.0)
        m.head.weight.mul_(30.0)
    x = m.x_mean + m.x_std * torch.randn(5, cfg.history, cfg.n_features)
    fused = FusedNeuralActuator(m)
    with torch.no_grad():
        want, got = m(x), fused(x)
    assert want[3].abs().amax() > 0.5
    for u, v in zip(want, got):
        torch.testing.assert_close(v, u, rtol=1e-4, atol=1e-5)
    # a joint's raw channels move only that joint's motor-head logits
    y = x.clone()
    y[:, -1, 2 * C:3 * C] += 1.0
    with torch.no_grad():
        d = (fused(y)[3] - got[3]).abs().amax((0, 2))
    if head == "motor":
        assert (d > 1e-6).tolist() == [False, False, True, False, False, False]
    pytest.importorskip("onnxruntime")
    import onnxruntime as ort

    from neuract.neuralactuator.export import export_onnx

    path = export_onnx(m, tmp_path / "m.onnx")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outs = sess.run(None, {"x": x.numpy()})
    np.testing.assert_allclose(outs[3], want[3].numpy(), rtol=1e-4, atol=1e-4)


def _friction_episode(degraded: bool, seed: int, T: int = 600):
    """SO-101 episode whose load is gravity + friction + noise; a degraded shoulder has
    three times the friction."""
    from neuract.data import Trajectory, TrajectoryMeta

    rng = np.random.default_rng(seed)
    t = np.arange(T) * 0.016
    phase = rng.uniform(0, 2 * np.pi, 6)
    q = 0.4 * np.sin(2 * np.pi * 0.4 * t[:, None] + phase)
    qd = np.gradient(q, t, axis=0)
    g = physics_channels(q, "so101", "gripperframe")["tau_gravity"]
    fric = np.full(6, 0.05)
    if degraded:
        fric[1] *= 3.0
    load = 0.3 * g + fric * np.tanh(qd / MOVE_SPEED) + rng.normal(0, 0.01, (T, 6))
    names = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll",
             "gripper")
    return Trajectory({"t": t, "q": q, "qd": qd, "q_goal": q + 0.01, "load": load,
                       "condition": np.full(T, int(degraded), np.int8)},
                      TrajectoryMeta(robot="so101", joint_names=names, name=f"f{seed}"))


def test_ident_random_forest_baseline_reads_the_channels_causally():
    from neuract.errors import SchemaError
    from neuract.eval import evaluate_estimator
    from neuract.pipeline.baselines import ident_condition_baseline

    phys = ("so101", "gripperframe")
    train = [_friction_episode(bool(i % 2), i) for i in range(12)]
    test = [_friction_episode(bool(i % 2), 50 + i) for i in range(4)]
    est, clf = ident_condition_baseline(train, phys, "load", stride=8, skip=7)
    assert clf.model_.n_features_in_ == 6 * len(IDENT_CHANNELS)
    out = est(test[1])
    assert not out["valid"][:7].any() and out["valid"][7:].all()
    assert np.isnan(out["condition_prob"][:7]).all()
    # causal: a changed future leaves the past's probabilities as they were
    tr = test[1]
    later = tr.slice(0, 300)
    np.testing.assert_array_equal(est(later)["condition_prob"][7:],
                                  out["condition_prob"][7:300])
    # the identification converges within the episode: every sample right after the first
    # 1.6 s, and every episode at its end
    rec = evaluate_estimator(est, test, "rf ident")
    assert rec["condition"]["episode_end"]["accuracy"] == 1.0
    assert rec["condition"]["accuracy"] > 0.95
    late = np.concatenate([np.argmax(est(tr)["condition_prob"][100:], 1)
                           == np.asarray(tr["condition"])[100:] for tr in test])
    assert late.mean() > 0.99
    with pytest.raises(SchemaError, match="both classes"):
        ident_condition_baseline(train[::2], phys, "load")


def test_experiment_refuses_a_bad_ident_memory_before_any_fit(episodes):
    from neuract.pipeline.experiment import run_experiment
    from neuract.pipeline.experiment_config import ExperimentConfig
    from neuract.pipeline.setups import so101_setup

    setup = so101_setup()
    for kw, match in (({"ident": True, "physics": True, "ident_memory": -3}, "integer >= 2"),
                      ({"ident_memory": 100}, "set ident=True"),
                      ({"gate_weight": float("nan")}, "gate_weight"),
                      ({"gate_focal_gamma": -2.0}, "gate_focal_gamma")):
        with pytest.raises(ConfigError, match=match):
            run_experiment(setup, episodes[:1], episodes[1:], ExperimentConfig(**kw))
