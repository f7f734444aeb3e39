"""Motor-condition baselines: threshold, SVM and random forest on windowed telemetry features.

All classifiers share one interface (``fit(features, labels) -> self``, ``predict_proba(features)
-> (N, K)``, ``predict(features) -> (N,)``) and are registered by name in
:data:`CONDITION_BASELINES` (``threshold``, ``svm``, ``random_forest``). Labels are integer
classes (0 normal, 1 degraded, ...). The SVM and random forest use scikit-learn (the
``peers`` extra), imported when a model is fitted.

Features (:func:`window_features`): trajectories are cut into windows of ``window`` samples
every ``stride`` samples; per joint and window the statistics in :data:`FEATURES` are computed
from the channels present (``effort`` is ``current`` [A] when present, else ``load``):

- ``err_mean``, ``err_rms``: mean |q_goal - q| and RMS of the tracking error [rad]
- ``effort_mean``, ``effort_rms``: mean |effort| and its RMS
- ``effort_per_err``: mean |effort| / (mean |tracking error| + 1e-3 rad)
- ``vel_rms``: RMS joint velocity [rad/s]; ``temp_mean``: mean temperature [degC]
- ``effort_per_tau``: mean |effort| / (mean |tau| + 1e-3 N m), only where ``tau`` is measured

A window's label is its majority ``condition`` (ties go to the larger class).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from neuract.errors import ConfigError, SchemaError
from neuract.registry import Registry

__all__ = [
    "CONDITION_BASELINES",
    "FEATURES",
    "ConditionClassifier",
    "RandomForestCondition",
    "SVMCondition",
    "ThresholdCondition",
    "WindowFeatures",
    "condition_estimator",
    "make_condition_baseline",
    "window_features",
]

FEATURES = ("err_mean", "err_rms", "effort_mean", "effort_rms", "effort_per_err", "vel_rms",
            "temp_mean", "effort_per_tau")


# -------------------------------------------------------------------------- features
@dataclass(frozen=True)
class WindowFeatures:
    """features: (N, F); labels: (N,) int or None; names: F feature names ``joint:stat``;
    traj_index, start: (N,) trajectory and first sample of each window."""

    features: np.ndarray
    labels: np.ndarray | None
    names: tuple[str, ...]
    traj_index: np.ndarray
    start: np.ndarray


def _stats(tr, sl: slice) -> dict[str, np.ndarray]:
    q = np.asarray(tr["q"])[sl]
    out: dict[str, np.ndarray] = {}
    if "q_goal" in tr:
        e = np.abs(np.asarray(tr["q_goal"])[sl] - q)
        out["err_mean"] = e.mean(0)
        out["err_rms"] = np.sqrt((e**2).mean(0))
    effort = tr.get("current", tr.get("load"))
    if effort is not None:
        a = np.abs(np.asarray(effort)[sl])
        out["effort_mean"] = a.mean(0)
        out["effort_rms"] = np.sqrt((a**2).mean(0))
        if "err_mean" in out:
            out["effort_per_err"] = out["effort_mean"] / (out["err_mean"] + 1e-3)
        if "tau" in tr:
            out["effort_per_tau"] = out["effort_mean"] / (
                np.abs(np.asarray(tr["tau"])[sl]).mean(0) + 1e-3)
    if "qd" in tr:
        out["vel_rms"] = np.sqrt((np.asarray(tr["qd"])[sl] ** 2).mean(0))
    if "temperature" in tr:
        out["temp_mean"] = np.asarray(tr["temperature"])[sl].mean(0)
    return out


def window_features(trajs: Iterable, window: int = 64, stride: int = 32,
                    stats: Sequence[str] | None = None) -> WindowFeatures:
    """Per-joint statistics over windows of telemetry (see the module docstring).

    trajs: :class:`~neuract.data.Trajectory` objects with the same joints; stats: the
    statistics to use (default: every one in :data:`FEATURES` that all trajectories support).
    Labels come from the ``condition`` channel when every trajectory has it, else None.
    """
    if window < 1 or stride < 1:
        raise ConfigError(f"window ({window}) and stride ({stride}) must be >= 1")
    trajs = list(trajs)
    if not trajs:
        raise ConfigError("window_features needs at least one trajectory")
    joints = tuple(trajs[0].meta.joint_names)
    rows, labels, tix, starts = [], [], [], []
    chosen: list[str] | None = list(stats) if stats is not None else None
    unknown = sorted(set(chosen or ()) - set(FEATURES))
    if unknown:
        raise ConfigError(f"unknown feature statistic(s) {unknown}; accepted: {list(FEATURES)}")
    have_labels = all("condition" in tr for tr in trajs)
    per_window: list[dict[str, np.ndarray]] = []
    for i, tr in enumerate(trajs):
        if tuple(tr.meta.joint_names) != joints:
            raise SchemaError(f"trajectory {tr.meta.name!r} has joints {tr.meta.joint_names}; "
                              f"expected {list(joints)}")
        for s in range(0, len(tr) - window + 1, stride):
            sl = slice(s, s + window)
            per_window.append(_stats(tr, sl))
            tix.append(i)
            starts.append(s)
            if have_labels:
                c = np.asarray(tr["condition"])[sl].astype(np.int64)
                counts = np.bincount(c)
                labels.append(int(len(counts) - 1 - np.argmax(counts[::-1])))
    if not per_window:
        raise SchemaError(f"no trajectory is at least window = {window} samples long")
    common = [k for k in FEATURES if all(k in w for w in per_window)]
    if chosen is None:
        chosen = common
    missing = sorted(set(chosen) - set(common))
    if missing or not chosen:
        raise SchemaError(f"feature statistic(s) {missing or list(FEATURES)} need channels "
                          f"some trajectories lack; available: {common}")
    for w in per_window:
        rows.append(np.concatenate([w[k] for k in chosen]))
    names = tuple(f"{j}:{k}" for k in chosen for j in joints)
    return WindowFeatures(np.asarray(rows, dtype=np.float64),
                          np.asarray(labels, dtype=np.int64) if have_labels else None,
                          names, np.asarray(tix), np.asarray(starts))


# ----------------------------------------------------------------------- classifiers
class ConditionClassifier(Protocol):
    """Common interface of the condition baselines (and of any model compared with them)."""

    def fit(self, features: Any, labels: Any) -> ConditionClassifier: ...

    def predict_proba(self, features: Any) -> np.ndarray: ...

    def predict(self, features: Any) -> np.ndarray: ...


CONDITION_BASELINES: Registry = Registry("condition baseline")


def _check_xy(features: Any, labels: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    X = np.asarray(features, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise SchemaError(f"features have shape {X.shape}; expected (N, F) with N >= 1")
    if not np.isfinite(X).all():
        r, c = np.argwhere(~np.isfinite(X))[0]
        raise SchemaError(f"features[{r}, {c}] is {X[r, c]}; features must be finite")
    if labels is None:
        return X, None
    y = np.asarray(labels)
    if y.shape != (X.shape[0],):
        raise SchemaError(f"labels have shape {y.shape}; expected ({X.shape[0]},) like the "
                          "features")
    if not (np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_) or (y < 0).any():
        raise SchemaError("labels must be non-negative integer classes (0 normal, 1 degraded)")
    if len(np.unique(y)) < 2:
        raise SchemaError(f"labels hold a single class {np.unique(y).tolist()}; a condition "
                          "classifier needs at least two")
    return X, y.astype(np.int64)


def _sklearn(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:  # pragma: no cover - depends on the install
        raise ConfigError(f"this condition baseline needs scikit-learn ({module}); install "
                          "neuract[peers]") from None


class _Base:
    classes_: np.ndarray | None = None

    def _fitted(self) -> None:
        if self.classes_ is None:
            raise ConfigError(f"{type(self).__name__} is not fitted; call fit() first")

    def predict(self, features: Any) -> np.ndarray:
        """(N,) predicted classes (columns of ``predict_proba`` are the classes 0..K-1)."""
        return np.argmax(self.predict_proba(features), axis=1)

    def _full_proba(self, p: np.ndarray) -> np.ndarray:
        """Columns for classes 0..max(class) (a class absent in training gets 0)."""
        out = np.zeros((p.shape[0], int(self.classes_.max()) + 1))
        out[:, self.classes_] = p
        return out


@CONDITION_BASELINES.register("threshold")
class ThresholdCondition(_Base):
    """Binary threshold on one feature: degraded where ``sign * (x - threshold) > 0``.

    feature: column index or name (with ``names``); None picks, on the training data, the
    feature, threshold and direction of best balanced accuracy. ``predict_proba`` is a
    logistic function of the signed distance to the threshold (in feature standard
    deviations), so it ranks samples for ROC AUC.
    """

    def __init__(self, feature: int | str | None = None, names: Sequence[str] | None = None):
        self.feature = feature
        self.names = tuple(names) if names is not None else None

    def _column(self) -> list[int] | None:
        if self.feature is None:
            return None
        if isinstance(self.feature, str):
            if self.names is None or self.feature not in self.names:
                raise ConfigError(f"threshold feature {self.feature!r} not among the feature "
                                  f"names {list(self.names or [])}")
            return [self.names.index(self.feature)]
        return [int(self.feature)]

    def fit(self, features: Any, labels: Any) -> ThresholdCondition:
        X, y = _check_xy(features, labels)
        classes = np.unique(y)
        if len(classes) != 2:
            raise ConfigError(f"the threshold baseline is binary; labels hold classes "
                              f"{classes.tolist()}")
        pos = y == classes[1]
        cols = self._column() or range(X.shape[1])
        best = (-1.0, 0, 0.0, 1.0)
        for j in cols:
            order = np.argsort(X[:, j], kind="stable")
            xs, ps = X[order, j], pos[order]
            n_pos, n_neg = ps.sum(), (~ps).sum()
            # split i: samples [i:] predicted positive (direction +1)
            tp = n_pos - np.concatenate([[0], np.cumsum(ps)])
            tn = np.concatenate([[0], np.cumsum(~ps)])
            bacc = 0.5 * (tp / n_pos + tn / n_neg)
            ok = np.concatenate([[True], xs[1:] > xs[:-1], [True]])  # splits between values
            for sign, score in ((1.0, bacc), (-1.0, 1.0 - bacc)):
                s = np.where(ok, score, -1.0)
                i = int(np.argmax(s))
                if s[i] > best[0]:
                    lo = xs[i - 1] if i > 0 else xs[0] - 1.0
                    hi = xs[i] if i < len(xs) else xs[-1] + 1.0
                    best = (float(s[i]), j, 0.5 * (lo + hi), sign)
        self.train_balanced_accuracy_, self.column_, self.threshold_, self.sign_ = best
        self.scale_ = float(X[:, self.column_].std()) or 1.0
        self.classes_ = classes
        return self

    def predict_proba(self, features: Any) -> np.ndarray:
        self._fitted()
        X, _ = _check_xy(features)
        z = self.sign_ * (X[:, self.column_] - self.threshold_) / self.scale_
        p1 = 0.5 * (1.0 + np.tanh(2.0 * z))  # logistic(4 z), numerically safe
        return self._full_proba(np.stack([1.0 - p1, p1], axis=1))


class _SklearnBase(_Base):
    """A baseline whose fitted scikit-learn estimator ``model_`` gives the probabilities."""

    def predict_proba(self, features: Any) -> np.ndarray:
        """(N, K) class probabilities for window features (N, F)."""
        self._fitted()
        X, _ = _check_xy(features)
        return self._full_proba(self.model_.predict_proba(X))


@CONDITION_BASELINES.register("svm")
class SVMCondition(_SklearnBase):
    """RBF support-vector classifier on standardised features (Platt-scaled probabilities)."""

    def __init__(self, C: float = 1.0, gamma: str | float = "scale", cv: int = 3,
                 seed: int = 0):
        self.C, self.gamma, self.cv, self.seed = C, gamma, cv, seed

    def fit(self, features: Any, labels: Any) -> SVMCondition:
        X, y = _check_xy(features, labels)
        pipeline = _sklearn("sklearn.pipeline")
        prep = _sklearn("sklearn.preprocessing")
        svm = _sklearn("sklearn.svm")
        calib = _sklearn("sklearn.calibration")
        # Platt scaling by cross-validation around ONE SVC fitted on all data
        svc = svm.SVC(C=self.C, gamma=self.gamma, random_state=self.seed)
        self.model_ = pipeline.make_pipeline(
            prep.StandardScaler(),
            calib.CalibratedClassifierCV(svc, method="sigmoid", cv=self.cv, ensemble=False))
        self.model_.fit(X, y)
        self.classes_ = np.asarray(self.model_.classes_)
        return self


@CONDITION_BASELINES.register("random_forest")
class RandomForestCondition(_SklearnBase):
    """Random forest of ``n_estimators`` trees (scikit-learn defaults otherwise)."""

    def __init__(self, n_estimators: int = 100, max_depth: int | None = None, seed: int = 0):
        self.n_estimators, self.max_depth, self.seed = n_estimators, max_depth, seed

    def fit(self, features: Any, labels: Any) -> RandomForestCondition:
        X, y = _check_xy(features, labels)
        ensemble = _sklearn("sklearn.ensemble")
        self.model_ = ensemble.RandomForestClassifier(
            n_estimators=self.n_estimators, max_depth=self.max_depth, random_state=self.seed,
            n_jobs=1)
        self.model_.fit(X, y)
        self.classes_ = np.asarray(self.model_.classes_)
        return self


def make_condition_baseline(name: str, **kwargs: Any) -> ConditionClassifier:
    """Build a registered baseline by name (``threshold``, ``svm``, ``random_forest``)."""
    return CONDITION_BASELINES.get(name)(**kwargs)


def condition_estimator(clf: ConditionClassifier, window: int = 64, stride: int = 32,
                        stats: Sequence[str] | None = None):
    """A per-sample estimator ``est(traj) -> {"condition_prob" (T, K), "valid" (T,)}`` for
    :func:`neuract.eval.evaluate_estimator` from a fitted window classifier.

    Causal: sample k gets the prediction of the latest window that ends at or before k;
    samples before the first window ends are marked invalid. ``window``, ``stride`` and
    ``stats`` must be those the classifier was trained with.
    """

    def est(traj) -> dict[str, np.ndarray]:
        wf = window_features([traj], window, stride, stats)
        proba = np.asarray(clf.predict_proba(wf.features), dtype=np.float64)
        n = len(traj)
        ends = wf.start + window - 1
        idx = np.searchsorted(ends, np.arange(n), side="right") - 1  # latest window ended
        valid = idx >= 0
        out = np.full((n, proba.shape[1]), np.nan)
        out[valid] = proba[idx[valid]]
        return {"condition_prob": out, "valid": valid}

    return est
