"""The NAD files (NeuralActuator release data, OMX and SO-101) as an experiment reads them:
train and test episodes of one robot, the OMX gripper column dropped, a known 0 g payload's
force label filled in (NAD writes -999 there)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neuract.errors import ConfigError, SchemaError
from neuract.io.nad import iter_nad
from neuract.pipeline.setups import OMX_ARM


def omx_arm_only(tr):
    """The trajectory with the gripper column dropped from every per-joint channel."""
    names = tuple(tr.meta.joint_names)
    idx = [names.index(j) for j in OMX_ARM]
    n = len(names)
    ch = {}
    for k in tr.channels:
        v = np.asarray(tr[k])
        if v.ndim == 2 and v.shape[1] == n and k not in ("ee_force",):
            ch[k] = v[:, idx]
    return tr.replace(channels=ch, joint_names=OMX_ARM)


def zero_payload_label(tr):
    """A known 0 g payload is a 0 N force label (NAD writes -999 there)."""
    if tr.meta.labels.get("payload_mass_kg") == 0.0 and "ee_force_mask" in tr \
            and not np.asarray(tr["ee_force_mask"]).any():
        T = len(tr)
        return tr.replace(channels={"ee_force": np.zeros((T, 3)),
                                    "ee_force_mask": np.ones(T, bool)})
    return tr


def load_nad(root: Path, robot: str) -> tuple[list, list]:
    root = Path(root)
    if not root.exists():
        raise ConfigError(f"NAD root {str(root)!r} does not exist; pass --nad PATH")
    trajs = [tr for tr in iter_nad(root) if tr.meta.robot == robot]
    if robot == "omx":
        trajs = [omx_arm_only(tr) for tr in trajs]
    trajs = [zero_payload_label(tr) for tr in trajs]
    train = [tr for tr in trajs if tr.meta.labels.get("split") == "train"]
    test = [tr for tr in trajs if tr.meta.labels.get("split") == "test"]
    if not train or not test:
        raise SchemaError(f"NAD {robot}: {len(train)} train and {len(test)} test files under "
                          f"{root}; need both")
    return train, test


__all__ = ["load_nad", "omx_arm_only", "zero_payload_label"]
