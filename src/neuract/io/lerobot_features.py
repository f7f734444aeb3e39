"""How neuract channels map onto LeRobot v3 features (shared by the writer and the reader).

A dataset neuract writes in LeRobot's layout (:mod:`neuract.io.lerobot_write`) names every
channel as a LeRobot feature: ``q`` is ``observation.state``, ``q_goal`` is ``action``, ``t``
is ``timestamp``, and every other channel is an ``observation.*`` feature of its own
(:data:`FEATURE_OF`). Per-joint features name their elements ``<joint>.<suffix>``
(``shoulder_pan.pos``, ``shoulder_pan.vel``, ...). ``meta/info.json`` carries a ``neuract``
block (:data:`INFO_KEY`) that records the unit of every feature (positions in rad) and which
channel each feature holds, so that :func:`neuract.io.lerobot.read_lerobot` reads such a
dataset back exactly, without guessing units.
"""

from __future__ import annotations

from typing import Any

from neuract.data.schema import CHANNELS

FEATURE_OF: dict[str, str] = {
    "t": "timestamp",
    "q": "observation.state",
    "q_goal": "action",
    "qd": "observation.velocity",
    "qdd": "observation.acceleration",
    "current": "observation.current",
    "load": "observation.load",
    "pwm": "observation.pwm",
    "voltage": "observation.voltage",
    "temperature": "observation.temperature",
    "tau": "observation.effort",
    "torque_enable": "observation.torque_enable",
    "valid": "observation.valid",
    "ee_force": "observation.ee_force",
    "ee_force_mask": "observation.ee_force_mask",
    "contact": "observation.contact",
    "condition": "observation.condition",
}
"""neuract channel -> LeRobot feature key (every channel of :data:`neuract.data.schema.CHANNELS`)"""

NAME_SUFFIX: dict[str, str] = {
    "q": "pos", "q_goal": "pos", "qd": "vel", "qdd": "acc", "current": "current",
    "load": "load", "pwm": "pwm", "voltage": "voltage", "temperature": "temperature",
    "tau": "torque", "torque_enable": "torque_enable", "valid": "valid",
}
"""per-joint channel -> suffix of its element names (``shoulder_pan.pos``)"""

DTYPE_OF = {"float": "float64", "bool": "bool", "int": "int8"}
"""neuract dtype kind -> LeRobot feature dtype"""

INFO_KEY = "neuract"
"""the block of ``meta/info.json`` that marks a dataset neuract wrote"""
INFO_FORMAT = "neuract-lerobot"
INFO_VERSION = 1
EPISODE_META_COLUMN = "neuract/meta"
"""column of ``meta/episodes/*.parquet``: each episode's neuract metadata as JSON text"""

INDEX_FEATURES = ("frame_index", "episode_index", "index", "task_index")
"""the int64 bookkeeping features of every LeRobot frame"""

def element_names(channel: str, joints: tuple[str, ...] | list[str]) -> list[str]:
    """Names of the elements of ``channel``'s feature."""
    kind = CHANNELS[channel].kind
    if kind == "joint":
        return [f"{j}.{NAME_SUFFIX[channel]}" for j in joints]
    if kind == "vec3":
        return [f"{channel}.{a}" for a in "xyz"]
    return [channel]


def feature_spec(channel: str, joints: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The ``features`` entry of ``channel``: dtype, shape, names."""
    names = element_names(channel, joints)
    if channel == "t":
        return {"dtype": "float64", "shape": [1], "names": None}
    return {"dtype": DTYPE_OF[CHANNELS[channel].dtype], "shape": [len(names)], "names": names}


def is_neuract(info: dict[str, Any]) -> bool:
    """True for the ``info.json`` of a dataset neuract wrote."""
    block = info.get(INFO_KEY)
    return isinstance(block, dict) and block.get("format") == INFO_FORMAT


__all__ = [
    "DTYPE_OF",
    "EPISODE_META_COLUMN",
    "FEATURE_OF",
    "INDEX_FEATURES",
    "INFO_FORMAT",
    "INFO_KEY",
    "INFO_VERSION",
    "NAME_SUFFIX",
    "element_names",
    "feature_spec",
    "is_neuract",
]
