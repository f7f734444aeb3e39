"""Does a robot model fit the data it is given? Joints are matched by position.

``check_joints("omx", robot.joint_names, names, "--data 'runs/so101'")`` refuses a model whose
joint count differs from the data's, or that lists the same joints in another order (matching
by position would pair the wrong ones), and warns where the names differ (data may name its
joints its own way, but it may also be another arm): what ``neuract simulate`` and ``neuract
adapt`` do, for every verb that pairs a robot model with recorded joints.

``check_arm`` adds the robot the data name: a bundled model (``--robot omx``) of another arm
than the one the data were recorded on (``so101``) is refused, even with as many joints, unless
the user asks for it (``--force-robot``); the verbs that take ``--robot`` and data (fit,
identify, simulate, adapt, evaluate) all call it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from neuract.errors import ConfigError


def check_joints(robot: str, robot_joints: Sequence[str], data_joints: Sequence[str] | int,
                 data: str = "the data", option: str = "--robot", warn: bool = True) -> None:
    """Refuse (:class:`ConfigError`) or warn (``UserWarning``) where the model ``robot`` (as
    given to ``option``), whose joints are ``robot_joints``, does not fit ``data`` (how the
    message names the data, e.g. ``--data 'x'``), whose joints are ``data_joints`` (names, or
    only their count where the data name none). ``warn=False``: no warning about other joint
    names (the user said the model is meant for these data)."""
    ours = list(robot_joints)
    if isinstance(data_joints, int):
        names, n = None, data_joints
    else:
        names, n = [str(x) for x in data_joints], len(data_joints)
    if len(ours) != n:
        theirs = f"{n} {names}" if names is not None else str(n)
        k = 0
        while names is not None and k < min(n, len(ours)) and ours[k] == names[k]:
            k += 1
        eg = ("; e.g. a gripper modelled as two finger joints where the data log one"
              if len(ours) > n else "")
        why = (f"they share {ours[:k]}, the rest differs ({ours[k:]} in the model, "
               f"{names[k:]} in the data{eg})" if k else "not the same arm")
        raise ConfigError(f"{option} {robot!r} has {len(ours)} joint(s) {ours}; {data} has "
                          f"{theirs}: {why}. Accepted: a model whose joints are the data's, "
                          "one for one")
    if names is None or ours == names or not warn:
        return
    if set(ours) == set(names):
        raise ConfigError(f"{option} {robot!r} orders its joints {ours}; {data} {names}: joints "
                          "are matched by position, so the data must list them in the model's "
                          "order")
    warnings.warn(f"the arm model {robot!r} names its joints {ours}, {data} {names}: matched by "
                  "position; check that it is the same arm", stacklevel=2)


UNNAMED = ("", "unknown", "none")
"""robot names that name no arm (a dataset whose reader could not tell)"""


def arm_of(name: str) -> str:
    """The arm a robot name stands for: lower case, without LeRobot's ``_follower`` /
    ``_leader`` suffix and without punctuation (``SO-101``, ``so_101``, ``so101_follower``:
    ``so101``); ``omx_arm`` (the OpenManipulator-X without its gripper) is ``omx``."""
    n = str(name).strip().lower()
    for suffix in ("_follower", "_leader"):
        n = n.removesuffix(suffix)
    n = "".join(c for c in n if c.isalnum())
    return {"omxarm": "omx"}.get(n, n)


def check_robot_name(robot: str, data_robot: str | None, data: str = "the data",
                     force: bool = False, option: str = "--robot") -> None:
    """Refuse (:class:`ConfigError`, one line) the bundled model ``robot`` (as given to
    ``option``) where ``data`` (how the message names them) were recorded on another arm,
    ``data_robot``; ``force`` (``--force-robot``) accepts it. A robot given as a file (any name
    not bundled), and data that name no robot, are not compared."""
    from neuract.robot.bundled import BUNDLED_ROBOTS

    if force or robot not in BUNDLED_ROBOTS or str(data_robot or "").lower() in UNNAMED:
        return
    if arm_of(robot) == arm_of(str(data_robot)):
        return
    same = sorted(n for n in BUNDLED_ROBOTS if arm_of(n) == arm_of(str(data_robot)))
    hint = f"pass {option} {same[0]}, or " if same else "pass a model of that arm, or "
    raise ConfigError(f"{option} {robot!r} is another arm than the robot of {data}, "
                      f"{str(data_robot)!r}: {hint}add --force-robot to use {robot!r} anyway")


def check_arm(robot: str, robot_joints: Sequence[str], data_joints: Sequence[str] | int,
              data: str = "the data", data_robot: str | None = None, force: bool = False,
              option: str = "--robot") -> None:
    """Does the model ``robot`` (joints ``robot_joints``) fit ``data`` (joints ``data_joints``,
    recorded on ``data_robot``)? Joint counts and orders as :func:`check_joints` checks them
    (never forced), then the arm's name (:func:`check_robot_name`; ``force``: accepted, and
    other joint names are not warned about either)."""
    check_joints(robot, robot_joints, data_joints, data, option, warn=False)
    check_robot_name(robot, data_robot, data, force, option)
    if not force:  # the same checks again, now warning where the joints are named otherwise
        check_joints(robot, robot_joints, data_joints, data, option)
