"""Run twin episode batches as Ray tasks, streaming their results back as they finish.

``connect`` joins (or starts) a Ray cluster and refuses an unreachable one with a one-line
:class:`~neuract.errors.ConfigError`; ``run_batches`` submits one task per episode batch, at
most ``in_flight`` at a time, and yields each batch's trajectories in the order they finish.
Episodes are keyed by their own seeds (:mod:`neuract.twin.generate`), so neither the number of
Ray workers nor the order in which they finish changes a byte of the result.

A worker that dies is retried ``retries`` times by Ray; past that, ``run_batches`` raises
:class:`~neuract.errors.ClusterError` and the batches already received stay with the caller
(the twin verb keeps them on disk, and a rerun generates only the rest).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from neuract.errors import ClusterError, ConfigError

ADDRESS_HELP = ("expected 'auto' (the cluster that `ray start --head` runs on this machine), "
                "'local' (a cluster of this machine's processes, started for this run) or "
                "HOST:PORT of a running head (ray://HOST:PORT for Ray Client)")
CONNECT_TIMEOUT_S = 5.0
"""how long a HOST:PORT address may take to accept a TCP connection before it is refused"""


def _import_ray(option: str):
    try:
        import ray
    except ImportError:
        raise ConfigError(f"{option} needs Ray, which is not installed: pip install "
                          "'neuract[scale]' (or run without it on this machine)") from None
    return ray


def _host_port(address: str, option: str) -> tuple[str, int]:
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{option} = {address!r}; {ADDRESS_HELP}")
    return host, int(port)


def check_reachable(address: str, option: str = "--ray",
                    timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse a HOST:PORT nothing answers on within ``timeout_s`` (before Ray's own, much
    longer, connection retries)."""
    host, port = _host_port(address, option)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ConfigError(f"{option} = {address!r}: no Ray head reachable there ({why}); "
                          f"start one with `ray start --head` on that machine, or "
                          f"{ADDRESS_HELP.removeprefix('expected ')}") from None


def connect(address: str, workers: int = 1, option: str = "--ray") -> bool:
    """Join the Ray cluster at ``address`` ('auto', 'local' or HOST:PORT); True where this
    call started Ray (the caller shuts it down), False where it was already running here."""
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(f"{option} = {address!r}; {ADDRESS_HELP}")
    ray = _import_ray(option)
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address == "local":
        kw.update(num_cpus=int(workers), include_dashboard=False)
        target = None
    elif address == "auto":
        target = "auto"
    else:
        check_reachable(address, option)
        target = address
    try:
        ray.init(address=target, **kw)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{option} = {address!r}: cannot join a Ray cluster ({first}); "
                          f"{ADDRESS_HELP}") from None
    return True


def shutdown() -> None:
    import ray

    ray.shutdown()


def _died(exc: BaseException) -> bool:
    from ray import exceptions as rex

    kinds = tuple(getattr(rex, n) for n in ("WorkerCrashedError", "NodeDiedError",
                                            "ObjectLostError", "RaySystemError",
                                            "LocalRayletDiedError", "TaskUnschedulableError")
                  if hasattr(rex, n))
    return isinstance(exc, kinds)


def run_batches(fn: Callable[..., list], args: Sequence[tuple], in_flight: int,
                retries: int = 2) -> Iterator[tuple[int, list]]:
    """Yield ``(i, fn(*args[i]))`` for every batch, in the order the Ray tasks finish, with
    at most ``in_flight`` tasks submitted at a time (each one CPU). A task whose worker dies
    is retried ``retries`` times; past that, :class:`ClusterError`. An error ``fn`` raises
    is re-raised as it was (a neuract error keeps its one-line message)."""
    ray = _import_ray("--ray")
    task = ray.remote(num_cpus=1, max_retries=int(retries))(fn)
    todo = list(enumerate(args))
    todo.reverse()
    pending: dict[Any, int] = {}
    try:
        while todo or pending:
            while todo and len(pending) < max(1, int(in_flight)):
                i, a = todo.pop()
                pending[task.remote(*a)] = i
            ready, _ = ray.wait(list(pending), num_returns=1)
            ref = ready[0]
            i = pending.pop(ref)
            try:
                out = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                cause = exc.as_instanceof_cause() if hasattr(exc, "as_instanceof_cause") else exc
                inner = getattr(exc, "cause", None)
                raise (inner if isinstance(inner, BaseException) else cause) from None
            except Exception as exc:
                if _died(exc) or isinstance(exc, ray.exceptions.RayError):
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    raise ClusterError(f"a Ray worker died running episode batch {i} "
                                       f"({first[:200]})") from None
                raise
            yield i, out
    finally:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - best effort: the run is ending anyway
                pass
