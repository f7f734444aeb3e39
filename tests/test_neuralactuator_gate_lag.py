"""The fixed-lag recurrent contact gate (``NeuralActuatorConfig.gate_lag``): one logit per lag,
each sample decided after the gate has read ``gate_lag`` samples more."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.errors import ConfigError, SchemaError
from neuract.estimate import estimate
from neuract.estimate.gate_rnn import (
    GateRows,
    GateTrainConfig,
    best_f1,
    gate_probabilities,
    train_gate_rnn,
)
from neuract.eval.metrics import gate_counts
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
from neuract.neuralactuator.checkpoint import load_checkpoint, save_checkpoint
from neuract.neuralactuator.config import MAX_GATE_LAG
from neuract.neuralactuator.features import windows
from neuract.neuralactuator.gate import RecurrentGate, decision_delay, lagged_probability
from neuract.neuralactuator.model import count_flops, count_params
from test_neuralactuator_gate_rnn import TINY, make_model, memory_task, tiny_gate_experiment


@pytest.fixture(scope="module")
def episode():
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    return generate(GenerateConfig(robot="so101", tasks=("push",), minutes=0.1, units=1,
                                   seed=3, sim=SimConfig(episode_s=6.0)))[0]


def test_each_sample_takes_the_largest_lag_its_episode_allows():
    T, lag = 9, 3
    logits = torch.randn(T, lag + 1)
    p = lagged_probability(logits, lag)
    for s in range(T):
        k = min(lag, T - 1 - s)
        assert p[s] == torch.sigmoid(logits[s + k, k])
    np.testing.assert_array_equal(decision_delay(T, lag), [3, 3, 3, 3, 3, 3, 2, 1, 0])
    np.testing.assert_array_equal(decision_delay(4, 0), [0, 0, 0, 0])
    one = torch.randn(T)
    torch.testing.assert_close(lagged_probability(one, 0), torch.sigmoid(one))
    # the gate's outputs: (B, T, lag + 1), causal in every lag
    g = RecurrentGate(5, 8, lag=4)
    x = torch.randn(2, 30, 5)
    with torch.no_grad():
        out, _ = g(x)
        assert out.shape == (2, 30, 5)
        y = x.clone()
        y[:, 20] += 1.0
        changed = (g(y)[0] - out).abs()
        assert changed[:, :20].max() == 0 and changed[:, 20].min() > 0


def future_task(n_in: int, n_eps: int, seed: int, ahead: int = 6, T: int = 240
                ) -> list[GateRows]:
    """Contacts whose start and end pulses (channels 0 and 1) come ``ahead`` samples after the
    label changes: a causal gate learns each change ``ahead`` samples late; a gate that may
    wait that long before deciding can be right at every sample."""
    rng = np.random.default_rng(seed)
    out = []
    for e in range(n_eps):
        rows = rng.normal(0, 0.3, (T, n_in)).astype(np.float32)
        y = np.zeros(T, bool)
        k = int(rng.integers(5, 30))
        while k < T - 20:
            on, off = k, k + int(rng.integers(15, 40))
            rows[min(on + ahead, T - 1), 0] += 4.0
            rows[min(off + ahead, T - 1), 1] += 4.0
            y[on:off] = True
            k = off + int(rng.integers(15, 40))
        out.append(GateRows(f"ep{e}", rows, y))
    return out


def test_a_lagged_gate_learns_what_the_samples_after_tell():
    F = make_model().cfg.n_features
    train, calib, test = (future_task(F, n, s) for n, s in ((24, 0), (6, 1), (6, 2)))
    cfg = GateTrainConfig(iters=200, batch=8, crop=200, lr=1e-2, eval_every=50)
    scores = {}
    for lag in (0, 8):
        m = make_model(hidden=16, gate_lag=lag)
        rep = train_gate_rnn(m, train, calib, cfg)
        assert m.gate_rnn.lag == lag and bool(m.gate_rnn.trained)
        scores[lag] = best_f1(gate_probabilities(m.gate_rnn, test), test)[0]
        assert rep["calib_f1"] == pytest.approx(max(h["calib_f1"] for h in rep["history"]))
    # a causal gate learns of each contact 6 samples late and of its end 6 samples late:
    # over contacts of 15-40 samples its F1 is about 2 (L - 6) / (2 (L - 6) + 12) = 0.78 at
    # best (L = 27.5); the lagged gate has read the pulses by the time it decides
    assert scores[8] > 0.85 and scores[0] < 0.8, scores


def test_training_resumes_and_refuses_another_lag(tmp_path):
    from neuract.errors import CheckpointError

    F = make_model().cfg.n_features
    train, calib = memory_task(F, 8, 0, T=120), memory_task(F, 3, 1, T=120)
    cfg = GateTrainConfig(iters=40, batch=4, crop=50, lr=1e-2, eval_every=20)
    ref = make_model(gate_lag=3)
    r_ref = train_gate_rnn(ref, train, calib, cfg)

    class Stop(Exception):
        pass

    def interrupt(it, total, info):
        if it == 20:
            raise Stop

    resumable = GateTrainConfig(**{**cfg.__dict__, "checkpoint": str(tmp_path / "s")})
    with pytest.raises(Stop):
        train_gate_rnn(make_model(gate_lag=3), train, calib, resumable, progress=interrupt)
    m = make_model(gate_lag=3)
    r = train_gate_rnn(m, train, calib, resumable)
    for k, v in ref.gate_rnn.state_dict().items():
        torch.testing.assert_close(m.gate_rnn.state_dict()[k], v, rtol=0, atol=0, msg=k)
    assert r["history"] == r_ref["history"]
    with pytest.raises(CheckpointError, match="lag"):
        train_gate_rnn(make_model(gate_lag=2), train, calib, resumable)


def test_estimate_decides_each_sample_after_the_lag(episode, tmp_path):
    lag = 5
    m = make_model(gate_lag=lag)
    c = m.cfg
    x = windows(episode, c.channels, 6, c.history, physics=c.physics, context_s=c.context_s)
    with torch.no_grad():
        logits = m.recurrent_gate(x[:, -1])[0]
        m.gate_rnn.out.bias -= logits.median()
        logits = m.recurrent_gate(x[:, -1])[0]
    assert logits.shape == (len(x), lag + 1)
    out = estimate(m, episode, gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
    v = out["valid"]
    np.testing.assert_allclose(out["contact_prob"][v], lagged_probability(logits, lag).numpy(),
                               rtol=1e-5, atol=1e-6)
    t = np.asarray(episode["t"])  # (telemetry times, with jitter)
    at = np.flatnonzero(v)
    after = np.r_[np.full(len(at) - lag, lag), np.arange(lag - 1, -1, -1)]
    np.testing.assert_array_equal(out["contact_decided_t"][v], t[at + after])
    np.testing.assert_array_equal(out["contact_decided_t"][~v], t[~v])
    # the causal gate's decisions come at their own samples
    causal = estimate(make_model(), episode)
    np.testing.assert_array_equal(causal["contact_decided_t"], t)
    # the checkpoint keeps the lag and the gate's outputs
    save_checkpoint(m, tmp_path / "ck")
    m2 = load_checkpoint(tmp_path / "ck")
    assert m2.cfg.gate_lag == lag and m2.gate_rnn.lag == lag
    again = estimate(m2, episode, gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
    np.testing.assert_array_equal(again["contact_prob"], out["contact_prob"])


def test_latency_counts_to_when_the_decision_is_made():
    t = np.arange(10) * 0.1
    contact = np.array([0, 0, 1, 1, 1, 1, 0, 0, 1, 1], bool)
    p = contact.astype(float)  # right at every sample
    assert gate_counts(p, contact, t).latencies == [0.0, 0.0]
    decided = t + np.minimum(0.3, t[-1] - t)  # a 3-sample lag, less at the end
    lat = gate_counts(p, contact, t, decided_t=decided).latencies
    np.testing.assert_allclose(lat, [0.3, 0.1])
    with pytest.raises(SchemaError, match="decided_t is before"):
        gate_counts(p, contact, t, decided_t=t - 0.1)
    with pytest.raises(SchemaError, match="decided_t"):
        gate_counts(p, contact, t, decided_t=t[:5])
    bad = decided.copy()
    bad[4] = np.nan
    with pytest.raises(SchemaError, match="decided_t is nan"):
        gate_counts(p, contact, t, decided_t=bad)


@pytest.mark.parametrize("kw", [dict(gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5),
                                dict(gate_threshold=0.6, gate_tau_s=0.05, gate_release=0.3)])
def test_streaming_a_lagged_gate_gives_the_whole_recording_decisions(episode, kw):
    from neuract.estimate.neural import stream_trajectory
    from neuract.estimate.stream import StreamingEstimator

    lag = 4
    m = make_model(gate_lag=lag)
    want = estimate(m, episode, **kw)
    got = stream_trajectory(m, episode, **kw)
    v = want["valid"]
    np.testing.assert_array_equal(got["valid"], v)
    np.testing.assert_allclose(got["contact_prob"][v], want["contact_prob"][v], rtol=1e-4,
                               atol=1e-5)
    assert np.isnan(got["contact_prob"][~v]).all()
    np.testing.assert_array_equal(got["contact_decided_t"], want["contact_decided_t"])
    np.testing.assert_allclose(got["tau"][v], want["tau"][v], rtol=1e-4, atol=1e-5)
    d = want["contact_prob"][v] >= 0.5
    assert d.any() and (~d).any()  # the decisions are not all one
    # sample by sample: each decision comes lag samples after the sample it decides
    t = np.asarray(episode["t"])
    h = m.cfg.history
    est = StreamingEstimator(m, **kw)
    assert est.lag == lag
    for _ in range(2):  # finish() starts a new episode: the second pass is the first's
        outs = [est.step({"t": t[k], **{c: np.asarray(episode[c])[k] for c in est.inputs}})
                for k in range(len(t))]
        ct = np.array([o["contact_t"] for o in outs])
        assert np.isnan(ct[:h - 1 + lag]).all()
        np.testing.assert_array_equal(ct[h - 1 + lag:], t[h - 1:len(t) - lag])
        owed = est.finish()
        np.testing.assert_array_equal([o["contact_t"] for o in owed], t[len(t) - lag:])
        p = [o["contact_prob"] for o in outs[h - 1 + lag:]] + [o["contact_prob"] for o in owed]
        np.testing.assert_allclose(p, want["contact_prob"][v], rtol=1e-4, atol=1e-5)
    # an episode with fewer valid samples than the lag: all its decisions come at its end
    short = episode.slice(0, h + 1)  # 2 valid samples, lag 4
    s_want, s_got = estimate(m, short, **kw), stream_trajectory(m, short, **kw)
    np.testing.assert_allclose(s_got["contact_prob"][h - 1:], s_want["contact_prob"][h - 1:],
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(s_got["contact_decided_t"], s_want["contact_decided_t"])
    assert (s_got["contact_decided_t"][h - 1:] == t[h]).all()
    # a causal gate decides each valid sample at once and owes nothing at the end
    causal = StreamingEstimator(make_model(), **kw)
    outs = [causal.step({"t": t[k], **{c: np.asarray(episode[c])[k] for c in causal.inputs}})
            for k in range(h + 3)]
    np.testing.assert_array_equal([o["contact_t"] for o in outs[h - 1:]], t[h - 1:h + 3])
    assert causal.finish() == [] and causal.lag == 0


def test_onnx_export_of_a_lagged_gate_gives_every_lag(episode, tmp_path):
    pytest.importorskip("onnxruntime")
    from neuract.neuralactuator.export import OnnxActuator, export_onnx

    lag = 3
    m = make_model(gate_lag=lag)
    ort = OnnxActuator(export_onnx(m, tmp_path / "g.onnx"))
    assert ort.gate_lag == lag and ort.gate_state_size == m.gate_rnn.state_size
    c = m.cfg
    x = windows(episode, c.channels, 6, c.history, physics=c.physics, context_s=c.context_s)
    with torch.no_grad():
        want = m.recurrent_gate(x[:, -1])[0].numpy()  # (T, lag + 1)
    state, logits = None, []
    for k in range(len(x)):
        out = ort(x[k:k + 1].numpy(), state)
        state = out["gate_state"]
        assert out["gate_logit"].shape == (1, lag + 1)
        logits.append(out["gate_logit"][0])
    np.testing.assert_allclose(logits, want, rtol=1e-4, atol=1e-4)
    # the bound runner too
    run = ort.runner(1)
    got = [run(x[k:k + 1].numpy())[2][0].copy() for k in range(12)]
    np.testing.assert_allclose(got, want[:12], rtol=1e-4, atol=1e-4)
    # the probabilities estimate() decides from, rebuilt from the exported logits
    p = lagged_probability(torch.from_numpy(np.array(logits)), lag)
    ref = estimate(m, episode, gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
    np.testing.assert_allclose(p.numpy(), ref["contact_prob"][ref["valid"]], rtol=1e-4,
                               atol=1e-5)


def test_bad_lags_are_refused_and_sizes_count_the_logits():
    for bad in (-1, True, 2.0, MAX_GATE_LAG + 1):
        with pytest.raises(ConfigError, match="gate_lag=.*expected an integer from 0 to 600"):
            NeuralActuatorConfig(gate_rnn=8, gate_lag=bad).validate()
    with pytest.raises(ConfigError, match="gate_lag=3 is a lag of the recurrent gate"):
        NeuralActuatorConfig(gate_lag=3).validate()
    from neuract.pipeline.experiment_config import check_experiment

    with pytest.raises(ConfigError, match="ExperimentConfig.gate_lag = 3 is a lag"):
        check_experiment(tiny_gate_experiment(gate_rnn=0, gate_lag=3))
    with pytest.raises(ConfigError, match="ExperimentConfig.gate_lag = -2"):
        check_experiment(tiny_gate_experiment(gate_lag=-2))
    check_experiment(tiny_gate_experiment(gate_lag=np.int64(6)))
    base = NeuralActuatorConfig(n_joints=6, effort="load", gate_rnn=32, **TINY)
    lagged = base.replace(gate_lag=10)
    assert count_params(NeuralActuator(lagged)) - count_params(NeuralActuator(base)) == 10 * 33
    assert count_flops(lagged) - count_flops(base) == 2 * 10 * 32


def test_twin_experiment_trains_and_saves_a_lagged_gate(tmp_path):
    from neuract.pipeline.twin_data import TwinDataConfig
    from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment

    # decided at a shorter lag than it is trained with (gate_decide), as a user may choose
    exp = tiny_gate_experiment(calibration_fraction=0.3, gate_rnn_iters=10, gate_lag=6,
                               gate_decide=2)
    data = TwinDataConfig(minutes=1.2, units=1, tasks=("push", "free"), episode_s=6.0,
                          contact_min_force_n=0.5)
    res = run_twin_experiment(TwinExperimentConfig(tmp_path / "run", data, exp))
    rec = res["models"]["NeuralActuator[estimator]"]
    assert rec["gate_rnn"]["trained"] and rec["gate_rnn"]["lag"] == 6
    assert rec["gate_rnn"]["decide"] == 2
    ck = load_checkpoint(tmp_path / "run" / "checkpoints" / "neuralactuator_estimator")
    assert ck.cfg.gate_lag == 6 and ck.gate_rnn.out.out_features == 7
    assert ck.cfg.gate_decide == 2
    m = res["_neuralactuator"]["estimator"]
    for k, v in m.gate_rnn.state_dict().items():
        assert torch.equal(ck.gate_rnn.state_dict()[k], v), k


def test_cli_estimate_writes_when_each_decision_was_made(episode, tmp_path, capsys):
    import pyarrow.parquet as pq

    from neuract.cli import main
    from neuract.data import write_dataset

    ck = save_checkpoint(make_model(gate_lag=4), tmp_path / "ck")
    ds = write_dataset([episode], tmp_path / "ds")
    assert main(["estimate", "--checkpoint", str(ck), "--data", str(ds), "--out",
                 str(tmp_path / "est"), "--quiet"]) == 0
    (f,) = (tmp_path / "est").glob("*.parquet")
    tab = pq.read_table(f).to_pydict()
    want = estimate(load_checkpoint(ck), episode)
    np.testing.assert_array_equal(tab["contact_decided_t"], want["contact_decided_t"])
    assert tab["contact_decided_t"][100] > tab["t"][100]
    # streamed, as on a running robot: the same decisions, made at the same times
    assert main(["estimate", "--checkpoint", str(ck), "--data", str(ds), "--stream", "--out",
                 str(tmp_path / "s"), "--quiet"]) == 0
    (f,) = (tmp_path / "s").glob("*.parquet")
    streamed = pq.read_table(f).to_pydict()
    np.testing.assert_array_equal(streamed["contact_decided_t"], tab["contact_decided_t"])
    np.testing.assert_allclose(np.array(streamed["contact_prob"], float),
                               np.array(tab["contact_prob"], float), rtol=1e-4, atol=1e-5)
    # the export verb checks every lag's logit against torch
    pytest.importorskip("onnxruntime")
    assert main(["export", "--checkpoint", str(ck), "--out", str(tmp_path / "g.onnx"),
                 "--check-windows", "16"]) == 0
    assert "gate_logit" in capsys.readouterr().out
