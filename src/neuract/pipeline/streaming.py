"""What the verbs that read a checkpoint and telemetry share (``neuract estimate``,
``neuract simulate``, ``neuract adapt``): the episodes read from a dataset or NAD CSV files
and matched to the checkpoint's joints, the arm model they run on, and the output
directories of estimate and simulate (which never replace each other's)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from neuract.atomic import check_dest
from neuract.data import load_dataset
from neuract.data.dataset import is_dataset, require_channels
from neuract.errors import ConfigError, SchemaError
from neuract.io.nad import iter_nad, read_nad_csv
from neuract.pipeline.checkpoints import load_model
from neuract.pipeline.nad_data import omx_arm_only
from neuract.robot import load_robot
from neuract.robot.match import check_arm
from neuract.runtime.channels import (
    CONTEXT_CHANNELS,
    IDENT_CHANNELS,
    PHYSICS_CHANNELS,
    REFERENCE_CHANNELS,
    source_channels,
)

VERB_OF_MODE = {"estimator": "estimate", "simulator": "simulate"}
"""the verb that writes a ``summary.json`` of each ``mode``"""


def out_dest(mode: str) -> dict[str, Any]:
    """What makes a directory an earlier output of the verb of ``mode`` (estimator:
    ``neuract estimate``, simulator: ``neuract simulate``): its ``summary.json`` names that
    mode (as every version wrote it), so ``--overwrite`` of one verb never replaces the
    other's output."""
    if mode not in VERB_OF_MODE:
        raise ConfigError(f"out_dest: mode {mode!r}; accepted: {list(VERB_OF_MODE)}")
    return {"marker": "summary.json",
            "kind": lambda j: j.get("mode") == mode and "episodes" in j,
            "allowed": lambda name: name == "summary.json" or name.endswith(".parquet")}


ESTIMATE_DEST = out_dest("estimator")
SIMULATE_DEST = out_dest("simulator")
OUT_DEST = SIMULATE_DEST
"""the former name of :data:`SIMULATE_DEST` (``neuract simulate``'s outputs), kept for code
that imports it"""


def check_out(out: Path, overwrite: bool, inputs: Sequence[Path | str | None] = (),
              mode: str = "simulator") -> None:
    """Refuse, before any work, an ``--out`` that is or holds one of the ``inputs``
    (checkpoint, data, robot file), or an existing one that is not replaceable
    (:func:`neuract.atomic.check_dest`: without ``--overwrite``, not a directory, or not an
    earlier output of the verb of ``mode``: estimator for estimate, simulator (the default)
    for simulate)."""
    dest = out_dest(mode)
    marker = Path(out) / "summary.json"
    if overwrite and marker.is_file() and not Path(out).is_symlink():
        try:
            other = json.loads(marker.read_text()).get("mode")
        except (OSError, ValueError, AttributeError):
            other = None
        if other in VERB_OF_MODE and other != mode:
            raise ConfigError(
                f"output directory {str(out)!r} is an earlier neuract {VERB_OF_MODE[other]} "
                f"output (summary.json mode {other!r}); --overwrite of neuract "
                f"{VERB_OF_MODE[mode]} replaces only its own outputs: choose another output "
                "path")
    check_dest(out, overwrite, inputs=inputs, **dest)


def read_telemetry(path: Path) -> list:
    """Episodes from a dataset directory or NAD CSV file(s)."""
    path = Path(path)
    if is_dataset(path):  # one lacking its meta/info.json is refused as such
        ds = load_dataset(path)
        return [ds[i] for i in range(len(ds))]
    if path.is_file() and path.suffix.lower() == ".csv":
        return [read_nad_csv(path)]
    if path.is_dir():
        trajs = list(iter_nad(path))
        if trajs:
            return trajs
    raise SchemaError(f"--data {str(path)!r}: expected a dataset directory (meta/info.json), a "
                      "NAD CSV file or a folder of NAD CSV files")


def to_model_joints(model, traj):
    """The episode with the checkpoint's joints: OMX episodes from NAD carry a gripper column
    the arm model does not have (dropped); any other mismatch is refused."""
    n = model.cfg.n_joints
    if len(traj.meta.joint_names) == n + 1 and traj.meta.robot == "omx":
        return omx_arm_only(traj)
    if len(traj.meta.joint_names) != n:
        raise SchemaError(f"episode {traj.meta.name!r} has {len(traj.meta.joint_names)} joints; "
                          f"the checkpoint models {n}")
    return traj


def read_channels(channels: Sequence[str]) -> list[str]:
    """What a NeuralActuator with input ``channels`` reads from the episodes: the time stamps
    and its channels less those derived or computed (position error, physics, context,
    reference and identification channels)."""
    computed = (*PHYSICS_CHANNELS, *CONTEXT_CHANNELS, *REFERENCE_CHANNELS, *IDENT_CHANNELS)
    return ["t", *(c for c in source_channels(channels) if c not in computed)]


def model_channels(model) -> list[str]:
    """The channels a NeuralActuator checkpoint reads from the episodes (:func:`read_channels`
    of its input channels)."""
    return read_channels(model.cfg.channels)


def model_episodes(model, checkpoint: Path, data: Path) -> list:
    """The episodes of ``data``, each carrying the channels the checkpoint reads (refused
    before any work, naming the episode and how to add what it lacks) and matched to its
    joints."""
    trajs = read_telemetry(data)
    require_channels(trajs, model_channels(model), data,
                     f"the {model.cfg.mode}-mode model --checkpoint {str(checkpoint)!r}")
    return [to_model_joints(model, t) for t in trajs]


def checkpoint_and_episodes(checkpoint: Path, data: Path, mode: str, what: str):
    """(model, episodes) of a streaming verb: the checkpoint must be a ``mode`` model (for
    ``what``), the episodes are read from ``data``, checked for the channels it reads and
    matched to its joints."""
    model = load_model(Path(checkpoint))
    if model.cfg.mode != mode:
        raise ConfigError(f"--checkpoint {str(checkpoint)!r} is a {model.cfg.mode}-mode "
                          f"model; {what} need a {mode}-mode checkpoint")
    return model, model_episodes(model, checkpoint, data)


def resolve_robot(name: str, model, trajs, site: str = "", force: bool = False,
                  data: str = "the episodes"):
    """(float32 arm model, end-effector site) for a checkpoint's episodes: ``name`` (bundled
    name or MJCF/URDF path), else the checkpoint's physics robot, else the episodes' robot;
    ``omx`` with a 4-joint model is the bundled arm without the gripper (``omx_arm``). A
    ``name`` given for another arm than the episodes' is refused unless ``force``
    (``--force-robot``; :func:`neuract.robot.match.check_arm`); ``data`` names the episodes
    in its messages."""
    given = bool(name)
    name = name or model.cfg.physics_robot or str(trajs[0].meta.robot or "")
    if name == "omx" and model.cfg.n_joints == 4:  # the arm without the gripper
        name = "omx_arm"
    if not name:
        raise ConfigError("--robot is needed: the episodes do not name their robot")
    robot = load_robot(name, dtype=torch.float32)
    check_arm(name, robot.joint_names, list(trajs[0].meta.joint_names), data,
              data_robot=trajs[0].meta.robot if given else None, force=force)
    defaults = {"so101": "gripperframe", "omx": "end_effector", "omx_arm": "end_effector"}
    return robot, site or model.cfg.physics_site or defaults.get(name) or None


__all__ = ["ESTIMATE_DEST", "OUT_DEST", "SIMULATE_DEST", "VERB_OF_MODE", "check_out",
           "checkpoint_and_episodes", "model_channels", "model_episodes", "out_dest",
           "read_channels", "read_telemetry", "resolve_robot", "to_model_joints"]
