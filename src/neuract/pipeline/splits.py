"""How an experiment divides its episodes: training / test split by task, the estimator's
calibration episodes held out of its training, and the episodes a threshold is set on."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from neuract.errors import ConfigError


def split_by_task(trajs: Sequence[Any], test_fraction: float) -> tuple[list, list]:
    """Hold out the last ``ceil(test_fraction * n)`` episodes of every task, and of its
    degraded-motor episodes apart (episodes are whole: no window of a test episode is ever
    seen in training)."""
    if not 0 < test_fraction < 1:
        raise ConfigError(f"test_fraction = {test_fraction}; expected 0 < f < 1")
    by_task: dict[tuple, list] = {}
    for tr in trajs:  # degraded-motor episodes are held out apart, so both classes are tested
        bad = bool(np.asarray(tr.get("condition", [0])).any())
        by_task.setdefault((str(tr.meta.labels.get("task", "?")), bad), []).append(tr)
    train, test = [], []
    for _task, eps in by_task.items():
        k = max(1, math.ceil(test_fraction * len(eps))) if len(eps) > 1 else 0
        train += eps[:len(eps) - k]
        test += eps[len(eps) - k:]
    return train, test


def check_split(train: Sequence[Any], test: Sequence[Any]) -> None:
    """Refuse an experiment without training or test episodes, saying what to change (the
    verbs call it once the data is split, before they write anything)."""
    if not train or not test:
        raise ConfigError(
            f"need training and test episodes; got {len(train)} and {len(test)}: a task's last "
            "episodes are held out for testing only where it has at least two (its "
            "degraded-motor episodes apart), and at least one is kept for training; give more "
            "episodes of each task (more minutes of data, or fewer tasks), a smaller test "
            "fraction where one is set, or label a dataset's test episodes split=test")


def check_calibration_fraction(fraction: float) -> None:
    if not 0 <= fraction < 1:
        raise ConfigError(f"ExperimentConfig.calibration_fraction = {fraction} "
                          "(--experiment.calibration-fraction); expected 0 <= f < 1")


def calibration_split(train: Sequence[Any], fraction: float) -> tuple[Sequence, Sequence]:
    """(episodes the estimator trains on, episodes its thresholds are calibrated on): the
    last ``fraction`` of each task's training episodes held out (0, or nothing to hold out:
    both are ``train`` itself)."""
    check_calibration_fraction(fraction)
    if fraction == 0:
        return train, train
    fit, held = split_by_task(train, fraction)
    return fit, held or train


def has_contact(tr: Any) -> bool:
    """Whether an episode has a contact label with some contact."""
    return "contact" in tr and bool(np.asarray(tr["contact"]).any())


def calibration_set(calib: Sequence[Any], train: Sequence[Any], positive, min_each: int = 2
                    ) -> Sequence[Any] | None:
    """``calib`` if it holds at least ``min_each`` positive and negative episodes, else
    ``train`` if it does, else None (a decision threshold cannot be set from one episode of a
    class: the default threshold is kept)."""
    for eps in (calib, train):
        pos = sum(1 for tr in eps if positive(tr))
        if min(pos, len(eps) - pos) >= min_each:
            return eps
    return None


__all__ = ["calibration_set", "calibration_split", "check_calibration_fraction", "check_split",
           "has_contact", "split_by_task"]
