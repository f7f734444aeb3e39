"""The recurrent contact gate's extra twin episodes (``TwinDataConfig.gate_train_minutes``):
other units' episodes, generated chunk by chunk after the estimator is trained (by one or
more worker processes), of which only the gate's feature rows are kept."""

from __future__ import annotations

import dataclasses
import importlib
import math
import multiprocessing as mp
import numbers
from typing import Any

import torch

import neuract.twin as twin
from neuract.errors import ConfigError
from neuract.estimate.gate_rnn import gate_rows
from neuract.pipeline.progress import ProgressFn
from neuract.pipeline.twin_data import TwinDataConfig, contact_labelled, generate_config
from neuract.twin.tasks import TASKS

# the module: the twin package exports its ``generate`` function under the same name
twin_generate = importlib.import_module("neuract.twin.generate")

GATE_CHUNK_MINUTES = 216.0
"""twin minutes per data seed of the extra gate episodes (``gate_train_minutes``)"""
GATE_ROW_BYTES_PER_MINUTE = 2.4e6
"""memory of the recurrent gate's feature rows per extra minute (measured: 2.24 MB per minute
of SO-101 twin telemetry at the twin estimator's 144 channels, float32), with a margin"""
GATE_SEED_OFFSET = 1000
"""the extra gate episodes' first data seed, past the main data's ``seed``"""


def gate_chunks(cfg: TwinDataConfig) -> list:
    """The :class:`~neuract.twin.generate.GenerateConfig` of each chunk of ``cfg``'s extra
    gate episodes (``gate_train_minutes``): other units (data seeds from ``seed +``
    :data:`GATE_SEED_OFFSET`), :data:`GATE_CHUNK_MINUTES` each (the last one the rest);
    empty without any. Validates the options."""
    m = cfg.gate_train_minutes
    if isinstance(m, bool) or not isinstance(m, numbers.Real) or not (math.isfinite(m)
                                                                       and m >= 0):
        raise ConfigError(f"TwinDataConfig.gate_train_minutes = {m!r}; expected minutes >= 0")
    w = cfg.workers
    if isinstance(w, bool) or not isinstance(w, int) or w < 1:
        raise ConfigError(f"TwinDataConfig.workers = {w!r}; expected an integer >= 1")
    tasks = cfg.gate_train_tasks
    if isinstance(tasks, str) or not tasks or any(t not in TASKS for t in tasks):
        raise ConfigError(f"TwinDataConfig.gate_train_tasks = {tasks!r}; expected one or more "
                          f"of {list(TASKS)}")
    if m == 0:
        return []
    base = generate_config(cfg)
    episode_min = base.sim.episode_s / 60.0
    if m < episode_min * (1 - 1e-9):
        raise ConfigError(f"TwinDataConfig.gate_train_minutes = {m:g} is less than one episode "
                          f"(TwinDataConfig.episode_s = {base.sim.episode_s:g} s); expected 0 "
                          f"or at least {episode_min:g} minutes")
    out, left, k = [], float(m), 0
    while left > 1e-9:
        chunk = min(left, GATE_CHUNK_MINUTES)
        if left - chunk < episode_min:  # a remainder under one episode joins this chunk
            chunk = left
        out.append(dataclasses.replace(base, tasks=tuple(tasks), minutes=chunk,
                                       seed=cfg.seed + GATE_SEED_OFFSET + k, workers=1))
        left -= chunk
        k += 1
    # held at once: the main (and worn) episodes, one chunk per worker, every chunk's rows
    held = cfg.minutes + (cfg.worn_train_minutes or 0.0)
    need = (twin_generate.estimated_bytes(held, base.sim.episode_s, base.robot)
            + twin_generate.estimated_bytes(min(float(m), GATE_CHUNK_MINUTES * w),
                                            base.sim.episode_s, base.robot)
            + float(m) * GATE_ROW_BYTES_PER_MINUTE)
    have = twin_generate.available_memory()
    if have is not None and need > have:
        raise ConfigError(f"TwinDataConfig.gate_train_minutes = {m:g} with workers = {w} needs "
                          f"about {need / 1e9:.3g} GB of memory (the main episodes, one "
                          f"{GATE_CHUNK_MINUTES:g}-min chunk per worker and about "
                          f"{GATE_ROW_BYTES_PER_MINUTE / 1e6:.2g} MB of feature rows per extra "
                          f"minute); this machine has {have / 1e9:.3g} GB available: expected "
                          "fewer minutes or workers")
    return out


_GATE_JOB: dict[str, Any] = {}
"""what a process computes the extra gate rows with (this one's, or a worker's)"""


def _gate_worker_init(model: Any, chunks: list, thr: float) -> None:
    torch.set_num_threads(1)  # one core per worker
    _GATE_JOB.update(model=model, chunks=chunks, thr=thr)


def _gate_chunk_rows(k: int) -> list:
    job = _GATE_JOB
    eps = contact_labelled(twin.generate(job["chunks"][k]), job["thr"])
    return gate_rows(job["model"], eps)


def gate_extra_rows(cfg: TwinDataConfig, model: Any, progress: ProgressFn | None = None
                    ) -> list:
    """The recurrent gate's :class:`~neuract.estimate.gate_rnn.GateRows` of ``cfg``'s
    extra gate episodes (:func:`gate_chunks`), computed with the trained estimator ``model``
    by ``cfg.workers`` processes, chunk by chunk (only the rows are kept)."""
    chunks = gate_chunks(cfg)
    what = "recurrent contact gate: extra twin episodes of other units"
    if not chunks:
        return []
    thr = cfg.contact_min_force_n
    rows: list = []
    if progress:
        progress(what, 0, len(chunks))
    if cfg.workers <= 1 or len(chunks) == 1:
        _GATE_JOB.update(model=model, chunks=chunks, thr=thr)
        try:
            for k in range(len(chunks)):
                rows += _gate_chunk_rows(k)
                if progress:
                    progress(what, k + 1, len(chunks))
        finally:
            _GATE_JOB.clear()
        return rows
    # spawned (not forked) workers: nothing of this process's threads is inherited
    with mp.get_context("spawn").Pool(min(cfg.workers, len(chunks)),
                                      initializer=_gate_worker_init,
                                      initargs=(model, chunks, thr)) as pool:
        for k, r in enumerate(pool.imap(_gate_chunk_rows, range(len(chunks)))):
            rows += r  # in chunk order, whatever the order the workers finish in
            if progress:
                progress(what, k + 1, len(chunks))
    return rows


__all__ = ["GATE_CHUNK_MINUTES", "GATE_ROW_BYTES_PER_MINUTE", "GATE_SEED_OFFSET", "gate_chunks",
           "gate_extra_rows"]
