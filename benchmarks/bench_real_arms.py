"""Torque prediction on real arms: nMSE per joint of rigid-body least squares, hybrid,
Lagrangian and MLP models (inverse dynamics, held-out data).

Datasets (../shared/data; splits stated in the results): Schunk LWA 4P (by trajectory),
Franka Panda (Gaz 2019 exciting trajectory; bundled ``panda`` kinematics; identified base
parameters compared with the bundled published model), KUKA LWR4+ (FloBaRoID; URDF
kinematics from ../shared/robots; URDF parameter sets as references), SARCOS (test file
only). nMSE = MSE / variance of the measured test torque, per joint.

Rigid-body models need kinematics: available for Panda and KUKA; Schunk (no model shipped)
and SARCOS get the learned models only. Fits are kept small (shared CPU): learned models see
at most ``MAX_TRAIN`` training samples.

Each loader (``load_<arm>``) returns ``{"train": (q, qd, qdd, tau), "test": (...), "split":
text}`` with float64 tensors (N, n_dof) in rad, rad/s, rad/s^2, N m. Accelerations that the
data do not carry are differentiated from the velocities with a Savitzky-Golay filter (and the
torques smoothed with the same window), as identification practice does.

Run: ``.venv/bin/python benchmarks/bench_real_arms.py`` (several minutes, 1 thread).
Writes ``benchmarks/results/real_arms.{json,md}``.
"""

from __future__ import annotations

import re
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import torch
from scipy.signal import savgol_filter

from common import write_result  # noqa: E402
from neuract.atomic import write_text
from neuract.fit.inverse_dynamics import fit_inverse_model
from neuract.fit.least_squares import (
    base_parameters,
    identify_consistent,
    identify_ls,
)
from neuract.models import (
    HybridModel,
    LagrangianModel,
    MLPModel,
    RigidBodyModel,
    nmse,
)

RESULTS = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared"
"""the shared data and robot files beside the repository"""
MAX_TRAIN = 6000
EPOCHS = {"mlp": 60, "lagrangian": 40, "hybrid": 40}


# ------------------------------------------------------------------------ data loaders --
def _t(*xs):
    return tuple(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)) for x in xs)


def _cat(parts):
    return tuple(torch.cat([p[i] for p in parts]) for i in range(4))


def load_schunk(data=SHARED / "data", n_train=80, window=15, stride=2):
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


def load_panda(data=SHARED / "data", window=51, stride=5, frac=0.7):
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


def load_kuka(data=SHARED / "data", stride=2):
    """KUKA LWR4+ (FloBaRoID): measurements_1 and _2 train, measurements_3 test (200 Hz,
    signals already filtered by the recording pipeline)."""
    parts = []
    for i in (1, 2, 3):
        d = np.load(data / "kuka_lwr4_flobaroid_hw" / f"measurements_{i}.npz")
        parts.append(_t(*(d[k][::stride] for k in
                          ("positions", "velocities", "accelerations", "torques"))))
    return {"train": _cat(parts[:2]), "test": parts[2],
            "split": f"measurements_1+2 train, measurements_3 test; every {stride}nd sample"}


def load_sarcos(data=SHARED / "data", frac=0.8):
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


# ------------------------------------------------------------------------------ models --
def _sub(train, n, seed=0):
    N = train[0].shape[0]
    if N <= n:
        return train
    idx = torch.randperm(N, generator=torch.Generator().manual_seed(seed))[:n]
    return tuple(x[idx] for x in train)


def _eval(model, test) -> list[float]:
    q, qd, qdd, tau = test
    with torch.no_grad():
        pred = torch.cat([model.inverse(q[i:i + 2000], qd[i:i + 2000], qdd[i:i + 2000])
                          for i in range(0, len(q), 2000)])
    return nmse(pred, tau).tolist()


def learned_models(train, test, rb_model=None) -> dict:
    rows = {}
    small = _sub(train, MAX_TRAIN)
    n = train[0].shape[-1]
    torch.manual_seed(0)
    t0 = time.time()
    mlp = MLPModel(n, hidden=128)
    fit_inverse_model(mlp, *small, epochs=EPOCHS["mlp"], batch_size=256, lr=3e-3)
    rows["mlp"] = {"nmse": _eval(mlp, test), "seconds": time.time() - t0}
    torch.manual_seed(0)
    t0 = time.time()
    lag = LagrangianModel(n, hidden=64)
    fit_inverse_model(lag, *small, epochs=EPOCHS["lagrangian"], batch_size=256, lr=3e-3)
    rows["lagrangian"] = {"nmse": _eval(lag, test), "seconds": time.time() - t0}
    if rb_model is not None:
        torch.manual_seed(0)
        t0 = time.time()
        hy = HybridModel(rb_model, hidden=64)
        fit_inverse_model(hy, *small, epochs=EPOCHS["hybrid"], batch_size=256, lr=3e-3)
        rows["hybrid (consistent rigid body + MLP residual)"] = {
            "nmse": _eval(hy, test), "seconds": time.time() - t0}
    return rows


def rigid_body_rows(robot, train, test, prior=None) -> tuple[dict, RigidBodyModel, dict]:
    q, qd, qdd, tau = train
    t0 = time.time()
    bp = base_parameters(robot.regressor, robot.n_dof)
    y = torch.cat([robot.regressor(q[i:i + 4000], qd[i:i + 4000], qdd[i:i + 4000])
                   for i in range(0, len(q), 4000)])
    ls = identify_ls(y, tau, qd, bp)
    model = ls.model(robot.regressor)
    rows = {"rigid-body least squares (base params + friction)": {
        "nmse": _eval(model, test), "n_base": bp.n_base, "cond": ls.cond,
        "seconds": time.time() - t0}}
    t0 = time.time()
    sub = _sub((y, tau, qd, q), 3000)
    cons = identify_consistent(sub[0], sub[1], sub[2], prior=prior, prior_weight=1e-3,
                               max_iter=300)
    cmodel = cons.model(robot.regressor)
    rows["rigid-body consistent (log-Cholesky, prior-regularised)"] = {
        "nmse": _eval(cmodel, test), "min_pseudo_inertia_eig": min(
            cons.extra["pseudo_inertia_min_eig"]), "seconds": time.time() - t0}
    extra = {"base": bp, "ls": ls, "consistent": cons}
    # the hybrid's base: the physically consistent fit (it extrapolates better than plain LS)
    return rows, cmodel, extra


def run_panda() -> dict:
    from neuract.robot import load_robot

    d = load_panda()
    robot = load_robot("panda")
    pi_pub = robot.inertial_parameters().reshape(-1, 10)
    rows, rb, ex = rigid_body_rows(robot, d["train"], d["test"], prior=pi_pub)
    pub = RigidBodyModel(robot.regressor, pi_pub.reshape(-1), robot.n_dof)
    rows["bundled published model (no friction, no fit)"] = {"nmse": _eval(pub, d["test"])}
    rows.update(learned_models(d["train"], d["test"], rb))
    bp, ls, cons = ex["base"], ex["ls"], ex["consistent"]
    # an independent consistent fit, from generic 1 kg spheres instead of the published prior
    q, qd, qdd, tau = _sub(d["train"], 3000)
    y = robot.regressor(q, qd, qdd)
    generic = identify_consistent(y, tau, qd, prior=None, prior_weight=1e-4, max_iter=300)
    rows["rigid-body consistent, generic prior (1 kg spheres)"] = {
        "nmse": _eval(generic.model(robot.regressor), d["test"])}
    beta_pub = bp.project(pi_pub.reshape(-1).numpy())
    scale = np.maximum(np.abs(beta_pub), 1e-3)
    rel = np.abs(ls.beta - beta_pub) / scale
    masses = cons.extra["params"][:, 0]
    compare = {
        "base_param_rel_diff_median": float(np.median(rel)),
        "base_param_rel_diff_within_20pct": int((rel < 0.2).sum()), "n_base": bp.n_base,
        "consistent_fit_link_masses_kg": masses.tolist(),
        "generic_prior_fit_link_masses_kg": generic.extra["params"][:, 0].tolist(),
        "published_link_masses_kg": pi_pub[:, 0].tolist(),
        "ls_friction_fv": ls.fv.tolist(), "ls_friction_fc": ls.fc.tolist(),
    }
    return {"split": d["split"], "n_train": len(d["train"][0]), "n_test": len(d["test"][0]),
            "models": rows, "parameters_vs_published": compare}


def run_kuka() -> dict:
    from neuract.robot import load_robot

    d = load_kuka()
    robots = SHARED / "robots"
    robot = load_robot(sanitized_urdf(robots / "kuka_lwr4.urdf"))
    refs = {}
    for name in ("kuka_lwr4", "kuka_lwr4_gaz", "kuka_lwr4_identified"):
        pi = torch.from_numpy(urdf_inertial_parameters(robots / f"{name}.urdf",
                                                            robot.joint_names))
        refs[name] = pi
    prior = refs["kuka_lwr4"]
    try:
        from neuract.fit.least_squares import params_to_log_cholesky

        params_to_log_cholesky(prior)
    except Exception:
        prior = None  # a-priori URDF not consistent: generic prior
    rows, rb, _ = rigid_body_rows(robot, d["train"], d["test"], prior=prior)
    for name, pi in refs.items():
        m = RigidBodyModel(robot.regressor, pi.reshape(-1), robot.n_dof)
        rows[f"URDF parameters {name}.urdf (no friction, no fit)"] = {
            "nmse": _eval(m, d["test"])}
    rows.update(learned_models(d["train"], d["test"], rb))
    return {"split": d["split"], "n_train": len(d["train"][0]), "n_test": len(d["test"][0]),
            "models": rows}


def run_learned_only(loader) -> dict:
    d = loader()
    rows = learned_models(d["train"], d["test"])
    return {"split": d["split"], "n_train": len(d["train"][0]), "n_test": len(d["test"][0]),
            "models": rows, "note": "no kinematic model: rigid-body and hybrid not run"}


def to_markdown(res: dict) -> str:
    lines = ["# Real-arm inverse dynamics: torque nMSE per joint (held-out data)", "",
             "Produced by `benchmarks/bench_real_arms.py`; nMSE = MSE / var(test torque). "
             f"Learned models train on at most {MAX_TRAIN} samples.", ""]
    for ds, r in res["datasets"].items():
        if "error" in r:
            lines += [f"## {ds}", "", f"not run: {r['error']}", ""]
            continue
        n = len(next(iter(r["models"].values()))["nmse"])
        lines += [f"## {ds}", "", f"Split: {r['split']} ({r['n_train']} train / "
                  f"{r['n_test']} test samples).", "",
                  "| model | " + " | ".join(f"j{i + 1}" for i in range(n)) + " | mean |",
                  "|---|" + "---|" * (n + 1)]
        for name, row in r["models"].items():
            v = row["nmse"]
            lines.append(f"| {name} | " + " | ".join(f"{x:.3f}" for x in v)
                         + f" | {np.mean(v):.3f} |")
        if "parameters_vs_published" in r:
            c = r["parameters_vs_published"]
            lines += ["", f"Identified vs published (bundled) parameters: median relative "
                      f"difference of the {c['n_base']} base parameters "
                      f"{c['base_param_rel_diff_median']:.2f}, "
                      f"{c['base_param_rel_diff_within_20pct']} within 20 %; link masses "
                      "(consistent fit with the published prior / with a generic prior / "
                      "published) [kg]: " + ", ".join(
                          f"{a:.2f}/{g:.2f}/{b:.2f}" for a, g, b in zip(
                              c["consistent_fit_link_masses_kg"],
                              c["generic_prior_fit_link_masses_kg"],
                              c["published_link_masses_kg"])),
                      "", "The prior-regularised fit keeps unidentifiable directions at the "
                      "published values, so its agreement there is not independent evidence; "
                      "the generic-prior fit is. Base parameters are compared after projecting "
                      "the published model onto the same base (many are near zero, hence the "
                      "large median relative difference)."]
        if "note" in r:
            lines += ["", r["note"]]
        lines.append("")
    return "\n".join(lines)


def main() -> dict:
    torch.set_num_threads(1)
    t0 = time.time()
    out: dict = {"datasets": {}}
    for name, fn in (("franka_panda_gaz2019", run_panda), ("kuka_lwr4_flobaroid", run_kuka),
                     ("schunk_lwa4p", lambda: run_learned_only(load_schunk)),
                     ("sarcos_test_only", lambda: run_learned_only(load_sarcos))):
        t1 = time.time()
        try:
            out["datasets"][name] = fn()
        except FileNotFoundError as exc:
            out["datasets"][name] = {"error": str(exc)}
        out["datasets"][name]["seconds"] = time.time() - t1
        print(name, {k: np.round(v["nmse"], 3).tolist() for k, v in
                     out["datasets"][name].get("models", {}).items()}, flush=True)
    out["seconds_total"] = time.time() - t0
    return out


if __name__ == "__main__":
    res = main()
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_result(RESULTS / "real_arms.json", res)
    write_text(RESULTS / "real_arms.md", to_markdown(res))
    print(to_markdown(res))
