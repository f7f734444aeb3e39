"""The canonical telemetry schema: every channel a :class:`~neuract.data.Trajectory` may hold.

All values are in SI units (angles in rad, currents in A, voltages in V, temperatures in degC,
torques in N m, forces in N, time in s). Raw register units exist only inside the readers in
:mod:`neuract.io`.

Channel kinds (``T`` samples, ``n`` joints):

=================  ===========  =======  ======================================================
channel            shape        unit     meaning
=================  ===========  =======  ======================================================
t                  (T,)         s        sample time, strictly increasing
q                  (T, n)       rad      measured joint position
qd                 (T, n)       rad/s    joint velocity (servo-reported or differentiated)
qdd                (T, n)       rad/s^2  joint acceleration (differentiated)
q_goal             (T, n)       rad      commanded joint position (servo goal / leader arm)
current            (T, n)       A        motor current reported by the servo
load               (T, n)       1        signed load register as a duty fraction, -1..1
pwm                (T, n)       1        signed PWM duty as a fraction, -1..1
voltage            (T, n)       V        supply voltage seen by each servo
temperature        (T, n)       degC     servo temperature
tau                (T, n)       N m      joint torque, only where measured by a sensor
torque_enable      (T, n)       bool     servo torque on (False: joint released / passive)
overload           (T, n)       bool     overload protection tripped (status register bits)
valid              (T, n)       bool     False where a sample was repaired (see readers)
ee_force           (T, 3)       N        external force at the end effector, world frame
ee_force_mask      (T,)         bool     True where ``ee_force`` is a real label
contact            (T,)         bool     True while something pushes on / hangs from the arm
condition          (T,)         int8     motor condition: 0 normal, 1 degraded
=================  ===========  =======  ======================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ChannelSpec:
    """Shape kind, SI unit, dtype kind and meaning of one channel."""

    kind: str  # "time" (T,), "joint" (T, n), "vec3" (T, 3), "scalar" (T,)
    unit: str
    dtype: str  # "float", "bool", "int"
    doc: str


CHANNELS: dict[str, ChannelSpec] = {
    "t": ChannelSpec("time", "s", "float", "sample time"),
    "q": ChannelSpec("joint", "rad", "float", "measured joint position"),
    "qd": ChannelSpec("joint", "rad/s", "float", "joint velocity"),
    "qdd": ChannelSpec("joint", "rad/s^2", "float", "joint acceleration"),
    "q_goal": ChannelSpec("joint", "rad", "float", "commanded joint position"),
    "current": ChannelSpec("joint", "A", "float", "motor current"),
    "load": ChannelSpec("joint", "1", "float", "signed load register as duty fraction"),
    "pwm": ChannelSpec("joint", "1", "float", "signed PWM duty fraction"),
    "voltage": ChannelSpec("joint", "V", "float", "supply voltage"),
    "temperature": ChannelSpec("joint", "degC", "float", "servo temperature"),
    "tau": ChannelSpec("joint", "N m", "float", "measured joint torque"),
    "torque_enable": ChannelSpec("joint", "bool", "bool", "servo torque enabled"),
    "overload": ChannelSpec("joint", "bool", "bool",
                            "servo overload protection tripped (status register bits)"),
    "valid": ChannelSpec("joint", "bool", "bool", "False where a sample was repaired"),
    "ee_force": ChannelSpec("vec3", "N", "float", "end-effector external force, world frame"),
    "ee_force_mask": ChannelSpec("scalar", "bool", "bool", "True where ee_force is a label"),
    "contact": ChannelSpec("scalar", "bool", "bool", "contact flag"),
    "condition": ChannelSpec("scalar", "1", "int", "motor condition, 0 normal 1 degraded"),
}

JOINT_CHANNELS = tuple(k for k, s in CHANNELS.items() if s.kind == "joint")
FLOAT_CHANNELS = tuple(k for k, s in CHANNELS.items() if s.dtype == "float")

_NUMPY_DTYPE = {"float": np.float64, "bool": np.bool_, "int": np.int8}


def numpy_dtype(channel: str) -> type:
    """The numpy dtype a channel is stored with."""
    return _NUMPY_DTYPE[CHANNELS[channel].dtype]


def expected_shape(channel: str, n_samples: int, n_joints: int) -> tuple[int, ...]:
    """Shape ``channel`` must have for ``n_samples`` samples of ``n_joints`` joints."""
    kind = CHANNELS[channel].kind
    if kind == "joint":
        return (n_samples, n_joints)
    if kind == "vec3":
        return (n_samples, 3)
    return (n_samples,)


def units_table() -> dict[str, str]:
    """channel -> SI unit of every known channel."""
    return {k: s.unit for k, s in CHANNELS.items()}


__all__ = [
    "CHANNELS",
    "ChannelSpec",
    "FLOAT_CHANNELS",
    "JOINT_CHANNELS",
    "expected_shape",
    "numpy_dtype",
    "units_table",
]
