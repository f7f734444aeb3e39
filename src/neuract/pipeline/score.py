"""Any saved simulator model, open loop on any recorded episodes: what ``neuract score`` runs.

The models (:func:`load_scorable`):

* a ``neuract fit`` output (a parametric servo, an actuator net, a residual on a servo: any
  actuator family with its joint parameters), and the fitted baselines ``neuract evaluate``
  saves in that form (``checkpoints/baseline_<name>/``), on the plant it was fitted on: the
  bench pendulum (one plant per run from its ``mass``/``length`` labels) or an arm;
* a simulator-mode NeuralActuator checkpoint (arms), on the episodes' arm model;
* a saved MuJoCo position-servo baseline (kind ``mujoco_servo``), in MuJoCo.

Each episode starts from its measured state and is driven by its commands alone (goals, and
the known inputs the model reads: supply voltage, torque enable, run labels such as the
firmware ``kp``). A fit model is simulated as ``neuract fit`` scores its validation runs: every
episode on a uniform grid of the data's sample period, all episodes batched; a NeuralActuator
(from its measured ``history``-sample past) and the MuJoCo servo at the recorded samples, by
the rollout protocol (:func:`neuract.eval.protocol.simulate_full`). The score counts the
simulated samples only (not the measured start), and only valid ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neuract.atomic import is_output
from neuract.data import load_dataset
from neuract.data.dataset import is_dataset, require_channels
from neuract.errors import CheckpointError, ConfigError, NeuractError, SchemaError
from neuract.eval.protocol import simulate_full
from neuract.fit.batch import RunBatch, batch_from_trajectories
from neuract.fit.identify import plant_factory
from neuract.fit.saved import FittedModel, is_fit_output, load_fit
from neuract.io.bam import iter_bam_logs
from neuract.io.nad import iter_nad, read_nad_csv
from neuract.neuralactuator import simulator as na_simulator
from neuract.neuralactuator.checkpoint import CHECKPOINT_DEST
from neuract.pipeline.baseline_checkpoints import MujocoServo, is_mujoco_servo, load_mujoco
from neuract.pipeline.checkpoints import load_model
from neuract.pipeline.nad_data import omx_arm_only
from neuract.pipeline.streaming import model_channels, resolve_robot
from neuract.robot.bundled import BUNDLED_ROBOTS
from neuract.robot.match import UNNAMED, arm_of, check_arm, check_joints

KINDS = ("fit", "neuralactuator", "mujoco_servo")
ACCEPTED = ("a neuract fit output (config.json of type FitConfig + model.safetensors; also "
            "evaluate's checkpoints/baseline_<name>/ of a fitted baseline), a simulator-mode "
            "NeuralActuator checkpoint (config.json of kind 'neuralactuator') or a MuJoCo servo "
            "baseline (config.json of kind 'mujoco_servo')")
PENDULUM_LABELS = ("mass", "length")


# ----------------------------------------------------------------------------- data
def read_episodes(path: str | Path, option: str = "--data") -> list[Any]:
    """Episodes from a neuract dataset directory, BAM pendulum logs (one ``.json``, a folder
    of them or a ``.tgz``), or NAD CSV file(s)."""
    import warnings

    p = Path(path)
    if is_dataset(p, option):
        ds = load_dataset(p)
        return [ds[i] for i in range(len(ds))]
    if not p.exists():
        raise ConfigError(f"{option} {str(p)!r}: no such file or directory; expected a dataset "
                          "directory (meta/info.json), BAM logs (*.json, a folder or .tgz of "
                          "them) or NAD CSV file(s)")
    if p.is_file() and p.suffix.lower() == ".csv":
        return [read_nad_csv(p)]
    if p.is_dir() and any(p.rglob("*.csv")):
        trajs = list(iter_nad(p))
        if trajs:
            return trajs
    with warnings.catch_warnings(record=True) as caught:  # one summary line, not one per run
        warnings.simplefilter("always")
        try:
            trajs = list(iter_bam_logs(p))
        except NeuractError as e:
            raise type(e)(f"{option} {str(p)!r}: {e}") from None
    for w in caught[:1]:
        warnings.warn(str(w.message), w.category, stacklevel=2)
    if not trajs:
        raise SchemaError(f"{option} {str(p)!r} holds no episodes")
    return trajs


def is_pendulum(trajs: Sequence[Any]) -> bool:
    """Whether the episodes are bench-pendulum runs (robot ``pendulum``, or one joint and
    mass/length labels)."""
    tr = trajs[0]
    return (str(tr.meta.robot).lower() == "pendulum"
            or (len(tr.meta.joint_names) == 1
                and all(k in tr.meta.labels for k in PENDULUM_LABELS)))


def describe_data(trajs: Sequence[Any]) -> str:
    """``'so101' episodes with 6 joints (shoulder_pan, ...)``."""
    tr = trajs[0]
    names = list(tr.meta.joint_names)
    robot = "bench pendulum" if is_pendulum(trajs) else repr(str(tr.meta.robot or "unnamed"))
    return f"{robot} episodes with {len(names)} joint(s) ({', '.join(names)})"


# ---------------------------------------------------------------------------- models
@dataclass
class Scorable:
    """A loaded model and what it was made for."""

    kind: str
    """'fit', 'neuralactuator' or 'mujoco_servo'"""
    path: Path
    label: str
    """what it is, in words"""
    robot: str
    """the plant it runs on: 'pendulum', a bundled arm or a description file; '' = the
    episodes' arm (a NeuralActuator)"""
    n_joints: int
    obj: Any
    option: str = "--model"
    """how the command line gave it (for messages)"""

    def info(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": self.kind, "label": self.label,
                "robot": self.robot or None, "n_joints": self.n_joints}


def _config_json(path: Path) -> dict[str, Any]:
    try:
        info = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def load_scorable(path: str | Path, option: str = "--model") -> Scorable:
    """The model saved at ``path`` (see the module docstring); CheckpointError naming what
    the directory is and what is accepted, for anything else."""
    p = Path(path)
    where = f"{option} {str(p)!r}"
    if not p.exists():
        raise CheckpointError(f"{where}: no such directory; accepted: {ACCEPTED}")
    if not p.is_dir():
        raise CheckpointError(f"{where} is a file; accepted: a directory, {ACCEPTED}")
    if is_fit_output(p):
        fm = load_fit(p)
        a = fm.config.actuator
        net = a.type in ("mlp", "gru", "transformer")
        what = f"actuator {a.type}" + (f", friction {a.friction}" if not net else "")
        if getattr(a, "residual", "none") not in ("none", "", None):
            what += f", residual {a.residual}"
        return Scorable("fit", p, f"neuract fit model ({what})", fm.robot, fm.n_dof, fm, option)
    if is_mujoco_servo(p):
        ms = load_mujoco(p)
        return Scorable("mujoco_servo", p, f"MuJoCo position servo of {ms.robot}", ms.robot,
                        len(ms.joint_names), ms, option)
    if is_output(p, **CHECKPOINT_DEST):
        model = load_model(p)
        if model.cfg.mode != "simulator":
            raise CheckpointError(f"{where} is an {model.cfg.mode}-mode NeuralActuator; score "
                                  "simulates open loop: give a simulator-mode checkpoint "
                                  "(checkpoints/neuralactuator_simulator)")
        return Scorable("neuralactuator", p, f"NeuralActuator (simulator mode, prior "
                        f"{model.cfg.prior})", "", model.cfg.n_joints, model, option)
    info = _config_json(p)
    if info.get("type") == "IdentifyConfig":
        raise CheckpointError(f"{where} is a neuract identify output (inverse dynamics: torques "
                              "from the measured motion), not a simulator; accepted: "
                              f"{ACCEPTED}")
    if not (p / "config.json").is_file():
        raise CheckpointError(f"{where} has no config.json; accepted: {ACCEPTED}")
    found = (f"type={info.get('type')!r}" if "type" in info
             else f"kind={info.get('kind')!r}")
    raise CheckpointError(f"{where}: its config.json has {found}; accepted: {ACCEPTED}")


# --------------------------------------------------------------------------- rollouts
@dataclass
class Rollout:
    """One episode: its measured and simulated positions and the samples that count."""

    name: str
    labels: dict[str, Any]
    t: np.ndarray  # (T,) [s]
    q: np.ndarray  # (T, n) measured [rad]
    q_sim: np.ndarray  # (T, n) simulated [rad]
    scored: np.ndarray  # (T, n) bool: simulated (not the measured start) and valid


ProgressFn = Callable[[int, int], None]


def _mismatch(m: Scorable, trajs: Sequence[Any], data: str, fix: str) -> ConfigError:
    fitted = ("the bench pendulum (1 joint)" if m.robot == "pendulum"
              else f"{m.robot!r} ({m.n_joints} joints)")
    made = {"fit": "was fitted on", "mujoco_servo": "is the servo of",
            "neuralactuator": "models"}[m.kind]
    return ConfigError(f"{m.option} {str(m.path)!r} ({m.label}) {made} {fitted}; --data "
                       f"{data!r} holds {describe_data(trajs)}: {fix}")


def check_model_data(m: Scorable, trajs: Sequence[Any], data: str, robot: str = "",
                     force: bool = False) -> None:
    """Refuse (one-line ConfigError naming the model's kind and robot and the data's robot
    and joints) a model that does not fit the episodes."""
    pend = is_pendulum(trajs)
    tr = trajs[0]
    names = list(tr.meta.joint_names)
    logged = str(tr.meta.robot or "")
    if m.kind == "fit" and m.robot == "pendulum":
        if robot:
            raise ConfigError(f"--robot {robot!r} applies to arm models; {m.option} "
                              f"{str(m.path)!r} was fitted on the bench pendulum (one plant per "
                              "run from its mass and length labels)")
        if not pend:
            raise _mismatch(m, trajs, data, "score it on pendulum runs, or give a model fitted "
                            f"on {logged or 'that arm'}")
        for t in trajs:
            lacking = [k for k in PENDULUM_LABELS if k not in t.meta.labels]
            if lacking:
                raise ConfigError(f"--data {data!r}: episode {t.meta.name!r} lacks the label "
                                  f"{lacking[0]!r} that the pendulum model {m.option} "
                                  f"{str(m.path)!r} needs (each run's mass and length build "
                                  "its plant)")
        return
    if pend:
        raise _mismatch(m, trajs, data, "give a model fitted on the pendulum (neuract fit "
                        "--robot pendulum)")
    n = len(names)
    gripper = m.n_joints == n - 1 and arm_of(logged) == "omx"  # NAD's OMX gripper column
    if n != m.n_joints and not gripper:
        raise _mismatch(m, trajs, data, f"give a model of {logged or 'that arm'} with {n} "
                        "joints")
    if m.kind == "neuralactuator":
        return  # its arm model is the episodes' (or --robot), checked when it is loaded
    own = m.robot
    if robot and m.kind == "mujoco_servo":
        raise ConfigError(f"--robot {robot!r} applies to fit models of an arm and to "
                          f"NeuralActuator checkpoints; {m.option} {str(m.path)!r} is a MuJoCo "
                          f"servo of its own arm model ({own!r})")
    if robot:  # another model of the arm, given by the user
        check_arm(robot, plant_factory(robot)([]).joint_names, names if not gripper else n - 1,
                  f"--data {data!r}", logged, force)
        return
    if (not force and own in BUNDLED_ROBOTS and logged.lower() not in UNNAMED
            and arm_of(own) != arm_of(logged)):
        raise _mismatch(m, trajs, data, f"give a model of {logged}, or add --force-robot to "
                        "score it anyway")
    if not gripper:  # the same joints in the same order (other names: a warning)
        joints = (m.obj.joint_names if m.kind == "mujoco_servo"
                  else plant_factory(own)([]).joint_names)
        check_joints(own, joints, names, f"--data {data!r}", f"{m.option}'s robot")


def label_inputs(fm: FittedModel, trajs: Sequence[Any], data: str,
                 option: str = "--model") -> tuple[str, ...]:
    """The run labels a fit model reads that the episodes carry (all of them, or none: one
    carried by only some episodes is refused)."""
    out = []
    for k in fm.config.train.label_inputs:
        have = [k in t.meta.labels for t in trajs]
        if any(have) and not all(have):
            t = trajs[have.index(False)]
            raise ConfigError(f"--data {data!r}: episode {t.meta.name!r} lacks the label {k!r} "
                              f"that the other episodes carry and the model {option} "
                              f"{str(fm.path)!r} reads (its --train.label-inputs); accepted: "
                              "episodes that all carry it, or none")
        if all(have):
            out.append(k)
    return tuple(out)


def grid_batch(trajs: Sequence[Any]) -> RunBatch:
    """The episodes on one uniform grid (each from its first sample, step: the first
    episode's sample period), as ``neuract fit`` reads runs."""
    return batch_from_trajectories(list(trajs))


def _grid_rollouts(batch: RunBatch, trajs: Sequence[Any], q_sim: np.ndarray) -> list[Rollout]:
    out = []
    q, mask = batch.q.numpy(), batch.mask.numpy()
    for b, tr in enumerate(trajs):
        t = np.asarray(tr["t"], dtype=np.float64)
        T = min(int(np.floor((t[-1] - t[0]) / batch.dt + 1e-9)) + 1, q.shape[1])
        scored = mask[b, :T].copy()
        scored[0] = False
        out.append(Rollout(tr.meta.name, dict(tr.meta.labels), t[0] + batch.dt * np.arange(T),
                           q[b, :T], q_sim[b, :T], scored))
    return out


def fit_rollouts(fm: FittedModel, trajs: Sequence[Any], data: str, robot: str = "",
                 substeps: int = 0, progress: ProgressFn | None = None,
                 batch: RunBatch | None = None, chunk: int = 256) -> list[Rollout]:
    """A fit model on every episode, batched on the uniform grid (as fit validates)."""
    label_inputs(fm, trajs, data)
    batch = batch if batch is not None else grid_batch(trajs)
    tc = fm.config.train
    pf = plant_factory(robot or fm.robot, arm_mass=fm.config.arm_mass
                       if fm.robot == "pendulum" else None)
    out = []
    with torch.no_grad():
        for s in range(0, len(batch), chunk):
            if progress:
                progress(s, len(batch))
            sub = batch.select(range(s, min(s + chunk, len(batch))))
            out.append(fm.system.rollout(pf(sub.labels), sub, substeps or tc.substeps,
                                         tc.label_inputs, tc.use_voltage).numpy())
    if progress:
        progress(len(batch), len(batch))
    return _grid_rollouts(batch, trajs, np.concatenate(out))


def _protocol_rollouts(sim, trajs: Sequence[Any], history: int, inputs_of,
                       progress: ProgressFn | None) -> list[Rollout]:
    out = []
    first = max(history - 1, 0)
    for i, tr in enumerate(trajs):
        if progress:
            progress(i, len(trajs))
        q_sim = simulate_full(sim, tr, "model", inputs=inputs_of(tr), history=history)
        q = np.asarray(tr["q"], dtype=np.float64)
        valid = (np.asarray(tr["valid"], bool) if "valid" in tr
                 else np.ones(q.shape, bool)).copy()
        valid[:first + 1] = False
        out.append(Rollout(tr.meta.name, dict(tr.meta.labels),
                           np.asarray(tr["t"], dtype=np.float64), q, q_sim, valid))
    if progress:
        progress(len(trajs), len(trajs))
    return out


def arm_joints(m: Scorable, trajs: Sequence[Any]) -> list[Any]:
    """The episodes with the model's joints (NAD's OMX episodes lose their gripper column
    where the model has the 4 arm joints)."""
    return [omx_arm_only(t) if (len(t.meta.joint_names) == m.n_joints + 1
                                and arm_of(str(t.meta.robot)) == "omx") else t for t in trajs]


def rollouts(m: Scorable, trajs: Sequence[Any], data: str, robot: str = "",
             force: bool = False, substeps: int = 0, progress: ProgressFn | None = None,
             batch: RunBatch | None = None) -> list[Rollout]:
    """Every episode of ``trajs`` simulated open loop by ``m`` (checked against the episodes
    first: :func:`check_model_data`). batch: the episodes (with the model's joints,
    :func:`arm_joints`) on their grid (:func:`grid_batch`), where the caller has it."""
    require_channels(trajs, ("t", "q", "q_goal"), data, f"the model {m.option} {str(m.path)!r}")
    check_model_data(m, trajs, data, robot, force)
    trajs = arm_joints(m, trajs)
    if m.kind == "fit":
        return fit_rollouts(m.obj, trajs, data, robot, substeps, progress, batch)
    if m.kind == "mujoco_servo":
        ms: MujocoServo = m.obj
        return _protocol_rollouts(ms.simulator(), trajs, 0, lambda tr: ("q_goal",), progress)
    model = m.obj
    require_channels(trajs, model_channels(model), data,
                     f"the simulator-mode model {m.option} {str(m.path)!r}")
    arm, _ = resolve_robot(robot, model, trajs, force=force, data=f"--data {data!r}")
    sim = na_simulator(model, arm, substeps or 2)
    return _protocol_rollouts(sim, trajs, model.cfg.history,
                              lambda tr: ("q_goal", "voltage") if "voltage" in tr
                              else ("q_goal",), progress)


__all__ = ["ACCEPTED", "KINDS", "Rollout", "Scorable", "arm_joints", "check_model_data",
           "describe_data", "fit_rollouts", "grid_batch", "is_pendulum", "label_inputs",
           "load_scorable",
           "read_episodes", "rollouts"]
