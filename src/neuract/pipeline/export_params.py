"""``neuract export --format bam | torchscript``: a ``neuract fit`` output directory to a
file another simulator loads.

    neuract export --format bam --checkpoint runs/fit --out runs/export/fit.json
    neuract export --format torchscript --checkpoint runs/fit_mlp --out runs/export/net.pt

``--checkpoint`` is the directory ``neuract fit`` wrote (``config.json`` + ``model.safetensors``).
``bam``: the fitted servo's BAM parameter file (:func:`neuract.io.bam_params.save_bam_params`;
a servo with a BAM friction family and nothing BAM lacks). ``torchscript``: a fitted MLP or GRU
actuator net for Isaac Lab / mjlab (:mod:`neuract.pipeline.export_torchscript`), with its
sidecar ``<out stem>.json``. An existing ``--out`` is replaced only with ``--overwrite``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from neuract.errors import CheckpointError, ConfigError
from neuract.fit import saved
from neuract.fit.trainer import SystemModel
from neuract.fit.verb import FitConfig
from neuract.io.bam_params import save_bam_params, to_bam_params
from neuract.pipeline.export_torchscript import check_net, export_torchscript, sidecar_path

SUFFIX = {"bam": ".json", "torchscript": ".pt"}


def load_fit(path: str | os.PathLike) -> tuple[SystemModel, FitConfig]:
    """The fitted model (float64) and resolved config of a ``neuract fit`` output directory."""
    path = Path(path)
    where = f"--checkpoint {str(path)!r}"
    cfg_path, weights = path / "config.json", path / "model.safetensors"
    if not cfg_path.is_file():
        raise ConfigError(f"{where}: no config.json; accepted: an output directory of "
                          "`neuract fit`")
    try:
        kind = json.loads(cfg_path.read_text()).get("type")
    except (ValueError, AttributeError, OSError) as exc:
        raise CheckpointError(f"{where}: config.json unreadable: {exc}") from None
    if kind != "FitConfig":
        raise ConfigError(f"{where}: config.json of a {kind!r} run; accepted: an output "
                          "directory of `neuract fit` (type FitConfig); a NeuralActuator "
                          "checkpoint exports with --format onnx or aot")
    if not weights.is_file():
        raise CheckpointError(f"{where}: model.safetensors missing (the fit did not "
                              "finish); rerun `neuract fit`")
    fm = saved.load_fit(path)
    return fm.system, fm.config


def check_dest(dest: Path, fmt: str, overwrite: bool) -> None:
    """Refuse a wrong suffix, and an existing ``dest`` (or sidecar) without ``overwrite``."""
    if dest.suffix.lower() != SUFFIX[fmt]:
        raise ConfigError(f"--out {str(dest)!r}: --format {fmt} writes a file ending in "
                          f"{SUFFIX[fmt]}")
    for p in (dest, sidecar_path(dest)) if fmt == "torchscript" else (dest,):
        if os.path.lexists(p) and (not overwrite or not p.is_file() or p.is_symlink()):
            why = ("is not a plain file" if overwrite else
                   "already exists; pass --overwrite to replace it")
            raise ConfigError(f"--out: {str(p)!r} {why}")


def run_params(cfg: Any, dest: Path) -> dict[str, Any]:
    """``neuract export`` for ``--format bam`` and ``--format torchscript`` (``cfg``: the
    verb's ExportConfig)."""
    if cfg.quantize != "none":
        raise ConfigError(f"--quantize {cfg.quantize!r} applies to --format onnx and aot; "
                          f"--format {cfg.format} accepts: none")
    check_dest(dest, cfg.format, cfg.overwrite)
    model, fit = load_fit(cfg.checkpoint)
    if cfg.format == "bam":  # refusals before any folder is made
        n = model.joints.armature.raw.numel()
        if n != 1:
            raise ConfigError(f"--checkpoint {str(cfg.checkpoint)!r}: a fit of {n} joints; a "
                              "BAM parameter file holds one (accepted: a 1-joint fit; "
                              "neuract.io.bam_params.save_bam_params(path, actuator, joints, "
                              "joint=i) writes joint i)")
        to_bam_params(model.actuator, model.joints)
    else:
        check_net(model.actuator)
    dest.parent.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"format": cfg.format, "checkpoint": str(cfg.checkpoint)}
    if cfg.format == "bam":
        save_bam_params(dest, model.actuator, model.joints)
        out |= {"bam": str(dest), "params": json.loads(dest.read_text())}
    else:
        notes = export_torchscript(model.actuator, dest, fit.actuator.control_dt,
                                   fit.train.substeps)
        out |= {"torchscript": str(dest), "sidecar": str(sidecar_path(dest)), "notes": notes}
    if not cfg.quiet:
        extra = f" and {out['sidecar']}" if cfg.format == "torchscript" else ""
        print(f"wrote {dest}{extra} ({cfg.format}, from {cfg.checkpoint})")
    return out


__all__ = ["check_dest", "load_fit", "run_params"]
