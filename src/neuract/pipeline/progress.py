"""Progress reporting of the experiments and verbs: the ``progress(stage, done, total)``
callback they take, and the bars the verbs draw with it."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

ProgressFn = Callable[[str, int, int], None]
"""``progress(stage, done, total)``."""


def no_progress(stage: str, done: int, total: int) -> None:
    """The progress callback that reports nothing."""


def progress_bar(quiet: bool):
    """(rich Progress, progress(stage, done, total) callback): one bar per stage, on stderr."""
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                   TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                   console=Console(stderr=True, quiet=quiet), disable=quiet)
    tasks: dict[str, int] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=max(total, 1))
        bar.update(tasks[stage], completed=done, total=max(total, 1))

    return bar, progress


__all__ = ["ProgressFn", "no_progress", "progress_bar"]
