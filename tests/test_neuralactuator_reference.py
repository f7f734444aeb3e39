"""Servo-reference channels of the estimator (``reference_steps``): each sample compares the
measured position with the fitted servo driven open loop from the start of its segment (two
chains offset by half a segment, the older segment wins), causally; the servo travels in the
checkpoint, so a loaded model estimates exactly as the trained one; bad configurations are
refused with the field named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _tiny import fitted_servo
from neuract.actuators import ActuatorConfig
from neuract.errors import ConfigError, SchemaError
from neuract.neuralactuator import NeuralActuatorConfig
from neuract.neuralactuator.config import servo_json
from neuract.neuralactuator.reference import reference_channels
from neuract.sim.simulate import JointParamsConfig, simulate

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16)
ACT = ActuatorConfig(type="sts3215", friction="stribeck", control_dt=0.016)
JOINTS = JointParamsConfig(armature=0.0, fit_armature=False, fit_offset=False)
STEPS = 40


@pytest.fixture(scope="module")
def fitted():
    """Twin SO-101 episodes, the arm models and a briefly fitted parametric servo."""
    return fitted_servo(ACT, JOINTS)


def _arrays(tr, T=300):
    return {k: np.asarray(tr[k], dtype=np.float64)[:T] for k in ("t", "q", "qd", "q_goal",
                                                                   "voltage")}


def _channels(a, sm, robot, steps=STEPS):
    return reference_channels(a["t"], a["q"], a["qd"], a["q_goal"], sm, robot, steps,
                              voltage=a["voltage"])


def _open_loop(a, sm, robot, start, n):
    """The fitted servo driven from the measured state at ``start`` for n samples."""
    dt = float(np.median(np.diff(a["t"])))
    f = lambda x: torch.tensor(x, dtype=torch.float64)[None]  # noqa: E731
    v = a["voltage"].reshape(len(a["t"]), -1).mean(-1, keepdims=True)
    with torch.no_grad():
        out = simulate(robot, sm.actuator, sm.joints, f(a["q"][start]), f(a["qd"][start]),
                       f(a["q_goal"][start:start + n]), dt, 2, {},
                       {"voltage": f(v[start:start + n])})
    return out.q[0].numpy()


def test_each_sample_is_compared_with_the_older_open_loop_segment(fitted):
    trajs, setup, sm = fitted
    a = _arrays(trajs[0])
    ch = _channels(a, sm, setup.robot64)
    # the first half segment: chain A from the episode start
    ref = _open_loop(a, sm, setup.robot64, 0, STEPS)
    np.testing.assert_allclose(ch["ref_error"][:STEPS // 2],
                               a["q"][:STEPS // 2] - ref[:STEPS // 2], atol=1e-12)
    # sample 45: chain A restarted at 40 (5 samples ago), chain B at 20 (25 ago): B wins
    ref_b = _open_loop(a, sm, setup.robot64, 20, STEPS)
    np.testing.assert_allclose(ch["ref_error"][45], a["q"][45] - ref_b[25], atol=1e-12)
    assert ch["ref_age"][45] == pytest.approx(np.full(6, 25 / STEPS))
    # after the first half segment every reference has run between half and a whole segment
    age = ch["ref_age"]
    assert (age == age[:, :1]).all()
    np.testing.assert_allclose(age[:STEPS // 2, 0], np.arange(STEPS // 2) / STEPS)
    assert age[STEPS // 2:].min() >= 0.5 and age.max() < 1.0
    # the servo model is not a perfect copy of the twin: the comparison is not trivially 0
    assert np.abs(ch["ref_error"]).max() > 1e-4


def test_a_batch_of_episodes_gives_each_episode_its_own_channels(fitted):
    from neuract.neuralactuator.features import reference_inputs
    from neuract.neuralactuator.reference import reference_channels_many

    trajs, setup, sm = fitted
    eps = [reference_inputs(trajs[0].slice(0, 300), 6), reference_inputs(trajs[1], 6),
           reference_inputs(trajs[1], 6)]
    eps[2]["voltage"] = None  # another set of known inputs: simulated in its own batch
    assert np.median(np.diff(eps[0]["t"])) != np.median(np.diff(eps[1]["t"]))
    many = reference_channels_many(eps, sm, setup.robot64, STEPS)
    for ep, got in zip(eps, many):
        one = reference_channels(ep["t"], ep["q"], ep["qd"], ep["q_goal"], sm, setup.robot64,
                                 STEPS, voltage=ep["voltage"])
        for key in one:
            np.testing.assert_allclose(got[key], one[key], atol=1e-12)
    assert len(many[1]["ref_error"]) == len(trajs[1])
    assert np.abs(many[2]["ref_error"] - many[1]["ref_error"]).max() > 1e-6


def test_reference_channels_are_causal(fitted):
    trajs, setup, sm = fitted
    a = _arrays(trajs[0])
    k = 137
    b = {key: v.copy() for key, v in a.items()}
    for key in ("q", "qd", "q_goal", "voltage"):
        b[key][k + 1:] += 0.05
    ca, cb = _channels(a, sm, setup.robot64), _channels(b, sm, setup.robot64)
    for key in ca:
        np.testing.assert_array_equal(ca[key][:k + 1], cb[key][:k + 1])
    assert np.abs(ca["ref_error"][k + 1:] - cb["ref_error"][k + 1:]).max() > 1e-3


def test_bad_reference_configs_are_refused(fitted):
    from neuract.neuralactuator import NeuralActuator
    from neuract.neuralactuator.features import trajectory_channels

    trajs, setup, sm = fitted
    js = servo_json(ACT, JOINTS)
    with pytest.raises(ConfigError, match="reference_steps=1"):
        NeuralActuatorConfig(reference_steps=1, servo=js, physics_robot="so101",
                             physics_site="gripperframe").validate()
    with pytest.raises(ConfigError, match="estimator mode"):
        NeuralActuatorConfig(mode="simulator", reference_steps=20, servo=js).validate()
    with pytest.raises(ConfigError, match="physics_robot"):
        NeuralActuatorConfig(reference_steps=20, servo=js).validate()
    with pytest.raises(ConfigError, match="reference_steps"):
        reference_channels(np.arange(5.0), np.zeros((5, 6)), np.zeros((5, 6)),
                           np.zeros((5, 6)), sm, setup.robot64, 1)
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", reference_steps=20, servo=js,
                               physics_robot="so101", physics_site="gripperframe", **TINY)
    with pytest.raises(SchemaError, match="reference"):
        trajectory_channels(trajs[0], cfg.channels, 6, cfg.physics)
    assert NeuralActuator(cfg).reference[1:] == ("so101", 20)


def test_estimator_with_reference_trains_and_its_checkpoint_estimates_the_same(fitted,
                                                                              tmp_path):
    from neuract.estimate import estimate
    from neuract.neuralactuator import load_checkpoint, save_checkpoint, train_neuralactuator
    from neuract.neuralactuator.train import NeuralActuatorTrainConfig as TrainConfig

    trajs, setup, sm = fitted
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", reference_steps=20,
                               servo=servo_json(ACT, JOINTS), physics_robot="so101",
                               physics_site="gripperframe", **TINY)
    assert cfg.channels[-2:] == ("ref_error", "ref_age")
    tc = TrainConfig(steps=3, batch=4, horizon=4)
    with pytest.raises(ConfigError, match="needs the fitted servo"):
        train_neuralactuator(trajs, setup.robot, cfg, tc, site=setup.site)
    model, rep = train_neuralactuator(trajs, setup.robot, cfg, tc, site=setup.site, servo=sm)
    assert rep["steps"] == 3 and model.servo_loaded
    for k, v in model.servo_model.state_dict().items():
        torch.testing.assert_close(v, sm.state_dict()[k].to(v.dtype))
    save_checkpoint(model, tmp_path / "ck")
    back = load_checkpoint(tmp_path / "ck")
    tr = trajs[-1].slice(0, 300)
    a, b = estimate(model, tr), estimate(back, tr)
    assert np.isfinite(a["tau"][a["valid"]]).all()
    for key in ("tau", "ee_force", "contact_prob"):
        np.testing.assert_array_equal(a[key], b[key])
    # the reference channels reach the model: another servo changes the estimate
    other = load_checkpoint(tmp_path / "ck")
    with torch.no_grad():
        for p in other.servo_model.parameters():
            p.mul_(1.5)
    c = estimate(other, tr)
    assert np.nanmax(np.abs(c["tau"] - a["tau"])) > 1e-6
    # windows computed once serve a model with the same servo, and not one with another
    from neuract.estimate import estimate_inputs

    inputs = estimate_inputs(model, tr)
    np.testing.assert_array_equal(estimate(back, tr, inputs=inputs)["tau"], b["tau"])
    with pytest.raises(ConfigError, match="reference servo differ"):
        estimate(other, tr, inputs=inputs)
    # fine-tuning a loaded checkpoint keeps its servo (no servo argument needed)
    from neuract.neuralactuator import fine_tune

    tuned, rep = fine_tune(back, trajs[:1], setup.robot, TrainConfig(steps=2, batch=4,
                                                                     horizon=4),
                           site=setup.site)
    assert rep["steps"] == 2
    for k, v in tuned.servo_model.state_dict().items():
        torch.testing.assert_close(v, sm.state_dict()[k].to(v.dtype))


def test_experiment_reference_needs_the_physics_channels(fitted):
    from neuract.pipeline.experiment import run_experiment
    from neuract.pipeline.experiment_config import ExperimentConfig

    trajs, setup, _ = fitted
    with pytest.raises(ConfigError, match="physics=True"):
        run_experiment(setup, trajs[:1], trajs[1:], ExperimentConfig(reference_steps=20))


def test_streamed_reference_channels_and_estimates_equal_the_offline_ones(fitted):
    from neuract.estimate import estimate
    from neuract.estimate.neural import stream_trajectory
    from neuract.estimate.stream import StreamingEstimator
    from neuract.estimate.stream_parts import ReferenceStream
    from neuract.neuralactuator import NeuralActuator

    trajs, setup, sm = fitted
    a = _arrays(trajs[0])
    dt = float(np.median(np.diff(a["t"])))
    ref = _channels(a, sm, setup.robot64)
    rs = ReferenceStream(sm, "so101", STEPS, dt)
    v = a["voltage"].reshape(len(a["t"]), -1).mean(-1, keepdims=True)
    got = [rs.update(a["q"][k], a["qd"][k], a["q_goal"][k], {"voltage": v[k]})
           for k in range(len(a["t"]))]
    for key in ("ref_error", "ref_age"):
        np.testing.assert_allclose(np.stack([g[key] for g in got]), ref[key], rtol=0,
                                   atol=1e-9, err_msg=key)
    # a servo with state beyond the last frame (command delay line, goal slew, I term): a
    # restarting chain forgets its own state and keeps the other chain's
    from neuract.fit.identify import build_model

    stateful = build_model(ActuatorConfig(type="sts3215", friction="stribeck",
                                          control_dt=0.016, delay=0.05, goal_slew=2.0, ki=0.5),
                           JOINTS, 6, dtype=torch.float64)
    ref = _channels(a, stateful, setup.robot64)
    rs = ReferenceStream(stateful, "so101", STEPS, dt)
    got = [rs.update(a["q"][k], a["qd"][k], a["q_goal"][k], {"voltage": v[k]})
           for k in range(len(a["t"]))]
    np.testing.assert_allclose(np.stack([g["ref_error"] for g in got]), ref["ref_error"],
                               rtol=0, atol=1e-9)
    # the whole estimator, streamed, on a model that reads the channels
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", reference_steps=STEPS,
                               servo=servo_json(ACT, JOINTS), physics_robot="so101",
                               physics_site="gripperframe", **TINY)
    torch.manual_seed(0)
    model = NeuralActuator(cfg)
    with pytest.raises(ConfigError, match="no fitted values"):
        StreamingEstimator(model, reference_dt=dt)
    model.set_servo(sm)
    with pytest.raises(ConfigError, match="reference_dt"):
        StreamingEstimator(model)
    tr = trajs[0].slice(0, 300)
    off = estimate(model, tr)
    got = stream_trajectory(model, tr)  # the servo on the episode's median spacing, as offline
    ok = off["valid"]
    np.testing.assert_array_equal(got["valid"], ok)
    for key in ("tau", "ee_force", "contact_prob", "condition_prob_joint"):
        np.testing.assert_allclose(got[key][ok], off[key][ok], rtol=1e-4, atol=1e-5,
                                   err_msg=key)


def test_gate_rows_of_a_batch_equal_each_episodes_windows(fitted):
    """The recurrent gate's rows simulate the reference channels of many episodes in one
    batch; each episode's rows are its own windows' last steps, normalised."""
    from neuract.estimate.gate_rnn import gate_rows
    from neuract.neuralactuator import NeuralActuator
    from neuract.neuralactuator.features import windows

    trajs, setup, sm = fitted
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", reference_steps=STEPS,
                               servo=servo_json(ACT, JOINTS), physics_robot="so101",
                               physics_site="gripperframe", gate_rnn=4, history=4, **TINY)
    model = NeuralActuator(cfg)
    model.set_servo(sm)
    eps = [tr.slice(0, 200 + 40 * k) for k, tr in enumerate(trajs[:3])]
    for tr in eps:
        assert "contact" in tr
    rows = gate_rows(model, eps, group=3)
    assert [len(r) for r in rows] == [len(tr) - 3 for tr in eps]
    for r, tr in zip(rows, eps):
        x = windows(tr, cfg.channels, 6, 4, physics=cfg.physics, reference=model.reference)
        np.testing.assert_allclose(r.rows, model.gate_rows(x[:, -1]).detach().numpy(),
                                   rtol=1e-5, atol=1e-5)
