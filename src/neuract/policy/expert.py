"""A scripted expert for the ``lift`` and ``pick`` environments, and the tasks' success.

The expert sends the task's reference plus a gravity feed-forward: a position servo holds a
static load ``tau`` only with an error of about ``tau / kp_eff``, so the expert aims past the
reference by that much. ``tau`` is the gravity torque of the arm and of the payload (the
privileged ``info['payload_kg']``, a point mass at the end effector) at the reference pose,
from the arm's MuJoCo model; ``kp_eff`` is the servo's static stiffness from the twin spec's
*nominal* values (the middle of each randomisation range: firmware gain, duty scale, winding
resistance, back-EMF and torque constants, the arm's nominal supply), never a unit's hidden
parameters. Plain reference following droops by the same amount.

Success, defined before any policy is trained (:func:`lift_success`, :func:`pick_success`):
the end-effector error is the distance between the end-effector point (the twin's payload
body) placed by forward kinematics at the measured joint positions and at the task's
reference at the same sample.

- ``lift``: the error stays within :data:`LIFT_TOL_M` (1 cm) at every sample of the last
  :data:`LIFT_HOLD_S` (3 s) of the episode;
- ``pick``: at the sample where the payload is released the error is within
  :data:`PICK_TOL_M` (2 cm): the object is placed within 2 cm of where the task puts it;
- either task: any over-current stop of a servo during the episode is a failure.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import mujoco
import numpy as np

from neuract.envs.backends import NOMINAL_SUPPLY_V
from neuract.errors import ConfigError
from neuract.twin.config import ROBOT_SPECS
from neuract.twin.model import TwinModel

LIFT_TOL_M = 0.01
LIFT_HOLD_S = 3.0
PICK_TOL_M = 0.02
TASKS = ("lift", "pick")
"""the environment tasks the expert and the success criteria cover"""


def _mid(r: tuple[float, float]) -> float:
    return 0.5 * (float(r[0]) + float(r[1]))


def nominal_stiffness(robot: str) -> float:
    """Static stiffness [N m/rad] of the robot's servo from the twin spec's nominal values:
    duty = kp * p_scale * error, stall current duty * V / R, torque kt * current."""
    if robot not in ROBOT_SPECS:
        raise ConfigError(f"robot {robot!r}; accepted: {sorted(ROBOT_SPECS)}")
    s = ROBOT_SPECS[robot]().servo
    kt = _mid(s.ke) * _mid(s.kt_ratio)
    return s.kp * _mid(s.p_scale) * NOMINAL_SUPPLY_V[robot] / _mid(s.resistance) * kt


class Kinematics:
    """Forward kinematics of the end-effector point and gravity torques of an arm (its twin
    model: the payload acts at ``tm.ee_body``; a private copy of the model, so that the
    environment's is never touched)."""

    def __init__(self, tm: TwinModel):
        self.tm = tm
        self.model = copy.copy(tm.model)
        self.data = mujoco.MjData(self.model)

    def _pose(self, q: np.ndarray) -> None:
        self.data.qpos[:] = 0.0
        self.data.qpos[self.tm.motor_qpos] = q
        self.data.qvel[:] = 0.0

    def ee(self, q: np.ndarray) -> np.ndarray:
        """(3,) end-effector point [m] at joint positions ``q`` (n,)."""
        self._pose(np.asarray(q, dtype=np.float64))
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.xpos[self.tm.ee_body].copy()

    def ee_error(self, q: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
        """(K,) distance [m] between the end effector at ``q`` (K, n) and at ``q_ref``."""
        q, q_ref = np.atleast_2d(q), np.atleast_2d(q_ref)
        return np.array([np.linalg.norm(self.ee(a) - self.ee(b)) for a, b in zip(q, q_ref)])

    def gravity(self, q: np.ndarray, payload_kg: float) -> np.ndarray:
        """(n,) joint torques [N m] that hold the arm and a payload of ``payload_kg`` still at
        ``q``."""
        body = self.tm.ee_body
        old = float(self.model.body_mass[body])
        self.model.body_mass[body] = old + max(float(payload_kg), 0.0)
        try:
            self._pose(np.asarray(q, dtype=np.float64))
            mujoco.mj_forward(self.model, self.data)
            return self.data.qfrc_bias[self.tm.motor_dof].copy()
        finally:
            self.model.body_mass[body] = old


@dataclass
class ExpertConfig:
    """The scripted expert: reference + ``gain`` * gravity torque / nominal stiffness."""

    gain: float = 1.0
    """share of the predicted droop compensated (0: plain reference following)"""
    max_offset_rad: float = 0.3
    """largest goal offset from the reference [rad]"""

    def validate(self) -> ExpertConfig:
        if not (np.isfinite(self.gain) and 0.0 <= self.gain <= 2.0):
            raise ConfigError(f"ExpertConfig.gain = {self.gain!r}; accepted: [0, 2]")
        if not (np.isfinite(self.max_offset_rad) and 0.0 < self.max_offset_rad <= 1.0):
            raise ConfigError(f"ExpertConfig.max_offset_rad = {self.max_offset_rad!r}; "
                              "accepted: (0, 1] rad")
        return self


class Expert:
    """The scripted expert of one arm (see the module docstring)."""

    def __init__(self, tm: TwinModel, cfg: ExpertConfig | None = None):
        self.cfg = (cfg or ExpertConfig()).validate()
        self.kin = Kinematics(tm)
        self.kp = nominal_stiffness(tm.robot)

    def act(self, target: np.ndarray, payload_kg: float) -> np.ndarray:
        """(n,) goal for the reference ``target`` (n,) with the privileged payload [kg]."""
        target = np.asarray(target, dtype=np.float64)
        off = self.cfg.gain * self.kin.gravity(target, payload_kg) / self.kp
        lim = self.cfg.max_offset_rad
        return target + np.clip(off, -lim, lim)


def lift_success(t: np.ndarray, err: np.ndarray, overloads: int = 0) -> bool:
    """``lift``: error within 1 cm at every sample of the last 3 s, no over-current stop."""
    t, err = np.asarray(t), np.asarray(err)
    last = t >= t[-1] - LIFT_HOLD_S
    return bool(overloads == 0 and np.all(err[last] <= LIFT_TOL_M))


def pick_success(t: np.ndarray, err: np.ndarray, release_t: float, overloads: int = 0
                 ) -> bool:
    """``pick``: error within 2 cm at the last sample before the payload's release, no
    over-current stop (an episode without a release inside it fails)."""
    t, err = np.asarray(t), np.asarray(err)
    before = np.flatnonzero(t < release_t)
    if not np.isfinite(release_t) or release_t > t[-1] or not len(before):
        return False
    return bool(overloads == 0 and err[before[-1]] <= PICK_TOL_M)


__all__ = ["Expert", "ExpertConfig", "Kinematics", "LIFT_HOLD_S", "LIFT_TOL_M", "PICK_TOL_M",
           "TASKS", "lift_success", "nominal_stiffness", "pick_success"]
