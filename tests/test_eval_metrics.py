"""Metrics: cross-checked against simple loops, hand-counted cases and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest

from neuract.errors import SchemaError
from neuract.eval import metrics as M


def test_joint_mae_equals_loop_and_masks_nan():
    rng = np.random.default_rng(0)
    p, t = rng.normal(size=(4, 50, 3)), rng.normal(size=(4, 50, 3))
    mask = rng.random((4, 50)) > 0.3
    p[~mask] = np.nan  # allowed: masked out
    got = M.joint_mae_deg(p, t, mask)
    for j in range(3):
        errs = [abs(p[b, k, j] - t[b, k, j]) for b in range(4) for k in range(50) if mask[b, k]]
        assert got[j] == pytest.approx(np.degrees(np.mean(errs)), rel=1e-12)


def test_joint_mae_rejects_nan_shape_and_empty():
    p = np.zeros((10, 2))
    with pytest.raises(SchemaError, match="shape"):
        M.joint_mae_deg(p, np.zeros((10, 3)))
    bad = p.copy()
    bad[3, 1] = np.nan
    with pytest.raises(SchemaError, match=r"index \(3, 1\)"):
        M.joint_mae_deg(bad, p)
    with pytest.raises(SchemaError, match="mask"):
        M.joint_mae_deg(p, p, np.zeros(7, bool))
    with pytest.raises(SchemaError, match="no sample"):
        M.joint_mae_deg(p, p, np.zeros(10, bool))


def test_joint_summary_splits_gripper():
    t = np.zeros((5, 3))
    p = t + np.radians([1.0, 3.0, 10.0])
    s = M.joint_mae_summary(p, t, ["a", "b", "gripper"])
    assert s["per_joint"]["b"] == pytest.approx(3.0)
    assert s["arm_mean"] == pytest.approx(2.0) and s["arm_max"] == pytest.approx(3.0)
    assert s["gripper"] == pytest.approx(10.0)
    with pytest.raises(SchemaError, match="joint_names"):
        M.joint_mae_summary(p, t, ["a", "b"])


def test_force_mae_segments_and_unlabelled_nan():
    n = 30
    f_true = np.zeros((n, 3))
    f_pred = np.zeros((n, 3))
    contact = np.zeros(n, bool)
    contact[10:20] = True
    f_pred[contact] = [0.0, 0.0, 1.0]  # 1 N error in contact
    f_pred[~contact] = [0.3, 0.4, 0.0]  # 0.5 N error out of contact
    label = np.ones(n, bool)
    label[25:] = False
    f_true[25:] = np.nan
    r = M.force_mae(f_pred, f_true, contact, label)
    assert r["contact"] == pytest.approx(1.0)
    assert r["no_contact"] == pytest.approx(0.5)
    assert r["n_contact"] == 10 and r["n_no_contact"] == 15
    assert r["all"] == pytest.approx((10 * 1.0 + 15 * 0.5) / 25)
    assert r["per_axis"][2] == pytest.approx(10 / 25)
    empty = M.force_mae(f_pred[:5], np.zeros((5, 3)), np.zeros(5, bool))
    assert empty["contact"] is None and empty["n_contact"] == 0
    with pytest.raises(SchemaError, match="f_true"):
        M.force_mae(f_pred, f_true, contact)  # NaN labels not masked
    with pytest.raises(SchemaError, match=r"\(\.\.\., 3\)"):
        M.force_mae(np.zeros((5, 2)), np.zeros((5, 2)), np.zeros(5, bool))


def test_gate_hand_counted_events_and_latency():
    t = np.arange(60) * 0.01
    contact = np.zeros(60, bool)
    contact[10:20] = True
    contact[40:50] = True
    p = np.zeros(60)
    p[13:25] = 0.9  # detects event 1 three samples late, 5 false positives after it
    r = M.gate_metrics(p, contact, t)
    assert r["precision"] == pytest.approx(7 / 12)
    assert r["recall"] == pytest.approx(7 / 20)
    assert r["n_events"] == 2 and r["n_detected"] == 1 and r["n_missed"] == 1
    assert r["latency_mean_s"] == pytest.approx(0.03)
    # gate already on at onset: latency 0
    p2 = contact.astype(float)
    p2[5:10] = 1.0
    r2 = M.gate_metrics(p2, contact, t)
    assert r2["latency_max_s"] == 0.0 and r2["recall"] == 1.0
    # counts add up over trajectories
    tot = (M.gate_counts(p, contact, t) + M.gate_counts(p2, contact, t)).metrics()
    assert tot["n_events"] == 4 and tot["n_detected"] == 3


def test_gate_errors_at_label_changes_hand_counted():
    """A gate late by two samples at onset and at release: every error lies within 0.1 s of
    a label change, so the F1 away from the changes is 1; counts add over trajectories."""
    t = np.arange(20) * 0.05
    c = np.zeros(20, bool)
    c[5:12] = True  # label changes at 0.225 s and 0.575 s
    p = np.zeros(20)
    p[7:14] = 1.0
    r = M.gate_metrics(p, c, t)
    assert r["f1"] == pytest.approx(10 / 14)
    assert r["n_false_alarms"] == 2 and r["n_missed_samples"] == 2
    lc = r["label_changes"]
    assert lc["bands_s"] == list(M.GATE_CHANGE_BANDS_S)
    assert lc["false_alarm_share_near"] == [1.0, 1.0, 1.0]
    assert lc["miss_share_near"] == [1.0, 1.0, 1.0]
    # 0.1 s: contact samples 7, 8, 9 are farther (all fired); 0.25 s: none is left
    assert lc["f1_away"] == [1.0, None, None]
    # a false alarm far from any change counts away from it
    p2 = p.copy()
    p2[19] = 1.0
    r2 = M.gate_counts(p2, c, t)
    assert r2.away[0] == [3, 1, 0] and r2.away[1] == [0, 1, 0]
    m2 = r2.metrics()["label_changes"]
    assert m2["false_alarm_share_near"][0] == pytest.approx(2 / 3)
    assert m2["f1_away"][1] is None  # no contact sample that far: F1 undefined, as in f1
    tot = (M.gate_counts(p, c, t) + r2).away
    assert tot[0] == [6, 1, 0]
    # invalid samples are left out of the bands too, and no change: everything is away
    r3 = M.gate_counts(np.ones(20), np.ones(20, bool), t, valid=np.arange(20) >= 3)
    assert r3.away[2] == [17, 0, 0]


def test_gate_matches_sklearn_per_sample():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    c = rng.random(500) > 0.6
    p = np.clip(c * 0.6 + rng.random(500) * 0.5, 0, 1)
    r = M.gate_metrics(p, c, np.arange(500) * 0.02)
    pred = p >= 0.5
    assert r["precision"] == pytest.approx(sk.precision_score(c, pred))
    assert r["recall"] == pytest.approx(sk.recall_score(c, pred))
    assert r["f1"] == pytest.approx(sk.f1_score(c, pred))
    # a gate that never fires scores F1 0 on data with contacts, as in scikit-learn
    silent = M.gate_metrics(np.zeros(500), c, np.arange(500) * 0.02)
    assert silent["f1"] == 0.0 == sk.f1_score(c, np.zeros(500, bool), zero_division=0)
    assert silent["recall"] == 0.0 and silent["precision"] is None
    for p in (np.zeros(500), np.ones(500)):  # no contact at all: F1 undefined, alarms counted
        free = M.gate_metrics(p, np.zeros(500, bool), np.arange(500) * 0.02)
        assert free["f1"] is None and free["n_false_alarms"] == int(p.sum())


def test_roc_auc_matches_sklearn_with_ties():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 300)
    s = rng.integers(0, 5, 300) + y  # many ties
    assert M.roc_auc(s, y) == pytest.approx(sk.roc_auc_score(y, s), abs=1e-12)
    assert M.roc_auc(s, np.ones(300, int)) is None
    assert M.roc_auc([0.1, 0.9], [0, 1]) == 1.0 and M.roc_auc([0.9, 0.1], [0, 1]) == 0.0


def test_condition_metrics_binary_and_multiclass():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 400)
    logits = rng.normal(size=(400, 3)) + 1.5 * np.eye(3)[y]
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    r = M.condition_metrics(proba, y)
    assert r["accuracy"] == pytest.approx(sk.accuracy_score(y, proba.argmax(1)))
    assert r["auc"] == pytest.approx(sk.roc_auc_score(y, proba, multi_class="ovr"), abs=1e-12)
    assert np.array_equal(r["confusion"], sk.confusion_matrix(y, proba.argmax(1)))
    yb = (y == 1).astype(int)
    rb = M.condition_metrics(proba[:, 1], yb)
    assert rb["auc"] == pytest.approx(sk.roc_auc_score(yb, proba[:, 1]))
    with pytest.raises(SchemaError):
        M.condition_metrics(proba[:10], y)


def test_torque_rmse_equals_loop():
    rng = np.random.default_rng(4)
    p, t = rng.normal(size=(100, 4)), rng.normal(size=(100, 4))
    got = M.torque_rmse(p, t)
    assert np.allclose(got, [np.sqrt(np.mean((p[:, j] - t[:, j]) ** 2)) for j in range(4)])
    with pytest.raises(SchemaError, match="tau_true"):
        M.torque_rmse(p, t[:, :3])


def test_balanced_accuracy_does_not_reward_the_majority_class():
    from neuract.eval.metrics import balanced_accuracy, condition_metrics

    # 90 normal, 10 degraded; always "normal": accuracy 0.9, balanced 0.5
    y = np.r_[np.zeros(90, int), np.ones(10, int)]
    m = condition_metrics(np.zeros(100), y)
    assert m["accuracy"] == 0.9 and m["balanced_accuracy"] == 0.5
    # half of each class right: 0.5 either way; a class that never occurs is skipped
    assert balanced_accuracy([[45, 45], [5, 5]]) == 0.5
    assert balanced_accuracy([[3, 1], [0, 0]]) == 0.75
    assert balanced_accuracy([[0, 0], [0, 0]]) is None
