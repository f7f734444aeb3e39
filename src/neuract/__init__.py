"""neuract: learn how real robot actuators and arms behave from servo telemetry.

Public entry points are imported lazily so ``import neuract`` does no work.
"""

from __future__ import annotations

import importlib
from typing import Any

from neuract.errors import (
    CheckpointError,
    ConfigError,
    NeuractError,
    NotPhysicallyConsistent,
    RobotModelError,
    SchemaError,
    UnitsError,
)

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access)
_LAZY = {
    "load_robot": "neuract.robot",
    "Robot": "neuract.robot",
    "load_dataset": "neuract.data",
    "Trajectory": "neuract.data",
    "DynamicsModel": "neuract.models",
    "ComputedTorque": "neuract.control",
    "NeuralActuator": "neuract.neuralactuator",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'neuract' has no attribute {name!r}")


__all__ = [
    "__version__",
    "NeuractError",
    "ConfigError",
    "SchemaError",
    "UnitsError",
    "RobotModelError",
    "NotPhysicallyConsistent",
    "CheckpointError",
    *_LAZY,
]
