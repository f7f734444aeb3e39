"""The recurrent contact gate: its rows are the model's windows' last steps, estimate and the
streaming estimator use it alike, it learns what a window cannot see, its training resumes
to the same result, and bad settings are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.errors import CheckpointError, ConfigError
from neuract.estimate import estimate
from neuract.estimate.gate_rnn import (
    GateRows,
    GateTrainConfig,
    best_f1,
    gate_probabilities,
    gate_rows,
    train_gate_rnn,
)
from neuract.estimate.neural import stream_trajectory
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
from neuract.neuralactuator.checkpoint import load_checkpoint, save_checkpoint
from neuract.neuralactuator.features import windows
from neuract.neuralactuator.model import count_flops, count_params

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4)


@pytest.fixture(scope="module")
def episodes():
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    return generate(GenerateConfig(robot="so101", tasks=("push",), minutes=0.2, units=1,
                                   seed=3, sim=SimConfig(episode_s=6.0)))


def make_model(hidden: int = 8, **kw) -> NeuralActuator:
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", physics_robot="so101",
                               physics_site="gripperframe", context_s=0.5, gate_rnn=hidden,
                               **TINY, **kw)
    torch.manual_seed(0)
    m = NeuralActuator(cfg).eval()
    with torch.no_grad():  # a recurrent gate whose output moves with the telemetry
        m.gate_rnn.inp.weight.mul_(5.0)
        m.gate_rnn.out.weight.mul_(20.0)
    m.gate_rnn.trained.fill_(True)  # as if trained: these tests check how it is used
    return m


def test_rows_are_the_windows_last_steps_normalised(episodes):
    m = make_model()
    with torch.no_grad():
        m.x_mean.uniform_(-1, 1)
        m.x_std.uniform_(0.5, 2)
    tr = episodes[0]
    rows = gate_rows(m, [tr])[0]
    c = m.cfg
    x = windows(tr, c.channels, c.n_joints, c.history, physics=c.physics, context_s=c.context_s)
    np.testing.assert_allclose(rows.rows, ((x[:, -1] - m.x_mean) / m.x_std).numpy(), rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_array_equal(rows.contact, np.asarray(tr["contact"], bool)[c.history - 1:])
    # an episode without a contact label is left out
    assert gate_rows(m, [{k: tr[k] for k in tr if k != "contact"}]) == []


@pytest.mark.parametrize("conv", [0, 3])
def test_estimate_and_stream_use_the_recurrent_gate(episodes, conv):
    m = make_model(gate_conv=conv)
    tr = episodes[0]
    x = windows(tr, m.cfg.channels, 6, m.cfg.history, physics=m.cfg.physics,
                context_s=m.cfg.context_s)
    with torch.no_grad():  # centred on the episode: the decision at 0.5 goes both ways
        m.gate_rnn.out.bias -= m.recurrent_gate(x[:, -1])[0].median()
    ref = estimate(m, tr, gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
    v = ref["valid"]
    # the recurrent gate over the valid samples from the episode's first valid one
    with torch.no_grad():
        p = torch.sigmoid(m.recurrent_gate(x[:, -1])[0]).numpy()
    np.testing.assert_allclose(ref["contact_prob"][v], p, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        head = torch.sigmoid(m(x)[2]).numpy()
    assert np.abs(head - p).max() > 0.05  # not the gate head's probability
    assert (p >= 0.5).any() and (p < 0.5).any()
    got = stream_trajectory(m, tr, gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
    np.testing.assert_allclose(got["contact_prob"][v], ref["contact_prob"][v], rtol=1e-4,
                               atol=1e-5)
    # a second episode streamed after the first starts from a fresh state (reset)
    from neuract.estimate.stream import StreamingEstimator

    est = StreamingEstimator(m, gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
    for tr2 in episodes[:2]:
        est.reset()
        out = [est.step({"t": tr2["t"][k], **{c: np.asarray(tr2[c])[k] for c in est.inputs}})
               for k in range(len(tr2["t"]))]
        want = estimate(m, tr2, gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
        ok = want["valid"]
        np.testing.assert_allclose(np.array([o["contact_prob"] for o in out])[ok],
                                   want["contact_prob"][ok], rtol=1e-4, atol=1e-5)


def test_an_untrained_recurrent_gate_is_refused(episodes, tmp_path):
    from neuract.estimate.stream import StreamingEstimator
    from neuract.neuralactuator.export import export_onnx

    m = make_model()
    m.gate_rnn.trained.fill_(False)
    for use in (lambda: estimate(m, episodes[0]), lambda: StreamingEstimator(m),
                lambda: export_onnx(m, tmp_path / "u.onnx")):
        with pytest.raises(ConfigError, match="recurrent contact gate .* was never trained"):
            use()
    assert not (tmp_path / "u.onnx").exists()
    # the flag travels with the checkpoint
    save_checkpoint(m, tmp_path / "u")
    with pytest.raises(ConfigError, match="never trained"):
        estimate(load_checkpoint(tmp_path / "u"), episodes[0])


@pytest.mark.parametrize("conv", [0, 2])
def test_checkpoint_keeps_the_recurrent_gate(episodes, tmp_path, conv):
    m = make_model(gate_conv=conv)
    save_checkpoint(m, tmp_path / "ck")
    m2 = load_checkpoint(tmp_path / "ck")
    assert m2.cfg.gate_rnn == 8 and m2.cfg.gate_conv == conv and bool(m2.gate_rnn.trained)
    assert len(m2.gate_rnn.convs) == conv
    a = estimate(m, episodes[0], gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
    b = estimate(m2, episodes[0], gate_threshold=0.5, gate_tau_s=0.0, gate_release=0.5)
    np.testing.assert_array_equal(a["contact_prob"], b["contact_prob"])


def test_size_counts_include_the_gate():
    base = NeuralActuatorConfig(n_joints=6, effort="load", **TINY)
    with_gate = base.replace(gate_rnn=32)
    F = base.n_features
    gru = F * 32 + 32 + 3 * (32 * 32 + 32 * 32 + 2 * 32) + 33
    assert count_params(NeuralActuator(with_gate)) - count_params(NeuralActuator(base)) == gru
    assert count_flops(with_gate) - count_flops(base) == 2 * (F * 32 + 6 * 32 * 32 + 32)
    # each convolution: 3 taps of 32 x 32 and a bias
    conv = with_gate.replace(gate_conv=2)
    assert count_params(NeuralActuator(conv)) - count_params(NeuralActuator(with_gate)) == \
        2 * (3 * 32 * 32 + 32)
    assert count_flops(conv) - count_flops(with_gate) == 2 * 2 * 3 * 32 * 32


def test_convolution_front_is_causal_and_streams_in_pieces():
    """The convolution front's state carries each layer's last inputs: an episode fed in
    pieces (one sample, a few, many) gives the logits of feeding it whole; a row changes no
    logit before it; at an episode's start the layers see zero inputs before the first row."""
    from neuract.neuralactuator.gate import RecurrentGate, gate_state_size

    torch.manual_seed(0)
    g = RecurrentGate(12, 16, conv=3).double()
    assert g.dilations == (1, 2, 4) and g.state_size == gate_state_size(16, 3) == 16 * 15
    x = torch.randn(2, 60, 12, dtype=torch.double)
    with torch.no_grad():
        whole, s_whole = g(x)
        got, state = [], None
        for a, b in ((0, 1), (1, 2), (2, 9), (9, 10), (10, 41), (41, 60)):
            out, state = g(x[:, a:b], state)
            got.append(out)
        torch.testing.assert_close(torch.cat(got, 1), whole, rtol=0, atol=1e-12)
        torch.testing.assert_close(state, s_whole, rtol=0, atol=1e-12)
        assert state.shape == (1, 2, g.state_size)
        # causal: a change at sample 30 leaves samples 0-29 alone and reaches 30 on
        y = x.clone()
        y[:, 30] += 1.0
        changed = (g(y)[0] - whole).abs()
        assert changed[:, :30].max() == 0 and changed[:, 30].min() > 0
        # the GRU's part of the state is the GRU's state
        h = torch.relu(g.inp(x)).transpose(1, 2)
        for d, conv in zip(g.dilations, g.convs):
            h = h + torch.relu(conv(torch.nn.functional.pad(h, (2 * d, 0))))
        ref, gru_state = g.gru(h.transpose(1, 2))
        torch.testing.assert_close(g.out(ref).squeeze(-1), whole, rtol=0, atol=1e-12)
        torch.testing.assert_close(state[:, :, :16], gru_state, rtol=0, atol=1e-12)
    # a state of another size (e.g. the GRU's alone, or another batch) is refused, named
    for bad in (state[:, :, :16], state[:, :1], state[0]):
        with pytest.raises(ConfigError, match=r"RecurrentGate state of shape .*expected "
                           r"\(1, 2, 240\)"):
            g(x[:, :5], bad)
    with pytest.raises(ConfigError, match=r"expected \(1, 2, 16\)"):
        RecurrentGate(12, 16).double()(x[:, :5], torch.zeros(1, 2, 240, dtype=torch.double))


def memory_task(n_in: int, n_eps: int, seed: int, T: int = 300) -> list[GateRows]:
    """Rows whose contact label is set by a pulse on channel 0 and cleared by a pulse on
    channel 1 some samples later: only a gate that remembers the pulses can tell."""
    rng = np.random.default_rng(seed)
    out = []
    for e in range(n_eps):
        rows = rng.normal(0, 0.3, (T, n_in)).astype(np.float32)
        y = np.zeros(T, bool)
        k = int(rng.integers(5, 40))
        while k < T - 10:
            on, off = k, k + int(rng.integers(15, 60))
            rows[on, 0] += 4.0
            rows[min(off, T - 1), 1] += 4.0
            y[on:off] = True
            k = off + int(rng.integers(15, 60))
        out.append(GateRows(f"ep{e}", rows, y))
    return out


def test_training_learns_what_one_sample_cannot_tell():
    m = make_model(hidden=16)
    F = m.cfg.n_features
    train, calib = memory_task(F, 24, 0), memory_task(F, 6, 1)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    cfg = GateTrainConfig(iters=150, batch=8, crop=200, lr=1e-2, eval_every=50)
    rep = train_gate_rnn(m, train, calib, cfg)
    # one sample's rows carry nothing but the pulses: the best any per-sample rule can do is
    # far below what the trained gate reaches on unseen episodes
    test = memory_task(F, 6, 2)
    f1, _ = best_f1(gate_probabilities(m.gate_rnn, test), test)
    assert rep["calib_f1"] > 0.9 and f1 > 0.9, (rep["calib_f1"], f1)
    assert rep["kept_iteration"] in [h["iteration"] for h in rep["history"]]
    assert max(h["calib_f1"] for h in rep["history"]) == pytest.approx(rep["calib_f1"])
    # only the gate changed
    for k, v in m.state_dict().items():
        if not k.startswith("gate_rnn."):
            assert torch.equal(v, before[k]), k


@pytest.mark.parametrize("conv", [0, 2])
def test_training_resumes_to_the_same_result(tmp_path, conv):
    F = make_model().cfg.n_features
    train, calib = memory_task(F, 8, 0, T=120), memory_task(F, 3, 1, T=120)
    cfg = GateTrainConfig(iters=60, batch=4, crop=50, lr=1e-2, eval_every=20)
    ref = make_model(gate_conv=conv)
    r_ref = train_gate_rnn(ref, train, calib, cfg)

    class Stop(Exception):
        pass

    def interrupt(it, total, info):
        if it == 40:
            raise Stop

    state = tmp_path / "gate_state.safetensors"
    m = make_model(gate_conv=conv)
    with pytest.raises(Stop):
        train_gate_rnn(m, train, calib, GateTrainConfig(**{**cfg.__dict__,
                                                           "checkpoint": str(state)}),
                       progress=interrupt)
    assert state.is_file()
    m = make_model(gate_conv=conv)
    r = train_gate_rnn(m, train, calib, GateTrainConfig(**{**cfg.__dict__,
                                                           "checkpoint": str(state)}))
    for k, v in ref.gate_rnn.state_dict().items():
        torch.testing.assert_close(m.gate_rnn.state_dict()[k], v, rtol=0, atol=0, msg=k)
    assert r["history"] == r_ref["history"] and r["kept_iteration"] == r_ref["kept_iteration"]
    # a state of another run is refused, not resumed
    with pytest.raises(CheckpointError, match="lr"):
        train_gate_rnn(make_model(gate_conv=conv), train, calib,
                       GateTrainConfig(**{**cfg.__dict__, "lr": 5e-3,
                                          "checkpoint": str(state)}))
    # ... and so is one of a gate with another convolution front
    with pytest.raises(CheckpointError, match="conv"):
        train_gate_rnn(make_model(gate_conv=1 - conv // 2), train, calib,
                       GateTrainConfig(**{**cfg.__dict__, "checkpoint": str(state)}))


def test_bad_settings_are_refused():
    for bad in (-1, True, 2.5):
        with pytest.raises(ConfigError, match="gate_rnn"):
            NeuralActuatorConfig(gate_rnn=bad).validate()
    with pytest.raises(ConfigError, match="estimator-mode"):
        NeuralActuatorConfig(mode="simulator", gate_rnn=8).validate()
    for bad in (-1, True, 1.0, 11):
        with pytest.raises(ConfigError, match="gate_conv=.*expected an integer from 0 to 10"):
            NeuralActuatorConfig(gate_rnn=8, gate_conv=bad).validate()
    with pytest.raises(ConfigError, match="gate_conv=2 builds on the recurrent gate"):
        NeuralActuatorConfig(gate_conv=2).validate()
    from neuract.pipeline.experiment_config import check_experiment

    with pytest.raises(ConfigError, match="ExperimentConfig.gate_conv = 3 adds convolutions"):
        check_experiment(tiny_gate_experiment(gate_rnn=0, gate_conv=3))
    with pytest.raises(ConfigError, match="ExperimentConfig.gate_conv = -1"):
        check_experiment(tiny_gate_experiment(gate_conv=-1))
    for field, v in (("iters", 0), ("crop", 1), ("lr", float("nan")), ("batch", True),
                     ("seed", -1), ("max_seconds", -1.0)):
        with pytest.raises(ConfigError, match=field):
            GateTrainConfig(**{field: v}).validate()
    m = make_model()
    F = m.cfg.n_features
    with pytest.raises(ConfigError, match="no recurrent gate"):
        train_gate_rnn(NeuralActuator(NeuralActuatorConfig(n_joints=6, effort="load", **TINY)),
                       memory_task(F, 2, 0), memory_task(F, 2, 1))
    with pytest.raises(ConfigError, match="no calibration episodes"):
        train_gate_rnn(m, memory_task(F, 2, 0), [])
    wrong = [GateRows("w", np.zeros((10, F + 1), np.float32), np.zeros(10, bool))]
    with pytest.raises(ConfigError, match="expected"):
        train_gate_rnn(m, wrong, memory_task(F, 2, 1))
    none = [GateRows("n", np.zeros((10, F), np.float32), np.zeros(10, bool))]
    with pytest.raises(ConfigError, match="only no-contact"):
        train_gate_rnn(m, memory_task(F, 2, 0), none)
    with pytest.raises(ConfigError, match="no recurrent gate"):
        NeuralActuator(NeuralActuatorConfig(n_joints=6, effort="load", **TINY)).recurrent_gate(
            torch.zeros(3, F))


@pytest.mark.parametrize("conv", [0, 3])
def test_onnx_export_carries_the_gate_state(episodes, tmp_path, conv):
    pytest.importorskip("onnxruntime")
    from neuract.neuralactuator.export import OnnxActuator, export_onnx

    m = make_model(gate_conv=conv)
    path = export_onnx(m, tmp_path / "g.onnx")
    ort = OnnxActuator(path)
    S = 8 * (1 + 2 * (1 + 2 + 4)) if conv else 8  # the GRU state, then the layers' inputs
    assert ort.gate_state_size == m.gate_rnn.state_size == S == ort.gate_hidden
    tr = episodes[0]
    c = m.cfg
    x = windows(tr, c.channels, 6, c.history, physics=c.physics, context_s=c.context_s)
    with torch.no_grad():
        want = m.recurrent_gate(x[:, -1])[0].numpy()
        tau = m(x)[0].numpy()
    # one stream, sample by sample, the state passed back each time
    state, got = None, []
    for k in range(len(x)):
        out = ort(x[k:k + 1].numpy(), state)
        state = out["gate_state"]
        got.append(out["gate_logit"][0])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ort(x.numpy())["tau"], tau, rtol=1e-4, atol=1e-5)
    # the bound runner carries the state itself; reset starts a new stream
    run = ort.runner(1)
    for _ in range(2):
        run.reset()
        got = [float(run(x[k:k + 1].numpy())[2][0]) for k in range(20)]
        np.testing.assert_allclose(got, want[:20], rtol=1e-4, atol=1e-4)
    # two streams in a batch: resetting one leaves the other's state
    run2 = ort.runner(2)
    for k in range(10):
        out = run2(np.stack([x[k].numpy(), x[k].numpy()]))
    run2.reset([1])
    out = run2(np.stack([x[10].numpy(), x[0].numpy()]))
    np.testing.assert_allclose(out[2], [want[10], want[0]], rtol=1e-4, atol=1e-4)
    # int8: the head trunk quantized in the recurrent graph too
    q = OnnxActuator(export_onnx(m, tmp_path / "g8.onnx", quantize="int8"))
    assert q.quantize == "int8" and q.gate_state_size == S
    np.testing.assert_allclose(q(x[:1].numpy())["gate_logit"], want[:1], rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="gate_state has shape"):
        ort(x[:2].numpy(), np.zeros((1, S), np.float32))
    # AOT packages do not carry the state: refused before any work
    from neuract.neuralactuator.compiled import compile_aot
    from neuract.neuralactuator.fused import FusedNeuralActuator

    for what in (m, FusedNeuralActuator(m)):  # the folded copy too (it has no GRU)
        with pytest.raises(ConfigError, match="recurrent contact gate"):
            compile_aot(what, (1,), tmp_path / "aot")
    assert not (tmp_path / "aot").exists()


@pytest.mark.parametrize("conv", [0, 2])
def test_export_verb_checks_a_recurrent_gate_checkpoint(tmp_path, capsys, conv):
    pytest.importorskip("onnxruntime")
    from neuract.cli import main

    m = make_model(gate_conv=conv)
    m.gate_threshold = 0.4
    save_checkpoint(m, tmp_path / "ck")
    out = tmp_path / "g.onnx"
    assert main(["export", "--checkpoint", str(tmp_path / "ck"), "--out", str(out),
                 "--check-windows", "16"]) == 0
    text = capsys.readouterr().out
    assert "gate_state_out" in text and out.is_file()  # the state is checked too
    assert main(["export", "--checkpoint", str(tmp_path / "ck"), "--format", "aot", "--out",
                 str(tmp_path / "aot")]) != 0
    assert "recurrent contact gate" in capsys.readouterr().err
    assert not (tmp_path / "aot").exists()


def tiny_gate_experiment(**kw):
    """A tiny estimator-only experiment with an 8-unit recurrent gate (``kw``: changes)."""
    from neuract.pipeline.experiment_config import ExperimentConfig, ModelSize

    size = ModelSize(history=4, d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16)
    return ExperimentConfig(size=size, sim_steps=0, est_steps=3, batch=4, est_horizon=3,
                            baseline_iters=0, parametric_friction=(), neural_baselines=(),
                            horizons=(10,), full=False, figure_samples=60,
                            **{"gate_rnn": 8, **kw})


def test_twin_experiment_trains_the_recurrent_gate_on_extra_units(tmp_path):
    """The twin experiment trains the estimator's recurrent gate after the estimator, on its
    training episodes and extra episodes of other units (two worker processes), keeps the
    best calibration iteration, calibrates the gate on it and saves it with the checkpoint;
    the test episodes are the same as without the extra ones."""
    import dataclasses

    from neuract.pipeline.experiment_config import check_experiment
    from neuract.pipeline.twin_data import TwinDataConfig
    from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment
    from neuract.pipeline.twin_gate import gate_chunks

    exp = tiny_gate_experiment(calibration_fraction=0.3, gate_rnn_iters=20, gate_conv=2)
    data = TwinDataConfig(minutes=2.4, units=2, tasks=("push", "free"), episode_s=6.0,
                          contact_min_force_n=0.5, gate_train_minutes=0.4, workers=2)
    chunks = gate_chunks(data)
    # by default the contact tasks of the default mix (not the run's own: push, free)
    assert [c.seed for c in chunks] == [1000] and chunks[0].tasks == ("lift", "pick", "push",
                                                                        "degraded")
    res = run_twin_experiment(TwinExperimentConfig(tmp_path / "run", data, exp))
    g = res["models"]["NeuralActuator[estimator]"]["gate_rnn"]
    assert g["trained"] and g["hidden"] == 8 and g["conv"] == 2 and g["extra_episodes"] == 4
    assert 0.3 < g["extra_minutes"] < 0.5
    assert g["kept_iteration"] in [h["iteration"] for h in g["calib_history"]]
    m = res["_neuralactuator"]["estimator"]
    ck = load_checkpoint(tmp_path / "run" / "checkpoints" / "neuralactuator_estimator")
    assert ck.cfg.gate_conv == 2 and len(ck.gate_rnn.convs) == 2
    for k, v in m.gate_rnn.state_dict().items():
        assert torch.equal(ck.gate_rnn.state_dict()[k], v), k
    assert not (tmp_path / "run" / "checkpoints" / "train_neuralactuator_gate_rnn.safetensors"
                ).exists()
    # the same test episodes as a run without the extra gate episodes
    plain = dataclasses.replace(data, gate_train_minutes=0.0)
    assert res["data"]["test_episodes"] == run_twin_split_names(plain)
    with pytest.raises(ConfigError, match="gate_rnn"):
        run_twin_experiment(TwinExperimentConfig(
            tmp_path / "bad", data, dataclasses.replace(exp, gate_rnn=0, gate_conv=0)))
    for bad in (-1.0, 0.05):  # negative; less than one 6-s episode
        with pytest.raises(ConfigError, match="gate_train_minutes"):
            gate_chunks(dataclasses.replace(data, gate_train_minutes=bad))
    # a remainder under one episode joins the last chunk
    chunks = gate_chunks(dataclasses.replace(data, gate_train_minutes=216.05))
    assert [c.minutes for c in chunks] == [216.05]
    chunks = gate_chunks(dataclasses.replace(data, gate_train_minutes=300.0))
    assert [c.minutes for c in chunks] == [216.0, 84.0] and chunks[1].seed == 1001
    with pytest.raises(ConfigError, match="ExperimentConfig.gate_rnn = -1"):
        run_twin_experiment(TwinExperimentConfig(
            tmp_path / "bad", data, dataclasses.replace(exp, gate_rnn=-1)))
    with pytest.raises(ConfigError, match="workers"):
        gate_chunks(dataclasses.replace(data, workers=0))
    with pytest.raises(ConfigError, match="gate_rnn_iters"):
        run_twin_experiment(TwinExperimentConfig(
            tmp_path / "bad", data, dataclasses.replace(exp, gate_rnn_iters=0)))
    # a gate with no estimator trained in the run to train it on is refused, not left unused
    with pytest.raises(ConfigError, match="gate_rnn = 8 .* est_steps = 0 trains no estimator"):
        run_twin_experiment(TwinExperimentConfig(
            tmp_path / "bad", data, dataclasses.replace(exp, est_steps=0)))
    with pytest.raises(ConfigError, match="gate_rnn = 8 .* given checkpoint"):
        check_experiment(exp, ("estimator",))
    check_experiment(dataclasses.replace(exp, gate_rnn=0, gate_conv=0), ("estimator",))
    assert not (tmp_path / "bad").exists()


def run_twin_split_names(data) -> list:
    from neuract.pipeline.twin_data import twin_split

    return [tr.meta.name for tr in twin_split(data)[1]]


def test_without_contact_labels_the_gate_head_decides(tmp_path):
    from neuract.pipeline.twin_data import TwinDataConfig
    from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment

    exp = tiny_gate_experiment(gate_rnn_iters=5, gate_conv=2)
    data = TwinDataConfig(minutes=0.6, units=1, tasks=("free",), episode_s=6.0)
    res = run_twin_experiment(TwinExperimentConfig(tmp_path / "run", data, exp))
    g = res["models"]["NeuralActuator[estimator]"]["gate_rnn"]
    assert not g["trained"] and "gate head" in g["why"]
    assert res["_neuralactuator"]["estimator"].gate_rnn is None
    ck = load_checkpoint(tmp_path / "run" / "checkpoints" / "neuralactuator_estimator")
    assert ck.cfg.gate_rnn == 0 and ck.cfg.gate_conv == 0 and ck.gate_rnn is None


def test_memory_bounds_count_what_is_held_together(monkeypatch):
    import importlib

    from neuract.pipeline.twin_data import TwinDataConfig, worn_config
    from neuract.pipeline.twin_gate import gate_chunks

    gen = importlib.import_module("neuract.twin.generate")

    per_min = gen.estimated_bytes(1.0, 30.0, "so101")
    # room for 100 min of episodes: 80 main + 30 worn minutes do not fit together
    monkeypatch.setattr(gen, "available_memory", lambda: int(100 * per_min))
    with pytest.raises(ConfigError, match="minutes \\+ TwinDataConfig.worn_train_minutes"):
        worn_config(TwinDataConfig(minutes=80.0, worn_train_minutes=30.0))
    worn_config(TwinDataConfig(minutes=60.0, worn_train_minutes=30.0))
    # the gate's rows of every extra minute are held too: room for 12 main minutes, one
    # 216-min chunk and 1000 minutes' rows, but not for 2000 minutes' rows
    import neuract.pipeline.twin_gate as te

    eps = gen.estimated_bytes(12.0, 30.0, "so101") + gen.estimated_bytes(216.0, 30.0, "so101")
    room = eps + 1500 * te.GATE_ROW_BYTES_PER_MINUTE
    monkeypatch.setattr(gen, "available_memory", lambda: int(room))
    gate_chunks(TwinDataConfig(minutes=12.0, gate_train_minutes=1000.0, workers=1))
    with pytest.raises(ConfigError, match="gate_train_minutes = 2000 with workers = 1"):
        gate_chunks(TwinDataConfig(minutes=12.0, gate_train_minutes=2000.0, workers=1))
    # and the main episodes: 400 more main minutes do not fit beside 1000 minutes' rows
    with pytest.raises(ConfigError, match="gate_train_minutes = 1000"):
        gate_chunks(TwinDataConfig(minutes=412.0, gate_train_minutes=1000.0, workers=1))


def test_extra_gate_rows_do_not_depend_on_the_workers(monkeypatch):
    """Two chunks computed by two spawned worker processes give the rows one process gives,
    in chunk order."""
    import neuract.pipeline.twin_gate as te

    monkeypatch.setattr(te, "GATE_CHUNK_MINUTES", 0.2)
    m = make_model()
    data = te.TwinDataConfig(minutes=0.6, units=1, tasks=("push",), episode_s=6.0,
                             gate_train_minutes=0.4, gate_train_tasks=("push",), workers=2)
    assert len(te.gate_chunks(data)) == 2
    seen = []
    two = te.gate_extra_rows(data, m, lambda s, d, t: seen.append((d, t)))
    one = te.gate_extra_rows(te.TwinDataConfig(**{**data.__dict__, "workers": 1}), m)
    assert seen[-1] == (2, 2) and len(two) == len(one) == 4
    for a, b in zip(two, one):
        assert a.name == b.name
        np.testing.assert_array_equal(a.rows, b.rows)
        np.testing.assert_array_equal(a.contact, b.contact)
