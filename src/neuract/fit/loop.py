"""The one training loop of neuract: a trainer supplies its loss and data, this loop the rest.

Every trainer (actuator identification :func:`neuract.fit.trainer.fit`, NeuralActuator
:func:`neuract.neuralactuator.train.train_neuralactuator`, the recurrent contact gate
:func:`neuract.estimate.gate_rnn.train_gate_rnn`, learned dynamics models
:func:`neuract.fit.inverse_dynamics.fit_inverse_model`) builds its model, optimiser and
random streams, then hands :class:`Trainer` a loss function ``loss(i) -> (loss, info)`` that
draws the data of step ``i`` (0-based) and computes its loss. The trainer owns:

* the step: a non-finite loss is an error, then backward, gradient clipping (optionally a
  step with a non-finite gradient is skipped and counted), the optimiser and schedule steps;
* evaluation every ``Evaluation.every`` steps and at the last: the best score's weights are
  kept, and with a patience the training stops early;
* the callbacks: ``record(step, info)`` before the state is written, ``progress(step, info)``
  after it;
* a wall-time limit (``max_seconds``: the step reached is evaluated and saved, then training
  stops) and ``stop_after`` (stop as if killed after that many steps of this call; tests);
* the training state (:class:`StateFile`): one safetensors file written atomically every
  ``every`` steps, at the last step, on an early or a timed stop
  (:func:`neuract.fit.checkpoint.save_training`): weights, optimiser state, the torch and
  numpy random streams, the step reached, the training time, the best evaluation and its
  weights, the trainer's own records (``loop_state``) and the run's key (the options and data
  that change the result). A state found when training starts is checked first
  (:func:`neuract.fit.checkpoint.check_run_key`: another kind of training, an older state
  format or another key is refused, naming each option that differs, before anything of it is
  loaded) and training resumes from it to the same result as an uninterrupted run; the
  run's progress reporter (:mod:`neuract.progress`) says so.

Under ``torchrun`` (:mod:`neuract.scale.ddp`) only rank 0 writes the training state (every
rank resumes from it). A trainer whose ``loss(i)`` returns the rank's part of step ``i``'s
loss (the parts add up to the loss of the whole batch) says so with ``split_batch=True``: the
loop then sums the gradients over the ranks before clipping and stepping and checks the summed
loss. Without it every rank computes the whole batch, as one process would.

A schedule is built after the resume, from the step reached (``schedule(optimizer, step)``),
as torch's schedulers resume with ``last_epoch = step - 1``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from neuract import progress as _progress
from neuract.errors import CheckpointError, ConfigError
from neuract.fit.checkpoint import (
    STATE_FORMAT,
    check_run_key,
    load_training,
    normalise_key,
    read_training_state,
    read_training_tensors,
    save_training,
)
from neuract.scale import ddp

LossFn = Callable[[int], tuple[Tensor, dict[str, Any]]]
Schedule = Callable[[torch.optim.Optimizer, int], Any]


@dataclass
class StateFile:
    """Where a training loop keeps its resumable state, and what a resumed run must share."""

    path: str | Path
    key: dict[str, Any]
    """the run's options and data fingerprint (JSON-ready); a state with another is refused"""
    kind: str
    """the kind of training (a state of another kind is refused)"""
    every: int = 1
    """steps between states (also written at the last step and on a stop)"""
    resume_hint: str = "rerun with the original options and data"
    restart_hint: str = "delete it or use another checkpoint directory"
    option: Callable[[str], str] | None = None
    """names a key field as the user's option in a refusal"""
    wording: str = "checkpoint"
    """how a refusal shows a difference (see :func:`~neuract.fit.checkpoint.check_run_key`)"""
    what: str = "training checkpoint"
    """how a refusal calls the file"""


@dataclass
class Evaluation:
    """Scoring during training, keep-best and early stopping."""

    every: int
    score: Callable[[int], tuple[float, dict[str, Any]]]
    """score(step) -> (score, info); info joins the step's info"""
    higher_is_better: bool = False
    patience: int = 0
    """evaluations without improvement before training stops (0: never)"""
    counts: Callable[[int], bool] | None = None
    """whether a non-improving evaluation at ``step`` counts toward the patience (default:
    every one)"""
    keep: nn.Module | None = None
    """the module whose weights at the best score are kept (in the state too)"""
    on_best: Callable[[int, float], None] | None = None


@dataclass
class Outcome:
    """What a call of :meth:`Trainer.run` reached."""

    step: int
    seconds: float
    """training time up to now, the time before an interruption included"""
    interrupted: bool
    """stopped by ``stop_after`` or the wall-time limit before the last step"""
    early_stop: bool
    best: dict[str, Any]
    """``score`` (inf / -inf: none yet), ``step`` (-1: none), ``bad_evals``"""
    skipped: int
    """steps skipped for a non-finite gradient"""


class Trainer:
    """One training loop (see the module): ``Trainer(...).run(loss)``."""

    def __init__(self, module: nn.Module, optimizer: torch.optim.Optimizer, steps: int, *,
                 grad_clip: float | None = None, clip: Sequence[Tensor] | None = None,
                 schedule: Schedule | None = None, torch_rng: torch.Generator | None = None,
                 numpy_rng: np.random.Generator | None = None, state: StateFile | None = None,
                 evaluation: Evaluation | None = None, skip_nonfinite_grads: bool = False,
                 max_seconds: float = 0.0, clock: Callable[[], float] = time.perf_counter,
                 nonfinite: Callable[[int], str] | None = None,
                 loop_state: Callable[[], dict[str, Any]] | None = None,
                 restore: Callable[[dict[str, Any]], None] | None = None,
                 log: Callable[[str], None] | None = None, split_batch: bool = False) -> None:
        self.module, self.optimizer, self.steps = module, optimizer, steps
        self.split_batch = split_batch
        self.grad_clip = grad_clip
        self.clip = list(clip) if clip is not None else list(module.parameters())
        self.schedule, self.scheduler = schedule, None
        self.torch_rng, self.numpy_rng = torch_rng, numpy_rng
        self.state, self.evaluation = state, evaluation
        self.skip_nonfinite_grads, self.max_seconds = skip_nonfinite_grads, max_seconds
        self.clock, self.log = clock, log
        self.nonfinite = nonfinite or (lambda i: f"non-finite training loss at step {i}")
        self.loop_state, self.restore = loop_state, restore
        self.step, self.seconds, self.skipped, self.early_stop = 0, 0.0, 0, False
        worst = -math.inf if evaluation and evaluation.higher_is_better else math.inf
        self.best: dict[str, Any] = {"score": worst, "step": -1, "bad_evals": 0}
        self.best_weights: dict[str, Tensor] | None = None
        self._resumed = False
        self.loaded = False
        """whether :meth:`resume` loaded a training state"""
        if state is not None:
            state.key = normalise_key(state.key)

    # -- the state file --------------------------------------------------------------------

    def resume(self) -> int:
        """Load the training state if the state file exists (refusing another run's, before
        anything of it is loaded); returns the step to continue at (0: afresh)."""
        if self._resumed:
            return self.step
        self._resumed = True
        sf = self.state
        if sf is None or not Path(sf.path).is_file():
            return 0
        st = read_training_state(sf.path)
        check_run_key(sf.path, st, sf.key, sf.resume_hint, sf.restart_hint, sf.option,
                      kind=sf.kind, wording=sf.wording, what=sf.what)
        best = st.get("best", self.best)
        if best["step"] >= 0 and self.evaluation and self.evaluation.keep is not None:
            self.best_weights = read_training_tensors(sf.path, "best.")
            if not self.best_weights:
                raise CheckpointError(f"{sf.what} {str(sf.path)!r} lacks the best weights of "
                                      f"its step {best['step']}; not resumed")
        st = load_training(sf.path, self.module, self.optimizer, self.torch_rng)
        self.loaded = True
        if self.numpy_rng is not None:
            self.numpy_rng.bit_generator.state = st["numpy_rng"]
        self.step, self.skipped = int(st["step"]), int(st.get("skipped", 0))
        self.seconds = float(st.get("seconds", 0.0))  # unknown: counted as 0
        self.early_stop = bool(st.get("early_stop", False))
        self.best = best
        if self.restore is not None:
            self.restore(st.get("loop", {}))
        _progress.resumed(sf.path, self.step, self.steps)  # said by the run's reporter, if any
        return self.step

    def save(self) -> None:
        """Write the training state now (atomically)."""
        sf = self.state
        if sf is None or not ddp.world().writer:  # rank 0 alone writes
            return
        st: dict[str, Any] = {"format": STATE_FORMAT, "kind": sf.kind, "key": sf.key,
                              "step": self.step, "seconds": self.seconds,
                              "skipped": self.skipped, "early_stop": self.early_stop,
                              "best": self.best}
        if self.numpy_rng is not None:
            st["numpy_rng"] = self.numpy_rng.bit_generator.state
        if self.loop_state is not None:
            st["loop"] = self.loop_state()
        Path(sf.path).parent.mkdir(parents=True, exist_ok=True)
        save_training(sf.path, self.module, self.optimizer, self.torch_rng, st,
                      best=self.best_weights)

    # -- the loop --------------------------------------------------------------------------

    def run(self, loss: LossFn, record: Callable[[int, dict[str, Any]], None] | None = None,
            progress: Callable[[int, dict[str, Any]], None] | None = None,
            stop_after: int | None = None) -> Outcome:
        """Train from the step reached (resuming first) to ``steps``; see the module."""
        self.resume()
        if self.schedule is not None and self.scheduler is None:
            self.scheduler = self.schedule(self.optimizer, self.step)
        t_start = self.clock()
        t_base = t_start - self.seconds  # the training time of a resumed state counts
        done_here, interrupted = 0, False
        while self.step < self.steps and not self.early_stop:
            i = self.step
            value, info = loss(i)
            finite = (math.isfinite(ddp.total(value)) if self._summed()  # every rank alike
                      else bool(torch.isfinite(value)))
            if not finite:
                raise ConfigError(self.nonfinite(i))
            self._update(value, i)
            self.step = i + 1
            timed_out = bool(self.max_seconds) and self.clock() - t_start > self.max_seconds
            last = self.step == self.steps
            ev = self.evaluation
            if ev is not None and (self.step % ev.every == 0 or last or timed_out):
                self._evaluate(info)
            if record is not None:
                record(self.step, info)
            self.seconds = self.clock() - t_base
            if self.state is not None and (self.step % self.state.every == 0 or last
                                           or self.early_stop or timed_out):
                self.save()
            if progress is not None:
                progress(self.step, info)
            done_here += 1
            if stop_after is not None and done_here >= stop_after:
                interrupted = True  # as if killed here
                break
            if timed_out:
                interrupted = not last
                break
        self.seconds = self.clock() - t_base
        return Outcome(self.step, self.seconds, interrupted, self.early_stop, dict(self.best),
                       self.skipped)

    def _update(self, value: Tensor, i: int) -> None:
        """Backward, clip and step (a non-finite gradient skips the step, if so configured)."""
        self.optimizer.zero_grad()
        value.backward()
        if self._summed():
            ddp.sum_gradients(p for g in self.optimizer.param_groups for p in g["params"])
        if self.skip_nonfinite_grads:
            grads = [p.grad for p in self.clip if p.grad is not None]
            if not all(torch.isfinite(g).all() for g in grads):
                self.skipped += 1
                if self.log is not None:
                    self.log(f"step {i + 1}: non-finite gradient, step skipped "
                             f"({self.skipped} so far)")
                return
        if self.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.clip, self.grad_clip)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()

    def _summed(self) -> bool:
        """whether the ranks' parts of each step are summed (see the module)"""
        return self.split_batch and ddp.world().size > 1

    def _evaluate(self, info: dict[str, Any]) -> None:
        ev = self.evaluation
        assert ev is not None
        score, extra = ev.score(self.step)
        info.update(extra)
        old = self.best["score"]
        if (score > old) if ev.higher_is_better else (score < old):
            self.best = {"score": score, "step": self.step, "bad_evals": 0}
            if ev.keep is not None:
                self.best_weights = {k: v.detach().clone()
                                     for k, v in ev.keep.state_dict().items()}
            if ev.on_best is not None:
                ev.on_best(self.step, score)
        elif ev.patience and (ev.counts is None or ev.counts(self.step)):
            self.best["bad_evals"] += 1
            if self.best["bad_evals"] >= ev.patience:
                self.early_stop = True
                info["early_stop"] = True

    def restore_best(self) -> bool:
        """Load the kept best weights into ``Evaluation.keep``; False if there are none."""
        ev = self.evaluation
        if ev is None or ev.keep is None or self.best_weights is None:
            return False
        ev.keep.load_state_dict(self.best_weights)
        return True


__all__ = ["Evaluation", "Outcome", "StateFile", "Trainer"]
