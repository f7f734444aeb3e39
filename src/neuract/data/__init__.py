"""Telemetry in SI units: ``Trajectory``, datasets on disk, resampling, windows, splits.

>>> ds = load_dataset("runs/nad")        # written by ``neuract ingest``
>>> traj = ds[0]; traj["q"].shape         # (T, n_joints) [rad]
"""

from neuract.data.dataset import Dataset, compute_stats, load_dataset, write_dataset
from neuract.data.schema import CHANNELS, ChannelSpec
from neuract.data.trajectory import Trajectory, TrajectoryMeta

__all__ = [
    "CHANNELS",
    "ChannelSpec",
    "Dataset",
    "Trajectory",
    "TrajectoryMeta",
    "compute_stats",
    "load_dataset",
    "write_dataset",
]
