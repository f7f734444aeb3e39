"""Model-based control: computed torque, gravity compensation, clamped learned residuals,
closed-loop simulation, replay of logged commands, and drift monitoring."""

from neuract.control.computed_torque import ComputedTorque, PIDController, gravity_compensation
from neuract.control.drift import DriftMonitor, DriftReport
from neuract.control.replay import Episode, ReplayReport, replay, speed_band
from neuract.control.residual import ResidualController, fit_residual
from neuract.control.simulate import rk4_step, simulate

__all__ = [
    "ComputedTorque",
    "DriftMonitor",
    "DriftReport",
    "Episode",
    "PIDController",
    "ReplayReport",
    "ResidualController",
    "fit_residual",
    "gravity_compensation",
    "replay",
    "rk4_step",
    "simulate",
    "speed_band",
]
