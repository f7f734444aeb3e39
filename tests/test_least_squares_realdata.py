"""Identification on real arms (../shared/data): least squares must beat published or
a-priori parameter sets on held-out torques, and the consistent fit must stay consistent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.signal import savgol_filter

from neuract.fit.least_squares import base_parameters, identify_consistent, identify_ls
from neuract.models import RigidBodyModel, nmse

pytestmark = pytest.mark.realdata
torch.set_num_threads(1)


def _panda(shared_data: Path, stride=10):
    d = shared_data / "franka_panda_gaz2019_exciting_traj" / "rbt_log"
    t = np.loadtxt(d / "exciting_traj_time.txt")
    q = np.loadtxt(d / "exciting_traj_positions.txt").reshape(-1, 7)
    qd = np.loadtxt(d / "exciting_traj_velocity.txt").reshape(-1, 7)
    tau = np.loadtxt(d / "exciting_traj_torques.txt").reshape(-1, 7)
    dt = float(np.median(np.diff(t)))
    qdd = savgol_filter(qd, 51, 3, deriv=1, delta=dt, axis=0)
    qd, tau = savgol_filter(qd, 51, 3, axis=0), savgol_filter(tau, 51, 3, axis=0)
    return [torch.from_numpy(x[::stride].copy()) for x in (q, qd, qdd, tau)]


def test_panda_least_squares_beats_published_model_on_held_out_time(shared_data):
    robot_mod = pytest.importorskip("neuract.robot")
    robot = robot_mod.load_robot("panda")
    q, qd, qdd, tau = _panda(shared_data)
    k = int(0.7 * len(q))
    y = robot.regressor(q, qd, qdd)
    bp = base_parameters(robot.regressor, 7)
    ls = identify_ls(y[:k], tau[:k], qd[:k], bp)
    with torch.no_grad():
        e_ls = nmse(ls.model(robot.regressor).inverse(q[k:], qd[k:], qdd[k:]), tau[k:])
        pub = RigidBodyModel(robot.regressor, robot.inertial_parameters().reshape(-1), 7)
        e_pub = nmse(pub.inverse(q[k:], qd[k:], qdd[k:]), tau[k:])
    # the big joints (2, 4) carry the gravity load: both fit them; LS adds friction
    assert e_ls[[1, 3]].max() < 0.05
    assert e_ls.mean() < e_pub.mean()


def test_panda_consistent_fit_is_consistent_and_predicts(shared_data):
    robot_mod = pytest.importorskip("neuract.robot")
    robot = robot_mod.load_robot("panda")
    q, qd, qdd, tau = _panda(shared_data, stride=20)
    prior = robot.inertial_parameters().reshape(-1, 10)
    y = robot.regressor(q, qd, qdd)
    res = identify_consistent(y, tau, qd, prior=prior, prior_weight=1e-3, max_iter=150)
    assert min(res.extra["pseudo_inertia_min_eig"]) > 0
    with torch.no_grad():
        e = nmse(res.model(robot.regressor).inverse(q, qd, qdd), tau)
    assert e[[1, 3]].max() < 0.05
