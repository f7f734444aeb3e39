"""Robot models and differentiable rigid-body dynamics (torch, batched, float32/float64).

``load_robot(name_or_path)`` parses any MJCF/URDF with MuJoCo and returns an immutable
:class:`Robot`; the physics are pure functions in :mod:`.kinematics`, :mod:`.dynamics` and
:mod:`.regressor`; :class:`LearnableRobot` holds physically consistent learnable parameters.
"""

from neuract.robot.bundled import BUNDLED_ROBOTS, bundled_path
from neuract.robot.loader import load_mj_model, load_robot, robot_from_mj_model
from neuract.robot.model import Robot
from neuract.robot.params import LearnableRobot

__all__ = [
    "BUNDLED_ROBOTS",
    "LearnableRobot",
    "Robot",
    "bundled_path",
    "load_mj_model",
    "load_robot",
    "robot_from_mj_model",
]
