"""StreamingEstimator: estimator mode one telemetry sample at a time gives what ``estimate``
gives on the whole recorded episode."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from neuract.errors import ConfigError, SchemaError
from neuract.estimate import estimate
from neuract.estimate.calibrate import gate_samples
from neuract.estimate.stream import StreamingEstimator
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4)
KEYS = ("tau", "ee_force", "contact_prob", "condition_prob_joint", "condition_prob")


@pytest.fixture(scope="module")
def episodes():
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    return generate(GenerateConfig(robot="so101", tasks=("push",), minutes=0.2, units=1,
                                   seed=3, sim=SimConfig(episode_s=6.0)))


@pytest.fixture(scope="module")
def model(episodes):
    """An untrained estimator with physics and context channels, its gate filter and
    per-motor condition thresholds set so that every state of the filters is visited."""
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", physics_robot="so101",
                               physics_site="gripperframe", context_s=0.5, **TINY)
    torch.manual_seed(0)
    m = NeuralActuator(cfg).eval()
    with torch.no_grad():  # a gate that moves with the telemetry
        m.head.weight.mul_(30.0)
    p = np.concatenate([q for _, q, _ in gate_samples(m, episodes[:1])])
    m.gate_tau_s = 0.05
    m.gate_threshold = float(np.quantile(p, 0.7))
    m.gate_release = float(np.quantile(p, 0.3))
    m.condition_tau_s = 2.0
    m.condition_threshold = (0.3, 0.4, 0.5, 0.5, 0.6, 0.7)
    return m


def samples(tr, channels):
    """The episode's samples as a robot would report them, one mapping per sample."""
    cols = {c: np.asarray(tr[c], dtype=np.float64) for c in channels}
    t = np.asarray(tr["t"], dtype=np.float64)
    for k in range(len(t)):
        yield {"t": t[k], **{c: v[k] for c, v in cols.items()}}


def stream(est, tr):
    outs = [est.step(s) for s in samples(tr, est.inputs)]
    return {k: np.array([o[k] for o in outs]) for k in (*KEYS, "valid")}


def test_streamed_outputs_equal_the_whole_episode_estimate(model, episodes):
    est = StreamingEstimator(model)
    assert set(est.inputs) == {"q_goal", "q", "qd", "load", "voltage", "temperature"}
    for tr in episodes[:2]:  # reset between episodes: the second starts afresh
        est.reset()
        got, ref = stream(est, tr), estimate(model, tr)
        np.testing.assert_array_equal(got["valid"], ref["valid"])
        v = ref["valid"]
        assert not v[:3].any() and v[3:].all()
        for k in KEYS:
            assert np.isnan(got[k][~v]).all()
            np.testing.assert_allclose(got[k][v], ref[k][v], rtol=1e-4, atol=1e-5, err_msg=k)
        # the filters were exercised: contacts begin and end, thresholds differ per motor
        fire = ref["contact_prob"][v] >= 0.5
        assert fire.any() and (~fire).any()


def test_explicit_thresholds_and_filters_match_estimate(model, episodes):
    kw = dict(gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5, condition_tau_s=1.0,
              condition_threshold=0.4)
    tr = episodes[0]
    got, ref = stream(StreamingEstimator(model, **kw), tr), estimate(model, tr, **kw)
    v = ref["valid"]
    for k in KEYS:
        np.testing.assert_allclose(got[k][v], ref[k][v], rtol=1e-4, atol=1e-5, err_msg=k)
    # a caller's own threshold without a filter is a plain threshold, as in estimate
    own = StreamingEstimator(model, gate_threshold=0.4)
    assert own.gate_tau_s == 0.0 and own.gate_release == 0.4


def test_bad_models_and_samples_are_refused(model, episodes):
    sim = NeuralActuator(NeuralActuatorConfig(n_joints=6, mode="simulator", **TINY))
    with pytest.raises(ConfigError, match="estimator-mode"):
        StreamingEstimator(sim)
    ref = NeuralActuator(model.cfg)
    ref.cfg = dataclasses.replace(model.cfg, reference_steps=400)
    with pytest.raises(ConfigError, match="reference_steps=400"):
        StreamingEstimator(ref)
    with pytest.raises(ConfigError, match="gate_release"):
        StreamingEstimator(model, gate_threshold=0.3, gate_release=0.6)
    est = StreamingEstimator(model)
    s = next(samples(episodes[0], est.inputs))
    with pytest.raises(SchemaError, match="'load'"):
        est.step({k: v for k, v in s.items() if k != "load"})
    with pytest.raises(SchemaError, match="'qd'"):
        est.step({**s, "qd": np.zeros(5)})
    with pytest.raises(SchemaError, match="'t'"):
        est.step({k: v for k, v in s.items() if k != "t"})
    est.step(s)
    with pytest.raises(SchemaError, match="after the previous"):
        est.step(s)  # the same time again
