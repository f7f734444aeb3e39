"""Readers: telemetry logs in the formats users have -> validated SI-unit Trajectories.

Each reader converts raw register units in one place (:mod:`neuract.io.registers`).
"""

from neuract.io.bam import iter_bam_logs, iter_kscale_runs, read_bam_log
from neuract.io.common import DataRepairWarning

__all__ = ["DataRepairWarning", "iter_bam_logs", "iter_kscale_runs", "read_bam_log"]
