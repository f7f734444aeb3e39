"""Progress reporting of the experiments and verbs: the ``progress(stage, done, total)``
callback they take, and the one reporter every verb draws it with (:mod:`neuract.progress`:
rich bars on a terminal, plain timed lines with elapsed time and ETA in a log, on stderr)."""

from __future__ import annotations

from neuract.progress import (
    ProgressFn,
    Reporter,
    no_progress,
    note,
    reporter,
    resumed,
    with_loss,
)

__all__ = ["ProgressFn", "Reporter", "no_progress", "note", "reporter", "resumed", "with_loss"]
