"""AOTInductor-compiled NeuralActuator: the packages compute what the eager model computes, at
every compiled batch size, after a reload from disk; bad inputs, missing sizes, a foreign torch
version and a missing C++ compiler fail with errors that say what to do."""

from __future__ import annotations

import json

import pytest
import torch

from neuract.errors import CheckpointError, ConfigError, SchemaError
from neuract.neuralactuator.compiled import (
    AotActuator,
    CompilerNotFound,
    _matmul_for_inductor,
    compile_aot,
    cxx_compiler,
    inductor_options,
)
from neuract.neuralactuator.config import NeuralActuatorConfig
from neuract.neuralactuator.fused import FusedNeuralActuator
from neuract.neuralactuator.model import NeuralActuator

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=32, d_trunk=48, n_joints=2, history=4)
needs_cxx = pytest.mark.skipif(cxx_compiler() is None, reason="no C++ compiler for AOTInductor")


def trained_like(cfg: NeuralActuatorConfig, seed: int = 0) -> NeuralActuator:
    """A model whose every folded constant is non-trivial (stats, PD gains, torque limits)."""
    g = torch.Generator().manual_seed(seed)
    m = NeuralActuator(cfg)
    m.set_stats(torch.randn(cfg.n_features, generator=g),
                torch.rand(cfg.n_features, generator=g) + 0.5,
                force_scale=torch.tensor([2.0, 3.0, 4.0]))
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return m.eval()


def test_missing_compiler_is_a_clear_error_and_writes_nothing(tmp_path):
    import torch._inductor.config as ic

    model = trained_like(NeuralActuatorConfig(**TINY))
    with ic.patch({"cpp.cxx": ("neuract-no-such-compiler++",)}):
        assert cxx_compiler() is None
        with pytest.raises(CompilerNotFound, match="C\\+\\+ compiler.*CXX"):
            compile_aot(model, (1,), tmp_path / "aot")
    assert not (tmp_path / "aot").exists()


def test_rejects_other_models_and_bad_batch_sizes(tmp_path):
    with pytest.raises(ConfigError, match="NeuralActuator"):
        compile_aot(torch.nn.Linear(2, 2), (1,), tmp_path / "aot")
    with pytest.raises(ConfigError, match="batch_sizes"):
        compile_aot(trained_like(NeuralActuatorConfig(**TINY)), (0,), tmp_path / "aot")
    # a directory holding other files is not a package directory: refused, left alone
    # (the packages replace the directory as a whole)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not an earlier output of this kind"):
        compile_aot(trained_like(NeuralActuatorConfig(**TINY)), (1,), tmp_path / "mine")
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    (tmp_path / "mine" / "aot.json").write_text('{"kind": "neuralactuator-aoti"}')  # + a stray file
    with pytest.raises(ConfigError, match="notes.txt.*does not write"):
        compile_aot(trained_like(NeuralActuatorConfig(**TINY)), (1,), tmp_path / "mine")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["aot.json", "notes.txt"]


def test_options_autotune_only_small_batches():
    assert inductor_options(1)["max_autotune"] and inductor_options(1)["freezing"]
    assert inductor_options(32) == {}  # MKL on the plain weights (see inductor_options)


@pytest.mark.parametrize("shapes", [((2, 4, 8, 24), (2, 4, 24, 8)),  # q @ k^T
                                    ((2, 4, 8, 8), (2, 4, 8, 24)),  # att @ v
                                    ((3, 8, 42), (42, 96)),  # x @ w_in
                                    ((3, 336), (336, 6)),  # flat x @ w_prior
                                    ((3, 6, 1, 22), (6, 22, 64))])  # motor head, per joint
def test_matmul_rewrite_equals_matmul(shapes):
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(s, generator=g, dtype=torch.float64) for s in shapes)
    torch.testing.assert_close(_matmul_for_inductor(a, b), a @ b, rtol=1e-12, atol=1e-12)
    with pytest.raises(ConfigError, match="1-D"):
        _matmul_for_inductor(torch.ones(3), torch.ones(3, 2))


def test_loading_a_missing_directory_names_it(tmp_path):
    with pytest.raises(CheckpointError, match="compile_aot"):
        AotActuator(tmp_path / "nothing")


@needs_cxx
@pytest.mark.slow  # two AOTInductor compiles, ~20-40 s on 2 cores
@pytest.mark.parametrize("mode,head", [("estimator", "trunk"), ("simulator", "trunk"),
                                       ("estimator", "both")])
def test_packages_equal_the_eager_model_at_each_batch_size(tmp_path, mode, head):
    cfg = NeuralActuatorConfig(**TINY, mode=mode, tau_max=(1.5, 2.5), condition_head=head)
    model = trained_like(cfg)
    # a FusedNeuralActuator is accepted as well as the model it folds
    src = FusedNeuralActuator(model) if mode == "simulator" else model
    aot = compile_aot(src, (1, 3), tmp_path / "aot")
    assert aot.batch_sizes == (1, 3)
    assert all(s > 0 for s in aot.compile_seconds().values())
    loaded = AotActuator(tmp_path / "aot")  # a fresh load from disk, as a user would
    g = torch.Generator().manual_seed(1)
    for B in (1, 3):
        x = 3 * torch.randn(B, cfg.history, cfg.n_features, generator=g)
        with torch.no_grad():
            ref = model(x)
        for out in (loaded(x), tuple(loaded.runner(B)(x))):
            assert [o.shape for o in out] == [r.shape for r in ref]
            for o, r in zip(out, ref):
                torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-5)
        # saturation holds in the compiled copy too
        assert (out[0].abs() <= torch.tensor(cfg.tau_max) + 1e-6).all()

    x = torch.randn(2, cfg.history, cfg.n_features)
    with pytest.raises(SchemaError, match="batch size 2.*\\[1, 3\\]"):
        loaded(x)
    with pytest.raises(SchemaError, match="shape"):
        loaded(torch.randn(1, cfg.history, cfg.n_features + 1))
    bad = torch.randn(1, cfg.history, cfg.n_features)
    bad[0, 1, 2] = float("nan")
    with pytest.raises(SchemaError, match="non-finite"):
        loaded(bad)
    with pytest.raises(SchemaError, match="float32"):
        loaded(torch.randn(1, cfg.history, cfg.n_features, dtype=torch.float64))

    meta = json.loads((tmp_path / "aot" / "aot.json").read_text())
    assert meta["config"]["mode"] == mode and set(meta["batch_sizes"]) == {"1", "3"}
    meta["torch"] = "0.0.1"
    (tmp_path / "aot" / "aot.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="torch 0.0.1"):
        AotActuator(tmp_path / "aot")


@needs_cxx
def test_export_verb_aot_float32_and_reusing_a_directory(tmp_path, monkeypatch):
    """`neuract export --format aot` (float32): the check runs every compiled size on padded
    windows and is near zero; a later compile of another model into the same directory drops
    the first model's packages, one of the same model adds its sizes; a failing compile
    leaves the directory as it was."""
    from neuract.neuralactuator import compiled, save_checkpoint
    from neuract.pipeline.export_verb import ExportConfig, run

    # this test is about the verb and the directory, not the tuned compile: untuned compiles
    # take a third of the time (the tuned options: test_int8_packages_equal_the_eager_int8_model
    # and, with -m slow, test_packages_equal_the_eager_model_at_each_batch_size)
    monkeypatch.setattr(compiled, "inductor_options", lambda batch_size: {})
    a = trained_like(NeuralActuatorConfig(**TINY), seed=0)
    b = trained_like(NeuralActuatorConfig(**TINY), seed=1)
    save_checkpoint(a, tmp_path / "ck", extra={"gate_threshold": 0.3})
    out = tmp_path / "aot"
    res = run(ExportConfig(checkpoint=tmp_path / "ck", out=out, format="aot", batch_sizes=(2,),
                           check_windows=5, quiet=True))
    assert res["batch_sizes"] == [2] and res["extra"] == {"gate_threshold": 0.3}
    assert max(v["max_abs_diff_over_std"] for v in res["check"].values()) < 1e-5
    x = torch.randn(2, a.cfg.history, a.cfg.n_features)
    with torch.no_grad():
        for o, r in zip(AotActuator(out)(x), a(x)):
            torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-5)
    # another model into the same directory: the first model's package goes
    compile_aot(b, (1,), out)
    assert AotActuator(out).batch_sizes == (1,) and not (out / "neuralactuator_b2.pt2").exists()
    # the same model again at another size: both sizes are listed, both are b's
    compile_aot(b, (2,), out)
    loaded = AotActuator(out)
    assert loaded.batch_sizes == (1, 2)
    with torch.no_grad():
        for o, r in zip(loaded(x), b(x)):
            torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-5)
    # a compile that fails leaves the directory as it was, and no staging folder
    before = {f.name: f.read_bytes() for f in out.iterdir()}

    def boom(*args, **kwargs):
        raise RuntimeError("compiler crashed")

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", boom)
    with pytest.raises(RuntimeError, match="compiler crashed"):
        compile_aot(a, (1, 2), out)
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aot", "ck"]
