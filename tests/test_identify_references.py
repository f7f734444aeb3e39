"""``neuract identify`` scores every fit beside the training mean and the nominal model, warns
where a fit does worse than the mean, and states the fit's expected run time first."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from neuract.cli import main

torch.set_num_threads(1)


@pytest.fixture()
def planar2_npz(tmp_path):
    from neuract.fit.least_squares import random_states
    from neuract.models import TwoLinkArm, TwoLinkParams

    arm = TwoLinkArm(TwoLinkParams(fv=(0.2, 0.1), fc=(0.1, 0.05)))
    q, qd, qdd = random_states(2, 600, seed=0)
    tau = arm.inverse(q, qd, qdd)
    path = tmp_path / "planar2.npz"
    np.savez(path, q=q.numpy(), qd=qd.numpy(), qdd=qdd.numpy(), tau=tau.numpy())
    return path


def _nmse(pred, tau):
    return (((pred - tau) ** 2).mean(0) / tau.var(0, ddof=1)).tolist()


def test_identify_reports_the_training_mean_and_the_nominal_model(planar2_npz, tmp_path,
                                                                   capsys):
    from neuract.robot import load_robot

    out = tmp_path / "ls"
    assert main(["identify", "--data", str(planar2_npz), "--robot", "planar2",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    first = printed.splitlines()[0]
    assert first.startswith("identify: least_squares on 480 training samples: expected run "
                            "time about ") and "(an estimate" in first
    assert "training mean: held-out nMSE" in printed and "nominal model: held-out" in printed
    rep = json.loads((out / "report.json").read_text())
    d = np.load(planar2_npz)
    tau = d["tau"]
    train, test = tau[:480], tau[480:]
    mean = rep["references"]["training mean"]["nmse_per_joint"]
    np.testing.assert_allclose(mean["test"], _nmse(train.mean(0), test), rtol=1e-9)
    np.testing.assert_allclose(mean["train"], _nmse(train.mean(0), train), rtol=1e-9)
    robot = load_robot("planar2")
    with torch.no_grad():
        nom = robot.inverse_dynamics(*(torch.as_tensor(d[k][480:]).to(robot.dtype)
                                       for k in ("q", "qd", "qdd"))).double().numpy()
    ref = rep["references"]["nominal model"]
    assert ref["robot"] == "planar2"
    np.testing.assert_allclose(ref["nmse_per_joint"]["test"], _nmse(nom, test), rtol=1e-6)
    # the plant has friction the description lacks: the nominal model is close, not exact;
    # the fit (friction identified) is exact, the mean about 1
    assert 0 < np.mean(ref["nmse_per_joint"]["test"]) < 0.05
    assert max(rep["nmse_per_joint"]["test"]) < 1e-12 and np.mean(mean["test"]) > 0.9
    assert rep["warnings"] == []
    assert rep["expected_seconds"] > 0 and rep["fit_seconds"] > 0
    md = (out / "report.md").read_text()
    for row in ("| least_squares, test |", "| training mean, test |", "| nominal model, test |"):
        assert row in md, md
    assert "Warning" not in md


def test_identify_warns_when_a_fit_is_worse_than_the_mean(tmp_path, capsys):
    """Torques whose relation to the motion flips in the held-out tail: the fit predicts them
    worse than the training mean, and says so; without a robot the nominal model is n/a."""
    rng = np.random.default_rng(0)
    n = 1000
    q, qd, qdd = (rng.uniform(-1, 1, (n, 1)) for _ in range(3))
    tau = 2.0 * q
    tau[800:] *= -1  # the last 20 % (held out) reversed
    data = tmp_path / "flip.npz"
    np.savez(data, q=q, qd=qd, qdd=qdd, tau=tau)
    out = tmp_path / "mlp"
    assert main(["identify", "--data", str(data), "--model", "mlp", "--epochs", "30",
                 "--out", str(out)]) == 0
    err = capsys.readouterr().err
    rep = json.loads((out / "report.json").read_text())
    assert len(rep["warnings"]) == 1 and "worse than the training mean" in rep["warnings"][0]
    assert "identify: warning: mlp predicts the held-out torques worse than the training " \
           "mean" in err
    assert np.mean(rep["nmse_per_joint"]["test"]) > np.mean(
        rep["references"]["training mean"]["nmse_per_joint"]["test"])
    assert rep["references"]["nominal model"]["nmse_per_joint"] == {"train": None,
                                                                    "test": None}
    md = (out / "report.md").read_text()
    assert "**Warning:** mlp predicts" in md and "| nominal model, test | n/a" in md


def test_expected_run_time_counts_the_fits_steps():
    from neuract.control.identify_cost import duration, expected_seconds

    q = torch.rand(1500, 2, dtype=torch.float64)
    train = (q, q, q, q)
    state = torch.random.get_rng_state()
    est = expected_seconds("mlp", train, 60, 1000, None)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's draws untouched
    assert "120 optimiser steps (60 epochs of 1000 samples)" in est["basis"]
    assert est["seconds"] > 0 and not est["upper_bound"]
    assert [duration(x) for x in (0.04, 45.2, 600, 7200)] == ["0.1 s", "45 s", "10.0 min",
                                                             "2.0 h"]
