"""Telemetry in SI units: ``Trajectory``, datasets on disk, resampling, windows, splits.

>>> ds = load_dataset("runs/nad")        # written by ``neuract ingest``
>>> traj = ds[0]; traj["q"].shape         # (T, n_joints) [rad]
"""

from neuract.data.dataset import Dataset, compute_stats, load_dataset, write_dataset
from neuract.data.derivatives import add_derivatives
from neuract.data.resample import resample
from neuract.data.schema import CHANNELS, ChannelSpec
from neuract.data.splits import split_dataset, split_episodes
from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.data.windows import WindowSpec, make_windows, window_indices, window_spec

__all__ = [
    "CHANNELS",
    "ChannelSpec",
    "Dataset",
    "Trajectory",
    "TrajectoryMeta",
    "WindowSpec",
    "add_derivatives",
    "compute_stats",
    "load_dataset",
    "make_windows",
    "resample",
    "split_dataset",
    "split_episodes",
    "window_indices",
    "window_spec",
    "write_dataset",
]
