"""A fixed-lag recurrent gate decided at a shorter lag (``NeuralActuatorConfig.gate_decide``):
trained with every lag's target up to ``gate_lag``, each sample decided after reading only
``gate_decide`` samples more, with the filter calibrated at that lag."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.errors import ConfigError
from neuract.estimate import estimate
from neuract.estimate.calibrate import gate_samples, select_gate_filter, set_gate_decision_lag
from neuract.estimate.gate_rnn import (
    GateTrainConfig,
    best_f1,
    gate_probabilities,
    train_gate_rnn,
)
from neuract.neuralactuator import NeuralActuatorConfig
from neuract.neuralactuator.checkpoint import load_checkpoint, save_checkpoint
from neuract.neuralactuator.features import windows
from neuract.neuralactuator.gate import lagged_probability
from test_neuralactuator_gate_lag import future_task
from test_neuralactuator_gate_rnn import make_model, tiny_gate_experiment

KW = dict(gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)


@pytest.fixture(scope="module")
def labelled():
    from neuract.pipeline.twin_data import contact_labelled
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    eps = generate(GenerateConfig(robot="so101", tasks=("push",), minutes=0.3, units=1,
                                  seed=3, sim=SimConfig(episode_s=6.0)))
    return contact_labelled(eps, 0.5)


def test_a_shorter_lag_takes_that_lags_logit():
    T, D = 9, 4
    logits = torch.randn(T, D + 1)
    for d in range(D + 1):
        p = lagged_probability(logits, d)
        for s in range(T):
            k = min(d, T - 1 - s)
            assert p[s] == torch.sigmoid(logits[s + k, k])
    with pytest.raises(ConfigError, match="lag 5; the logits \\(9, 5\\) hold lags 0 to 4"):
        lagged_probability(logits, 5)
    with pytest.raises(ConfigError, match="lag 2 of a causal gate"):
        lagged_probability(torch.randn(T), 2)


def test_bad_decision_lags_are_refused_naming_the_field():
    base = dict(gate_rnn=8, gate_lag=4)
    for bad in (-2, 5, True, 1.5, "2"):
        with pytest.raises(ConfigError, match="NeuralActuatorConfig.gate_decide=.*expected -1 "
                                              "\\(decide at gate_lag\\) or an integer from 0 "
                                              "to gate_lag=4"):
            NeuralActuatorConfig(**base, gate_decide=bad).validate()
    with pytest.raises(ConfigError, match="gate_decide=1.*gate_lag=0"):
        NeuralActuatorConfig(gate_rnn=8, gate_decide=1).validate()
    for ok in (-1, 0, 2, 4, np.int64(3)):
        NeuralActuatorConfig(**base, gate_decide=ok).validate()
    assert NeuralActuatorConfig(**base).gate_decision_lag == 4
    assert NeuralActuatorConfig(**base, gate_decide=0).gate_decision_lag == 0
    assert NeuralActuatorConfig(gate_rnn=8).gate_decision_lag == 0
    from neuract.pipeline.experiment_config import check_experiment

    with pytest.raises(ConfigError, match="ExperimentConfig.gate_decide=7"):
        check_experiment(tiny_gate_experiment(gate_lag=6, gate_decide=7))
    with pytest.raises(ConfigError, match="ExperimentConfig.gate_decide=2.*gate_lag=0"):
        check_experiment(tiny_gate_experiment(gate_decide=2))
    check_experiment(tiny_gate_experiment(gate_lag=6, gate_decide=2))


@pytest.mark.parametrize("decide", [0, 2])
def test_estimate_stream_and_checkpoint_decide_at_the_shorter_lag(labelled, decide, tmp_path):
    from neuract.estimate.neural import stream_trajectory

    ep = labelled[0]
    D = 5
    m = make_model(gate_lag=D, gate_decide=decide)
    c = m.cfg
    x = windows(ep, c.channels, 6, c.history, physics=c.physics, context_s=c.context_s)
    with torch.no_grad():
        logits = m.recurrent_gate(x[:, -1])[0]
        m.gate_rnn.out.bias -= logits.median(0).values
        logits = m.recurrent_gate(x[:, -1])[0]
    out = estimate(m, ep, **KW)
    v = out["valid"]
    want = lagged_probability(logits, decide).numpy()
    np.testing.assert_allclose(out["contact_prob"][v], want, rtol=1e-5, atol=1e-6)
    # not the lag-D decisions: the shorter lag is what decides
    assert np.abs(lagged_probability(logits, D).numpy() - want).max() > 1e-3
    t, at = np.asarray(ep["t"]), np.flatnonzero(v)
    np.testing.assert_array_equal(out["contact_decided_t"][v],
                                  t[np.minimum(at + decide, at[-1])])
    d = out["contact_prob"][v] >= 0.5
    assert d.any() and (~d).any()
    # streamed, sample by sample: the same decisions at the same times
    got = stream_trajectory(m, ep, **KW)
    np.testing.assert_allclose(got["contact_prob"][v], out["contact_prob"][v], rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_array_equal(got["contact_decided_t"], out["contact_decided_t"])
    # the checkpoint keeps the decision lag
    save_checkpoint(m, tmp_path / "ck")
    m2 = load_checkpoint(tmp_path / "ck")
    assert m2.cfg.gate_decide == decide and m2.cfg.gate_lag == D
    np.testing.assert_array_equal(estimate(m2, ep, **KW)["contact_prob"], out["contact_prob"])


def test_setting_the_decision_lag_calibrates_the_filter_at_it(labelled):
    m = make_model(gate_lag=6)
    with torch.no_grad():
        m.gate_rnn.out.bias -= 2.0
    calib = labelled
    assert any(np.asarray(tr["contact"]).any() for tr in calib)
    rep = set_gate_decision_lag(m, 2, calib, taus_s=(0.0, 0.1))
    assert m.cfg.gate_decide == 2 and m.cfg.gate_decision_lag == 2
    # what select_gate_filter chooses for the same model decided at lag 2
    ref = make_model(gate_lag=6, gate_decide=2)
    with torch.no_grad():
        ref.gate_rnn.out.bias -= 2.0
    tau, thr, rel, _ = select_gate_filter(ref, calib, (0.0, 0.1), raw=gate_samples(ref, calib))
    assert (m.gate_tau_s, m.gate_threshold, m.gate_release) == (tau, thr, rel)
    assert rep == {"gate_decision_lag": 2, "gate_tau_s": tau, "gate_threshold": thr,
                   "gate_release": rel, "calibration_episodes": len(calib)}
    # estimate now uses that filter by default
    np.testing.assert_array_equal(
        estimate(m, calib[0])["contact_prob"],
        estimate(ref, calib[0], gate_threshold=thr, gate_tau_s=tau,
                 gate_release=rel)["contact_prob"])
    # -1: back to the trained lag, calibrated there
    assert set_gate_decision_lag(m, -1, calib, taus_s=(0.0,))["gate_decision_lag"] == 6
    assert m.cfg.gate_decision_lag == 6


def test_setting_a_decision_lag_refuses_what_it_cannot_do_and_changes_nothing(labelled):
    causal = make_model()
    with pytest.raises(ConfigError, match="no fixed-lag recurrent gate.*gate_lag=0"):
        set_gate_decision_lag(causal, 0, labelled)
    m = make_model(gate_lag=4)
    m.gate_threshold, m.gate_tau_s, m.gate_release = 0.4, 0.1, 0.3
    before = (m.cfg, m.gate_threshold, m.gate_tau_s, m.gate_release)
    with pytest.raises(ConfigError, match="set_gate_decision_lag: lag=5; expected -1"):
        set_gate_decision_lag(m, 5, labelled)
    unlabelled = [tr.replace(drop=("contact",)) for tr in labelled]
    with pytest.raises(ConfigError, match="no calibration episode has a contact label"):
        set_gate_decision_lag(m, 2, unlabelled)
    no_contact = [tr.replace({"contact": np.zeros(len(tr), bool)}) for tr in labelled]
    with pytest.raises(ConfigError, match="hold no contact samples"):
        set_gate_decision_lag(m, 2, no_contact)
    assert (m.cfg, m.gate_threshold, m.gate_tau_s, m.gate_release) == before
    with pytest.raises(ConfigError, match="lag=1.5; expected -1"):
        set_gate_decision_lag(m, 1.5, labelled)


def test_training_scores_its_calibration_passes_at_the_decision_lag(tmp_path):
    from neuract.errors import CheckpointError

    F = make_model().cfg.n_features
    train, calib = future_task(F, 16, 0), future_task(F, 4, 1)
    cfg = GateTrainConfig(iters=60, batch=8, crop=200, lr=1e-2, eval_every=30)
    m = make_model(hidden=16, gate_lag=8, gate_decide=3)
    rep = train_gate_rnn(m, train, calib, cfg)
    f1, thr = best_f1(gate_probabilities(m.gate_rnn, calib, 3), calib)
    assert rep["calib_f1"] == pytest.approx(f1) and rep["calib_threshold"] == thr
    assert f1 != pytest.approx(best_f1(gate_probabilities(m.gate_rnn, calib), calib)[0])
    # a resumable run's state names the decision lag: another one is refused
    state = GateTrainConfig(**{**cfg.__dict__, "iters": 30,
                               "checkpoint": str(tmp_path / "s")})
    train_gate_rnn(make_model(hidden=16, gate_lag=8, gate_decide=3), train, calib, state)
    with pytest.raises(CheckpointError, match="decide"):
        train_gate_rnn(make_model(hidden=16, gate_lag=8, gate_decide=2), train, calib, state)


def test_onnx_actuator_says_which_lag_decides(tmp_path):
    pytest.importorskip("onnxruntime")
    from neuract.neuralactuator.export import OnnxActuator, export_onnx

    a = OnnxActuator(export_onnx(make_model(gate_lag=3, gate_decide=1), tmp_path / "a.onnx"))
    assert (a.gate_lag, a.gate_decision_lag) == (3, 1)
    b = OnnxActuator(export_onnx(make_model(gate_lag=3), tmp_path / "b.onnx"))
    assert (b.gate_lag, b.gate_decision_lag) == (3, 3)
