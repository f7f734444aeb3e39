"""The int8-weight linear operator for compiled NeuralActuators (``neuract::linear_w8``).

At batch 1 the forward pass of the default model is bounded by reading the head trunk's
weights (1.2 M of its 1.4 M parameters, 4.8 MB in float32), not by arithmetic. torch has no
fast int8 path for this on a CPU without AVX-512 that ``torch.export`` / AOTInductor accept
(its packed-weight dynamic quantization cannot be exported; ``_weight_int8pack_mm`` and the
int4 kernels have no AVX2 code), so neuract ships its own operator, a small C++ file
(``csrc/linear_w8.cpp``) registered with the torch dispatcher:

    y = x @ (w * scale[:, None]).T + bias     x: (B, K) float32, w: (N, K) int8

* weights: int8 per output channel, symmetric, the full 8-bit range (:func:`quantize_rows`);
* activations: each row of x is scaled to int16 (its largest magnitude -> 16383) in the
  call; the int16 x int8 products are summed exactly (AVX2 ``vpmaddwd`` into int32 lanes,
  which cannot saturate, unlike the 8-bit pair sums that need 7-bit weights in ONNX Runtime;
  then the lanes in float64); a row with a NaN or an infinity gives a NaN row;
* :func:`linear_w8_reference` is the same arithmetic in torch, for tests.

:func:`build_op` compiles the file with the C++ compiler AOTInductor uses (~10-20 s; kept
in a cache, :func:`cache_dir`, and copied from there next time) into a directory;
:func:`load_op` loads it into the process (once) and registers its shape function so that
``torch.export`` can trace it. :func:`~neuract.neuralactuator.compiled.compile_aot` with
``quantize="int8"`` does both and keeps the library beside its packages, which load it
before they run. The operator needs a CPU with AVX2 and FMA.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import torch

from neuract.atomic import atomic_path
from neuract.errors import ConfigError, NeuractError
from neuract.neuralactuator.toolchain import require_cxx_compiler

SOURCE = Path(__file__).with_name("csrc") / "linear_w8.cpp"
LIBRARY = "neuract_ops.so"
QMAX_X = 16383  # int16 range used for activations (K <= 8256; see the C++ file)


class Int8OpUnavailable(NeuractError, RuntimeError):
    """The int8 operator cannot be built or run here (CPU without AVX2, or no compiler)."""


def source_hash() -> str:
    """SHA-256 (first 16 hex digits) of the operator's C++ source."""
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]


def cpu_supported() -> bool:
    """Whether this CPU can run the operator (torch reports AVX2 or AVX-512)."""
    return torch.backends.cpu.get_cpu_capability().upper().startswith(("AVX2", "AVX512"))


def require_avx2() -> str:
    """torch's CPU capability string; raises :class:`Int8OpUnavailable` without AVX2."""
    cap = torch.backends.cpu.get_cpu_capability()
    if not cpu_supported():
        raise Int8OpUnavailable(
            f"the int8 operator needs a CPU with AVX2 and FMA; torch reports CPU capability "
            f"{cap!r}. Use quantize='none' (float32), or the int8 ONNX export "
            "(export_onnx(..., quantize='int8')), which ONNX Runtime runs on any CPU")
    return cap


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w: (N, K) float -> (w_q (N, K) int8, scale (N,) float32), w ~= w_q * scale[:, None].

    Symmetric per row (output channel) over [-127, 127]; an all-zero row gets scale 1.
    """
    if w.dim() != 2 or not w.is_floating_point():
        raise ValueError(f"quantize_rows: w must be a 2-D float tensor; got {tuple(w.shape)} "
                         f"{w.dtype}")
    w = w.detach().float()
    m = w.abs().amax(dim=1)
    scale = torch.where(m > 0, m / 127.0, torch.ones_like(m))
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q.contiguous(), scale.contiguous()


TINY_X = 1e-30  # rows whose largest |x| is below this count as zero (kTiny in the C++ file)


def qmax_for(k: int) -> int:
    """The activation range the kernel uses for K inputs: each int32 lane sums ceil(K / 8)
    products of at most qmax * 128 (int8 reaches -128), so none can overflow."""
    per_lane = max((k + 7) // 8, 1)
    return min(QMAX_X, (2**31 - 1) // (128 * per_lane))


def linear_w8_reference(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor,
                        bias: torch.Tensor) -> torch.Tensor:
    """What ``torch.ops.neuract.linear_w8`` computes, in torch (float64 sums, exact): rows
    with a NaN or an infinity give NaN rows, rows below ``TINY_X`` count as zero."""
    x = x.float()
    qmax = qmax_for(x.shape[1])
    finite = torch.isfinite(x).all(dim=1)
    m = torch.where(finite, x.abs().amax(dim=1), torch.zeros_like(x[:, 0]))
    zero = m < TINY_X
    sx = torch.where(zero, torch.ones_like(m), m / qmax)
    xs = torch.where(finite[:, None], x, torch.zeros_like(x))
    xq = torch.round((xs * (1.0 / sx)[:, None]).clamp(-qmax, qmax))
    xq = torch.where(zero[:, None], torch.zeros_like(xq), xq)
    acc = xq.double() @ w.double().t()
    y = (acc * (scale.double()[None] * sx.double()[:, None]) + bias.double()).float()
    return torch.where(finite[:, None], y, torch.full_like(y, float("nan")))


def _registered() -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw("neuract::linear_w8", "")
    except RuntimeError:
        return False
    return True


_FAKE = []


def _register_fake() -> None:
    if _FAKE:
        return

    @torch.library.register_fake("neuract::linear_w8")
    def _shape(x, w, scale, bias):
        return x.new_empty((x.shape[0], w.shape[0]))

    _FAKE.append(_shape)


def loaded_source() -> str | None:
    """The source hash of the operator registered in this process (``None``: none is)."""
    if not _registered():
        return None
    try:
        return str(torch.ops.neuract.linear_w8_source())
    except (AttributeError, RuntimeError):  # a library built before the hash was recorded
        return "unknown"


def load_op(path: str | os.PathLike, source: str | None = None) -> None:
    """Load the library built by :func:`build_op` into this process, once.

    source: the source hash the library was built from (``aot.json`` records it); when the
    operator is already registered (by another directory's library) it must match, since a
    process can hold only one version: a different one raises :class:`Int8OpUnavailable`.
    """
    require_avx2()
    have = loaded_source()
    if have is None:
        p = Path(path)
        if not p.is_file():
            raise Int8OpUnavailable(f"int8 operator library {str(p)!r} not found; build it "
                                    "with build_op (compile_aot(..., quantize='int8') does)")
        torch.ops.load_library(str(p))
        have = loaded_source()
    if source is not None and have != source:
        raise Int8OpUnavailable(
            f"the int8 operator loaded in this process was built from source {have!r}, but "
            f"{str(path)!r} was built from {source!r}; a process holds one version: load "
            "this directory in a new process (or compile it again with this neuract)")
    _register_fake()


def cache_dir() -> Path:
    """Where built libraries are kept for reuse: ``$NEURACT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/neuract/ops`` (``~/.cache/neuract/ops``)."""
    env = os.environ.get("NEURACT_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neuract" / "ops"


def cached_library() -> Path:
    """The cache entry for this source, torch version and C++ ABI."""
    key = f"{torch.__version__}-{source_hash()}-abi{int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    return cache_dir() / key / LIBRARY


def _copy_atomic(src: Path, dst: Path) -> None:
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


def build_op(out_dir: str | os.PathLike, cache: bool = True) -> Path:
    """Compile ``csrc/linear_w8.cpp`` into ``out_dir/neuract_ops.so`` (atomically) and return
    its path. Needs a C++ compiler (:func:`~neuract.neuralactuator.toolchain.require_cxx_compiler`)
    and an AVX2 CPU; the library runs only with the torch that built it. It uses torch's
    OpenMP threads over the rows of a batch.

    cache: reuse a library built earlier from the same source for the same torch
    (:func:`cached_library`, copied in; ~10-20 s of compiling saved) and keep a new one there
    (best effort: an unwritable cache is skipped)."""
    from torch.utils import cpp_extension

    require_avx2()
    cxx = require_cxx_compiler()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dst = out / LIBRARY
    hit = cached_library() if cache else None
    if hit is not None and hit.is_file():
        _copy_atomic(hit, dst)
        return dst
    libs = cpp_extension.library_paths()
    with atomic_path(dst) as tmp:  # a failed compile leaves no library behind
        cmd = [cxx, "-O3", "-mavx2", "-mfma", "-fopenmp", "-shared", "-fPIC", "-std=c++17",
               f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
               f'-DNEURACT_SOURCE_HASH="{source_hash()}"',
               *[f"-I{p}" for p in cpp_extension.include_paths()], str(SOURCE), "-o", str(tmp),
               *[f"-L{p}" for p in libs], *[f"-Wl,-rpath,{p}" for p in libs],
               "-lc10", "-ltorch_cpu", "-ltorch"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise Int8OpUnavailable(f"compiling {SOURCE.name} with {cxx} took over 600 s; "
                                    "stopped") from None
        if done.returncode != 0:
            errors = [ln for ln in done.stderr.splitlines() if "error" in ln.lower()]
            raise Int8OpUnavailable(f"compiling {SOURCE.name} with {cxx} failed (exit "
                                    f"{done.returncode}):\n" + "\n".join(errors[:20]
                                                                         or [done.stderr[-2000:]]))
    if hit is not None:
        try:
            _copy_atomic(dst, hit)
        except (OSError, ConfigError):  # a read-only, full or blocked cache (a file where
            pass  # its folder should be) only costs the next build its time
    return dst


__all__ = ["build_op", "load_op", "quantize_rows", "linear_w8_reference", "qmax_for",
           "source_hash", "require_avx2", "cpu_supported", "loaded_source", "Int8OpUnavailable",
           "LIBRARY", "SOURCE", "TINY_X", "cache_dir", "cached_library"]
