"""Drift monitor: compare tracking/prediction error distributions over time windows.

A window drifts from the reference when the two-sample Kolmogorov-Smirnov test rejects
equality (p < alpha) AND the change is large enough to matter: the mean moved by more than
``min_shift`` reference standard deviations, or the spread grew by more than that factor.
A retrain is due after ``patience`` consecutive drifting windows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from neuract.errors import ConfigError, SchemaError


@dataclass
class DriftReport:
    """One window's verdict; ``mean_shift`` is in reference standard deviations."""

    window: int
    n: int
    ks_stat: float
    p_value: float
    mean_shift: float
    std_ratio: float
    drift: bool

    def to_dict(self) -> dict:
        return asdict(self)


class DriftMonitor:
    """reference: 1-D errors from the period the model was validated on (e.g. |e| [rad] or
    torque residuals [N m])."""

    def __init__(
        self, reference, alpha: float = 0.01, min_shift: float = 0.25, patience: int = 2
    ) -> None:
        ref = np.asarray(reference, dtype=float).ravel()
        if ref.size < 20 or not np.isfinite(ref).all():
            raise SchemaError(f"reference errors: need >= 20 finite values, got {ref.size}")
        if not 0 < alpha < 1 or min_shift <= 0 or patience < 1:
            raise ConfigError(
                f"alpha={alpha} (0..1), min_shift={min_shift} (>0), patience={patience} (>=1)"
            )
        self.ref = ref
        self.mu, self.sigma = float(ref.mean()), float(ref.std() + 1e-12)
        self.alpha, self.min_shift, self.patience = alpha, min_shift, patience
        self.history: list[DriftReport] = []

    def check(self, errors) -> DriftReport:
        """Compare one window of errors with the reference and record the verdict."""
        x = np.asarray(errors, dtype=float).ravel()
        if x.size < 5 or not np.isfinite(x).all():
            raise SchemaError(f"window errors: need >= 5 finite values, got {x.size}")
        ks = stats.ks_2samp(self.ref, x)
        shift = (float(x.mean()) - self.mu) / self.sigma
        ratio = float(x.std()) / self.sigma
        big = abs(shift) > self.min_shift or ratio > 1 + self.min_shift
        rep = DriftReport(len(self.history), int(x.size), float(ks.statistic),
                          float(ks.pvalue), shift, ratio, bool(ks.pvalue < self.alpha and big))
        self.history.append(rep)
        return rep

    @property
    def retrain_due(self) -> bool:
        """True when the last ``patience`` windows all drifted."""
        last = self.history[-self.patience:]
        return len(last) == self.patience and all(r.drift for r in last)

    def scan(self, errors, window: int) -> list[DriftReport]:
        """Split a 1-D error series into consecutive windows of ``window`` samples and check
        each (a trailing partial window is dropped)."""
        x = np.asarray(errors, dtype=float).ravel()
        return [self.check(x[i:i + window]) for i in range(0, len(x) - window + 1, window)]


__all__ = ["DriftMonitor", "DriftReport"]
