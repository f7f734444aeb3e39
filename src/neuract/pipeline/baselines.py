"""Baselines scored by the same protocol as NeuralActuator.

Simulator mode (open-loop rollouts, :data:`neuract.eval.Simulator`):

* :func:`mujoco_servo_simulator` -- MuJoCo's own position actuator with the description's
  parameters (SO-101: the Menagerie/LeRobot ``sts3215`` class, kp 17.8 N m/rad, forcerange
  +-3.35 N m, damping 0.60, frictionloss 0.052, armature 0.028), rolled out with
  ``mujoco.rollout`` at >= 500 Hz physics;
* :func:`system_simulator` -- any actuator family of :mod:`neuract.actuators` (the parametric
  servo, the MLP actuator net of Hwangbo et al. 2019, a GRU) with joint parameters, fitted
  pose-only with :func:`neuract.fit.identify.identify` (:func:`fit_actuator`).

Estimator mode (``est(traj) -> dict``, :func:`neuract.eval.evaluate_estimator`):

* :func:`fit_linear_kt` / :func:`linear_kt_estimator` -- tau = Kt I, Kt fitted per joint by
  least squares against inverse dynamics of the measured motion (positions only);
* :func:`system_torque_estimator` -- a fitted actuator's torque at the measured state;
* :func:`condition_baseline` -- threshold / SVM / random-forest classifiers on windowed
  features, each sample taking the latest window that ends at or before it (causal);
* :func:`ident_condition_baseline` -- a random forest on the identification channels
  (:data:`neuract.neuralactuator.features.IDENT_CHANNELS`, a running least-squares fit of each
  motor over the episode so far), the peer of a NeuralActuator that reads them.

Force baselines (momentum observer, model-based residual through J^T) are
:func:`neuract.estimate.force_estimator`, given a torque from one of the estimators above.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mujoco
import numpy as np
import torch
from mujoco import rollout

from neuract.actuators.base import ActuatorState
from neuract.actuators.param import cached_params
from neuract.errors import ConfigError, SchemaError
from neuract.estimate import make_condition_baseline, window_features
from neuract.estimate.condition import condition_estimator
from neuract.eval.adapters import system_model_simulator
from neuract.eval.protocol import SimBatch, Simulator
from neuract.fit.batch import batch_from_trajectories
from neuract.fit.identify import build_model
from neuract.fit.trainer import TrainConfig, fit
from neuract.neuralactuator.data import smooth_velocity
from neuract.neuralactuator.features import IDENT_CHANNELS, trajectory_channels
from neuract.sim.simulate import JointParamsConfig

# ----------------------------------------------------------------------- MuJoCo servo
SERVO_PARAMS = ("kp", "kv", "forcerange", "damping", "armature", "frictionloss")
"""what a MuJoCo position servo's parameters are, per joint: the actuator's gain kp [N m/rad],
velocity gain kv [N m s/rad] and force range [N m] (None: unlimited), the joint's damping
[N m s/rad], armature [kg m^2] and frictionloss [N m]"""


def _servo_indices(model, joint_names: Sequence[str], xml_path: str) -> tuple:
    names = [model.joint(i).name for i in range(model.njnt)]
    act_joint = [model.joint(int(model.actuator_trnid[a, 0])).name for a in range(model.nu)]
    missing = [j for j in joint_names if j not in names or j not in act_joint]
    if missing:
        raise SchemaError(f"{xml_path}: joints {missing} lack a joint or a position actuator; "
                          f"joints {names}, actuated {act_joint}")
    qadr = np.array([model.jnt_qposadr[model.joint(j).id] for j in joint_names])
    vadr = np.array([model.jnt_dofadr[model.joint(j).id] for j in joint_names])
    aidx = np.array([act_joint.index(j) for j in joint_names])
    return qadr, vadr, aidx


def mujoco_servo_params(xml_path: str, joint_names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Joint -> :data:`SERVO_PARAMS` of the MJCF's position servo of each joint."""
    model = mujoco.MjModel.from_xml_path(str(xml_path))
    _, vadr, aidx = _servo_indices(model, joint_names, xml_path)
    out = {}
    for j, v, a in zip(joint_names, vadr, aidx):
        limited = bool(model.actuator_forcelimited[a])
        out[j] = {"kp": float(model.actuator_gainprm[a, 0]),
                  "kv": float(-model.actuator_biasprm[a, 2]),
                  "forcerange": ([float(x) for x in model.actuator_forcerange[a]] if limited
                                 else None),
                  "damping": float(model.dof_damping[v]),
                  "armature": float(model.dof_armature[v]),
                  "frictionloss": float(model.dof_frictionloss[v])}
    return out


def _set_servo_params(model, joint_names: Sequence[str], vadr, aidx,
                      params: Mapping[str, Mapping[str, Any]]) -> None:
    """Write :data:`SERVO_PARAMS` (joint -> values, as :func:`mujoco_servo_params` reads
    them) into ``model``."""
    for j, v, a in zip(joint_names, vadr, aidx):
        p = params[j]
        model.actuator_gainprm[a, 0] = p["kp"]
        model.actuator_biasprm[a, 1] = -p["kp"]
        model.actuator_biasprm[a, 2] = -p["kv"]
        if p["forcerange"] is None:
            model.actuator_forcelimited[a] = 0
        else:
            model.actuator_forcelimited[a] = 1
            model.actuator_forcerange[a] = p["forcerange"]
        model.dof_damping[v] = p["damping"]
        model.dof_armature[v] = p["armature"]
        model.dof_frictionloss[v] = p["frictionloss"]


def mujoco_servo_simulator(xml_path: str, joint_names: Sequence[str],
                           physics_dt: float = 0.002,
                           params: Mapping[str, Mapping[str, Any]] | None = None) -> Simulator:
    """MuJoCo's default position servo: q_goal -> ctrl of each joint's position actuator.

    xml_path: an MJCF with one ``position`` actuator per trajectory joint (same names);
    physics_dt: largest physics step [s] (each telemetry step is split into equal steps);
    params: joint -> :data:`SERVO_PARAMS` to use instead of the MJCF's (a saved baseline's).
    """
    model = mujoco.MjModel.from_xml_path(str(xml_path))
    qadr, vadr, aidx = _servo_indices(model, joint_names, xml_path)
    if params is not None:
        _set_servo_params(model, joint_names, vadr, aidx, params)
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    nstate = mujoco.mj_stateSize(model, spec)

    def sim(batch: SimBatch) -> np.ndarray:
        B, H = batch.batch_size, batch.horizon
        dt = float(np.median(np.diff(batch.t, axis=1)))
        S = max(1, int(np.ceil(dt / physics_dt - 1e-9)))
        model.opt.timestep = dt / S
        state0 = np.zeros((B, nstate))
        for i in range(B):
            mujoco.mj_resetData(model, data)
            data.qpos[qadr] = batch.q0[i]
            data.qvel[vadr] = batch.qd0[i]
            mujoco.mj_getState(model, data, state0[i], spec)
        ctrl = np.zeros((B, H, model.nu))
        ctrl[:, :, aidx] = batch.q_goal
        ctrl = np.repeat(ctrl, S, axis=1)
        state, _ = rollout.rollout(model, data, state0, ctrl)
        # state after step k*S (k = 1..H): index k*S - 1; qpos starts after time (1 value)
        qpos = state[:, S - 1::S, 1:1 + model.nq]
        return qpos[:, :H, qadr]

    return sim


# ------------------------------------------------------------- fitted actuator families
def fit_joints():
    """Joint parameters of the fitted actuators: the arm model's own armature, no encoder
    offset, nothing fitted (a :class:`neuract.sim.simulate.JointParamsConfig`)."""
    return JointParamsConfig(armature=0.0, fit_armature=False, fit_offset=False)


def fit_actuator(trajs: Sequence[Any], plant, actuator, train=None, joints=None,
                 log: Callable[[str], None] | None = None):
    """Fit one actuator family + joint parameters pose-only (the identification trainer,
    :func:`neuract.fit.trainer.fit`: multiple shooting, horizon curriculum) on ``plant``
    (float64 robot). Returns (SystemModel, report). ``actuator``:
    :class:`neuract.actuators.ActuatorConfig`."""
    train = train or TrainConfig(horizons=(0.3, 0.8), stage_iters=(20, 20), windows_per_run=4,
                                 runs_per_iter=8, label_inputs=(), use_voltage=True)
    joints = joints or fit_joints()
    batch = batch_from_trajectories(list(trajs))
    model = build_model(actuator, joints, batch.q.shape[-1])
    report = fit(model, lambda labels: plant, batch, None, train, log=log)
    return model, report


def system_simulator(model, robot, substeps: int = 2, use_voltage: bool = True) -> Simulator:
    """Roll a fitted SystemModel (actuator + joint parameters) out on ``robot`` (float64);
    the supply voltage is fed whenever the protocol passes it (and ``use_voltage``)."""
    with_voltage = system_model_simulator(model, lambda labels: robot, substeps,
                                          use_voltage=True)
    without = system_model_simulator(model, lambda labels: robot, substeps)

    def sim(batch: SimBatch) -> np.ndarray:
        use = use_voltage and "voltage" in batch.inputs
        return (with_voltage if use else without)(batch)

    return sim


def _stack(trajs: Sequence[Any], key: str) -> tuple[np.ndarray, np.ndarray]:
    """(B, T_max, ...) padded with the last value, and lengths (B,)."""
    arrs = [np.asarray(tr[key], dtype=np.float64) for tr in trajs]
    T = max(len(a) for a in arrs)
    out = np.stack([np.concatenate([a, np.repeat(a[-1:], T - len(a), 0)]) for a in arrs])
    return out, np.array([len(a) for a in arrs])


@torch.no_grad()
def system_torques(model, robot, trajs: Sequence[Any], use_voltage: bool = True
                   ) -> list[np.ndarray]:
    """A fitted actuator's joint torque [N m] at every measured sample (estimator mode):
    the history sees the measured commands and states; friction budgets see the measured
    velocity, the rigid-body load and the joint inertia. Returns one (T, n) per trajectory."""
    q, lens = _stack(trajs, "q")
    qd, _ = _stack(trajs, "qd")
    qg, _ = _stack(trajs, "q_goal")
    t, _ = _stack(trajs, "t")
    volt = None
    if use_voltage and all("voltage" in tr for tr in trajs):
        v, _ = _stack(trajs, "voltage")
        volt = torch.as_tensor(v.reshape(v.shape[0], v.shape[1], -1).mean(-1, keepdims=True))
    act, joints = model.actuator, model.joints
    act.reset()
    q_t, qd_t, qg_t = (torch.as_tensor(x) for x in (q, qd, qg))
    out = []
    with cached_params():
        for k in range(q.shape[1]):
            dt = float(np.median(t[:, min(k + 1, q.shape[1] - 1)] - t[:, max(k, 1) - 1])) or 0.016
            qk = q_t[:, k]
            qgk = qk + joints.offset()
            M = robot.mass_matrix(qgk)
            inertia = torch.diagonal(M, dim1=-2, dim2=-1) + joints.armature()
            inputs = {} if volt is None else {"voltage": volt[:, k]}
            st = ActuatorState(q=qk, qd=qd_t[:, k], tau_ext=-robot.bias_forces(qgk, qd_t[:, k]),
                               inertia=inertia, dt=dt, inputs=inputs)
            act.observe(qg_t[:, k], st)
            out.append(act.torque(qg_t[:, k], st))
    tau = torch.stack(out, 1).numpy()
    return [tau[i, :n] for i, n in enumerate(lens)]


def system_torque_estimator(model, robot, use_voltage: bool = True):
    """``est(traj) -> {"tau"}`` from :func:`system_torques` (estimator mode)."""
    def est(traj) -> dict[str, np.ndarray]:
        return {"tau": system_torques(model, robot, [traj], use_voltage)[0]}

    return est


# ------------------------------------------------------------------------ tau = Kt I
def signed_current(traj) -> np.ndarray:
    """(T, n) motor current [A] with a sign: STS3215 report |duty * I| on the supply side, so
    the sign is taken from the signed load (duty) register; Dynamixel current is signed."""
    if "current" not in traj:
        raise SchemaError(f"trajectory {traj.meta.name!r} has no 'current' channel; the linear "
                          "tau = Kt I baseline needs the motor current")
    i = np.asarray(traj["current"], dtype=np.float64)
    if "load" in traj and (i >= 0).all():
        i = i * np.sign(np.asarray(traj["load"], dtype=np.float64))
    return i


def inverse_dynamics_torque(robot, traj) -> np.ndarray:
    """(T, n) rigid-body torque M qdd + b - J^T f explaining the measured motion [N m]
    (qd, qdd by Savitzky-Golay derivatives of q): a torque estimate from positions only."""
    t = np.asarray(traj["t"], dtype=np.float64)
    q = np.asarray(traj["q"], dtype=np.float64)
    qd = smooth_velocity(q, t)
    qdd = smooth_velocity(qd, t)
    tq = lambda x: torch.tensor(np.asarray(x), dtype=robot.dtype)  # noqa: E731
    with torch.no_grad():
        tau = robot.inverse_dynamics(tq(q), tq(qd), tq(qdd)).double().numpy()
    return tau


def fit_linear_kt(robot, trajs: Sequence[Any]) -> np.ndarray:
    """Kt (n,) [N m/A] per joint, least squares of tau_ID = Kt * I over free-motion samples
    (``contact`` False) -- positions and currents only."""
    num = den = 0.0
    for tr in trajs:
        free = ~np.asarray(tr.get("contact", np.zeros(len(tr), bool)), bool)
        i = signed_current(tr)[free]
        tau = inverse_dynamics_torque(robot, tr)[free]
        num = num + (i * tau).sum(0)
        den = den + (i * i).sum(0)
    if np.isscalar(den):
        raise SchemaError("fit_linear_kt: no trajectories")
    den = np.asarray(den)
    return np.where(den > 0, np.asarray(num) / np.maximum(den, 1e-12), 0.0)


def linear_kt_estimator(kt: np.ndarray):
    """``est(traj) -> {"tau": Kt * I}`` (estimator mode)."""
    kt = np.asarray(kt, dtype=np.float64)

    def est(traj) -> dict[str, np.ndarray]:
        return {"tau": signed_current(traj) * kt}

    return est


# -------------------------------------------------------------------------- condition
def condition_baseline(name: str, train_trajs: Sequence[Any], window: int = 64,
                       stride: int = 16, **kwargs: Any):
    """Fit a condition baseline (``threshold``, ``svm``, ``random_forest``) on windowed
    features of ``train_trajs``; returns ``(est, clf)``, ``est`` the causal per-sample
    estimator of :func:`neuract.estimate.condition.condition_estimator` (stride 1)."""
    wf = window_features(train_trajs, window=window, stride=stride)
    stats = list(dict.fromkeys(n.split(":", 1)[1] for n in wf.names))
    if "effort_per_tau" in stats:  # a measured torque is hidden truth on the twin: never used
        stats.remove("effort_per_tau")
        wf = window_features(train_trajs, window=window, stride=stride, stats=stats)
    if wf.labels is None:
        raise SchemaError("condition baselines need a 'condition' channel in every trajectory")
    if len(np.unique(wf.labels)) < 2:
        raise SchemaError("condition baselines need both classes in the training windows")
    clf = make_condition_baseline(name, **kwargs).fit(wf.features, wf.labels)
    return condition_estimator(clf, window=window, stride=1, stats=stats), clf


def ident_condition_baseline(train_trajs: Sequence[Any], physics: tuple[str, str],
                             effort: str, stride: int = 16, skip: int = 7,
                             ident_memory: int = 0, **kwargs: Any):
    """A random forest on the identification channels, one row per sample.

    Each sample's features are every joint's :data:`~neuract.neuralactuator.features.
    IDENT_CHANNELS` (computed causally from the episode so far, as a NeuralActuator reading
    them sees them; physics: the arm model's (robot name or path, end-effector site) for the
    gravity regressor; effort: ``"current"`` or ``"load"``) and its label the episode's
    ``condition`` at that sample. Training rows are every ``stride``-th sample; the first
    ``skip`` samples of an episode are neither trained on nor scored (a NeuralActuator with an
    8-sample history scores from its 8th sample: give ``history - 1``); ident_memory: the
    channels' memory [samples], as the NeuralActuator's. Returns ``(est, clf)``: ``est(traj) ->
    {"condition_prob" (T, K), "valid" (T,)}``; ``kwargs`` go to the random forest."""
    if stride < 1 or skip < 0:
        raise ConfigError(f"ident_condition_baseline: stride={stride!r} (>= 1) and "
                          f"skip={skip!r} (>= 0)")
    channels = ("q_goal", "q", "qd", effort, *IDENT_CHANNELS)

    def features(tr) -> np.ndarray:
        n = len(tr.meta.joint_names)
        parts = trajectory_channels(tr, channels, n, physics=physics,
                                    ident_memory=ident_memory)
        return np.concatenate([parts[c] for c in IDENT_CHANNELS], axis=1)  # (T, 8 n)

    if not all("condition" in tr for tr in train_trajs):
        raise SchemaError("condition baselines need a 'condition' channel in every trajectory")
    X = [features(tr)[skip::stride] for tr in train_trajs]
    y = [np.asarray(tr["condition"], dtype=np.int64)[skip::stride] for tr in train_trajs]
    y_all = np.concatenate(y)
    if len(np.unique(y_all)) < 2:
        raise SchemaError("condition baselines need both classes in the training samples")
    clf = make_condition_baseline("random_forest", **kwargs).fit(np.concatenate(X), y_all)

    def est(traj) -> dict[str, np.ndarray]:
        f = features(traj)
        valid = np.arange(len(f)) >= skip
        out = np.full((len(f), int(clf.classes_.max()) + 1), np.nan)
        if valid.any():
            out[valid] = clf.predict_proba(f[valid])
        return {"condition_prob": out, "valid": valid}

    return est, clf


def check_same_joints(trajs: Sequence[Any], robot) -> None:
    for tr in trajs:
        if tuple(tr.meta.joint_names) != tuple(robot.joint_names):
            raise ConfigError(f"trajectory {tr.meta.name!r} joints {tr.meta.joint_names} do "
                              f"not match the robot's {robot.joint_names}")


__all__ = [
    "SERVO_PARAMS",
    "check_same_joints",
    "condition_baseline",
    "ident_condition_baseline",
    "fit_actuator",
    "fit_joints",
    "fit_linear_kt",
    "inverse_dynamics_torque",
    "linear_kt_estimator",
    "mujoco_servo_params",
    "mujoco_servo_simulator",
    "signed_current",
    "system_simulator",
    "system_torque_estimator",
    "system_torques",
]
