"""Data-parallel training under ``torchrun``: every rank draws the same global batch (the
same seeds), computes the loss of its own slice of it, and the gradients are summed over the
ranks before each optimiser step, so the weights and the loss curve are those of one process
training on the whole batch (to float rounding: the sum's order differs).

The loss of a step is split so that the ranks' parts add up to it: a loss that is a mean over
the batch's rows takes the rank's rows' mean times their share (:func:`shard`); a masked
mean divides by the whole batch's count. Rank 0 alone writes checkpoints and outputs; every
rank resumes from the same training state.

``torchrun --nproc_per_node 2 -m neuract fit ...`` (or ``--nnodes``) sets the environment
:func:`init_from_env` reads; gloo is the backend on CPU, nccl where CUDA is available.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from neuract.errors import ConfigError


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1

    @property
    def writer(self) -> bool:
        """whether this rank writes checkpoints and outputs (rank 0)"""
        return self.rank == 0


def world() -> World:
    """This process's place in the distributed training (rank 0 of 1 outside one)."""
    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size())
    return World()


def init_from_env(backend: str | None = None) -> World:
    """Join the process group ``torchrun`` describes in the environment (``WORLD_SIZE`` > 1,
    ``RANK``, ``MASTER_ADDR``, ``MASTER_PORT``); outside torchrun, rank 0 of 1."""
    size = os.environ.get("WORLD_SIZE")
    if size is None or int(size) <= 1:
        return world()
    if not dist.is_available():
        raise ConfigError("WORLD_SIZE > 1 (run under torchrun) but this torch has no "
                          "torch.distributed")
    if not dist.is_initialized():
        be = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        dist.init_process_group(backend=be)
    return world()


@dataclass(frozen=True)
class Shard:
    rows: slice
    """this rank's rows of the global batch"""
    share: float
    """the part of a per-row mean this rank's rows carry (rows / batch); 1 / ranks where the
    batch has fewer rows than ranks (every rank then computes the whole batch)"""
    split: bool
    """whether the batch is split (False: every rank has all of it)"""


def shard(n: int, w: World | None = None) -> Shard:
    """This rank's contiguous slice of a batch of ``n`` rows (sizes differing by one at
    most)."""
    w = w or world()
    if w.size <= 1 or n < w.size:
        return Shard(slice(0, n), 1.0 / w.size, False)
    base, extra = divmod(n, w.size)
    start = w.rank * base + min(w.rank, extra)
    stop = start + base + (1 if w.rank < extra else 0)
    return Shard(slice(start, stop), (stop - start) / n, True)


def total(value: torch.Tensor) -> float:
    """The sum over the ranks of a rank's part of the loss (the global loss)."""
    if world().size <= 1:
        return float(value.detach())
    t = value.detach().reshape(1).to(torch.float64).clone()
    dist.all_reduce(t)
    return float(t)


def sum_gradients(params) -> None:
    """Replace each parameter's gradient by its sum over the ranks (one flat all-reduce;
    a parameter without a gradient contributes zeros and keeps none if no rank has one)."""
    if world().size <= 1:
        return
    params = [p for p in params if p.requires_grad]
    if not params:
        return
    flags = torch.tensor([p.grad is not None for p in params], dtype=torch.int32)
    dist.all_reduce(flags)
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                      .to(torch.float64) for p in params])
    dist.all_reduce(flat)
    at = 0
    for p, f in zip(params, flags.tolist()):
        k = p.numel()
        if f:
            g = flat[at:at + k].reshape(p.shape).to(p.dtype)
            if p.grad is None:
                p.grad = g
            else:
                p.grad.copy_(g)
        at += k


def barrier() -> None:
    if world().size > 1:
        dist.barrier()


__all__ = ["Shard", "World", "barrier", "init_from_env", "shard", "sum_gradients", "total",
           "world"]
