"""The unit table, re-exported from :mod:`neuract.data.units` (where the data layer's
plausibility checks can use it too): every unit a column mapping may declare, and its
conversion to SI."""

from neuract.data.units import (
    ALIASES,
    CHANNEL_QUANTITY,
    UNITS,
    Unit,
    accepted_units,
    check_unit,
    lookup,
    to_si,
)

__all__ = [
    "ALIASES",
    "CHANNEL_QUANTITY",
    "UNITS",
    "Unit",
    "accepted_units",
    "check_unit",
    "lookup",
    "to_si",
]
