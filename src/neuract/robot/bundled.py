"""Robot descriptions bundled with neuract, loadable by name."""

from __future__ import annotations

from pathlib import Path

from neuract.errors import RobotModelError

ASSETS = Path(__file__).resolve().parent / "assets"

# name -> (file in assets/, one-line description)
BUNDLED_ROBOTS: dict[str, tuple[str, str]] = {
    "planar2": ("planar2.xml", "two-link planar arm of the Sensors 2025 study (vertical plane)"),
    "so101": ("so101.xml", "SO-101 arm, 5 joints + gripper, Feetech STS3215 servos"),
    "omx": ("omx.xml", "OpenManipulator-X, 4 joints + gripper, Dynamixel XM430 servos"),
    "omx_arm": ("omx_arm.xml", "OpenManipulator-X arm without the gripper (4 joints), one "
                "XM430 position actuator per joint (the NAD and twin experiments' model)"),
    "panda": ("panda.xml", "Franka Emika Panda, 7 DoF, published dynamic parameters"),
}


def bundled_path(name: str) -> Path:
    """Path of the bundled description ``name``; unknown names list the known ones."""
    if name not in BUNDLED_ROBOTS:
        known = ", ".join(sorted(BUNDLED_ROBOTS))
        raise RobotModelError(f"unknown robot name {name!r}; bundled robots: {known}")
    path = ASSETS / BUNDLED_ROBOTS[name][0]
    if not path.is_file():
        raise RobotModelError(f"bundled robot {name!r} is missing its file {path}")
    return path
