"""NeuralActuator features from Trajectories, checkpoints (safetensors + JSON), ONNX export:
windows equal a hand-built stack, round trips are exact, ONNX Runtime equals torch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from neuract.data import Trajectory, TrajectoryMeta
from neuract.errors import CheckpointError, SchemaError
from neuract.neuralactuator import (
    NeuralActuator,
    NeuralActuatorConfig,
    OnnxActuator,
    export_onnx,
    feature_stats,
    load_checkpoint,
    read_config,
    save_checkpoint,
    windows,
)

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=32, d_trunk=48)


def make_traj(T=30, n=3, seed=0, nan=False):
    rng = np.random.default_rng(seed)
    ch = {"t": np.arange(T) * 0.016}
    for k in ("q", "qd", "q_goal", "current", "load", "voltage", "temperature"):
        ch[k] = rng.normal(size=(T, n))
    if nan:
        ch["current"][5, 1] = np.nan
    meta = TrajectoryMeta(robot="toy", joint_names=tuple("abc"[:n]), name="ep")
    return ch if nan else Trajectory(ch, meta)


@pytest.mark.parametrize("mode", ["simulator", "estimator"])
def test_windows_equal_a_hand_built_stack(mode):
    traj = make_traj()
    cfg = NeuralActuatorConfig(**TINY, n_joints=3, mode=mode, history=4)
    x = windows(traj, cfg.channels, n_joints=3, history=4, stride=2)
    assert x.shape == ((30 - 4) // 2 + 1, 4, 3 * len(cfg.channels))
    for i in (0, 5, len(x) - 1):
        for t in range(4):
            s = 2 * i + t
            for j in range(3):
                for c, name in enumerate(cfg.channels):
                    ref = (traj["q_goal"][s, j] - traj["q"][s, j] if name == "pos_error"
                           else traj[name][s, j])
                    assert x[i, t, j * len(cfg.channels) + c].item() == pytest.approx(ref, 1e-6)


def test_windows_reject_missing_and_non_finite_channels():
    cfg = NeuralActuatorConfig(**TINY, n_joints=3)
    traj = make_traj()
    no_volt = {k: traj[k] for k in traj.channels if k != "voltage"}
    with pytest.raises(SchemaError, match="voltage"):
        windows(no_volt, cfg.channels, 3)
    with pytest.raises(SchemaError, match="current"):
        windows(make_traj(nan=True), cfg.channels, 3)
    with pytest.raises(SchemaError, match="history"):
        windows(make_traj(T=5), cfg.channels, 3, history=8)


def test_feature_stats_are_numpys():
    x = torch.randn(50, 8, 12) * 3 + 1
    mean, std = feature_stats([x[:20], x[20:]])
    flat = x.reshape(-1, 12).numpy()
    np.testing.assert_allclose(mean.numpy(), flat.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(std.numpy(), flat.std(0), rtol=1e-5)
    const = torch.ones(10, 8, 2)
    assert (feature_stats(const)[1] > 0).all()


def trained_like(cfg, seed=0):
    g = torch.Generator().manual_seed(seed)
    model = NeuralActuator(cfg)
    model.set_stats(torch.randn(cfg.n_features, generator=g),
                    torch.rand(cfg.n_features, generator=g) + 0.5, torch.tensor([1.0, 2.0, 3.0]))
    with torch.no_grad():
        model.head.weight.normal_(0, 0.05, generator=g)
        model.log_kp.add_(0.3)
    return model.eval()


def test_checkpoint_round_trip_is_exact(tmp_path):
    cfg = NeuralActuatorConfig(**TINY, mode="simulator", n_joints=5, tau_max=(1, 2, 3, 4, 5))
    model = trained_like(cfg)
    save_checkpoint(model, tmp_path / "ck", extra={"steps": 3})
    back = load_checkpoint(tmp_path / "ck")
    assert back.cfg == cfg
    x = torch.randn(4, cfg.history, cfg.n_features)
    with torch.no_grad():
        for u, v in zip(model(x), back(x)):
            torch.testing.assert_close(u, v, rtol=0, atol=0)
    torch.testing.assert_close(back.x_std, model.x_std)
    _, info = read_config(tmp_path / "ck")
    assert info["extra"] == {"steps": 3} and info["channels"] == list(cfg.channels)
    with pytest.raises(Exception, match="exists"):
        save_checkpoint(model, tmp_path / "ck")


def test_checkpoint_errors_name_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="config.json"):
        load_checkpoint(tmp_path / "nothing")
    cfg = NeuralActuatorConfig(**TINY)
    save_checkpoint(trained_like(cfg), tmp_path / "ck")
    info = json.loads((tmp_path / "ck" / "config.json").read_text())
    info["config"]["d_model"] = 32  # weights no longer match
    (tmp_path / "ck" / "config.json").write_text(json.dumps(info))
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_checkpoint(tmp_path / "ck")
    info["kind"] = "other"
    (tmp_path / "ck" / "config.json").write_text(json.dumps(info))
    with pytest.raises(CheckpointError, match="kind"):
        load_checkpoint(tmp_path / "ck")


@pytest.mark.parametrize("kw", [{}, {"mode": "simulator", "activation": "relu"}])
def test_onnx_outputs_equal_torch_outputs(tmp_path, kw):
    cfg = NeuralActuatorConfig(**{**TINY, **kw})
    model = trained_like(cfg)
    path = export_onnx(model, tmp_path / "na.onnx")
    ort_model = OnnxActuator(path)
    assert ort_model.channels == cfg.channels and ort_model.config["mode"] == cfg.mode
    for B in (1, 9):  # dynamic batch
        x = 2.0 * torch.randn(B, cfg.history, cfg.n_features)
        got = ort_model(x.numpy())
        with torch.no_grad():
            ref = model(x)
        for name, r in zip(("tau", "force", "gate_logit", "condition_logits"), ref):
            np.testing.assert_allclose(got[name], r.numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg=name)
    with pytest.raises(SchemaError, match="shape"):
        ort_model(np.zeros((1, cfg.history, cfg.n_features + 1), np.float32))


def test_default_model_exports_and_matches(tmp_path):
    model = trained_like(NeuralActuatorConfig())
    ort_model = OnnxActuator(export_onnx(model, tmp_path / "na.onnx"))
    x = torch.randn(3, 8, model.cfg.n_features)
    with torch.no_grad():
        ref = model(x)
    for r, g in zip(ref, ort_model.run(x.numpy())):
        np.testing.assert_allclose(g, r.numpy(), rtol=1e-4, atol=2e-5)


def test_int8_export_quantizes_the_trunk_only_and_stays_close(tmp_path):
    """quantize='int8': the head trunk's weights become int8 (the file shrinks by about its
    three quarters), every other matrix stays float32, the outputs stay within a few per cent
    of each output's spread of the float32 model's (7-bit weights: without them AVX2's
    saturating 16-bit pair sums put the small head outputs off by about 15 % of their spread
    on average), and the user's root logger is left as it was."""
    import logging

    import onnx

    model = trained_like(NeuralActuatorConfig())
    f32 = export_onnx(model, tmp_path / "f32.onnx")
    handlers = list(logging.getLogger().handlers)
    q8 = export_onnx(model, tmp_path / "q8.onnx", quantize="int8")
    assert logging.getLogger().handlers == handlers
    assert q8.stat().st_size < 0.45 * f32.stat().st_size
    g = onnx.load(str(q8))
    ops = [n.op_type for n in g.graph.node]
    f32_ops = [n.op_type for n in onnx.load(str(f32)).graph.node]
    # one integer matrix product (the trunk); every other matrix product stays float32
    assert ops.count("MatMulInteger") == 1
    assert (ops.count("MatMul") + ops.count("Gemm")
            == f32_ops.count("MatMul") + f32_ops.count("Gemm") - 1)
    ort_model = OnnxActuator(q8)
    assert ort_model.quantize == "int8" and OnnxActuator(f32).quantize == "none"
    x = torch.randn(256, 8, model.cfg.n_features, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = model(x)
    got = ort_model(x.numpy())
    for name, r in zip(("tau", "force", "gate_logit", "condition_logits"), ref):
        r = r.numpy()
        err = np.abs(got[name] - r) / r.std()
        corr = np.corrcoef(got[name].ravel(), r.ravel())[0, 1]
        assert err.max() < 0.15 and err.mean() < 0.03 and corr > 0.9995, (name, err.max(),
                                                                          err.mean(), corr)


def test_export_refuses_an_unknown_quantization_and_writes_nothing(tmp_path):
    from neuract.errors import ConfigError

    model = trained_like(NeuralActuatorConfig(**TINY))
    with pytest.raises(ConfigError, match="quantize='int4'.*accepted"):
        export_onnx(model, tmp_path / "na.onnx", quantize="int4")
    assert not list(tmp_path.iterdir())


def test_onnx_runner_equals_run_and_rebinds_nothing(tmp_path):
    model = trained_like(NeuralActuatorConfig(**TINY))
    ort_model = OnnxActuator(export_onnx(model, tmp_path / "na.onnx"))
    g = torch.Generator().manual_seed(5)
    for B in (1, 4):
        f = ort_model.runner(B)
        for _ in range(2):  # the same bound buffers, new inputs
            x = torch.randn(B, model.cfg.history, model.cfg.n_features, generator=g).numpy()
            got = [o.copy() for o in f(x)]
            for a, b in zip(got, ort_model.run(x)):
                np.testing.assert_array_equal(a, b)
        with pytest.raises(SchemaError, match="shape"):
            f(np.zeros((B + 1, model.cfg.history, model.cfg.n_features), np.float32))
        # the caller may drop the returned list: the bound buffers stay alive with the runner
        f(x).clear()
        import gc

        gc.collect()
        junk = [np.ones(o.shape, np.float32) for o in ort_model.run(x)]  # noqa: F841
        got = [o.copy() for o in f(x)]
        for a, b in zip(got, ort_model.run(x)):
            np.testing.assert_array_equal(a, b)
    for bad in (0, True, 2.0):
        with pytest.raises(SchemaError, match="batch"):
            ort_model.runner(bad)


def test_export_verb_writes_onnx_with_the_calibration(tmp_path, capsys):
    from neuract.cli import main

    model = trained_like(NeuralActuatorConfig(**TINY))
    save_checkpoint(model, tmp_path / "ck", extra={"gate_threshold": 0.4, "gate_tau_s": 0.05,
                                                   "condition_threshold": [0.3, 0.6, 0.5],
                                                   "steps": 12})
    out = tmp_path / "deploy" / "na.onnx"
    assert main(["export", "--checkpoint", str(tmp_path / "ck"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "wrote" in printed and "max |ONNX - torch|" in printed
    ort_model = OnnxActuator(out)
    assert ort_model.extra == {"gate_threshold": 0.4, "gate_tau_s": 0.05,
                               "condition_threshold": [0.3, 0.6, 0.5]}
    assert ort_model.quantize == "none" and ort_model.channels == model.cfg.channels
    x = torch.randn(5, model.cfg.history, model.cfg.n_features)
    with torch.no_grad():
        ref = model(x)
    for r, g in zip(ref, ort_model.run(x.numpy())):
        np.testing.assert_allclose(g, r.numpy(), rtol=1e-4, atol=2e-5)
    # bad options: a clear error naming the option, nothing written
    for args, match in ((["--quantize", "int4"], "--quantize 'int4'"),
                        (["--out", str(tmp_path / "x.bin")], "--out")):
        bad = tmp_path / "bad.onnx"
        argv = ["export", "--checkpoint", str(tmp_path / "ck"), "--out", str(bad), *args]
        assert main(argv) == 1
        assert match in capsys.readouterr().err
        assert not bad.exists() and not (tmp_path / "x.bin").exists()
    assert main(["export", "--checkpoint", str(tmp_path / "nope"), "--out", str(out)]) == 1
    assert "config.json" in capsys.readouterr().err


def test_export_verb_leaves_no_onnx_file_when_its_check_fails(tmp_path, capsys, monkeypatch):
    """An export that fails its accuracy check is not left at --out (nor its staging file),
    and an earlier good file there is kept."""
    from neuract.cli import main
    from neuract.pipeline import export_verb

    save_checkpoint(trained_like(NeuralActuatorConfig(**TINY)), tmp_path / "ck")
    out = tmp_path / "deploy" / "na.onnx"
    argv = ["export", "--checkpoint", str(tmp_path / "ck"), "--out", str(out)]
    monkeypatch.setitem(export_verb.CHECK_LIMIT, "none", -1.0)  # every export fails
    assert main(argv) == 1
    assert "was not written" in capsys.readouterr().err
    assert not (tmp_path / "deploy").exists()  # nor the folder the export created
    monkeypatch.setitem(export_verb.CHECK_LIMIT, "none", 1e-3)
    assert main(argv) == 0
    before = out.read_bytes()
    monkeypatch.setitem(export_verb.CHECK_LIMIT, "none", -1.0)
    assert main(argv) == 1
    assert out.read_bytes() == before and sorted(p.name for p in out.parent.iterdir()) == [
        "na.onnx"]
