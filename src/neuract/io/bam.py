"""BAM pendulum-bench JSON logs (Rhoban BAM format; K-Scale STS3215 runs): one log, a folder
of logs or a tarball of logs.

Parsing one log, its channel mapping and its repairs: :mod:`neuract.io.bam_log`; reading
straight from a tarball and the K-Scale labels: :mod:`neuract.io.bam_tar`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from neuract.data.trajectory import Trajectory
from neuract.errors import SchemaError
from neuract.io.bam_log import (
    MAX_SPIKE_LEN,
    SPIKE_THRESHOLD_RAD,
    find_spikes,
    parse_bam_log,
    read_bam_log,
)
from neuract.io.bam_tar import (  # noqa: F401  (the archive helpers stay importable from here)
    KSCALE_ARM_MASS,
    TAR_ERRORS,
    is_tar,
    iter_kscale_runs,
    iter_tar_logs,
    tar_error,
    tar_errors,
    tar_members,
)


def iter_bam_logs(
    source: str | os.PathLike, limit: int | None = None, **kwargs: Any
) -> Iterator[Trajectory]:
    """BAM logs from a file, a directory of ``*.json`` (recursively) or a ``.tgz``/``.tar``."""
    src = Path(source)
    if src.is_dir():
        files = sorted(src.rglob("*.json"))
        if not files:
            raise SchemaError(f"{src}: no *.json BAM logs found")
        for i, f in enumerate(files):
            if limit is not None and i >= limit:
                return
            rel = f.relative_to(src).with_suffix("")
            yield read_bam_log(f, name=str(rel).replace(os.sep, "/"), **kwargs)
    elif src.is_file() and is_tar(src):
        yield from iter_tar_logs(src, limit=limit, **kwargs)
    elif src.is_file():
        yield read_bam_log(src, **kwargs)
    else:
        raise SchemaError(f"{src}: no such file or directory")


__all__ = [
    "MAX_SPIKE_LEN",
    "SPIKE_THRESHOLD_RAD",
    "find_spikes",
    "iter_bam_logs",
    "iter_kscale_runs",
    "iter_tar_logs",
    "parse_bam_log",
    "read_bam_log",
    "tar_members",
]
