"""A small synthetic experiment result (the shape :func:`neuract.pipeline.experiment.
run_experiment` returns, raw arrays for the figures included) for the report tests: one test
episode, four joints, NeuralActuator and baselines, one of them diverging."""

from __future__ import annotations

import numpy as np

from neuract.data import Trajectory, TrajectoryMeta
from neuract.eval import evaluate_estimator
from neuract.pipeline.scoring import mark_unscored

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "gripper"]
EPISODE = "unit000/ep0001_push"
PARAMETRIC = "parametric sts3215+none"


def _episode(contact: bool, degraded: bool, n: int = 240) -> Trajectory:
    t = np.linspace(0.0, 4.8, n)
    q = 0.4 * np.sin(t[:, None] * np.array([1.0, 1.3, 0.7, 2.0]))
    c = np.zeros(n, bool)
    f = np.zeros((n, 3))
    if contact:
        c[80:160] = True
        f[80:160] = [0.5, -0.3, -2.0]
    return Trajectory({"t": t, "q": q, "tau": 0.2 * q, "ee_force": f, "contact": c,
                       "condition": (np.arange(n) >= n // 2) & degraded},
                      TrajectoryMeta(robot="so101", joint_names=tuple(JOINTS), name=EPISODE,
                                     labels={"task": "push" if contact else "free",
                                             "unit": 0}))


def _outputs(tr: Trajectory) -> dict[str, dict]:
    """model -> its estimator-mode outputs on ``tr``."""
    rng = np.random.default_rng(0)
    n = len(tr)
    f, c = tr["ee_force"], tr["contact"]
    na = {"tau": tr["tau"] + 0.01, "ee_force": f + 0.05 * rng.standard_normal((n, 3)),
          "contact_prob": np.where(c, 0.9, 0.1), "valid": np.ones(n, bool),
          "condition_prob": np.full(n, 0.2)}
    return {"NeuralActuator": na,
            "momentum observer (NeuralActuator torque)": {"ee_force": f + 0.2},
            "momentum observer (Kt I)": {"ee_force": f + 0.4},
            "model residual J^T (Kt I)": {"ee_force": f - 0.6},
            f"momentum observer ({PARAMETRIC})": {"ee_force": f + 40.0 * np.sin(tr["t"])[:, None]},
            PARAMETRIC: {"tau": tr["tau"] + 0.05}}


def synthetic_results(contact: bool = True, degraded: bool = True) -> dict:
    """A results dict: ``contact`` False leaves the test episode without a contact sample,
    ``degraded`` False without a degraded one (else its second half is degraded)."""
    tr = _episode(contact, degraded)
    outs = _outputs(tr)
    est = [mark_unscored(evaluate_estimator(lambda x, m=m: outs[m], [tr], m)) for m in outs]
    q = tr["q"]
    drift = np.linspace(0, 3.0, len(tr))[:, None]  # the MLP diverges by 170 deg
    full_q = {"NeuralActuator": q + 0.01, PARAMETRIC: q + 0.02, "MuJoCo default servo": q - 0.03,
              "MLP actuator net": q + drift}
    rollouts = []
    for m, mae in (("NeuralActuator", 0.7), (PARAMETRIC, 0.9), ("MuJoCo default servo", 1.2),
                   ("MLP actuator net", 15.0)):
        for h in (10, 50):
            v = mae * (1 + h / 50)
            rollouts.append({"mode": "simulator", "model": m, "protocol": "open_loop_rollout",
                             "horizon": h, "n_windows": 20,
                             "joint_mae_deg": dict.fromkeys(JOINTS, v), "arm_mean_deg": v,
                             "arm_max_deg": v})
    models = {"NeuralActuator[simulator]": {"mode": "simulator", "params": 4706, "flops": 39616},
              "NeuralActuator[estimator]": {"mode": "estimator", "params": 4994, "flops": 44224},
              PARAMETRIC: {"mode": "simulator", "params": 12, "flops": None}}
    return {"robot": "so101", "n_train": 3, "n_test": 1, "models": models,
            "rollouts": rollouts, "estimation": est, "best_parametric": {"name": PARAMETRIC},
            "timings_s": {"total": 1.0},
            "_figures": {"full_q": full_q, "fig_traj": tr, "est": {m: {EPISODE: o}
                                                                   for m, o in outs.items()},
                         "test": [tr]}}
