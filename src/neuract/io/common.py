"""Helpers shared by the readers: repair warnings and robot joint counts.

The robot core (torch, MuJoCo) is imported inside the functions that need it, so that
``neuract.io`` stays importable without torch (tests/test_package.py).
"""

from __future__ import annotations

import functools
import warnings

from neuract.errors import ConfigError, RobotModelError, SchemaError


class DataRepairWarning(UserWarning):
    """A reader dropped or masked samples (the counts are also in ``traj.meta.counts``)."""


def warn_repair(message: str) -> None:
    """Emit a :class:`DataRepairWarning` attributed to the reader's caller."""
    warnings.warn(message, DataRepairWarning, stacklevel=3)


# Fallback joint counts for robots whose description is not available (or not a MJCF).
# so101: 5 arm joints + gripper; omx: 4 arm joints + gripper (NAD pos1..pos5); panda: 7 arm
# joints; planar2: 2; pendulum: the single-joint servo bench of BAM logs.
KNOWN_JOINT_COUNTS: dict[str, int] = {"so101": 6, "omx": 5, "planar2": 2, "panda": 7, "pendulum": 1}


@functools.lru_cache(maxsize=32)
def robot_joint_count(robot: str) -> int | None:
    """Number of actuated joints (servos) of ``robot``, or None when unknown.

    The bundled description (``neuract.robot.bundled.bundled_path``) is loaded with MuJoCo and
    its actuators counted (a coupled two-finger gripper driven by one servo counts once); a
    description without actuators counts its hinge and slide joints. Where no description can
    be loaded the table :data:`KNOWN_JOINT_COUNTS` answers.
    """
    try:
        from neuract.robot.bundled import bundled_path

        path = bundled_path(robot)
    except (ImportError, RobotModelError):
        return KNOWN_JOINT_COUNTS.get(robot)
    try:
        import mujoco

        model = mujoco.MjModel.from_xml_path(str(path))
    except Exception:  # a description still being written: fall back to the table
        return KNOWN_JOINT_COUNTS.get(robot)
    if model.nu > 0:
        return int(model.nu)
    return int(sum(1 for j in range(model.njnt) if int(model.jnt_type[j]) in (2, 3)))


def known_robots() -> list[str]:
    """Robot names neuract knows: the bundled descriptions
    (``neuract.robot.bundled.BUNDLED_ROBOTS``) and :data:`KNOWN_JOINT_COUNTS`."""
    try:
        from neuract.robot.bundled import BUNDLED_ROBOTS
    except ImportError:  # pragma: no cover - robot package unavailable
        BUNDLED_ROBOTS = {}
    return sorted(set(BUNDLED_ROBOTS) | set(KNOWN_JOINT_COUNTS))


def check_robot_name(robot: str, option: str = "--robot") -> None:
    """Raise :class:`ConfigError` unless ``robot`` is one of :func:`known_robots`."""
    known = known_robots()
    if robot not in known:
        raise ConfigError(f"{option} {robot!r}: unknown robot; accepted: {', '.join(known)}")


def check_joint_count(robot: str, n_joints: int, where: str) -> None:
    """Raise :class:`SchemaError` when data has a different joint count than ``robot``."""
    want = robot_joint_count(robot)
    if want is not None and want != n_joints:
        raise SchemaError(
            f"{where}: data has {n_joints} joints but robot {robot!r} has "
            f"{want}; pass the matching --robot (or a column mapping with "
            f"{want} joints)"
        )


def robot_joint_ranges(robot: str) -> dict[str, tuple[float, float]]:
    """joint name -> (lower, upper) [rad] from the bundled description of ``robot``."""
    import mujoco

    from neuract.robot.bundled import bundled_path

    model = mujoco.MjModel.from_xml_path(str(bundled_path(robot)))
    out = {}
    for j in range(model.njnt):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        if name and model.jnt_limited[j]:
            out[name] = (float(model.jnt_range[j, 0]), float(model.jnt_range[j, 1]))
    return out


__all__ = [
    "DataRepairWarning",
    "KNOWN_JOINT_COUNTS",
    "check_joint_count",
    "check_robot_name",
    "known_robots",
    "robot_joint_count",
    "robot_joint_ranges",
    "warn_repair",
]
