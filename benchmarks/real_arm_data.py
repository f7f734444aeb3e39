"""Loaders for the real-arm benchmark: (q, qd, qdd, tau) splits from ../shared/data.

Each loader returns ``{"train": (q, qd, qdd, tau), "test": (...), "split": text}`` with
float64 tensors (N, n_dof) in rad, rad/s, rad/s^2, N m. Accelerations that the data do not
carry are differentiated from the velocities with a Savitzky-Golay filter (and the torques
smoothed with the same window), as identification practice does.
"""

from __future__ import annotations

import re
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import torch
from scipy.signal import savgol_filter

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def _t(*xs):
    return tuple(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)) for x in xs)


def _cat(parts):
    return tuple(torch.cat([p[i] for p in parts]) for i in range(4))


def schunk(data=SHARED / "data", n_train=80, window=15, stride=2):
    """Schunk LWA 4P: 100 trajectories at 250 Hz; 1..80 train, 81..100 test (by trajectory).
    tau[k] (input.csv has one row fewer) is paired with state k."""
    base = data / "schunk_lwa4p_6dof_liu_althoff" / "data"
    trajs = []
    for i in range(1, 101):
        d = base / f"measurement_{i}"
        x = np.loadtxt(d / "trajectory.csv", delimiter=",")
        u = np.loadtxt(d / "input.csv", delimiter=",")
        t = np.loadtxt(d / "time.csv", delimiter=",")
        dt = float(np.median(np.diff(t)))
        n = len(u)
        q, qd = x[:n, :6], x[:n, 6:]
        w = min(window, n - (1 - n % 2))
        qdd = savgol_filter(qd, w, 3, deriv=1, delta=dt, axis=0)
        qd_s = savgol_filter(qd, w, 3, axis=0)
        trajs.append(_t(q[::stride], qd_s[::stride], qdd[::stride], u[::stride]))
    return {"train": _cat(trajs[:n_train]), "test": _cat(trajs[n_train:]),
            "split": f"trajectories 1-{n_train} train, {n_train + 1}-100 test; 250 Hz, "
                     f"every {stride}nd sample; qdd by Savitzky-Golay ({window}, 3)"}


def panda(data=SHARED / "data", window=51, stride=5, frac=0.7):
    """Franka Panda, Gaz 2019 exciting trajectory at ~1 kHz: first 70 % of the time train,
    last 30 % test; qd, tau smoothed and qdd differentiated (Savitzky-Golay)."""
    d = data / "franka_panda_gaz2019_exciting_traj" / "rbt_log"
    t = np.loadtxt(d / "exciting_traj_time.txt")
    q = np.loadtxt(d / "exciting_traj_positions.txt").reshape(-1, 7)
    qd = np.loadtxt(d / "exciting_traj_velocity.txt").reshape(-1, 7)
    tau = np.loadtxt(d / "exciting_traj_torques.txt").reshape(-1, 7)
    dt = float(np.median(np.diff(t)))
    qdd = savgol_filter(qd, window, 3, deriv=1, delta=dt, axis=0)
    qd = savgol_filter(qd, window, 3, axis=0)
    tau = savgol_filter(tau, window, 3, axis=0)
    k = int(frac * len(t))
    s = slice(None, None, stride)
    return {"train": _t(q[:k][s], qd[:k][s], qdd[:k][s], tau[:k][s]),
            "test": _t(q[k:][s], qd[k:][s], qdd[k:][s], tau[k:][s]),
            "split": f"first {frac:.0%} of the 21 s trajectory train, rest test; every "
                     f"{stride}th sample; Savitzky-Golay ({window}, 3) on qd, tau, qdd"}


def kuka(data=SHARED / "data", stride=2):
    """KUKA LWR4+ (FloBaRoID): measurements_1 and _2 train, measurements_3 test (200 Hz,
    signals already filtered by the recording pipeline)."""
    parts = []
    for i in (1, 2, 3):
        d = np.load(data / "kuka_lwr4_flobaroid_hw" / f"measurements_{i}.npz")
        parts.append(_t(*(d[k][::stride] for k in
                          ("positions", "velocities", "accelerations", "torques"))))
    return {"train": _cat(parts[:2]), "test": parts[2],
            "split": f"measurements_1+2 train, measurements_3 test; every {stride}nd sample"}


def sarcos(data=SHARED / "data", frac=0.8):
    """SARCOS inverse dynamics, official TEST file only (4,449 rows): first 80 % of the rows
    train, last 20 % test (contiguous; the rows are in time order)."""
    import scipy.io as sio

    s = sio.loadmat(data / "sarcos_inv_test_only" / "sarcos_inv_test.mat")["sarcos_inv_test"]
    k = int(frac * len(s))
    cols = (slice(0, 7), slice(7, 14), slice(14, 21), slice(21, 28))
    return {"train": _t(*(s[:k, c] for c in cols)), "test": _t(*(s[k:, c] for c in cols)),
            "split": f"rows 1-{k} of sarcos_inv_test train, rows {k + 1}-{len(s)} test "
                     "(no official training file available)"}


# ------------------------------------------------------------------ KUKA URDF handling


def _rpy_matrix(r, p, y):
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def sanitized_urdf(path: Path) -> Path:
    """A loadable copy of a FloBaRoID URDF for its kinematics: repeated ``<origin>`` elements
    dropped (MuJoCo rejects them), every inertia replaced by a valid placeholder (the
    regressor does not depend on it), visuals/collisions removed. Written to a temp dir."""
    root = ET.parse(path).getroot()
    for el in root.iter():
        origins = [c for c in el if c.tag == "origin"]
        for extra in origins[1:]:
            el.remove(extra)
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for c in link.findall(tag):
                link.remove(c)
        inertial = link.find("inertial")
        if inertial is not None:
            inertia = inertial.find("inertia")
            for k in ("ixy", "ixz", "iyz"):
                inertia.set(k, "0")
            for k in ("ixx", "iyy", "izz"):
                inertia.set(k, "0.01")
    out = Path(tempfile.mkdtemp(prefix="neuract_urdf_")) / path.name
    out.write_text(ET.tostring(root, encoding="unicode"))
    return out


def urdf_inertial_parameters(path: Path, joint_names) -> np.ndarray:
    """(n_dof, 10) parameters of each joint's child link in the order of the core's
    regressor ``(m, m c, Ixx, Iyy, Izz, Ixy, Ixz, Iyz)`` about the link frame origin, straight
    from the URDF (no consistency check: identified URDFs may violate it)."""
    root = ET.parse(path).getroot()
    links = {lk.get("name"): lk for lk in root.findall("link")}
    child = {j.get("name"): j.find("child").get("link") for j in root.findall("joint")}
    rows = []
    for jn in joint_names:
        inertial = links[child[jn]].find("inertial")
        m = float(inertial.find("mass").get("value"))
        o = [c for c in inertial if c.tag == "origin"][0]
        xyz = np.array([float(v) for v in re.split(r"\s+", o.get("xyz", "0 0 0").strip())])
        rpy = [float(v) for v in re.split(r"\s+", o.get("rpy", "0 0 0").strip())]
        ia = inertial.find("inertia")
        g = {k: float(ia.get(k)) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
        ic = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]],
                       [g["ixz"], g["iyz"], g["izz"]]])
        R = _rpy_matrix(*rpy)
        i_o = R @ ic @ R.T + m * (xyz @ xyz * np.eye(3) - np.outer(xyz, xyz))
        rows.append([m, *(m * xyz), i_o[0, 0], i_o[1, 1], i_o[2, 2], i_o[0, 1], i_o[0, 2],
                     i_o[1, 2]])
    return np.array(rows)


__all__ = ["kuka", "panda", "sanitized_urdf", "sarcos", "schunk", "urdf_inertial_parameters"]
