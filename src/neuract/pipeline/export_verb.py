"""``neuract export``: a NeuralActuator checkpoint to one ONNX file for deployment.

    neuract export --checkpoint runs/demo/checkpoints/neuralactuator_estimator \\
        --out runs/export/neuralactuator.onnx [--quantize int8]

The file holds the folded graph (:func:`neuract.neuralactuator.export_onnx`), the model
config and channel list, and the checkpoint's calibrated decisions (gate threshold, filter,
condition threshold and smoothing) under ``neuract.extra``. After writing, the verb runs the
file in ONNX Runtime on windows drawn around the checkpoint's normalisation statistics and
reports how far each output is from the torch model's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuract.errors import ConfigError


@dataclass
class ExportConfig:
    """Export a NeuralActuator checkpoint to ONNX (folded graph, calibrated decisions)."""

    checkpoint: Path
    """checkpoint directory (model.safetensors + config.json), either mode"""
    out: Path = Path("runs/export/neuralactuator.onnx")
    """the ONNX file to write (atomically; its folder is created)"""
    quantize: str = "none"
    """none (float32, equal to torch to about 1e-6) or int8 (the head trunk's weights in int8
    for ONNX Runtime's dynamic quantization: faster at batch 1, an approximation)"""
    check_windows: int = 256
    """random windows (around the checkpoint's normalisation statistics) compared with the
    torch model after writing; 0: no check"""
    quiet: bool = False


def run(cfg: ExportConfig) -> dict[str, Any]:
    import numpy as np
    import torch

    from neuract.neuralactuator import OnnxActuator, export_onnx
    from neuract.neuralactuator.export import QUANTIZE, output_deviation
    from neuract.pipeline.verbs import calibrated, load_model

    if cfg.quantize not in QUANTIZE:
        raise ConfigError(f"--quantize {cfg.quantize!r}; accepted: {list(QUANTIZE)}")
    if Path(cfg.out).suffix.lower() != ".onnx":
        raise ConfigError(f"--out {str(cfg.out)!r}: expected a file name ending in .onnx")
    if not (isinstance(cfg.check_windows, int) and cfg.check_windows >= 0):
        raise ConfigError(f"--check-windows {cfg.check_windows!r}; expected an integer >= 0")
    model = load_model(cfg.checkpoint)  # with the calibrated decisions as attributes
    extra = calibrated(model)
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    path = export_onnx(model, cfg.out, quantize=cfg.quantize, extra=extra)
    out: dict[str, Any] = {"onnx": str(path), "quantize": cfg.quantize, "mode": model.cfg.mode,
                           "bytes": path.stat().st_size, "extra": extra, "check": None}
    if cfg.check_windows:
        g = torch.Generator().manual_seed(0)
        c = model.cfg
        x = (model.x_mean + model.x_std
             * torch.randn(cfg.check_windows, c.history, c.n_features, generator=g))
        with torch.no_grad():
            ref = [r.numpy() for r in model(x)]
        dev = output_deviation(ref, OnnxActuator(path).run(x.numpy().astype(np.float32)))
        out["check"] = {k: {"max_abs_diff": v["max_abs_diff"],
                            "max_abs_diff_over_std": v["max_abs_over_std"]}
                        for k, v in dev.items()}
    if not cfg.quiet:
        print(f"wrote {path} ({out['bytes'] / 1e6:.2f} MB, {model.cfg.mode} mode, "
              f"quantize={cfg.quantize}; calibrated decisions: {sorted(extra) or 'none'})")
        for k, v in (out["check"] or {}).items():
            print(f"  {k}: max |ONNX - torch| {v['max_abs_diff']:.2e} "
                  f"({v['max_abs_diff_over_std']:.2%} of its spread) over "
                  f"{cfg.check_windows} windows")
    return out


__all__ = ["ExportConfig", "run"]
