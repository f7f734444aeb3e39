"""Readers: telemetry logs in the formats users have -> validated SI-unit Trajectories.

Each reader converts raw register units in one place (:mod:`neuract.io.registers`):
NAD CSVs (:mod:`~neuract.io.nad`), BAM / K-Scale pendulum JSON logs (:mod:`~neuract.io.bam`),
LeRobot datasets (:mod:`~neuract.io.lerobot`) and users' own CSV/Parquet with a column
mapping (:mod:`~neuract.io.csv`). ``neuract ingest`` (:mod:`~neuract.io.ingest`) writes any
of them as a dataset directory.
"""

from neuract.io.bam import iter_bam_logs, iter_kscale_runs, read_bam_log
from neuract.io.common import DataRepairWarning
from neuract.io.csv import ColumnMapping, ColumnSpec, load_mapping, read_mapped
from neuract.io.lerobot import read_lerobot
from neuract.io.nad import iter_nad, read_nad_csv

__all__ = [
    "ColumnMapping",
    "ColumnSpec",
    "DataRepairWarning",
    "iter_bam_logs",
    "iter_kscale_runs",
    "iter_nad",
    "load_mapping",
    "read_bam_log",
    "read_lerobot",
    "read_mapped",
    "read_nad_csv",
]
