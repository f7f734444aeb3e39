"""neuract::linear_w8, the int8-weight operator of the compiled NeuralActuator: the C++ kernel
computes exactly the reference arithmetic (odd shapes, tails, long rows, empty batches), the
weights round-trip within half a step, AOTInductor packages with ``quantize="int8"`` equal
the eager int8 model and stay near the float32 one, and a failing build, a CPU without AVX2
or a bad option fail clearly, leaving nothing behind."""

from __future__ import annotations

import json

import pytest
import torch

from neuract.errors import ConfigError
from neuract.neuralactuator import int8op
from neuract.neuralactuator.compiled import AotActuator, compile_aot, cxx_compiler
from neuract.neuralactuator.config import NeuralActuatorConfig
from neuract.neuralactuator.fused import FusedNeuralActuator
from test_neuralactuator_compiled import TINY, trained_like

needs_op = pytest.mark.skipif(cxx_compiler() is None or not int8op.cpu_supported(),
                              reason="needs a C++ compiler and an AVX2 CPU")


@pytest.fixture(scope="module")
def op(tmp_path_factory):
    path = int8op.build_op(tmp_path_factory.mktemp("op"))
    int8op.load_op(path)
    return torch.ops.neuract.linear_w8


def test_quantize_rows_round_trips_within_half_a_step():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(37, 53, generator=g) * torch.logspace(-3, 1, 37)[:, None]
    w[5] = 0.0
    q, s = int8op.quantize_rows(w)
    assert q.dtype == torch.int8 and s.shape == (37,)
    assert q.abs().max() == 127  # the full range, not 7 bits
    assert (q[5] == 0).all() and s[5] == 1.0
    err = (q.float() * s[:, None] - w).abs()
    assert (err <= s[:, None] / 2 + 1e-7).all()
    with pytest.raises(ValueError, match="2-D float"):
        int8op.quantize_rows(torch.ones(3, dtype=torch.int32).reshape(1, 3))


def test_qmax_keeps_int32_lane_sums_exact():
    assert int8op.qmax_for(768) == 16383
    for k in (768, 8192, 8200, 50_000):
        assert int8op.qmax_for(k) * 128 * ((k + 7) // 8) < 2**31
    assert int8op.qmax_for(8192) == 16383 and int8op.qmax_for(8200) < 16383


@needs_op
@pytest.mark.parametrize("B,K,N", [(1, 768, 1576), (3, 48, 22), (5, 37, 9), (32, 16, 4),
                                   (2, 9000, 7), (0, 32, 8), (3, 5, 8), (4, 1, 1)])
def test_kernel_equals_the_reference(op, B, K, N):
    g = torch.Generator().manual_seed(B * 1000 + K + N)
    # rows of different sizes, so that a row given another row's scale shows
    x = 3 * torch.randn(B, K, generator=g) * torch.logspace(-2, 2, max(B, 1))[:B, None]
    w = torch.randn(N, K, generator=g)
    q, s = int8op.quantize_rows(w)
    bias = torch.randn(N, generator=g)
    y = op(x, q, s, bias)
    ref = int8op.linear_w8_reference(x, q, s, bias)
    assert y.shape == (B, N) and y.dtype == torch.float32
    torch.testing.assert_close(y, ref, rtol=1e-6, atol=1e-6 * float(ref.abs().amax()) if B else 0.0)
    if B:  # and near the float32 product: int8 weights, 15-bit activations
        full = x @ w.t() + bias
        assert ((y - full).abs() / full.abs().amax(dim=1, keepdim=True)).max() < 0.02


@needs_op
def test_kernel_special_rows(op):
    """Zero, tiny, NaN and infinite rows, in the two-row and the one-row paths; the others
    unaffected."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(7, 40, generator=g)
    x[1] = 0.0
    x[2] = 1e-35  # below TINY_X: counts as zero
    x[3, 5] = float("nan")
    x[6, 0] = float("inf")
    q, s = int8op.quantize_rows(torch.randn(9, 40, generator=g))
    bias = torch.randn(9, generator=g)
    y = op(x, q, s, bias)
    ref = int8op.linear_w8_reference(x, q, s, bias)
    torch.testing.assert_close(y, ref, rtol=1e-6, atol=1e-6, equal_nan=True)
    torch.testing.assert_close(y[1], bias)
    torch.testing.assert_close(y[2], bias)
    assert y[3].isnan().all() and y[6].isnan().all()
    assert torch.isfinite(y[[0, 1, 2, 4, 5]]).all()


@needs_op
def test_kernel_extremes_do_not_overflow(op):
    """The largest inputs against the largest weights (-128 included) over a long row: the
    int32 lanes must not wrap (the result is exact up to float32 rounding)."""
    K = 8200  # qmax drops below 16383 here
    x = torch.full((2, K), -1.0)
    x[1] = 1.0
    w = torch.full((5, K), -128, dtype=torch.int8)
    w[1] = 127
    w[2, ::2] = 127
    s, bias = torch.ones(5), torch.zeros(5)
    y = op(x, w, s, bias)
    exact = x.double() @ w.double().t()
    torch.testing.assert_close(y.double(), exact, rtol=1e-6, atol=1e-3)


@needs_op
def test_kernel_non_contiguous_inputs_and_threads(op):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(9, 96, generator=g)[:, ::2]  # (9, 48), strided
    w = torch.randn(48, 30, generator=g).t()  # (30, 48), transposed
    q, s = int8op.quantize_rows(w)
    qt = q.t().contiguous().t()  # the int8 weights as a strided view
    bias = torch.randn(30, generator=g)
    ref = int8op.linear_w8_reference(x.contiguous(), q, s, bias)
    torch.testing.assert_close(op(x, qt, s, bias), ref, rtol=1e-6, atol=1e-5)
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        xb = torch.randn(64, 48, generator=g)
        torch.testing.assert_close(op(xb, q, s, bias),
                                   int8op.linear_w8_reference(xb, q, s, bias),
                                   rtol=1e-6, atol=1e-5)
    finally:
        torch.set_num_threads(n)


@needs_op
def test_a_different_loaded_version_is_refused(op, tmp_path):
    assert int8op.loaded_source() == int8op.source_hash()
    with pytest.raises(int8op.Int8OpUnavailable, match="one version"):
        int8op.load_op(tmp_path / "other.so", source="0123456789abcdef")


@needs_op
def test_kernel_rejects_bad_operands_clearly(op):
    q, s = int8op.quantize_rows(torch.randn(4, 16))
    with pytest.raises(RuntimeError, match="float32"):
        op(torch.randn(1, 16, dtype=torch.float64), q, s, torch.zeros(4))
    with pytest.raises(RuntimeError, match="K = 16"):
        op(torch.randn(1, 16), q[:, :8].contiguous(), s, torch.zeros(4))
    with pytest.raises(RuntimeError, match="N = 4"):
        op(torch.randn(1, 16), q, s, torch.zeros(5))


def test_no_avx2_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    with pytest.raises(int8op.Int8OpUnavailable, match="AVX2.*'DEFAULT'.*ONNX"):
        int8op.build_op(tmp_path / "op")
    with pytest.raises(int8op.Int8OpUnavailable, match="AVX2"):
        compile_aot(trained_like(NeuralActuatorConfig(**TINY)), (1,), tmp_path / "aot",
                    quantize="int8")
    assert not (tmp_path / "op").exists() and not (tmp_path / "aot").exists()


@needs_op
def test_a_failing_build_names_the_compiler_error_and_leaves_no_file(monkeypatch, tmp_path):
    bad = tmp_path / "broken.cpp"
    bad.write_text("this is not C++\n")
    monkeypatch.setattr(int8op, "SOURCE", bad)
    with pytest.raises(int8op.Int8OpUnavailable, match="broken.cpp.*failed"):
        int8op.build_op(tmp_path / "op")
    assert list((tmp_path / "op").iterdir()) == []


def test_bad_quantize_option_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="quantize='int4'.*'none', 'int8'"):
        compile_aot(trained_like(NeuralActuatorConfig(**TINY)), (1,), tmp_path / "aot",
                    quantize="int4")
    assert not (tmp_path / "aot").exists()


@needs_op
def test_int8_packages_equal_the_eager_int8_model(op, tmp_path):
    cfg = NeuralActuatorConfig(**TINY, tau_max=(1.5, 2.5), condition_head="both")
    model = trained_like(cfg)
    # batch 1 only, with the tuned options a deployment's batch 1 gets (several sizes, and
    # batch 3, untuned: test_export_verb_writes_int8_aot_packages_with_the_calibration)
    aot = compile_aot(model, (1,), tmp_path / "aot", quantize="int8")
    meta = json.loads((tmp_path / "aot" / "aot.json").read_text())
    assert meta["quantize"] == "int8" and meta["op_source_sha256"] == int8op.source_hash()
    assert (tmp_path / "aot" / int8op.LIBRARY).is_file()
    loaded = AotActuator(tmp_path / "aot")
    assert loaded.quantize == "int8" and aot.quantize == "int8"
    fused = FusedNeuralActuator(model).eval()
    q8 = FusedNeuralActuator(model).eval().quantize_trunk()
    assert not hasattr(q8, "w_trunk") and q8.w_trunk_q.dtype == torch.int8
    assert aot.batch_sizes == (1,)
    assert json.loads((tmp_path / "aot" / "aot.json").read_text())["batch_sizes"]["1"][
        "options"]["max_autotune"]
    g = torch.Generator().manual_seed(3)
    for _ in range(3):  # three windows, one at a time
        x = 3 * torch.randn(1, cfg.history, cfg.n_features, generator=g)
        with torch.no_grad():
            ref8, ref32 = q8(x), fused(x)
        out = loaded(x)
        # a compiled graph rounds the trunk's input a little differently, which can move an
        # input across an int16 step: 1e-4, not float32's 1e-6
        for o, r in zip(out, ref8):
            torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-4)
        # int8 moves the outputs a little, not a lot, from float32
        for o, r in zip(out, ref32):
            assert (o - r).abs().max() <= 0.05 * max(r.abs().max().item(), 1.0)
        assert not torch.equal(out[1], ref32[1])  # the int8 trunk is what ran
        assert (out[0].abs() <= torch.tensor(cfg.tau_max) + 1e-6).all()
    # the caller's model is untouched (compile_aot quantized a copy)
    assert model.trunk.weight.dtype == torch.float32
    # an int8 model compiled as float32 would need the operator without shipping it
    with pytest.raises(ConfigError, match="already int8"):
        compile_aot(q8, (1,), tmp_path / "none")
    assert not (tmp_path / "none").exists()


@needs_op
def test_export_verb_writes_int8_aot_packages_with_the_calibration(tmp_path, capsys,
                                                                  monkeypatch):
    from neuract.cli import main
    from neuract.neuralactuator import compiled, save_checkpoint
    from neuract.pipeline import export_verb

    # the verb, not the tuned compile (test_int8_packages_equal_the_eager_int8_model compiles
    # with the tuned options): untuned compiles take a third of the time
    monkeypatch.setattr(compiled, "inductor_options", lambda batch_size: {})
    checked = {}  # the verb's check, as it computed it

    def keep_check(cfg, model, run_export, out, where):
        check(cfg, model, run_export, out, where)
        checked.update(out["check"])

    check = export_verb._check
    monkeypatch.setattr(export_verb, "_check", keep_check)
    model = trained_like(NeuralActuatorConfig(**TINY))
    extra = {"gate_threshold": 0.4, "condition_threshold": [0.3, 0.6]}
    save_checkpoint(model, tmp_path / "ck", extra=extra)
    out = tmp_path / "deploy" / "aot"
    argv = ["export", "--checkpoint", str(tmp_path / "ck"), "--format", "aot", "--out",
            str(out), "--quantize", "int8", "--batch-sizes", "1", "3", "--check-windows", "7"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "wrote" in printed and "max |AOT - torch|" in printed and "7 windows" in printed
    # the check itself: both packages over 7 windows (padded at batch 3) near float32
    worst = max(v["max_abs_diff_over_std"] for v in checked.values())
    assert 0 < worst < 0.1  # int8: not zero, not far
    aot = AotActuator(out)
    assert aot.extra == extra and aot.quantize == "int8" and aot.batch_sizes == (1, 3)
    x = torch.randn(3, model.cfg.history, model.cfg.n_features)
    with torch.no_grad():
        ref = FusedNeuralActuator(model).eval().quantize_trunk()(x)
    for r, g in zip(ref, aot(x)):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)  # int16 steps: see above
    # bad options: a clear error naming the option, nothing written
    (tmp_path / "afile").write_text("x")
    for args, match in ((["--format", "tflite"], "--format 'tflite'"),
                        (["--format", "aot", "--out", str(tmp_path / "x.onnx")], "directory"),
                        (["--format", "aot", "--out", str(tmp_path / "afile")], "directory"),
                        (["--format", "aot", "--batch-sizes", "0"], "--batch-sizes"),
                        (["--batch-sizes", "4", "--out", str(tmp_path / "bad.onnx")],
                         "applies to --format aot")):
        argv = ["export", "--checkpoint", str(tmp_path / "ck"), "--out", str(tmp_path / "bad"),
                *args]
        assert main(argv) == 1
        assert match in capsys.readouterr().err
        assert not any((tmp_path / n).exists() for n in ("bad", "bad.onnx", "x.onnx"))


@needs_op
def test_built_libraries_are_cached_and_an_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    import time

    blocked = tmp_path / "not_a_dir"
    blocked.write_text("x")
    monkeypatch.setenv("NEURACT_CACHE_DIR", str(blocked))
    first = int8op.build_op(tmp_path / "a")  # compiles; the cache cannot be written
    assert first.is_file() and blocked.read_text() == "x"
    monkeypatch.setenv("NEURACT_CACHE_DIR", str(tmp_path / "cache"))
    assert not int8op.cached_library().exists()
    int8op.build_op(tmp_path / "b")  # compiles and fills the cache
    assert int8op.cached_library().is_file()
    assert int8op.source_hash() in str(int8op.cached_library())
    t0 = time.perf_counter()
    again = int8op.build_op(tmp_path / "c")  # copied from the cache
    assert time.perf_counter() - t0 < 5.0
    assert again.read_bytes() == int8op.cached_library().read_bytes()
    assert [p.name for p in (tmp_path / "c").iterdir()] == [int8op.LIBRARY]
