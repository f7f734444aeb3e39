"""Atomic file and directory writes: write to a temporary sibling, then rename.

A crash or an exception never leaves a partial output behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary file path next to ``path``; rename it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory next to ``path``; move it onto ``path`` on success.

    If ``path`` exists and ``overwrite`` is true it is replaced only after the new content
    is complete. On any exception the temporary directory is removed.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        from neuract.errors import ConfigError

        raise ConfigError(f"output directory {str(path)!r} already exists; pass overwrite=True")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: str | os.PathLike, obj: Any, indent: int = 2) -> None:
    """Write ``obj`` as JSON atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=indent, sort_keys=False, default=_default) + "\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write text atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def _default(o: Any) -> Any:
    import dataclasses

    import numpy as np

    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot serialise {type(o).__name__} to JSON")
