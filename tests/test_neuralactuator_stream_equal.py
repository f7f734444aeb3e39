"""StreamingEstimator's fast path (features in preallocated numpy buffers, the network in ONNX
Runtime or torch, the physics channels from MuJoCo) gives ``estimate``'s outputs within 1e-6
for every sample of an episode, over the configurations a model can have: physics and context
channels, identification channels, a causal and a fixed-lag recurrent gate, servo-reference
channels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.errors import ConfigError
from neuract.estimate import estimate
from neuract.estimate.calibrate import gate_samples
from neuract.estimate.neural import stream_trajectory
from neuract.estimate.stream import StreamingEstimator
from neuract.estimate.stream_parts import onnxruntime_available
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
from neuract.neuralactuator.features import feature_stats, windows

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4)
KEYS = ("tau", "ee_force", "contact_prob", "condition_prob_joint", "condition_prob")
TOL = 1e-6
"""the largest streamed-minus-offline difference, plus the same relative to an output above 1
(the float32 network's own rounding differs between batch 1 and estimate's batches)"""
FILTERED_TOL = 1e-5
"""the same with a calibrated decision threshold: a probability is shifted in log-odds so that
the threshold maps to 0.5, which multiplies a difference by up to tens where the threshold
is far from 0.5 (the difference of the unshifted probabilities stays within TOL)"""
NEUTRAL = dict(gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5, condition_threshold=0.5)
"""decision thresholds that shift nothing (the probabilities as the network gives them, the
condition smoothed)"""
NETWORKS = ["onnxruntime", "torch"] if onnxruntime_available() else ["torch"]


@pytest.fixture(scope="module")
def episodes():
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    return generate(GenerateConfig(robot="so101", tasks=("push",), minutes=0.2, units=1,
                                   seed=3, sim=SimConfig(episode_s=6.0)))


def make_model(episodes, system_model=None, **kw) -> NeuralActuator:
    """An untrained estimator with physics and context channels (and ``kw``), its feature
    statistics those of the first episode, heads scaled up so that its outputs move with the
    telemetry, a gate filter with smoothing and hysteresis and per-motor condition thresholds
    (every state of the filters is visited). system_model: the reference channels' servo."""
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", physics_robot="so101",
                               physics_site="gripperframe", context_s=0.5, **TINY, **kw)
    torch.manual_seed(0)
    m = NeuralActuator(cfg).eval()
    if system_model is not None:
        m.set_servo(system_model)
    c = m.cfg
    m.set_stats(*feature_stats(windows(episodes[0], c.channels, c.n_joints, c.history,
                                       physics=c.physics, context_s=c.context_s,
                                       reference=m.reference, ident_memory=c.ident_memory)))
    with torch.no_grad():
        m.head.weight.mul_(30.0)
        if m.gate_rnn is not None:  # a recurrent gate that moves with the telemetry
            m.gate_rnn.inp.weight.mul_(5.0)
            m.gate_rnn.out.weight.mul_(20.0)
    if m.gate_rnn is not None:
        m.gate_rnn.trained.fill_(True)  # as if trained: these tests check how it is run
    p = np.concatenate([q for _, q, _ in gate_samples(m, episodes[:1])])
    m.gate_tau_s = 0.05
    m.gate_threshold = float(np.quantile(p, 0.7))
    m.gate_release = float(np.quantile(p, 0.3))
    m.condition_tau_s = 2.0
    m.condition_threshold = (0.3, 0.4, 0.5, 0.5, 0.6, 0.7)
    return m


def assert_equal_to_estimate(m, tr, stream=None, **kw) -> None:
    """Every output of every sample, streamed, equals estimate's: within TOL with neutral
    decision thresholds (the network's outputs, the condition smoothing); with the model's
    calibrated gate filter and per-motor condition thresholds, the same decisions at every
    sample, the torque and force within TOL and the probabilities within FILTERED_TOL. The
    gate decides both ways, and the decisions come when estimate says. stream(tr, **filters):
    the streamed outputs (default: ``stream_trajectory`` of m, with ``kw``)."""
    for filters in (NEUTRAL, {}):
        want = estimate(m, tr, **filters)
        got = (stream(tr, **filters) if stream is not None
               else stream_trajectory(m, tr, **filters, **kw))
        v = want["valid"]
        np.testing.assert_array_equal(got["valid"], v)
        np.testing.assert_array_equal(got["contact_decided_t"], want["contact_decided_t"])
        for k in KEYS:
            assert np.isnan(got[k][~v]).all(), k
            tol = TOL if filters or k in ("tau", "ee_force") else FILTERED_TOL
            np.testing.assert_allclose(got[k][v], want[k][v], rtol=tol, atol=tol, err_msg=k)
            if k != "ee_force" and k != "tau":
                np.testing.assert_array_equal(got[k][v] >= 0.5, want[k][v] >= 0.5, err_msg=k)
    fire = want["contact_prob"][v] >= 0.5
    assert fire.any() and (~fire).any()


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("physics", ["auto", "torch"])
def test_physics_and_context_channels(episodes, network, physics):
    m = make_model(episodes)
    est = StreamingEstimator(m, network=network, physics_backend=physics)
    assert est.backend == {"onnxruntime": "onnxruntime", "torch": "torch-eager"}[network]
    assert est.physics_backend == ("mujoco" if physics == "auto" else "torch")
    for tr in episodes[:2]:
        assert_equal_to_estimate(m, tr, network=network, physics_backend=physics)
    # one estimator over two episodes, reset between them: the second starts afresh
    for tr in episodes[:2]:
        est.reset()
        want = estimate(m, tr)
        t = np.asarray(tr["t"])
        outs = [est.step({"t": t[k], **{c: np.asarray(tr[c])[k] for c in est.inputs}})
                for k in range(len(t))]
        v = want["valid"]
        for k in KEYS:
            got = np.array([o[k] for o in outs])
            np.testing.assert_allclose(got[v], want[k][v], rtol=TOL, atol=TOL, err_msg=k)


@pytest.mark.parametrize("memory", [0, 50])
def test_identification_channels_and_both_condition_heads(episodes, memory):
    m = make_model(episodes, ident=True, ident_memory=memory, condition_head="both")
    for network in NETWORKS:
        assert_equal_to_estimate(m, episodes[0], network=network)


@pytest.mark.parametrize("gate", [dict(gate_rnn=8, gate_conv=2), dict(gate_rnn=8, gate_lag=3),
                                  dict(gate_rnn=8, gate_lag=3, gate_decide=1)])
def test_recurrent_gates_causal_and_fixed_lag(episodes, gate):
    m = make_model(episodes, **gate)
    for network in NETWORKS:
        for tr in episodes[:2]:
            assert_equal_to_estimate(m, tr, network=network)


def test_servo_reference_channels(episodes):
    from neuract.actuators import ActuatorConfig
    from neuract.fit.identify import build_model
    from neuract.neuralactuator.config import servo_json
    from neuract.sim.simulate import JointParamsConfig

    act = ActuatorConfig(type="sts3215", friction="stribeck", control_dt=0.016)
    joints = JointParamsConfig(armature=0.0, fit_armature=False, fit_offset=False)
    servo = build_model(act, joints, 6, dtype=torch.float64)  # unfitted: the values it has
    m = make_model(episodes, system_model=servo, reference_steps=40, servo=servo_json(act, joints))
    for network in NETWORKS:
        assert_equal_to_estimate(m, episodes[0].slice(0, 200), network=network)


def test_samples_as_a_robot_may_give_them(episodes):
    """A bus-wide channel as one number, a channel as a column or a list, and bad values
    refused naming the channel."""
    from neuract.errors import SchemaError

    m = make_model(episodes)
    tr = episodes[0]
    t = np.asarray(tr["t"])
    a, b = StreamingEstimator(m), StreamingEstimator(m)
    for k in range(TINY["history"] + 2):
        s = {"t": t[k], **{c: np.asarray(tr[c], dtype=np.float64)[k] for c in a.inputs}}
        odd = {**s, "voltage": float(np.mean(s["voltage"])), "q": s["q"][:, None],
               "qd": list(s["qd"])}
        s["voltage"] = np.full(6, odd["voltage"])
        oa, ob = a.step(s), b.step(odd)
        for key in KEYS:
            np.testing.assert_array_equal(oa[key], ob[key])
    s = {"t": t[k + 1], **{c: np.asarray(tr[c])[k + 1] for c in a.inputs}}
    for bad in ({"load": np.zeros(5)}, {"load": "x"}, {"q": [np.nan] * 6}, {"voltage": None}):
        name = next(iter(bad))
        with pytest.raises(SchemaError, match=repr(name)):
            a.step({**s, **bad})
    a.step(s)  # a refused sample leaves the estimator as it was


def test_backends_are_named_and_refused_clearly(episodes, monkeypatch):
    m = make_model(episodes)
    with pytest.raises(ConfigError, match="network='onnx'.*accepted"):
        StreamingEstimator(m, network="onnx")
    with pytest.raises(ConfigError, match="physics_backend='mj'.*accepted"):
        StreamingEstimator(m, physics_backend="mj")
    import neuract.estimate.stream as stream
    import neuract.estimate.stream_parts as parts

    for mod in (stream, parts):  # the argument check and the automatic choice
        monkeypatch.setattr(mod, "onnxruntime_available", lambda: False)
    with pytest.raises(ConfigError, match="onnxruntime"):
        StreamingEstimator(m, network="onnxruntime")
    assert StreamingEstimator(m).backend == "torch-eager"  # auto: torch without it


@pytest.mark.skipif("onnxruntime" not in NETWORKS, reason="ONNX Runtime not installed")
def test_int8_network_is_asked_for_and_approximates(episodes):
    m = make_model(episodes)
    est = StreamingEstimator(m, network="onnxruntime-int8")
    assert est.backend == "onnxruntime-int8"
    assert StreamingEstimator(m).backend == "onnxruntime"  # auto never picks int8
    tr = episodes[0]
    want = estimate(m, tr, **NEUTRAL)
    got = stream_trajectory(m, tr, network="onnxruntime-int8", **NEUTRAL)
    v = want["valid"]
    for k in ("tau", "ee_force"):
        d = np.abs(got[k][v] - want[k][v]).max()
        assert 0 < d < 0.05 * want[k][v].std(), k  # close, and not the float32 network


def test_pose_channels_use_mujoco_only_where_it_gives_the_torch_numbers(monkeypatch):
    import neuract.neuralactuator.physics as physics

    q = np.random.default_rng(1).uniform(-1.5, 1.5, (20, 6))
    want = physics.physics_channels(q, "so101", "gripperframe")
    fast = physics.PoseChannels("so101", "gripperframe")
    slow = physics.PoseChannels("so101", "gripperframe", use_mujoco=False)
    assert (fast.backend, slow.backend) == ("mujoco", "torch")
    for pc in (fast, slow):
        for k in range(len(q)):
            g, jac = pc(q[k])
            np.testing.assert_allclose(g, want["tau_gravity"][k], rtol=0, atol=1e-12)
            for i, c in enumerate(("jac_x", "jac_y", "jac_z")):
                np.testing.assert_allclose(jac[i], want[c][k], rtol=0, atol=1e-12)
    # an arm model MuJoCo disagrees with: the torch model computes the channels
    real = physics.physics_channels

    def off(q, robot, site, chunk=4096):
        out = real(q, robot, site, chunk)
        out["tau_gravity"] = out["tau_gravity"] + 1e-6
        return out

    monkeypatch.setattr(physics, "physics_channels", off)
    pc = physics.PoseChannels("so101", "gripperframe")
    assert pc.backend == "torch" and "differs from the torch model" in pc.fallback_reason
    with pytest.raises(ConfigError, match="physics_site='nope'"):
        physics.PoseChannels("so101", "nope")
