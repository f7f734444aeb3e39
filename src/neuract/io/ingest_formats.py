"""What each ``neuract ingest --format`` reads: for a config, the input items (files,
archive members or a dataset root) and the function that reads one item as episodes."""

from __future__ import annotations

import fnmatch
import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuract.data.dataset import load_dataset
from neuract.data.trajectory import Trajectory
from neuract.errors import ConfigError, SchemaError
from neuract.io.bam_log import read_bam_log
from neuract.io.bam_tar import _read_member, is_tar, tar_errors, tar_members
from neuract.io.csv import load_mapping, read_mapped
from neuract.io.ingest_config import IngestConfig
from neuract.io.lerobot import read_lerobot
from neuract.io.nad import read_nad_csv
from neuract.registry import Registry

Reader = Callable[["IngestConfig"], tuple[list[Any], Callable[[Any], list[Trajectory]]]]
FORMATS: Registry[Reader] = Registry("format")


def _files(cfg: IngestConfig, patterns: tuple[str, ...]) -> list[Path]:
    src = cfg.source
    if src.is_file():
        return [src]
    if not src.is_dir():
        raise SchemaError(f"{src}: no such file or directory")
    files = sorted({p for pat in patterns for p in src.rglob(pat) if p.is_file()})
    if cfg.include:
        files = [
            p
            for p in files
            if fnmatch.fnmatch(str(p.relative_to(src)).replace(os.sep, "/"), cfg.include)
        ]
    if not files:
        what = f" matching {cfg.include!r}" if cfg.include else ""
        raise SchemaError(f"{src}: no {' / '.join(patterns)} files{what}")
    return files


def _rel_name(cfg: IngestConfig, path: Path) -> str:
    if cfg.source.is_dir():
        return str(path.relative_to(cfg.source).with_suffix("")).replace(os.sep, "/")
    return path.stem


@FORMATS.register("nad")
def _nad(cfg: IngestConfig):
    def read(p: Path) -> list[Trajectory]:
        return [read_nad_csv(p, robot=cfg.robot, name=_rel_name(cfg, p))]

    return _files(cfg, ("*.csv",)), read


@FORMATS.register("bam")
def _bam(cfg: IngestConfig):
    robot = cfg.robot or "pendulum"
    src = cfg.source
    if src.is_file() and is_tar(src):
        members = tar_members(src)
        if cfg.include:
            members = [m for m in members if fnmatch.fnmatch(m, cfg.include)]
        tf = tarfile.open(src)  # read forward once, in archive order (gzip cannot seek back)
        stream = iter(tf)

        def read_member(name: str) -> list[Trajectory]:
            with tar_errors(src):
                for m in stream:
                    if m.name == name:
                        break
                else:
                    raise SchemaError(f"{src}: member {name!r} not found")
            return [_read_member(tf, m, src, robot=robot, name=Path(name).stem, warn=False)]

        if not members:
            raise SchemaError(f"{src}: no .json members")
        return members, read_member

    archives = (
        sorted(str(a) for pat in ("*.tgz", "*.tar", "*.tar.gz") for a in src.rglob(pat))
        if src.is_dir()
        else []
    )

    def read(p: Path) -> list[Trajectory]:
        try:
            return [read_bam_log(p, robot=robot, name=_rel_name(cfg, p), warn=False)]
        except SchemaError as exc:
            if archives and "not a BAM log" in str(exc):
                raise SchemaError(
                    f"{exc} (this folder also holds log archive(s) {', '.join(archives[:3])}: "
                    "pass an archive itself as SOURCE, or select files with --include)"
                ) from None
            raise

    try:
        return _files(cfg, ("*.json",)), read
    except SchemaError as exc:
        if archives:
            raise SchemaError(
                f"{exc}; archive(s) found: {', '.join(archives[:3])}: pass one as SOURCE"
            ) from None
        raise


@FORMATS.register("lerobot")
def _lerobot(cfg: IngestConfig):
    def read(root: Path) -> list[Trajectory]:
        return read_lerobot(
            root,
            robot=cfg.robot,
            position_units=cfg.position_units,
            calibration=cfg.calibration,
        )

    if not (cfg.source / "meta" / "info.json").is_file():
        inner = (
            sorted(p.parent.parent for p in cfg.source.glob("*/meta/info.json"))
            + sorted(p.parent.parent for p in cfg.source.glob("*/*/meta/info.json"))
            if cfg.source.is_dir()
            else []
        )
        hint = (
            "; LeRobot dataset(s) found below it, pass one as SOURCE: "
            + ", ".join(str(p) for p in inner[:3])
            if inner
            else ""
        )
        raise SchemaError(
            f"{cfg.source}: not a LeRobot dataset root (no meta/info.json; expected "
            f"meta/info.json and data/**/*.parquet){hint}"
        )
    return [cfg.source], read


@FORMATS.register("neuract")
def _neuract(cfg: IngestConfig):
    def read(root: Path) -> list[Trajectory]:
        return list(load_dataset(root))

    if not (cfg.source / "meta" / "info.json").is_file():
        raise SchemaError(f"{cfg.source}: not a neuract dataset directory (no meta/info.json; "
                          "expected the output of neuract ingest, twin or simulate)")
    return [cfg.source], read


@FORMATS.register("csv")
def _csv(cfg: IngestConfig):
    if cfg.mapping is None:
        raise ConfigError(
            "format 'csv' needs --mapping FILE.json (a column mapping: time column, "
            "column -> channel/joint/unit; see neuract.io.csv)"
        )
    mapping = load_mapping(cfg.mapping)

    def read(p: Path) -> list[Trajectory]:
        return [read_mapped(p, mapping, robot=cfg.robot, name=_rel_name(cfg, p))]

    return _files(cfg, ("*.csv", "*.tsv", "*.parquet", "*.pq")), read
