"""``neuract export``: a NeuralActuator checkpoint to one ONNX file, or to torch AOTInductor
packages, for deployment.

    neuract export --checkpoint runs/demo/checkpoints/neuralactuator_estimator \\
        --out runs/export/neuralactuator.onnx [--quantize int8]
    neuract export --checkpoint ... --format aot --out runs/export/neuralactuator_aot \\
        [--quantize int8] [--batch-sizes 1 32]

The ONNX file holds the folded graph (:func:`neuract.neuralactuator.export_onnx`), the model
config and channel list, and the checkpoint's calibrated decisions (gate threshold, filter,
condition threshold and smoothing) under ``neuract.extra``. ``--format aot`` writes a
directory of AOTInductor packages, one per batch size
(:func:`neuract.neuralactuator.compiled.compile_aot`; needs a C++ compiler; with ``--quantize
int8`` also neuract's int8 operator, which needs an AVX2 CPU), with the same decisions in its
``aot.json``; load it with ``AotActuator(dir)``. After writing, the verb runs the export on
windows drawn around the checkpoint's normalisation statistics and reports how far each
output is from the torch model's; past :data:`CHECK_LIMIT` it fails (an ONNX file is checked
under a staging name and only then moved to ``--out``, so a failing one is not left behind).
An existing ``--out`` is refused unless ``--overwrite`` is given, and even then only an
earlier ONNX file of this verb (neuract's metadata) or an empty directory is replaced; an
earlier AOT package directory (its ``aot.json``) is recompiled in place without it.

``--format bam`` and ``--format torchscript`` export a ``neuract fit`` output directory
instead (a servo's BAM parameter file; an MLP/GRU net for Isaac Lab / mjlab):
:mod:`neuract.pipeline.export_params`.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neuract.atomic import check_dest, is_output, missing_folders
from neuract.errors import ConfigError, NeuractError
from neuract.neuralactuator import OnnxActuator, compiled, export_onnx
from neuract.neuralactuator import export as na_export
from neuract.neuralactuator.compiled import AOT_DEST
from neuract.neuralactuator.export import QUANTIZE, reference_outputs
from neuract.pipeline import export_mjcf
from neuract.pipeline.checkpoints import calibrated, load_model
from neuract.pipeline.export_params import run_params

FORMATS = ("onnx", "aot", "mjcf", "bam", "torchscript")
CHECK_LIMIT = {"none": 1e-3, "int8": 0.25}
"""largest |export - torch| over an output's spread the check accepts (float32 exports agree
to ~1e-6; int8 ones to a few per cent on trained and random models)"""
DEFAULT_OUT = {"onnx": Path("runs/export/neuralactuator.onnx"),
               "aot": Path("runs/export/neuralactuator_aot"),
               "bam": Path("runs/export/fit.json"), "torchscript": Path("runs/export/net.pt")}


@dataclass
class ExportConfig:
    """Export a NeuralActuator checkpoint to ONNX or AOTInductor (folded graph, calibrated
    decisions)."""

    checkpoint: Path
    """checkpoint directory (model.safetensors + config.json), either mode; bam and
    torchscript: a `neuract fit` output directory"""
    out: Path | None = None
    """onnx: the file to write (atomically; its folder is created; default
    runs/export/neuralactuator.onnx); aot: the directory (default runs/export/neuralactuator_aot)"""
    format: str = "onnx"
    """onnx (one file for ONNX Runtime) or aot (torch AOTInductor packages, one per batch size;
    needs a C++ compiler, and the torch that compiled them to run); bam (a fitted servo's BAM
    parameter JSON) or torchscript (a fitted MLP/GRU net for Isaac Lab / mjlab, + sidecar)"""
    quantize: str = "none"
    """none (float32, equal to torch to about 1e-6) or int8 (the head trunk's weights in int8:
    faster at batch 1, an approximation; onnx: ONNX Runtime's dynamic quantization, aot:
    neuract's int8 operator, AVX2 CPUs)"""
    batch_sizes: tuple[int, ...] = (1, 32)
    """aot: the batch sizes to compile (static shapes, one package each)"""
    check_windows: int = 256
    """random windows (around the checkpoint's normalisation statistics) compared with the
    torch model after writing; 0: no check"""
    overwrite: bool = False
    """replace an existing --out: only an ONNX file neuract export wrote (onnx) or an empty
    directory (aot; an earlier package directory is always recompiled in place)"""
    robot: str | None = None
    """--format mjcf (a neuract fit's parametric servo written into a copy of the robot's MJCF,
    docs/exports.md): the robot description to copy (so101, omx or an MJCF file; default: the
    fit's)"""
    firmware_kp: float | None = None
    """mjcf: the firmware P gain to write the servo for (default: the checkpoint's)"""
    voltage: float | None = None
    """mjcf: the supply [V] to write the servo for (default: the checkpoint's)"""
    quiet: bool = False


def run(cfg: ExportConfig) -> dict[str, Any]:
    if cfg.format not in FORMATS:
        raise ConfigError(f"--format {cfg.format!r}; accepted: {list(FORMATS)}")
    if cfg.format == "mjcf":  # a fitted parametric servo, not a NeuralActuator
        return export_mjcf.run(cfg)
    if cfg.quantize not in QUANTIZE:
        raise ConfigError(f"--quantize {cfg.quantize!r}; accepted: {list(QUANTIZE)}")
    dest = Path(cfg.out) if cfg.out is not None else DEFAULT_OUT[cfg.format]
    if cfg.format in ("bam", "torchscript"):
        return run_params(cfg, dest)
    if cfg.format == "onnx" and dest.suffix.lower() != ".onnx":
        raise ConfigError(f"--out {str(dest)!r}: expected a file name ending in .onnx")
    if not cfg.batch_sizes or not all(type(b) is int and b >= 1 for b in cfg.batch_sizes):
        raise ConfigError(f"--batch-sizes {list(cfg.batch_sizes)!r}; expected one or more "
                          "integers >= 1")
    if cfg.format == "onnx" and tuple(cfg.batch_sizes) != (1, 32):
        raise ConfigError(f"--batch-sizes {list(cfg.batch_sizes)!r} applies to --format aot; "
                          "an ONNX file takes any batch size")
    if cfg.format == "aot" and (dest.suffix.lower() == ".onnx" or dest.is_file()):
        raise ConfigError(f"--out {str(dest)!r}: --format aot writes a directory of "
                          "packages; give a directory path (not a file, not *.onnx)")
    if not (isinstance(cfg.check_windows, int) and 0 <= cfg.check_windows <= 100_000):
        raise ConfigError(f"--check-windows {cfg.check_windows!r}; expected an integer in "
                          "[0, 100000]")
    model = load_model(cfg.checkpoint)  # with the calibrated decisions as attributes
    if cfg.format == "aot" and model.gate_rnn is not None:
        raise ConfigError(f"--format aot: the checkpoint {str(cfg.checkpoint)!r} has a "
                          f"recurrent contact gate (gate_rnn={model.cfg.gate_rnn}), whose state "
                          "the AOT packages do not carry; use --format onnx (its graph takes "
                          "and returns the gate's state)")
    extra = calibrated(model)
    check_export_dest(dest, cfg.format, cfg.overwrite, cfg.checkpoint)  # before any writing

    made = missing_folders(dest.parent)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # ONNX: written and checked under a staging name, moved to --out once it passes
    staged = dest.with_name(f".{dest.stem}.unchecked.onnx")
    try:
        return _export(cfg, model, extra, dest, staged)
    except BaseException:  # a failed check, Ctrl-C, SIGTERM: the folders this run made go
        staged.unlink(missing_ok=True)
        for d in made:  # deepest first; only while empty (nothing else was put there)
            try:
                d.rmdir()
            except OSError:
                break
        raise
    finally:
        staged.unlink(missing_ok=True)


def is_onnx_export(path: Path) -> bool:
    """Whether ``path`` is an ONNX file ``neuract export`` wrote (its ``neuract.kind``
    metadata names a NeuralActuator)."""
    try:
        import onnx

        proto = onnx.load(str(path), load_external_data=False)
        meta = {p.key: p.value for p in proto.metadata_props}
    except Exception:  # not ONNX (any parse error): not ours
        return False
    return meta.get("neuract.kind") == "neuralactuator"


def check_export_dest(dest: Path, fmt: str, overwrite: bool, checkpoint: Path) -> None:
    """Refuse, before any work, an existing ``--out`` without ``--overwrite``, and with it
    anything but an earlier output of ``neuract export`` of the same format (an ONNX file
    with neuract's metadata; a package directory with its ``aot.json``)."""
    if fmt == "aot":
        # an earlier package directory is recompiled in place as before (compile_aot reuses
        # what is unchanged; tests/test_neuralactuator_int8op.py relies on it); anything else
        # that exists needs --overwrite, and even then only an empty directory is replaced
        ours = os.path.isdir(dest) and not os.path.islink(dest) and is_output(dest, **AOT_DEST)
        check_dest(dest, overwrite or ours, inputs=(checkpoint,), **AOT_DEST)
        return
    if not os.path.lexists(dest):
        return
    if dest.is_symlink() or not dest.is_file():
        what = "a symlink" if dest.is_symlink() else "not a file"
        raise ConfigError(f"--out {str(dest)!r} exists and is {what}; only an ONNX file "
                          "neuract export wrote is replaced: remove it or choose another path")
    if not overwrite:
        raise ConfigError(f"--out {str(dest)!r} already exists; pass --overwrite to replace "
                          "it (only an ONNX file neuract export wrote is replaced)")
    if not is_onnx_export(dest):
        raise ConfigError(f"--out {str(dest)!r} is not an ONNX file neuract export wrote (no "
                          "neuract.kind metadata); --overwrite replaces only those: choose "
                          "another path")


def _export(cfg: ExportConfig, model, extra: dict, dest: Path, staged: Path) -> dict[str, Any]:
    if cfg.format == "onnx":
        path = export_onnx(model, staged, quantize=cfg.quantize, extra=extra)
        out: dict[str, Any] = {"onnx": str(dest), "bytes": path.stat().st_size}
        session = OnnxActuator(path)

        def run_export(x, state=None):  # one output set, like one compiled size below
            return [session.run(x, state)]
    else:
        if not cfg.quiet:
            print(f"compiling AOTInductor packages for batch sizes {sorted(set(cfg.batch_sizes))} "
                  "(about 15-60 s each) ...", flush=True)
        # the compiler's configuration: imported here, as it loads Inductor (seconds) that
        # ONNX exports and ``neuract export --help`` do without
        import torch._inductor.config as inductor_config

        # the autotuner's timing tables and torch's deprecation notes are not the user's
        # business here; the check below reports what matters
        with inductor_config.patch({"autotune_num_choices_displayed": 0,
                                    "max_autotune_report_choices_stats": False}), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            aot = compiled.compile_aot(model, cfg.batch_sizes, dest, quantize=cfg.quantize,
                                       extra=extra)
        path = dest
        out = {"aot": str(dest), "batch_sizes": list(aot.batch_sizes),
               "bytes": sum(f.stat().st_size for f in dest.iterdir() if f.is_file())}

        def run_export(x, state=None):  # every compiled size, each on padded windows
            return [[o.numpy() for o in aot.run_padded(torch.from_numpy(x), B)]
                    for B in aot.batch_sizes]
    out.update({"format": cfg.format, "quantize": cfg.quantize, "mode": model.cfg.mode,
                "extra": extra, "check": None})
    _check(cfg, model, run_export, out, dest)
    if cfg.format == "onnx":
        os.replace(path, dest)
        path = dest
    if not cfg.quiet:
        what = "ONNX" if cfg.format == "onnx" else "AOT"
        print(f"wrote {path} ({out['bytes'] / 1e6:.2f} MB, {model.cfg.mode} mode, "
              f"quantize={cfg.quantize}; calibrated decisions: {sorted(extra) or 'none'})")
        for k, v in (out["check"] or {}).items():
            print(f"  {k}: max |{what} - torch| {v['max_abs_diff']:.2e} "
                  f"({v['max_abs_diff_over_std']:.2%} of its spread) over "
                  f"{cfg.check_windows} windows")
    return out


def _check(cfg: ExportConfig, model, run_export, out: dict[str, Any], where: Path) -> None:
    """Compare the export with the checkpoint's torch model on ``cfg.check_windows`` random
    windows (drawn from the feature statistics); fills ``out["check"]``; raises past
    :data:`CHECK_LIMIT`. ``where``: the export as the user will find it (ONNX: not written
    to it when the check fails; AOT packages: written there)."""
    if not cfg.check_windows:
        return
    g = torch.Generator().manual_seed(0)
    c = model.cfg
    x = (model.x_mean + model.x_std
         * torch.randn(cfg.check_windows, c.history, c.n_features, generator=g))
    state = None
    if model.gate_rnn is not None:  # a recurrent gate: each window continues its own stream
        state = torch.rand(cfg.check_windows, model.gate_rnn.state_size, generator=g) * 2 - 1
    ref = reference_outputs(model, x, state)
    devs = [na_export.output_deviation(ref, o) for o in run_export(
        x.numpy().astype(np.float32), None if state is None else state.numpy())]
    out["check"] = {k: {"max_abs_diff": max(d[k]["max_abs_diff"] for d in devs),
                        "max_abs_diff_over_std": max(d[k]["max_abs_over_std"] for d in devs)}
                    for k in devs[0]}
    limit = CHECK_LIMIT[cfg.quantize]
    bad = {k: v["max_abs_diff_over_std"] for k, v in out["check"].items()
           if not v["max_abs_diff_over_std"] <= limit}
    if bad:
        what = ("was not written" if cfg.format == "onnx"
                else "was written but must not be deployed")
        raise NeuractError(
            f"the export for {str(where)!r} does not compute what the checkpoint computes: "
            f"largest |difference| over the output's spread "
            + ", ".join(f"{k} {v:.3g}" for k, v in bad.items())
            + f" (accepted for quantize={cfg.quantize}: <= {limit:g}); it {what}")


__all__ = ["ExportConfig", "check_export_dest", "is_onnx_export", "run"]
