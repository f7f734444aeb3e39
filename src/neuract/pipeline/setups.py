"""The robots an experiment fits and scores: everything robot-specific it needs
(:class:`RobotSetup`), for the SO-101 and the OpenManipulator-X arm.

* SO-101: the bundled description (6 joints, gripper included); MuJoCo default servo = its
  ``sts3215`` position actuators (kp 17.8 N m/rad).
* OpenManipulator-X: the bundled description models the gripper as two slide joints, NAD
  logs one gripper angle; the gripper is left out (4 arm joints, bundled as ``omx_arm``). The
  arm keeps the NAD release's joint defaults (armature 0.1, damping 1.0). MuJoCo default
  servo: a position actuator per joint with kp = 18.9 N m/rad and forcerange +-4.1 N m, the
  XM430-W350 default Position P gain 800 (duty = 800/128 PWM counts per encoder step,
  885 counts = 100 %, 4096 steps/rev -> 4.60 duty/rad) times its 12 V stall torque 4.1 N m
  per full duty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
import torch

from neuract.errors import ConfigError
from neuract.robot import load_robot
from neuract.robot.bundled import bundled_path
from neuract.twin.model import add_position_actuator, strip_to_hinges

OMX_ARM = ("joint1", "joint2", "joint3", "joint4")
XM430_KP = 800 / 128 * 4096 / (2 * np.pi) / 885 * 4.1  # [N m / rad]
XM430_TAU_MAX = 4.1  # stall torque at 12 V [N m]


@dataclass
class RobotSetup:
    """Everything robot-specific an experiment needs."""

    name: str
    robot: Any
    """rigid-body model (float32) whose joints are the trajectories' joints"""
    robot64: Any
    site: str
    """end-effector site for forces"""
    mujoco_xml: str | None
    """MJCF with a position actuator per joint (MuJoCo default-servo baseline)"""
    servo: str = "sts3215"
    """parametric servo family"""
    effort: str = "load"
    """NeuralActuator estimator effort channel"""
    tau_max: tuple[float, ...] = (3.35,)
    force_joints: tuple[str, ...] | None = None
    """joints used by the J^T force mapping (None: all)"""
    model_path: str = ""
    """the arm model as a loadable name or file (physics channels); empty: ``name``"""


def so101_setup() -> RobotSetup:
    return RobotSetup("so101", load_robot("so101", dtype=torch.float32),
                      load_robot("so101", dtype=torch.float64), "gripperframe",
                      str(bundled_path("so101")), "sts3215", "load", (3.35,),
                      ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"))


def omx_arm_xml() -> str:
    """MJCF of the OMX arm (4 hinge joints, slide gripper removed) with a position actuator
    per joint (XM430 default gains, see the module docstring)."""
    spec = mujoco.MjSpec.from_file(str(bundled_path("omx")))
    strip_to_hinges(spec)
    for name in OMX_ARM:
        add_position_actuator(spec, name, XM430_KP, force_limit=XM430_TAU_MAX)
    spec.compile()
    return spec.to_xml()


def omx_setup() -> RobotSetup:
    """The OMX arm experiment setup: the bundled ``omx_arm`` model (:func:`omx_arm_xml`, kept
    as a file so checkpoints name it by a name that travels)."""
    return RobotSetup("omx", load_robot("omx_arm", dtype=torch.float32),
                      load_robot("omx_arm", dtype=torch.float64), "end_effector",
                      str(bundled_path("omx_arm")), "xm430", "current", (XM430_TAU_MAX,), None,
                      "omx_arm")


def setup_for(robot: str) -> RobotSetup:
    """The experiment setup of a twin robot: ``so101`` or ``omx`` (the 4-joint
    OpenManipulator-X arm with XM430 position servos, bundled as ``omx_arm``)."""
    if robot == "so101":
        return so101_setup()
    if robot == "omx":
        return omx_setup()
    hint = ("; to fit and score a model of pendulum runs: neuract fit --data DATA --out FIT, "
            "then neuract score --model FIT --data DATA" if robot == "pendulum" else "")
    raise ConfigError(f"the data's robot is {robot!r}: evaluate and demo fit and score arm "
                      "models, so they need arm data (twin or NAD data of the SO-101 or the "
                      f"OpenManipulator-X); accepted: ['so101', 'omx']{hint}")


__all__ = ["OMX_ARM", "XM430_KP", "XM430_TAU_MAX", "RobotSetup", "omx_arm_xml", "omx_setup",
           "setup_for", "so101_setup"]
