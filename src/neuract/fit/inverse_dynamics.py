"""Supervised training of learned inverse-dynamics models (:mod:`neuract.models`).

Loss: mean over joints of the squared torque error divided by that joint's torque variance
(the normalised MSE the benchmarks report, :func:`neuract.models.training.nmse`), plus an
optional model-specific extra term. Minibatches of a seeded permutation per epoch, Adam with
cosine decay; the loop is :class:`neuract.fit.loop.Trainer`, so with ``checkpoint`` set the
training state is written every ``checkpoint_every`` epochs and a rerun resumes from it to the
same result.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from neuract.errors import ConfigError
from neuract.fit.loop import StateFile, Trainer
from neuract.models.base import DynamicsModel, check_finite

ExtraLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclasses.dataclass
class _Options:
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    seed: int
    normalize: bool


def fit_inverse_model(
    model: DynamicsModel,
    q: torch.Tensor,
    qd: torch.Tensor,
    qdd: torch.Tensor,
    tau: torch.Tensor,
    epochs: int = 200,
    batch_size: int = 512,
    lr: float = 3e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
    extra_loss: ExtraLoss | None = None,
    normalize: bool = True,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 1,
    progress: Callable[[int, int, dict[str, Any]], None] | None = None,
) -> list[float]:
    """Train ``model.inverse`` on (N, n_dof) samples with Adam + cosine decay.

    Calls ``model.set_normalization`` first when the model has one. Returns the mean loss of
    each epoch. checkpoint: training-state file, written every ``checkpoint_every`` epochs
    and at the end; if it exists, training resumes from it (a state of other options, data,
    model or start weights is refused, naming what differs). progress(step, total, info)
    after each minibatch step.
    """
    for name, x in (("q", q), ("qd", qd), ("qdd", qdd), ("tau", tau)):
        check_finite(name, x)
    for name, v in (("epochs", epochs), ("batch_size", batch_size),
                    ("checkpoint_every", checkpoint_every)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "epochs" else 1):
            raise ConfigError(f"fit_inverse_model: {name} = {v!r}; expected an integer >= "
                              f"{0 if name == 'epochs' else 1}")
    if normalize and hasattr(model, "set_normalization"):
        model.set_normalization(q, qd, qdd, tau)
    gen = torch.Generator().manual_seed(seed)
    w = 1.0 / tau.var(0).clamp_min(1e-8)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    n = q.shape[0]
    per_epoch = (n + batch_size - 1) // batch_size
    steps = max(1, epochs * per_epoch)
    state = None
    if checkpoint:
        opts = _Options(epochs, batch_size, lr, weight_decay, seed, normalize)
        state = StateFile(checkpoint, _run_key(model, opts, extra_loss, (q, qd, qdd, tau)),
                          "inverse_model_fit", every=checkpoint_every * per_epoch,
                          resume_hint="rerun with that run's options, data and model",
                          restart_hint="delete the file", wording="then-now",
                          what="training state")
    history: list[float] = []
    epoch_sum = [0.0]
    trainer = Trainer(
        model, opt, epochs * per_epoch, clip=params, torch_rng=gen, state=state,
        schedule=lambda o, start: torch.optim.lr_scheduler.CosineAnnealingLR(
            o, steps, eta_min=lr * 0.02, last_epoch=start - 1),
        nonfinite=lambda i: (f"non-finite inverse-model loss at step {i} (epoch {i // per_epoch})"
                             "; lower lr"),
        loop_state=lambda: {"history": history}, restore=lambda st: history.extend(st["history"]))
    loss = _batch_loss(model, (q, qd, qdd, tau), w, gen, batch_size, per_epoch, extra_loss)

    def record(step: int, info: dict[str, Any]) -> None:
        epoch_sum[0] += info["loss"] * info["samples"]
        if step % per_epoch == 0:  # an epoch's last minibatch
            history.append(epoch_sum[0] / n)
            epoch_sum[0] = 0.0

    trainer.run(loss, record=record,
                progress=(lambda s, i: progress(s, trainer.steps, i)) if progress else None)
    return history


def _batch_loss(model: DynamicsModel, data: tuple[torch.Tensor, ...], w: torch.Tensor,
                gen: torch.Generator, batch_size: int, per_epoch: int,
                extra_loss: ExtraLoss | None):
    """The loss of step ``i``: minibatch ``i % per_epoch`` of the epoch's permutation, drawn
    from ``gen`` at the epoch's first step (a training state is only written at an epoch's
    end, so a resumed run draws the same permutations)."""
    q, qd, qdd, tau = data
    n = q.shape[0]
    perm: list[torch.Tensor] = []

    def loss(i: int) -> tuple[torch.Tensor, dict[str, Any]]:
        b = i % per_epoch
        if b == 0:
            perm[:] = [torch.randperm(n, generator=gen)]
        elif not perm:
            raise RuntimeError(f"step {i} resumed inside an epoch")  # states: epoch ends only
        idx = perm[0][b * batch_size:(b + 1) * batch_size]
        pred = model.inverse(q[idx], qd[idx], qdd[idx])
        value = (((pred - tau[idx]) ** 2) * w).mean()
        if extra_loss is not None:
            value = value + extra_loss(q[idx], qd[idx], qdd[idx])
        return value, {"epoch": i // per_epoch, "loss": float(value.detach()),
                       "samples": len(idx)}

    return loss


def _digest(tensors: dict[str, torch.Tensor] | tuple[torch.Tensor, ...]) -> str:
    h = hashlib.sha256()
    items = tensors.items() if isinstance(tensors, dict) else enumerate(tensors)
    for k, v in items:
        h.update(str(k).encode() + v.detach().double().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def _run_key(model: DynamicsModel, opts: _Options, extra_loss: ExtraLoss | None,
             data: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    """What a resumed run must share with the run that wrote the state: the options, the
    extra loss (by name), the model's class and start weights (after normalisation) and the
    data (sample count and a checksum)."""
    extra = None if extra_loss is None else getattr(extra_loss, "__qualname__",
                                                    type(extra_loss).__name__)
    return {**dataclasses.asdict(opts), "extra_loss": extra,
            "model": type(model).__name__, "initial_weights_sha256": _digest(model.state_dict()),
            "data": {"samples": int(data[0].shape[0]), "sha256": _digest(data)}}


__all__ = ["fit_inverse_model"]
