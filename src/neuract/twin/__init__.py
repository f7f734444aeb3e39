"""Digital twin: servo arms (SO-101, OpenManipulator-X) with hidden actuator physics.

``generate(GenerateConfig(...))`` returns :class:`~neuract.data.Trajectory` episodes with
register-quantised telemetry and hidden ground truth (true torque, end-effector force,
contact, motor condition, per-unit parameters in the labels); ``neuract twin`` writes them as
a dataset.
"""

from neuract.twin.config import (
    BusRanges,
    DegradedRanges,
    Nonidealities,
    RegisterSpec,
    RobotTwinSpec,
    ServoRanges,
    SimConfig,
    omx_spec,
    so101_spec,
)
from neuract.twin.generate import GenerateConfig, generate
from neuract.twin.tasks import TASKS

__all__ = [
    "BusRanges",
    "DegradedRanges",
    "GenerateConfig",
    "Nonidealities",
    "RegisterSpec",
    "RobotTwinSpec",
    "ServoRanges",
    "SimConfig",
    "TASKS",
    "generate",
    "omx_spec",
    "so101_spec",
]
