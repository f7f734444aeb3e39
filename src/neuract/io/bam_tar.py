"""BAM logs read straight from a (possibly compressed) tarball, nothing extracted to disk (the
labels, K-Scale arm masses included, are the log reader's: :mod:`neuract.io.bam_log`)."""

from __future__ import annotations

import contextlib
import gzip
import io
import lzma
import os
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from neuract.data.trajectory import Trajectory
from neuract.errors import SchemaError
from neuract.io.bam_log import KSCALE_ARM_MASS, read_bam_log  # noqa: F401  (re-exported)
from neuract.io.common import warn_repair

TAR_ERRORS = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError)
"""What a truncated or corrupted (gzipped) tarball raises while it is read."""


def tar_error(tar_path: str | os.PathLike, exc: BaseException, member: str | None = None):
    """A :class:`SchemaError` naming the archive (and the member being read) for ``exc``."""
    at = f" while reading member {member!r}" if member else ""
    return SchemaError(
        f"{tar_path}: truncated or corrupted archive{at} ({type(exc).__name__}: {exc}); "
        "expected a complete .tar/.tgz of BAM JSON logs"
    )


@contextlib.contextmanager
def tar_errors(tar_path: str | os.PathLike, member: str | None = None) -> Iterator[None]:
    """Turn what a truncated or corrupted archive raises in the block into :func:`tar_error`."""
    try:
        yield
    except TAR_ERRORS as exc:
        raise tar_error(tar_path, exc, member) from None


def is_tar(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a (possibly compressed) tarball; a truncated one raises naming it."""
    with tar_errors(path):
        return tarfile.is_tarfile(path)


def tar_members(tar_path: str | os.PathLike) -> list[str]:
    """Names of the ``.json`` members of a log tarball, in archive order."""
    with tar_errors(tar_path), tarfile.open(tar_path) as tf:
        return [m.name for m in tf.getmembers() if m.isfile() and m.name.endswith(".json")]


def _read_member(
    tf: tarfile.TarFile, m: tarfile.TarInfo, tar_path: str | os.PathLike, **kwargs: Any
) -> Trajectory:
    """One member of an open log tarball as a Trajectory."""
    with tar_errors(tar_path, m.name):
        text = tf.extractfile(m).read()
    return read_bam_log(io.BytesIO(text), source=f"{tar_path}::{m.name}", **kwargs)


def iter_tar_logs(
    tar_path: str | os.PathLike,
    members: list[str] | None = None,
    limit: int | None = None,
    warn: bool = True,
    **kwargs: Any,
) -> Iterator[Trajectory]:
    """Read BAM logs straight from a tarball (nothing is extracted to disk).

    members: member names to read (default all ``.json`` members, in archive order);
    limit: stop after this many. One summary :class:`DataRepairWarning` at the end.
    """
    tar_path = Path(tar_path)
    wanted = set(members) if members is not None else None
    totals = {"dropped_samples": 0, "masked_samples": 0, "runs": 0}
    n = 0
    with tar_errors(tar_path):
        tf = tarfile.open(tar_path)
    with tf:
        members = iter(tf)
        while True:
            if limit is not None and n >= limit:
                break
            with tar_errors(tar_path):
                m = next(members, None)
            if m is None:
                break
            if not (m.isfile() and m.name.endswith(".json")):
                continue
            if wanted is not None and m.name not in wanted:
                continue
            traj = _read_member(tf, m, tar_path, warn=False, **kwargs)
            for k in ("dropped_samples", "masked_samples"):
                totals[k] += traj.meta.counts[k]
            totals["runs"] += bool(
                traj.meta.counts["dropped_samples"] or traj.meta.counts["masked_samples"]
            )
            n += 1
            yield traj
    if warn and (totals["dropped_samples"] or totals["masked_samples"]):
        warn_repair(
            f"{tar_path}: {n} runs read; dropped {totals['dropped_samples']} bus-read "
            f"dropout sample(s) and masked {totals['masked_samples']} sample(s) of short "
            f"position burst(s) in {totals['runs']} run(s)"
        )


def iter_kscale_runs(
    tar_path: str | os.PathLike,
    limit: int | None = None,
    members: list[str] | None = None,
    **kwargs: Any,
) -> Iterator[Trajectory]:
    """K-Scale STS3215 pendulum runs (``raw.tgz`` or ``processed.tgz``), read from the tar.

    Each trajectory's labels hold ``mass`` [kg], ``length`` [m], ``kp``, ``trajectory``,
    ``arm_mass`` [kg] (from the experiment configs) and the rest of the file metadata.
    """
    yield from iter_tar_logs(tar_path, members=members, limit=limit, **kwargs)
