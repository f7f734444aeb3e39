"""Condition baselines: separable data is learned, random labels stay at chance."""

from __future__ import annotations

import numpy as np
import pytest

from neuract.data import Trajectory
from neuract.data.trajectory import TrajectoryMeta
from neuract.errors import ConfigError, SchemaError
from neuract.estimate import (
    CONDITION_BASELINES,
    condition_estimator,
    make_condition_baseline,
    window_features,
)
from neuract.eval import condition_metrics, evaluate_estimator

pytest.importorskip("sklearn")
NAMES = ["threshold", "svm", "random_forest"]


def _blobs(n, seed, separable=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = rng.integers(0, 2, n)
    if separable:
        X[:, 2] += 4.0 * y  # one informative feature, 4 sigma apart
    return X, y


@pytest.mark.parametrize("name", NAMES)
def test_separable_classes_are_learned(name):
    X, y = _blobs(400, 0)
    Xt, yt = _blobs(600, 1)
    clf = make_condition_baseline(name).fit(X, y)
    proba = clf.predict_proba(Xt)
    assert proba.shape == (600, 2) and np.allclose(proba.sum(1), 1.0)
    m = condition_metrics(proba, yt)
    assert m["accuracy"] > 0.95 and m["auc"] > 0.98
    assert np.array_equal(clf.predict(Xt), proba.argmax(1))


@pytest.mark.parametrize("name", NAMES)
def test_random_labels_stay_at_chance(name):
    X, y = _blobs(400, 2, separable=False)
    Xt, yt = _blobs(600, 3, separable=False)
    acc = (make_condition_baseline(name).fit(X, y).predict(Xt) == yt).mean()
    assert 0.4 < acc < 0.6  # chance = 0.5; binomial sd 0.02 at n = 600


def test_threshold_finds_feature_and_direction():
    X, y = _blobs(300, 4)
    X[:, 2] *= -1.0  # degraded now has LOWER values
    clf = make_condition_baseline("threshold").fit(X, y)
    assert clf.column_ == 2 and clf.sign_ == -1.0
    assert -4.0 < clf.threshold_ < 0.0
    named = make_condition_baseline("threshold", feature="f2",
                                    names=[f"f{i}" for i in range(6)]).fit(X, y)
    assert named.column_ == 2 and named.threshold_ == pytest.approx(clf.threshold_)
    # probability: logistic in the signed distance to the threshold, in feature std devs
    z = -(X[:7, 2] - clf.threshold_) / X[:, 2].std()
    np.testing.assert_allclose(clf.predict_proba(X[:7])[:, 1], 1 / (1 + np.exp(-4 * z)),
                               rtol=1e-12)


def test_errors():
    X, y = _blobs(50, 5)
    with pytest.raises(ConfigError, match="valid condition baseline types"):
        make_condition_baseline("xgboost")
    with pytest.raises(ConfigError, match="not fitted"):
        make_condition_baseline("svm").predict_proba(X)
    with pytest.raises(SchemaError, match="single class"):
        make_condition_baseline("random_forest").fit(X, np.zeros(50, int))
    bad = X.copy()
    bad[3, 1] = np.inf
    with pytest.raises(SchemaError, match=r"features\[3, 1\]"):
        make_condition_baseline("threshold").fit(bad, y)
    with pytest.raises(ConfigError, match="binary"):
        make_condition_baseline("threshold").fit(X, np.arange(50) % 3)
    assert CONDITION_BASELINES.names() == sorted(NAMES)


def _servo_traj(degraded: bool, seed: int, n: int = 400) -> Trajectory:
    """First-order servo; a degraded motor lags more and draws more current."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * 0.016
    goal = np.cumsum(rng.normal(0, 0.03, (n, 2)), axis=0)
    alpha = 0.1 if degraded else 0.3
    q = np.zeros((n, 2))
    for k in range(n - 1):
        q[k + 1] = q[k] + alpha * (goal[k] - q[k]) + rng.normal(0, 1e-3, 2)
    current = (1.5 if degraded else 1.0) * np.abs(goal - q) * 5 + rng.normal(0, 0.05, (n, 2))
    return Trajectory({"t": t, "q": q, "q_goal": goal, "current": current,
                       "condition": np.full(n, int(degraded), np.int8)},
                      TrajectoryMeta(robot="toy", joint_names=("j1", "j2"), name=f"e{seed}"))


def test_window_features_separate_degraded_motor():
    train = [_servo_traj(bool(i % 2), i) for i in range(8)]
    test = [_servo_traj(bool(i % 2), 100 + i) for i in range(8)]
    wf = window_features(train, window=64, stride=32)
    wt = window_features(test, window=64, stride=32)
    assert wf.features.shape[1] == len(wf.names) == 2 * 5  # err x2, effort x2, effort/err
    assert "j1:err_mean" in wf.names and set(wf.labels.tolist()) == {0, 1}
    assert len(wf.start) == 8 * len(range(0, 400 - 64 + 1, 32))
    # the statistics of one window, from their definitions (module docstring)
    tr, k = train[1], len(range(0, 400 - 64 + 1, 32)) + 3  # 4th window of the 2nd run
    assert wf.traj_index[k] == 1 and wf.start[k] == 96
    e = np.abs(tr["q_goal"] - tr["q"])[96:160]
    a = np.abs(tr["current"])[96:160]
    want = [e.mean(0), np.sqrt((e**2).mean(0)), a.mean(0), np.sqrt((a**2).mean(0)),
            a.mean(0) / (e.mean(0) + 1e-3)]
    stats = ("err_mean", "err_rms", "effort_mean", "effort_rms", "effort_per_err")
    assert wf.names == tuple(f"{j}:{st}" for st in stats for j in ("j1", "j2"))
    np.testing.assert_allclose(wf.features[k], np.concatenate(want), rtol=1e-12)
    # a window's label is its majority condition, a tie going to the larger class
    cond = np.zeros(160, np.int8)
    cond[32:64] = 1  # windows [0, 64) and [32, 96): 32 of each
    cond[140:150] = 1  # window [96, 160): 10 of 64
    mixed = _servo_traj(False, 9, n=160).replace({"condition": cond})
    assert window_features([mixed], window=64, stride=32).labels.tolist() == [1, 1, 0, 0]
    for name in NAMES:
        acc = (make_condition_baseline(name).fit(wf.features, wf.labels)
               .predict(wt.features) == wt.labels).mean()
        assert acc > 0.9, name
    with pytest.raises(SchemaError, match="window"):
        window_features(train, window=1000)
    with pytest.raises(SchemaError, match="need channels"):
        window_features(train, stats=["temp_mean"])


def test_condition_estimator_is_causal_and_scores_per_sample():
    train = [_servo_traj(bool(i % 2), i) for i in range(8)]
    test = [_servo_traj(bool(i % 2), 200 + i) for i in range(4)]
    wf = window_features(train, window=64, stride=32)
    clf = make_condition_baseline("threshold").fit(wf.features, wf.labels)
    est = condition_estimator(clf, window=64, stride=32)
    out = est(test[0])
    assert not out["valid"][:63].any() and out["valid"][63:].all()
    assert np.isnan(out["condition_prob"][:63]).all()
    # sample 100 uses the window [32, 96) (latest one ended), not [64, 128)
    w = window_features([test[0]], window=64, stride=32)
    assert np.allclose(out["condition_prob"][100], clf.predict_proba(w.features[1:2])[0])
    rec = evaluate_estimator(est, test, "threshold")
    assert rec["mode"] == "estimator" and rec["condition"]["n"] == 4 * (400 - 63)
    assert rec["condition"]["accuracy"] > 0.9
