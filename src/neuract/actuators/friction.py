"""Gearbox friction as a *budget* that clips the stopping torque (the BAM family, M1-M6).

Each model computes a friction budget ``F >= 0`` [N m] from the joint velocity and the
torques loading the gearbox, then applies ``tau_f = -clip(tau_stop, -F, F)``, where
``tau_stop = inertia * qd / dt + tau_motor + tau_ext`` is the torque that would bring the
joint to rest within one step. Friction therefore never reverses the motion, and a joint at
rest stays there until the other torques exceed the budget (stiction), without the chattering
of a ``sign(qd)`` law.

Budget (names follow BAM's parameter files, so published fits load by name):

    F = c + v |qd|                                          coulomb_viscous (M1)
      + s * S(qd)                                           stribeck (M2)
      + l * |tau_ext - tau_m| (1 + ls S(qd)/l ...)          load (M3) / load_stribeck (M4)
      + |le tau_ext - lm tau_m| + S |les tau_ext - lms tau_m|  directional (M5)
      + S * quadratic term when motor and load oppose       quadratic (M6)

with ``S(qd) = exp(-|qd / dtheta_stribeck|^alpha)`` (1 at rest, 0 when moving). The smooth
variant (``smooth=True``) replaces |.|, clip and the direction switches with smooth surrogates
so gradients are informative everywhere (checked with ``torch.autograd.gradcheck``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from neuract.actuators.param import Param, hardclip, smooth_abs, softclip
from neuract.errors import ConfigError
from neuract.registry import Registry

FRICTIONS: Registry[dict] = Registry("friction")

_FAMILIES = {
    "none": {},
    "coulomb_viscous": dict(coulomb=True),
    "stribeck": dict(coulomb=True, stribeck=True),
    "load": dict(coulomb=True, load_dependent=True),
    "load_stribeck": dict(coulomb=True, load_dependent=True, stribeck=True),
    "directional": dict(coulomb=True, load_dependent=True, stribeck=True, directional=True),
    "quadratic": dict(
        coulomb=True, load_dependent=True, stribeck=True, directional=True, quadratic=True
    ),
}
_BAM_ALIASES = {"m1": "coulomb_viscous", "m2": "stribeck", "m3": "load",
                "m4": "load_stribeck", "m5": "directional", "m6": "quadratic"}
for _name, _flags in _FAMILIES.items():
    FRICTIONS.register(_name)(_flags)
for _alias, _name in _BAM_ALIASES.items():
    FRICTIONS.register(_alias)(_FAMILIES[_name])


@dataclass
class FrictionConfig:
    """Which friction family, its smoothness, and the velocity scale of the smooth surrogates."""

    type: str = "coulomb_viscous"
    smooth: bool = False
    eps_velocity: float = 0.01  # rad/s, width of smooth |qd| and direction switches
    eps_torque: float = 0.01  # N m, width of smooth |tau| surrogates


class BudgetFriction(nn.Module):
    """Friction budget + stopping-torque clip; see the module docstring for the law."""

    def __init__(self, cfg: FrictionConfig | None = None, n_dof: int = 1) -> None:
        super().__init__()
        cfg = cfg or FrictionConfig()
        flags = FRICTIONS.get(cfg.type)
        self.cfg = cfg
        self.coulomb = flags.get("coulomb", False)
        self.stribeck = flags.get("stribeck", False)
        self.load_dependent = flags.get("load_dependent", False)
        self.directional = flags.get("directional", False)
        self.quadratic = flags.get("quadratic", False)
        s = (n_dof,)
        if self.coulomb:
            self.friction_base = Param(0.05, lo=0.0, shape=s)
            self.friction_viscous = Param(0.1, lo=0.0, shape=s)
        if self.stribeck:
            self.friction_stribeck = Param(0.05, lo=0.0, shape=s)
            self.dtheta_stribeck = Param(0.2, lo=0.01, hi=5.0, shape=s)
            self.alpha = Param(1.35, lo=0.5, hi=10.0, shape=s)
        if self.load_dependent and not self.directional:
            self.load_friction_base = Param(0.05, lo=0.0, shape=s)
            if self.stribeck:
                self.load_friction_stribeck = Param(0.05, lo=0.0, shape=s)
        if self.directional:
            self.load_friction_motor = Param(0.05, lo=0.0, shape=s)
            self.load_friction_external = Param(0.05, lo=0.0, shape=s)
            self.load_friction_motor_stribeck = Param(0.05, lo=0.0, shape=s)
            self.load_friction_external_stribeck = Param(0.05, lo=0.0, shape=s)
        if self.quadratic:
            self.load_friction_motor_quad = Param(0.001, lo=0.0, shape=s)
            self.load_friction_external_quad = Param(0.001, lo=0.0, shape=s)

    # -- helpers -----------------------------------------------------------------------
    def _abs(self, x: Tensor, eps: float) -> Tensor:
        return smooth_abs(x, eps) if self.cfg.smooth else x.abs()

    def stribeck_coeff(self, qd: Tensor) -> Tensor:
        """S(qd): (..., n) in [0, 1], 1 at rest and 0 well above ``dtheta_stribeck``."""
        a = self._abs(qd, self.cfg.eps_velocity) / self.dtheta_stribeck()
        # a**alpha at a == 0: d/dalpha = a**alpha * log(a) is 0 * -inf = NaN, and d/da is
        # infinite for alpha < 1; a floor keeps both finite (S(0) stays 1 to 1e-12)
        a = a.clamp_min(1e-12) if not self.cfg.smooth else a + 1e-9
        return torch.exp(-(a ** self.alpha()))

    def budget(self, tau_motor: Tensor, tau_ext: Tensor, qd: Tensor) -> Tensor:
        """F: (..., n) friction budget [N m] from motor torque, external torque, velocity."""
        zero = torch.zeros_like(qd)
        if not self.coulomb:
            return zero
        et = self.cfg.eps_torque
        F = self.friction_base() + self.friction_viscous() * self._abs(qd, self.cfg.eps_velocity)
        S = self.stribeck_coeff(qd) if self.stribeck else None
        if S is not None:
            F = F + self.friction_stribeck() * S
        if self.load_dependent and not self.directional:
            g = self._abs(tau_ext - tau_motor, et)
            F = F + self.load_friction_base() * g
            if S is not None:
                F = F + self.load_friction_stribeck() * g * S
        if self.directional:
            F = F + self._abs(
                tau_ext * self.load_friction_external() - tau_motor * self.load_friction_motor(),
                et,
            )
            F = F + S * self._abs(
                tau_ext * self.load_friction_external_stribeck()
                - tau_motor * self.load_friction_motor_stribeck(),
                et,
            )
        if self.quadratic:
            F = F + S * self._quadratic(tau_motor, tau_ext)
        return F

    def _quadratic(self, tau_motor: Tensor, tau_ext: Tensor) -> Tensor:
        """Quadratic load term, active only when motor and load torques oppose each other.

        When the motor dominates, the load torque squared drives the friction, and vice versa.
        """
        et = self.cfg.eps_torque
        ext2 = self.load_friction_external_quad() * tau_ext**2
        mot2 = self.load_friction_motor_quad() * tau_motor**2
        if self.cfg.smooth:
            oppose = torch.sigmoid(-tau_ext * tau_motor / (et * et))
            motor_dom = torch.sigmoid((tau_motor.abs() - tau_ext.abs()) / et)
        else:
            oppose = (torch.sign(tau_ext) != torch.sign(tau_motor)).to(tau_motor.dtype)
            motor_dom = (tau_motor.abs() > tau_ext.abs()).to(tau_motor.dtype)
            ext_dom = (tau_ext.abs() > tau_motor.abs()).to(tau_motor.dtype)
            return oppose * (motor_dom * ext2 + ext_dom * mot2)
        ext_dom = 1.0 - motor_dom
        return oppose * (motor_dom * ext2 + ext_dom * mot2)

    def forward(self, tau_motor: Tensor, tau_ext: Tensor, qd: Tensor, inertia: Tensor,
                dt: float) -> Tensor:
        """tau_f: (..., n) friction torque [N m], the stopping torque clipped by the budget.

        tau_motor, tau_ext: (..., n) [N m]; qd: (..., n) [rad/s]; inertia: (..., n) [kg m^2];
        dt: step [s] over which the stopping torque would bring qd to zero.
        """
        if not self.coulomb:
            return torch.zeros_like(qd)
        if dt is None or inertia is None:
            raise ConfigError(
                "friction budget needs state.inertia and state.dt (the simulator sets them)"
            )
        F = self.budget(tau_motor, tau_ext, qd)
        tau_stop = inertia * qd / dt + tau_motor + tau_ext
        clip = softclip if self.cfg.smooth else hardclip
        return -clip(tau_stop, F)
