"""Realism check: replay real NAD goal trajectories on twin units and compare statistics.

The same statistics are computed on a real NAD file and on the twin driven by that file's
own goal trajectory (and payload), for several randomly drawn units:

- ``noise_steps``: mean |q[k+1] - q[k]| at rest [encoder steps], median over arm joints;
- ``load_rest``: median |load| at rest on shoulder_lift and elbow_flex [0.1 % duty counts];
- ``err_move_med`` / ``err_move_p90``: |q - q_goal| while the goal moves [deg], over the
  arm joints 1-4;
- ``v_min`` / ``v_mean`` / ``v_max``: supply voltage [V];
- ``temp``: temperature [degC] and ``temp_drift_10s``: change of the per-joint median
  temperature between the first and the last second of ~10 s [degC];
- ``current_change_rest``: share of consecutive rest samples in which the current register
  reads differently, median over the arm joints 1-4. Reported, not checked
  (:data:`UNCHECKED`): by default the twin's current register has no sensor noise of its
  own (``SimConfig.current_noise_lsb`` adds it; ``benchmarks/studies/bench_twin_current_noise.py``).
"""

from __future__ import annotations

import numpy as np

from neuract.data.trajectory import Trajectory
from neuract.twin.config import ROBOT_SPECS, RobotTwinSpec, SimConfig
from neuract.twin.generate import _model, episode_rng, unit_rng
from neuract.twin.servo import sample_unit
from neuract.twin.sim import Job, simulate
from neuract.twin.tasks import EpisodePlan
from neuract.twin.telemetry import to_trajectory

LSB = 2 * np.pi / 4096
ARM = slice(0, 4)
UNCHECKED = {
    "current_change_rest": "by default the twin's current register has no sensor noise of its "
                           "own: on the SO-101 it changes far less often at rest than the "
                           "real one (SimConfig.current_noise_lsb adds it)",
}
"""statistics that :func:`stats` reports but :func:`tolerance_bands` gives no band (why)"""


def rest_mask(tr: Trajectory, hold: int = 30, settle: int = 15) -> np.ndarray:
    """(T,) True where the goal has been constant (< 1.5 steps per sample on every joint)
    for at least ``hold`` samples; the first ``settle`` samples of each hold are skipped."""
    g = tr["q_goal"]
    still = np.concatenate([[False], np.all(np.abs(np.diff(g, axis=0)) < 1.5 * LSB, axis=1)])
    run = np.zeros(len(still), int)
    for i in range(1, len(still)):
        run[i] = run[i - 1] + 1 if still[i] else 0
    # extend: a sample belongs to a hold if the hold it is in reaches `hold` samples
    out = np.zeros(len(still), bool)
    i = 0
    while i < len(still):
        if run[i] == 0:
            i += 1
            continue
        j = i
        while j + 1 < len(still) and run[j + 1] > 0:
            j += 1
        if j - i + 1 >= hold:
            out[i + settle:j + 1] = True
        i = j + 1
    return out


def stats(tr: Trajectory) -> dict[str, float]:
    """The realism statistics of one trajectory (see the module docstring)."""
    out: dict[str, float] = {}
    rest = rest_mask(tr)
    q = tr["q"]
    if rest.sum() > 10:
        idx = np.flatnonzero(rest)
        pairs = idx[:-1][np.diff(idx) == 1]
        dq = np.abs(q[pairs + 1] - q[pairs]) / LSB
        out["noise_steps"] = float(np.median(dq[:, :5].mean(axis=0)))
        if "load" in tr:
            out["load_rest"] = float(np.median(np.abs(tr["load"][rest][:, 1:3]) * 1000))
        if "current" in tr:
            cur = tr["current"]
            changed = cur[pairs + 1][:, ARM] != cur[pairs][:, ARM]
            out["current_change_rest"] = float(np.median(changed.mean(axis=0)))
    gd = np.abs(np.gradient(tr["q_goal"], tr["t"], axis=0))
    moving = np.any(gd[:, ARM] > 0.2, axis=1)
    if moving.sum() > 10:
        err = np.degrees(np.abs(q - tr["q_goal"]))[moving][:, ARM]
        out["err_move_med"] = float(np.median(err))
        out["err_move_p90"] = float(np.percentile(err, 90))
    v = tr["voltage"]
    out["v_min"], out["v_mean"], out["v_max"] = float(v.min()), float(v.mean()), float(v.max())
    temp = tr["temperature"]
    out["temp_median"] = float(np.median(temp))
    k = max(1, int(round(tr.meta.rate_hz or 60.0)))
    out["temp_drift_10s"] = float(np.max(np.abs(np.median(temp[-k:], axis=0)
                                                - np.median(temp[:k], axis=0))))
    return out


def replay(real: Trajectory, n_units: int = 4, seed: int = 0, physics_hz: float = 500.0,
           spec: RobotTwinSpec | None = None, current_noise_lsb: float = 0.0
           ) -> list[Trajectory]:
    """The twin driven by ``real``'s goal trajectory and payload, on ``n_units`` units
    (``spec`` overrides the robot's default twin spec, e.g. for a negative control;
    ``current_noise_lsb``: ``SimConfig.current_noise_lsb``)."""
    robot = real.meta.robot
    spec = spec or ROBOT_SPECS[robot]()
    tm = _model(robot, physics_hz)
    n = tm.n
    t = real["t"] - real["t"][0]
    goal = real["q_goal"][:, :n]
    mass = float(real.meta.labels.get("payload_mass_kg") or 0.0)
    duration = float(t[-1])
    cfg = SimConfig(physics_hz=physics_hz, episode_s=duration, n_envs=n_units)
    jobs = []
    for u in range(n_units):
        params, bus = sample_unit(spec, n, unit_rng(seed, u))
        plan = EpisodePlan("replay", "nad", np.concatenate([t, [t[-1] + 1.0]]),
                           np.concatenate([goal, goal[-1:]]), payload_kg=mass,
                           attach_t=0.0 if mass > 0 else np.inf)
        jobs.append(Job(u, 0, params, bus, plan, episode_rng(seed, u, 0)))
    recs = simulate(tm, spec, cfg, jobs)
    return [to_trajectory(r, spec, cfg.nonideal, tm.joint_names, f"replay/unit{u}",
                          {"unit": u}, None, current_noise_lsb=current_noise_lsb,
                          rng=job.rng) for u, (r, job) in enumerate(zip(recs, jobs))]


def tolerance_bands(r: dict[str, float]) -> dict[str, tuple[float, float]]:
    """Tolerance band of each statistic given a real file's values ``r``: factor 3 on noise
    and tracking error, 2.5 on the rest load, +-0.3-0.4 V on voltages, 25-50 degC (real
    files: 30-45 degC), and at most 1 degC more 10-s drift than the real file."""
    b = {
        "noise_steps": (r["noise_steps"] / 3.0, r["noise_steps"] * 3.0 + 0.2),
        "err_move_med": (r["err_move_med"] / 3.0, r["err_move_med"] * 3.0 + 0.3),
        "err_move_p90": (r["err_move_p90"] / 3.0, r["err_move_p90"] * 3.0),
        "v_min": (r["v_min"] - 0.4, r["v_mean"]),
        "v_mean": (r["v_mean"] - 0.3, r["v_mean"] + 0.3),
        "v_max": (r["v_mean"], r["v_max"] + 0.3),
        "temp_median": (25.0, 50.0),
        "temp_drift_10s": (0.0, r["temp_drift_10s"] + 1.0),
    }
    if "load_rest" in r:
        b["load_rest"] = (r["load_rest"] / 2.5, r["load_rest"] * 2.5)
    return b
