"""Atomic file and directory writes: write to a temporary sibling, then rename.

A crash or an exception never leaves a partial output behind. A killed process (SIGKILL,
power loss: no ``except`` runs) may leave an :func:`atomic_dir` temporary directory; the next
:func:`atomic_dir` of the same path removes it (its writer held a lock on it while it lived).

The temporary file/directory is created with ``os.open(..., 0o666)`` / ``os.mkdir(..., 0o777)``
so the result gets exactly the permissions a plain ``open()``/``mkdir`` would give under the
current umask (``tempfile.mkstemp``/``mkdtemp`` would make every output 0600/0700). The umask
itself is never read or changed, so there is no process-global side effect.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from neuract.errors import ConfigError

_TRIES = 100
_STALE_S = 60.0
"""a temporary directory younger than this [s] is never removed as a leftover (its writer may
not hold its lock yet)"""


def _sibling_name(path: Path, suffix: str) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{suffix}")


def _user_error(exc: OSError, given: str | os.PathLike) -> OSError:
    """``exc`` (raised on a temporary sibling of an output) restated for the output path the
    caller gave: the temporary names are internal and mean nothing to the user."""
    folder = os.path.dirname(os.path.abspath(given))
    msg = f"cannot write {str(given)!r}: {exc.strerror or exc} (in its folder {folder!r})"
    return type(exc)(exc.errno, msg) if exc.errno is not None else type(exc)(msg)


def _make_temp_file(path: Path, given: str | os.PathLike | None = None) -> Path:
    """Create a new empty file next to ``path`` with mode ``0o666 & ~umask``; errors name
    ``given`` (the path as the caller spelled it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TRIES):
        tmp = _sibling_name(path, ".tmp")
        try:
            fd = os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise _user_error(exc, path if given is None else given) from None
        os.close(fd)
        return tmp
    raise FileExistsError(f"could not create a temporary file next to {str(path)!r}")


def _make_temp_dir(path: Path, given: str | os.PathLike | None = None) -> Path:
    """Create a new empty directory next to ``path`` with mode ``0o777 & ~umask``; errors
    name ``given`` (the path as the caller spelled it)."""
    for _ in range(_TRIES):
        tmp = _sibling_name(path, ".tmp")
        try:
            os.mkdir(tmp, 0o777)
        except FileExistsError:
            continue
        except OSError as exc:
            raise _user_error(exc, path if given is None else given) from None
        return tmp
    raise FileExistsError(f"could not create a temporary directory next to {str(path)!r}")


def _flock(path: Path) -> int | None:
    """An open descriptor of the directory ``path`` holding an exclusive lock on it (released
    when the descriptor is closed or its process dies, however it dies); None where the lock
    is held elsewhere or locks are unavailable."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _remove_leftovers(path: Path) -> None:
    """Remove the temporary directories of ``path`` that killed writers left: named as
    :func:`atomic_dir` names them, older than ``_STALE_S`` and locked by no live process."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{8}}\.tmp")
    try:
        names = [n for n in os.listdir(path.parent) if pattern.fullmatch(n)]
    except OSError:
        return
    for name in names:
        p = path.parent / name
        try:
            if not _is_real_dir(p) or time.time() - os.lstat(p).st_mtime < _STALE_S:
                continue
        except OSError:
            continue
        fd = _flock(p)
        if fd is None:  # a live writer's (or no locks here: nothing shows it is a leftover)
            continue
        try:
            _rmtree(p)
        except OSError:
            pass  # a leftover that cannot be removed only takes room, as before
        finally:
            os.close(fd)


def _is_real_dir(path: Path) -> bool:
    """True for a directory itself (not a symlink to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def check_dest(path: str | os.PathLike, overwrite: bool, marker: str | None = None,
               allowed: Callable[[str], bool] | None = None,
               kind: Callable[[Any], bool] | None = None,
               inputs: Sequence[str | os.PathLike | None] = ()) -> None:
    """Raise ConfigError unless the output directory ``path`` may be written.

    ``path`` may not be, or hold, one of the ``inputs`` the caller reads (symlinks followed).
    It may not exist; or it is a real directory (not a file or a symlink), ``overwrite`` is
    true and -- since it will be replaced as a whole -- it is empty, or it is an earlier
    output of the same kind: it holds ``marker`` (a JSON file that output wrote, e.g.
    ``meta/info.json``) whose content ``kind`` accepts (a predicate on the parsed JSON), and
    only top-level entries ``allowed`` accepts (default: anything)."""

    path = Path(path)
    target = Path(os.path.realpath(path))
    for p in inputs:
        if p is None or str(p) == "" or not os.path.lexists(p):
            continue
        src = Path(os.path.realpath(p))
        if src == target or target in src.parents:
            raise ConfigError(f"output directory {str(path)!r} is or holds the input "
                              f"{str(p)!r}; the output is written as a whole: choose another "
                              "output path")
    if not os.path.lexists(path):
        check_parent(path)
        return
    if not _is_real_dir(path):
        what = "a symlink" if path.is_symlink() else "not a directory"
        raise ConfigError(
            f"output directory {str(path)!r} exists and is {what}; only an existing directory "
            "is replaced: remove it or choose another output path")
    if not overwrite:
        raise ConfigError(f"output directory {str(path)!r} already exists; pass --overwrite "
                          "to replace it")
    names = [p.name for p in path.iterdir()]
    if not names:
        return
    if marker is not None and not _marks(path / marker, kind):
        raise ConfigError(f"output directory {str(path)!r} is not an earlier output of this "
                          f"kind (no {marker} of one) and would be replaced as a whole: choose "
                          "another output path")
    other = [n for n in names if allowed is not None and not allowed(n)]
    if other:
        raise ConfigError(f"output directory {str(path)!r} holds {sorted(other)[:5]}, which this "
                          "output does not write; it would be replaced as a whole: move them or "
                          "choose another output path")


def check_parent(path: str | os.PathLike, what: str = "output directory") -> None:
    """Raise ConfigError where the output ``path`` (which does not exist) cannot be created
    because a folder of its path exists but is not a directory (``--out notes.txt/run``)."""
    for parent in Path(path).parents:
        if os.path.lexists(parent):
            if not os.path.isdir(parent):
                raise ConfigError(f"{what} {str(path)!r} cannot be created: {str(parent)!r} "
                                  "exists and is not a directory; choose another output path")
            return


def _make_parent(path: Path, given: str | os.PathLike, what: str) -> None:
    """Create the folder of ``path`` (and its parents); a folder of the path that exists but
    is not a directory is refused naming ``given`` (:func:`check_parent`)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        check_parent(given, what)
        raise


def is_output(path: str | os.PathLike, marker: str, kind: Callable[[Any], bool] | None = None,
              allowed: Callable[[str], bool] | None = None) -> bool:
    """Whether the directory ``path`` is an output of the kind ``marker`` / ``kind`` describe
    (the arguments of :func:`check_dest`; ``allowed`` is not needed to recognise one)."""
    return Path(path).is_dir() and _marks(Path(path) / marker, kind)


def _marks(marker: Path, kind: Callable[[Any], bool] | None) -> bool:
    """Whether ``marker`` is a file (and, with ``kind``, JSON that ``kind`` accepts)."""
    if not marker.is_file():
        return False
    if kind is None:
        return True
    try:
        return bool(kind(json.loads(marker.read_text())))
    except (OSError, ValueError, AttributeError, TypeError):
        return False


def _rmtree(path: Path) -> None:
    """Remove a directory tree, making read-only directories writable where that blocks it."""

    def retry(func: Any, name: str, _exc: Any) -> None:
        for p in (os.path.dirname(name), name):
            with contextlib.suppress(OSError):
                if _is_real_dir(Path(p)):
                    os.chmod(p, os.stat(p).st_mode | stat.S_IRWXU)
        func(name)  # a second failure propagates

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary file path next to ``path``; rename it onto ``path`` on success.

    The file is created empty with the permissions ``open(path, "w")`` would give
    (``0o666 & ~umask``); a replaced file's old permissions are not kept."""
    given = path
    path = Path(os.path.abspath(path))
    _make_parent(path, given, "output file")
    tmp_path = _make_temp_file(path, given)
    mode = stat.S_IMODE(os.stat(tmp_path).st_mode)
    try:
        yield tmp_path
        cur = stat.S_IMODE(os.stat(tmp_path).st_mode)
        if cur | mode != cur:  # a writer replaced the file with a narrower mode (safetensors'
            os.chmod(tmp_path, cur | mode)  # save_file: 0600); bits it added (x) are kept
        try:
            os.replace(tmp_path, path)
        except OSError as exc:
            raise _user_error(exc, given) from None
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, overwrite: bool = False, marker: str | None = None,
               allowed: Callable[[str], bool] | None = None,
               kind: Callable[[Any], bool] | None = None) -> Iterator[Path]:
    """Yield a temporary directory next to ``path``; move it onto ``path`` on success.

    The directory is created with the permissions ``mkdir`` would give (``0o777 & ~umask``).
    If ``path`` exists it must pass :func:`check_dest` (a directory, ``overwrite``, and with
    ``marker`` / ``kind`` / ``allowed`` an earlier output of the same kind; else ConfigError, before
    anything is written); it is replaced only after the new content is complete, and its old
    copy is then deleted. On any exception the temporary directory is removed and an
    existing ``path`` is left as it was. Temporary directories of ``path`` that killed
    writers left (see the module docstring) are removed first.
    """
    given = path
    path = Path(os.path.abspath(path))  # "." and "dir/.." have no name to put a sibling by
    check_dest(path, overwrite, marker, allowed, kind)
    _make_parent(path, given, "output directory")
    tmp = _make_temp_dir(path, given)
    lock = _flock(tmp)  # held while this process lives: not a leftover for another writer
    try:
        _remove_leftovers(path)
        yield tmp
        check_dest(path, overwrite, marker, allowed, kind)  # it may have appeared meanwhile
        try:
            if os.path.lexists(path):
                _swap_in(tmp, path)
            else:
                os.replace(tmp, path)
        except OSError as exc:
            raise _user_error(exc, given) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if lock is not None:
            os.close(lock)


def _swap_in(tmp: Path, path: Path) -> None:
    """Replace the directory ``path`` by ``tmp``; restore ``path`` if the swap fails."""
    old = _sibling_name(path, ".old")
    os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old, path)
        raise
    try:
        _rmtree(old)
    except OSError as e:  # the new content is in place; only the old copy is left over
        warnings.warn(f"replaced {str(path)!r} but could not delete its old copy "
                      f"{str(old)!r}: {e}", RuntimeWarning, stacklevel=4)


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


def missing_folders(folder: str | os.PathLike) -> list[Path]:
    """The folders of ``folder``'s path (itself included) that do not exist yet, deepest
    first: what ``mkdir(parents=True)`` creates (empty: ``folder`` exists)."""
    folder = Path(folder)
    out = []
    for d in (folder, *folder.parents):
        if os.path.lexists(d):
            break
        out.append(d)
    return out


@contextlib.contextmanager
def undone_on_error(folder: str | os.PathLike,
                    keep: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """For a verb that writes into ``folder`` in place (a rerun resumes there): when the block
    fails (an exception; not an interrupt, which keeps what a rerun resumes from), remove what
    a first run wrote -- the folders of the path it created, or the entries of a folder that
    was empty -- unless ``keep(folder)`` finds a state worth resuming from (a training state).
    A folder that held an earlier run is left as it is. Yields ``folder`` as a Path."""
    folder = Path(folder)
    made = (missing_folders(folder) or [None])[-1]  # the outermost folder this run creates
    fresh = made is not None or (folder.is_dir() and not any(folder.iterdir()))
    try:
        yield folder
    except Exception:
        if fresh and not (keep is not None and folder.is_dir() and keep(folder)):
            if made is not None:
                shutil.rmtree(made, ignore_errors=True)
            elif folder.is_dir():
                for p in folder.iterdir():
                    if p.is_dir() and not p.is_symlink():
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        p.unlink(missing_ok=True)
        raise
