"""Differentiable open-loop rollout of a plant driven by an actuator, and joint parameters.

``simulate(plant, actuator, joints, q0, qd0, commands, dt)`` starts every row from its
recorded initial state and then uses only the commands (plus known inputs such as the supply
voltage): measured positions never enter after t = 0, so the error it produces is a genuine
simulation error.

Integration: semi-implicit Euler with ``substeps`` physics steps per control step. At each
substep the actuator sees the simulated state, the external torque on each joint
(``-bias_forces``) and the effective joint inertia (diagonal of M + armature), which its
friction budget needs for the stopping torque. Joint damping and frictionloss (MuJoCo's
passive joint parameters) are applied the same way: their budget
``frictionloss + damping |qd|`` clips the remaining stopping torque. With a diagonal-inertia
approximation of the stopping torque this is exact for one degree of freedom.

Any plant works that has ``n_dof``, ``mass_matrix(q) -> (..., n, n)`` and
``bias_forces(q, qd) -> (..., n)`` (``M qdd + b = tau``): :class:`neuract.robot.Robot`,
:class:`neuract.robot.pendulum.Pendulum`; one with ``mass_matrix_and_bias(q, qd)`` (a
``Robot``: one call of the compiled kernel of :mod:`neuract.robot.native` where it applies)
is asked for both at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn

from neuract.actuators.base import Actuator, ActuatorState
from neuract.actuators.param import Param, cached_params, finite, hardclip, refuse, softclip
from neuract.errors import ConfigError, SchemaError


class Plant(Protocol):
    n_dof: int

    def mass_matrix(self, q: Tensor) -> Tensor: ...

    def bias_forces(self, q: Tensor, qd: Tensor) -> Tensor: ...


@dataclass
class JointParamsConfig:
    """Initial joint parameters and which of them are fitted."""

    armature: float = 0.02  # [kg m^2]
    damping: float = 0.0  # [N m s/rad]
    frictionloss: float = 0.0  # [N m]
    offset: float = 0.0  # [rad] gravity zero minus encoder zero
    fit_armature: bool = True
    fit_damping: bool = False
    fit_frictionloss: bool = False
    fit_offset: bool = True
    smooth: bool = False

    def validate(self, prefix: str = "joints.") -> None:
        """Raise :class:`ConfigError` for an initial value outside what the parameter can
        take, naming the field after ``prefix`` (``--joints.`` names it as ``neuract fit``'s
        option), the value and what is accepted."""
        for name, what in (("armature", "a rotor inertia [kg m^2]"),
                           ("damping", "a viscous damping [N m s/rad]"),
                           ("frictionloss", "a dry friction torque [N m]")):
            v = getattr(self, name)
            if not (finite(v) and v >= 0):
                refuse(prefix, name, v, f"{what} >= 0")
        if not (finite(self.offset) and OFFSET_LO < self.offset < OFFSET_HI):
            refuse(prefix, "offset", self.offset, f"an encoder offset [rad] > {OFFSET_LO} "
                   f"and < {OFFSET_HI}")


OFFSET_LO, OFFSET_HI = -0.3, 0.3
"""range [rad] of the fitted offset between the gravity zero and the encoder zero"""


class JointParams(nn.Module):
    """Per-joint armature [kg m^2], damping [N m s/rad], frictionloss [N m], offset [rad]."""

    def __init__(self, n_dof: int = 1, cfg: JointParamsConfig | None = None) -> None:
        super().__init__()
        c = cfg or JointParamsConfig()
        c.validate()
        s = (n_dof,)
        self.cfg = c
        self.armature = Param(c.armature, lo=0.0, shape=s, fixed=not c.fit_armature)
        self.damping = Param(max(c.damping, 1e-6), lo=0.0, shape=s, fixed=not c.fit_damping)
        self.frictionloss = Param(max(c.frictionloss, 1e-6), lo=0.0, shape=s,
                                  fixed=not c.fit_frictionloss)
        self.offset = Param(c.offset, lo=OFFSET_LO, hi=OFFSET_HI, shape=s, fixed=not c.fit_offset)
        self._has_passive = (c.damping > 0 or c.frictionloss > 0 or c.fit_damping
                             or c.fit_frictionloss)


@dataclass
class Rollout:
    """q, qd: (B, T, n) simulated states at the command instants (q[:, 0] = q0)."""

    q: Tensor
    qd: Tensor


def step(plant: Plant, actuator: Actuator, joints: JointParams, command: Tensor, q: Tensor,
         qd: Tensor, dt: float, inputs: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """One semi-implicit Euler step of ``dt`` [s]; returns the new (q, qd), each (B, n)."""
    qg = q + joints.offset()  # the plant's gravity zero differs from the encoder zero
    both = getattr(plant, "mass_matrix_and_bias", None)  # one pass where the plant has it
    M, b = both(qg, qd) if both is not None else (plant.mass_matrix(qg),
                                                  plant.bias_forces(qg, qd))
    n = q.shape[-1]
    arm = joints.armature()
    inertia = torch.diagonal(M, dim1=-2, dim2=-1) + arm
    tau_ext = -b
    state = ActuatorState(q=q, qd=qd, tau_ext=tau_ext, inertia=inertia, dt=dt, inputs=inputs)
    tau = actuator.torque(command, state) + tau_ext
    if joints._has_passive:
        budget = joints.frictionloss() + joints.damping() * qd.abs()
        clip = softclip if joints.cfg.smooth else hardclip
        tau = tau - clip(inertia * qd / dt + tau, budget)
    if n == 1:
        qdd = tau / inertia
    else:
        Mfull = M + torch.diag_embed(arm.expand_as(inertia))
        qdd = torch.linalg.solve(Mfull, tau.unsqueeze(-1)).squeeze(-1)
    qd_new = qd + dt * qdd
    return q + dt * qd_new, qd_new


def control_step(plant: Plant, actuator: Actuator, joints: JointParams, command: Tensor,
                 q: Tensor, qd: Tensor, h: float | Tensor, inputs: dict[str, Tensor],
                 substeps: int = 1) -> tuple[Tensor, Tensor]:
    """One control step: the actuator observes (command, state), then ``substeps`` physics
    steps of ``h`` [s] each; returns the new (q, qd). What :func:`simulate` does per command
    (call it inside :func:`neuract.actuators.param.cached_params` in a loop)."""
    actuator.observe(command, ActuatorState(q=q, qd=qd, dt=h, inputs=inputs))
    for _ in range(substeps):
        q, qd = step(plant, actuator, joints, command, q, qd, h, inputs)
    return q, qd


def simulate(plant: Plant, actuator: Actuator, joints: JointParams, q0: Tensor, qd0: Tensor,
             commands: Tensor, dt: float | Tensor, substeps: int = 1,
             inputs: dict[str, Tensor] | None = None,
             input_series: dict[str, Tensor] | None = None,
             progress: Callable[[int, int], None] | None = None) -> Rollout:
    """Roll out ``commands`` open loop from (q0, qd0).

    q0, qd0: (B, n) initial state [rad, rad/s]; commands: (B, T, n) one command per control
    step of ``dt`` [s] (one value, or (B, 1): one per row); inputs: constant per-row known
    inputs, each (B, 1) or (B, n) (e.g. firmware ``kp``); input_series: time-varying known
    inputs, each (B, T, 1) or (B, T, n) (e.g. measured supply ``voltage``). Returns states
    at every control instant, (B, T, n); state t is before command t is applied.
    progress: ``progress(t, T)`` after each control step t (1-based).
    """
    if commands.ndim != 3:
        raise SchemaError(f"commands must be (B, T, n_dof), got shape {tuple(commands.shape)}")
    if q0.shape != commands[:, 0].shape or qd0.shape != q0.shape:
        raise SchemaError(
            f"q0 {tuple(q0.shape)} / qd0 {tuple(qd0.shape)} must match commands[:, 0] "
            f"{tuple(commands[:, 0].shape)}"
        )
    n_plant = getattr(plant, "n_dof", None)
    if isinstance(n_plant, int) and commands.shape[-1] != n_plant:
        raise SchemaError(f"commands {tuple(commands.shape)} must have one shape (B, T, n_joints) "
                          f"with the plant's {n_plant} joints: the actuator's joints are the "
                          "plant's")
    if isinstance(dt, Tensor) and dt.shape != (commands.shape[0], 1):
        raise SchemaError(f"a per-row dt must be (B, 1) = ({commands.shape[0]}, 1), got shape "
                          f"{tuple(dt.shape)}")
    if substeps < 1 or not bool((torch.as_tensor(dt) > 0).all()):
        raise ConfigError(f"need dt > 0 and substeps >= 1, got dt={dt}, substeps={substeps}")
    inputs = dict(inputs or {})
    series = input_series or {}
    h = dt / substeps
    actuator.reset()
    q, qd = q0, qd0
    qs, qds = [], []
    with cached_params():
        for t in range(commands.shape[1]):
            qs.append(q)
            qds.append(qd)
            now = {**inputs, **{k: v[:, t] for k, v in series.items()}}
            q, qd = control_step(plant, actuator, joints, commands[:, t], q, qd, h, now,
                                 substeps)
            if progress is not None:
                progress(t + 1, commands.shape[1])
    return Rollout(torch.stack(qs, 1), torch.stack(qds, 1))
