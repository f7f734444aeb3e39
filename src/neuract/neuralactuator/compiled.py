"""Ahead-of-time compiled NeuralActuator (torch AOTInductor): the fastest CPU path in torch.

:func:`compile_aot` folds a trained :class:`~neuract.neuralactuator.model.NeuralActuator`
(:class:`~neuract.neuralactuator.fused.FusedNeuralActuator`), exports it with
``torch.export`` at fixed batch sizes and compiles each to a shared library with
AOTInductor (generated C++ kernels; ``torch._inductor.aoti_compile_and_package``): one
``.pt2`` package per batch size, plus ``aot.json`` naming the config, batch sizes, torch
version and compiler options. :class:`AotActuator` loads the packages and runs them through
torch's own C++ runtime (no Python in the forward pass).

>>> aot = compile_aot(model, batch_sizes=(1, 32), out_dir="na_aot")  # ~20-60 s per size
>>> tau, force, gate_logit, cond = aot(x)      # x: (B, T, F) raw features, B in (1, 32)

Compiling needs a C++ compiler (g++ or clang++; ``CXX`` selects one); loading and running a
package does not, but needs the same torch version that compiled it.

Inductor options per batch size (:func:`inductor_options`, measured with 1 thread on an AMD
EPYC, see ``benchmarks/bench_inference.py``): batch sizes up to ``AUTOTUNE_MAX_BATCH`` are
compiled with ``freezing`` (the weights become constants) and ``max_autotune`` with
Inductor's own C++ GEMM templates, which beat MKL on this CPU for the batch-1
matrix-vector products and fuse LayerNorm / GELU into them; larger batches use neither:
at batch 32 the frozen graph's pre-packed (oneDNN) products were slower than MKL's GEMM on
the plain weights (2026-11-26, default model: 8.9-10.1k samples/s frozen, 11.4-11.8k not;
the templates did not help either). Before compiling, the
attention products (batched over heads, contracting over 24 head channels or 8 time steps)
are rewritten as multiply + sum (:func:`_matmul_for_inductor`), which Inductor fuses into its
own loops instead of calling a library ``bmm`` per product (~6 us less per batch-1 call).
Numerics stay float32; the outputs match the eager model to ~1e-6.

``quantize="int8"`` stores the head trunk's weights (1.2 M of the default model's 1.4 M) in
int8 and computes that product with neuract's own operator (:mod:`neuract.neuralactuator.
int8op`: int16 activations x int8 weights, exact integer sums, AVX2), whose library is built
into the output directory and loaded before the packages: at batch 1 the float32 call is
bound by reading the trunk's 4.8 MB, and int8 reads a quarter of that. Everything else stays
float32; the packages then match ``FusedNeuralActuator(model).quantize_trunk()`` (to 1e-4 on
the tests' small models, where an input can round to the neighbouring int16 step; at most
1.4e-4, a gate logit, on the twin benchmark's estimator).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import torch
from torch import nn

from neuract.atomic import atomic_dir, write_json
from neuract.config import from_dict
from neuract.errors import CheckpointError, ConfigError, SchemaError
from neuract.neuralactuator import int8op
from neuract.neuralactuator.config import NeuralActuatorConfig
from neuract.neuralactuator.export import QUANTIZE
from neuract.neuralactuator.fused import FusedNeuralActuator
from neuract.neuralactuator.model import NeuralActuator
from neuract.neuralactuator.toolchain import CompilerNotFound, cxx_compiler, require_cxx_compiler

OUTPUTS = ("tau", "force", "gate_logit", "condition_logits")
AUTOTUNE_MAX_BATCH = 4
META = "aot.json"


def inductor_options(batch_size: int) -> dict:
    """Inductor options used for one batch size (see the module docstring for why)."""
    if batch_size <= AUTOTUNE_MAX_BATCH:
        return {"freezing": True, "max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN"}
    return {}


def _matmul_for_inductor(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``aten.matmul`` as handed to Inductor: a batched product (attention: (B, H, T, dh) @
    (B, H, dh, T), (B, H, T, T) @ (B, H, T, dh)) as multiply + sum over the contraction, a
    product with a weight matrix b: (K, N) as one ``mm`` over the flattened leading dims."""
    if b.dim() == 2 and a.dim() >= 2:
        return torch.ops.aten.mm.default(a.reshape(-1, a.shape[-1]), b).reshape(
            *a.shape[:-1], b.shape[-1])
    if a.dim() >= 3 and b.dim() >= 3:
        return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)
    raise ConfigError(f"compile_aot: no rewrite for a matmul of shapes {tuple(a.shape)} @ "
                      f"{tuple(b.shape)} (1-D operands); FusedNeuralActuator changed?")


def _fused(model: nn.Module) -> FusedNeuralActuator:
    if isinstance(model, FusedNeuralActuator):
        return model.eval()
    if isinstance(model, NeuralActuator):
        return FusedNeuralActuator(model.eval()).eval()
    raise ConfigError(f"compile_aot got a {type(model).__name__}; expected a NeuralActuator "
                      "or a FusedNeuralActuator")


def weights_hash(model: nn.Module) -> str:
    """SHA-256 (first 16 hex digits) over a module's parameters and buffers, by name."""
    h = hashlib.sha256()
    for name, t in sorted({**dict(model.named_parameters()),
                           **dict(model.named_buffers())}.items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def package_name(batch_size: int) -> str:
    return f"neuralactuator_b{batch_size}.pt2"


def _ours(name: str) -> bool:
    """Whether a file name is one compile_aot writes (its directory holds nothing else)."""
    return name in (META, int8op.LIBRARY) or (name.startswith("neuralactuator_b")
                                       and name.endswith(".pt2"))


AOT_DEST = {"marker": META, "allowed": _ours,
            "kind": lambda j: j.get("kind") == "neuralactuator-aoti"}
"""what makes a directory an earlier :func:`compile_aot` output (the only kind it replaces)"""


def compile_aot(model: nn.Module, batch_sizes=(1, 32), out_dir: str | os.PathLike = "na_aot",
                options: dict | None = None, quantize: str = "none",
                extra: dict | None = None) -> AotActuator:
    """Compile ``model`` for each batch size into ``out_dir`` and load the result.

    model: a :class:`NeuralActuator` (folded here) or a :class:`FusedNeuralActuator`.
    batch_sizes: the batch sizes B the packages accept (static shapes: one package each).
    options: Inductor options for every size instead of :func:`inductor_options`.
    quantize: ``"none"`` (float32) or ``"int8"``: the head trunk's weights in int8, computed by
    neuract's own operator (:mod:`neuract.neuralactuator.int8op`, built into ``out_dir`` as
    ``neuract_ops.so``; needs an AVX2 CPU), the rest in float32.
    extra: JSON-serialisable metadata stored in ``aot.json`` (``AotActuator.extra``; the
    export verb stores the checkpoint's calibrated decisions there).
    Writes ``neuralactuator_b{B}.pt2`` per size and ``aot.json`` (built in a staging folder
    that replaces ``out_dir`` as a whole once every size compiled; a directory holding other
    files is refused); raises :class:`CompilerNotFound` before any work when
    no C++ compiler is present.
    """
    sizes, fused = _checked(model, batch_sizes, quantize, extra)
    if quantize == "int8":
        int8op.require_avx2()
    require_cxx_compiler()
    cfg = fused.cfg
    out = Path(out_dir).resolve()  # a symlinked directory: its target is replaced
    # everything is built in a private sibling folder that replaces the directory as a whole
    # once every size compiled (a failed or interrupted compile leaves it as it was), so an
    # existing one may hold only what compile_aot writes
    with atomic_dir(out, overwrite=True, **AOT_DEST) as stage:  # checks `out` before any work
        op = {}
        if quantize == "int8":
            int8op.load_op(int8op.build_op(stage), source=int8op.source_hash())
            fused = copy.deepcopy(fused).quantize_trunk()
            op = {"op_library": int8op.LIBRARY, "op_source_sha256": int8op.source_hash()}
        entries = {str(B): _compile_one(fused, B, options, stage) for B in sizes}
        meta = {"kind": "neuralactuator-aoti", "torch": torch.__version__,
                "config": dataclasses.asdict(cfg), "channels": list(cfg.channels),
                "inputs": "x: (B, history, n_features) float32 raw features",
                "outputs": list(OUTPUTS), "quantize": quantize, **op,
                "weights_sha256": weights_hash(fused), "extra": dict(extra or {}),
                "batch_sizes": entries}
        _carry_over(out, stage, meta, entries)
        write_json(stage / META, meta)
    return AotActuator(out)


def _checked(model: nn.Module, batch_sizes, quantize: str, extra: dict | None
             ) -> tuple[list[int], FusedNeuralActuator]:
    """compile_aot's arguments checked before any work: (sorted sizes, folded model)."""
    sizes = sorted({int(b) for b in batch_sizes})
    if not sizes or sizes[0] < 1:
        raise ConfigError(f"batch_sizes={tuple(batch_sizes)!r}; expected integers >= 1")
    if quantize not in QUANTIZE:
        raise ConfigError(f"compile_aot: quantize={quantize!r}; expected one of {QUANTIZE}")
    try:
        json.dumps(extra or {})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"compile_aot: extra must be JSON-serialisable ({exc})") from None
    if getattr(getattr(model, "cfg", None), "gate_rnn", 0):  # a model or its folded copy
        raise ConfigError("compile_aot: this model has a recurrent contact gate (gate_rnn="
                          f"{model.cfg.gate_rnn}), whose state the AOT packages do not carry; "
                          "export it to ONNX (neuract export --format onnx), whose graph "
                          "takes and returns the gate's state")
    fused = _fused(model)
    if fused.trunk_int8 and quantize != "int8":
        raise ConfigError("compile_aot: the model's head trunk is already int8 "
                          "(FusedNeuralActuator.quantize_trunk); pass quantize='int8' so the "
                          "operator's library is built beside the packages")
    return sizes, fused


def _compile_one(fused: FusedNeuralActuator, B: int, options: dict | None, stage: Path) -> dict:
    """Export and AOT-compile the folded model for batch size ``B`` into ``stage``; its
    ``aot.json`` entry."""
    cfg = fused.cfg
    opts = dict(options) if options is not None else inductor_options(B)
    x = torch.zeros(B, cfg.history, cfg.n_features)
    t0 = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(fused, (x,)).run_decompositions(
            {torch.ops.aten.matmul.default: _matmul_for_inductor})
        torch._inductor.aoti_compile_and_package(
            ep, package_path=str(stage / package_name(B)), inductor_configs=dict(opts))
    return {"package": package_name(B), "options": opts, "compile_s": time.perf_counter() - t0}


def _carry_over(out: Path, stage: Path, meta: dict, entries: dict) -> None:
    """Several compiles of the same model may share a directory: the sizes compiled earlier
    are carried over into ``stage`` (and ``meta``); packages of another model (or config,
    torch, quantization) are dropped."""
    old = out / META
    prev = json.loads(old.read_text()) if old.is_file() else {}
    as_json = json.loads(json.dumps(meta))  # tuples as the stored lists
    if all(prev.get(k) == as_json[k] for k in ("config", "torch", "quantize",
                                                "weights_sha256")):
        for B, e in prev["batch_sizes"].items():
            if B not in entries and (out / e["package"]).is_file():
                shutil.copy2(out / e["package"], stage / e["package"])
                entries[B] = e
        meta["batch_sizes"] = dict(sorted(entries.items(), key=lambda kv: int(kv[0])))


class AotActuator:
    """AOTInductor-compiled NeuralActuator loaded from a :func:`compile_aot` directory.

    ``aot(x)`` with x: (B, T, F) float32 raw features, B one of ``aot.batch_sizes`` ->
    ``(tau [N m] (B, J), force [N] (B, 3), gate_logit (B,), condition_logits (B, J, K))``,
    the outputs of :class:`NeuralActuator`. ``aot.runner(B)`` is the bare callable (a list
    of the four tensors, no input checks) for benchmarks and control loops.
    """

    def __init__(self, out_dir: str | os.PathLike):
        d = Path(out_dir)
        path = d / META
        if not path.is_file():
            raise CheckpointError(f"{str(path)!r} not found; compile with compile_aot first")
        self.meta = json.loads(path.read_text())
        if self.meta.get("torch") != torch.__version__:
            raise CheckpointError(
                f"{str(path)!r} was compiled with torch {self.meta.get('torch')}; this is "
                f"torch {torch.__version__} (AOTInductor packages run only with the torch "
                "that built them): compile again")
        fields = {f.name for f in dataclasses.fields(NeuralActuatorConfig)}
        self.config = from_dict(NeuralActuatorConfig, {k: v for k, v in
                                                       self.meta["config"].items() if k in fields})
        self._shape = (self.config.history, self.config.n_features)
        self.quantize = self.meta.get("quantize", "none")
        self.extra = self.meta.get("extra") or {}
        if self.quantize == "int8":  # the packages call neuract::linear_w8: load it first
            int8op.load_op(d / self.meta["op_library"], source=self.meta.get("op_source_sha256"))
        self._loaders = {}
        for B, entry in self.meta["batch_sizes"].items():
            pkg = d / entry["package"]
            if not pkg.is_file():
                raise CheckpointError(f"package {str(pkg)!r} listed in {str(path)!r} is missing")
            self._loaders[int(B)] = torch._inductor.aoti_load_package(str(pkg)).loader

    @property
    def batch_sizes(self) -> tuple:
        return tuple(sorted(self._loaders))

    def compile_seconds(self) -> dict:
        """Compile time [s] per batch size, as recorded by :func:`compile_aot`."""
        return {int(B): e["compile_s"] for B, e in self.meta["batch_sizes"].items()}

    def runner(self, batch_size: int):
        """``fn(x) -> [tau, force, gate_logit, condition_logits]`` for one batch size."""
        if batch_size not in self._loaders:
            raise SchemaError(f"no package for batch size {batch_size}; compiled: "
                              f"{list(self.batch_sizes)} (compile_aot(..., batch_sizes=...))")
        run = self._loaders[batch_size].run
        return lambda x: run([x])

    def run_padded(self, x: torch.Tensor, batch_size: int) -> list:
        """Any number of windows x: (N, T, F) through the package for ``batch_size``, in
        calls of that size (zero windows pad the last one) -> the four outputs for the N
        windows (checks, benchmarks; :meth:`__call__` checks its input, this does not)."""
        n = len(x)
        pad = (-n) % batch_size
        xp = torch.cat([x, x.new_zeros((pad, *x.shape[1:]))]) if pad else x
        run = self.runner(batch_size)
        outs = [[o.clone() for o in run(xp[i:i + batch_size].contiguous())]
                for i in range(0, len(xp), batch_size)]
        return [torch.cat(o)[:n] for o in zip(*outs)]

    def __call__(self, x: torch.Tensor) -> tuple:
        if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
            raise SchemaError(f"AOT NeuralActuator input must be a float32 tensor; got "
                              f"{getattr(x, 'dtype', type(x).__name__)}")
        if x.ndim != 3 or tuple(x.shape[1:]) != self._shape:
            raise SchemaError(f"AOT NeuralActuator input has shape {tuple(x.shape)}; expected "
                              f"(B, {self._shape[0]}, {self._shape[1]}) for channels "
                              f"{list(self.config.channels)}")
        if not torch.isfinite(x).all():
            raise SchemaError("AOT NeuralActuator input contains non-finite values")
        return tuple(self.runner(x.shape[0])(x.contiguous()))


__all__ = ["compile_aot", "AotActuator", "CompilerNotFound", "cxx_compiler",
           "require_cxx_compiler", "inductor_options", "AUTOTUNE_MAX_BATCH", "OUTPUTS"]
