"""Progress of a verb's run, on stderr, for a person at a terminal and for a log file alike.

A :class:`Reporter` is the ``progress(stage, done, total)`` callback every verb hands its
stages (``loss=`` where a training knows one), and a context manager around the run:

* on a terminal (stderr a TTY) it draws a rich bar per stage (done/total, elapsed, remaining
  time, the last loss);
* with no terminal (redirected to a file, piped, run under a scheduler) it prints plain lines,
  ``stage | step k/N | loss x | elapsed 1m02s | ETA 3m10s``: at a stage's first step, then at
  most every ``interval`` seconds (default 30, or ``$NEURACT_PROGRESS_INTERVAL``), and a
  closing line when the stage ends (``done``). The ETA is the stage's remaining steps at its
  rate so far in this run. No terminal control characters are written.

Messages beside the bars (``note``): a training resumed from its saved state says so
(:func:`resumed`, called by :class:`neuract.fit.loop.Trainer` and the verbs' own resumable
loops), through whichever reporter is active, so library code needs no handle on it. With
``quiet`` nothing is written. Results a verb prints (tables, summaries) stay on stdout; all of
this goes to stderr.
"""

from __future__ import annotations

import contextvars
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from neuract.errors import ConfigError

ProgressFn = Callable[[str, int, int], None]
"""``progress(stage, done, total)``."""

INTERVAL_ENV = "NEURACT_PROGRESS_INTERVAL"
"""environment variable: seconds between two plain progress lines of a stage (default 30;
0: a line at every step)"""
DEFAULT_INTERVAL = 30.0

_ACTIVE: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar(
    "neuract_progress", default=None)


def no_progress(stage: str, done: int, total: int) -> None:
    """The progress callback that reports nothing."""


def interval_from_env() -> float:
    """Seconds between plain progress lines: ``$NEURACT_PROGRESS_INTERVAL``, else 30."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"${INTERVAL_ENV} = {raw!r}; accepted: seconds >= 0 between two "
                          "progress lines (0: every step; unset: 30)")
    return value


def duration(seconds: float) -> str:
    """``45s``, ``1m02s``, ``2h05m``: a duration as a progress line shows it."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class _Stage:
    start: float
    """when the stage's first step was reported"""
    done0: int
    """the step it was at then (a resumed training starts past 0)"""
    done: int = 0
    total: int = 0
    loss: float | None = None
    printed: float = -math.inf
    """when its last line was printed"""
    shown: bool = True
    """whether its current state has been printed"""
    ended: bool = False


class Reporter:
    """The progress of one run (see the module): call it as ``progress(stage, done, total,
    loss=None)``; use it as a context manager around the run.

    quiet: write nothing. stream: where to write (default: stderr). tty: draw rich bars
    (default: whether the stream is a terminal). interval: seconds between two plain lines of
    a stage (default :func:`interval_from_env`). clock: seconds, monotonic (tests pass a fake).
    """

    def __init__(self, quiet: bool = False, *, stream: TextIO | None = None,
                 tty: bool | None = None, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty()) if callable(isatty) else False
        self.tty = tty
        self.interval = interval_from_env() if interval is None else float(interval)
        if not (math.isfinite(self.interval) and self.interval >= 0):
            raise ConfigError(f"progress interval {interval!r}; accepted: seconds >= 0")
        self.clock = clock
        self._stages: dict[str, _Stage] = {}
        self._current: str | None = None
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}
        self._token: contextvars.Token | None = None

    # -- the run ----------------------------------------------------------------------------

    def __enter__(self) -> Reporter:
        self._token = _ACTIVE.set(self)
        if self.tty and not self.quiet:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(),
                TextColumn("{task.completed}/{task.total}"), TextColumn("{task.fields[loss]}"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=Console(file=self.stream, force_terminal=True))
            self._bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._bar is not None:
                self._bar.stop()
                self._bar = None
            elif self._current is not None and not self.quiet:
                self._flush(self._current, self.clock())
        finally:
            if self._token is not None:
                _ACTIVE.reset(self._token)
                self._token = None

    # -- reporting --------------------------------------------------------------------------

    def __call__(self, stage: str, done: int, total: int, loss: float | None = None) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._draw(stage, done, total, loss)
            return
        now = self.clock()
        if self._current is not None and self._current != stage:
            self._flush(self._current, now, force=False)
        self._current = stage
        st = self._stages.get(stage)
        end = 0 < total <= done
        fresh = st is None or (st.ended and not end)  # new, or a stage run again
        if fresh:
            st = self._stages[stage] = _Stage(start=now, done0=done)
        st.done, st.total, st.shown = done, total, False
        if loss is not None:
            st.loss = float(loss)
        if end:
            if st.ended:
                st.shown = True  # its closing line is out
            else:
                st.ended = True
                self._line(stage, st, now)
        elif fresh or now - st.printed >= self.interval:
            self._line(stage, st, now)

    def note(self, message: str) -> None:
        """A message beside the progress (on stderr; nothing when quiet)."""
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.console.print(message, markup=False, highlight=False)
        else:
            print(message, file=self.stream, flush=True)

    # -- helpers ----------------------------------------------------------------------------

    def format(self, stage: str, st: _Stage, now: float) -> str:
        """The plain line of a stage at time ``now``."""
        parts = [stage, f"step {st.done}/{st.total}" if st.total > 0 else f"step {st.done}"]
        if st.loss is not None:
            parts.append(f"loss {st.loss:.4g}")
        elapsed = now - st.start
        parts.append(f"elapsed {duration(elapsed)}")
        if st.ended:
            parts.append("done")
        else:
            steps = st.done - st.done0
            if st.total > 0 and steps > 0 and elapsed > 0:
                parts.append(f"ETA {duration((st.total - st.done) * elapsed / steps)}")
            else:
                parts.append("ETA --")
        return " | ".join(parts)

    def _line(self, stage: str, st: _Stage, now: float) -> None:
        st.printed, st.shown = now, True
        print(self.format(stage, st, now), file=self.stream, flush=True)

    def _flush(self, stage: str, now: float, force: bool = True) -> None:
        """A stage left: its last state, if not yet shown (when another stage begins, only
        once its interval has passed, so that stages taking turns do not print every step)."""
        st = self._stages[stage]
        if not st.shown and (force or now - st.printed >= self.interval):
            self._line(stage, st, now)

    def _draw(self, stage: str, done: int, total: int, loss: float | None) -> None:
        bar = self._bar
        shown = f"loss {loss:.4g}" if loss is not None else ""
        if stage not in self._tasks:
            self._tasks[stage] = bar.add_task(stage, total=max(total, 1), completed=done,
                                              loss=shown)
            return
        fields = {"loss": shown} if loss is not None else {}
        bar.update(self._tasks[stage], completed=done, total=max(total, 1), **fields)


def with_loss(progress: ProgressFn, stage: str, done: int, total: int,
              loss: float | None) -> None:
    """``progress(stage, done, total)``, with the training's ``loss`` where ``progress`` is a
    :class:`Reporter` (a plain callback takes three arguments)."""
    if isinstance(progress, Reporter):
        progress(stage, done, total, loss=loss)
    else:
        progress(stage, done, total)


def reporter(quiet: bool = False, **kw: Any) -> Reporter:
    """A :class:`Reporter` on stderr (use it as ``with reporter(cfg.quiet) as progress:``);
    quiet in the ranks but 0 of a ``torchrun`` training (its environment's ``RANK``), which
    train alike."""
    return Reporter(quiet or os.environ.get("RANK", "0").strip() not in ("", "0"), **kw)


def current() -> Reporter | None:
    """The reporter of the run in progress, if any."""
    return _ACTIVE.get()


def note(message: str) -> None:
    """Say ``message`` through the active reporter (nothing when none is active)."""
    rep = _ACTIVE.get()
    if rep is not None:
        rep.note(message)


def resumed(path: Any, step: int, total: int | None = None, unit: str = "step") -> None:
    """Announce that a training resumed from its saved state ``path`` at ``step``."""
    of = f" of {total}" if total else ""
    note(f"resumed from {path} at {unit} {step}{of}")


__all__ = ["DEFAULT_INTERVAL", "INTERVAL_ENV", "ProgressFn", "Reporter", "current", "duration",
           "interval_from_env", "no_progress", "note", "reporter", "resumed", "with_loss"]
