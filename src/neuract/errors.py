"""One exception hierarchy for the whole library.

Every message names the offending field/channel/file, the value found, and what is accepted.
"""

from __future__ import annotations


class NeuractError(Exception):
    """Base class of every error neuract raises on purpose."""


class ConfigError(NeuractError, ValueError):
    """A configuration value is invalid (unknown registry name, out-of-range number, ...)."""


class SchemaError(NeuractError, ValueError):
    """Input data does not match the expected schema (missing column, wrong shape, NaN, ...)."""


class DataError(SchemaError):
    """Input data values are implausible: outside a physical, register or robot-model bound,
    or in a likely wrong unit (see :mod:`neuract.data.plausibility`)."""


class UnitsError(NeuractError, ValueError):
    """A unit is unknown or inconsistent with the channel it is attached to."""


class RobotModelError(NeuractError, ValueError):
    """A robot description cannot be loaded or uses an unsupported feature."""


class NotPhysicallyConsistent(NeuractError, ValueError):
    """Physical parameters violate physical consistency (negative mass, invalid inertia, ...)."""


class CheckpointError(NeuractError, RuntimeError):
    """A checkpoint is missing, corrupt or incompatible with the requested model."""


class ClusterError(NeuractError, RuntimeError):
    """A cluster run failed part-way (a Ray worker or node died, a rank of a distributed
    training lost its peers); what finished is kept and a rerun completes the rest."""


__all__ = [
    "NeuractError",
    "ConfigError",
    "SchemaError",
    "DataError",
    "UnitsError",
    "RobotModelError",
    "NotPhysicallyConsistent",
    "CheckpointError",
    "ClusterError",
]
