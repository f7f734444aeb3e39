"""A pendulum test bench (servo + rigid arm + point mass), batched over bench configurations.

The 1-DoF dynamics are written directly in torch (fast and differentiable), with the same
``mass_matrix`` / ``bias_forces`` interface as :class:`neuract.robot.Robot`, so the
identification code treats the bench like any robot. :meth:`Pendulum.to_mjcf` writes the
equivalent MJCF; a test checks both agree with MuJoCo.

Convention (BAM, K-Scale bench logs): q = 0 is the arm hanging down; a uniform arm of mass
``arm_mass`` and length ``length`` carries a point mass ``mass`` at its tip;
``M = mass l^2 + arm_mass l^2 / 3`` and ``M qdd + b = tau`` with
``b(q) = (mass + arm_mass / 2) g l sin(q)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from neuract.errors import ConfigError

G = 9.80665
# K-Scale bench arms (experiment configs): 0.036 kg for the 100 mm arm, 0.050 kg for 150 mm.
BENCH_ARM_MASS = {0.100: 0.036, 0.150: 0.050}


def bench_arm_mass(length: float) -> float:
    """Arm mass [kg] of the K-Scale bench arm of this length [m] (100 or 150 mm)."""
    for ell, m in BENCH_ARM_MASS.items():
        if abs(length - ell) < 1e-6:
            return m
    raise ConfigError(
        f"no known arm mass for length {length} m (known bench arms: "
        f"{', '.join(f'{ell:g}' for ell in sorted(BENCH_ARM_MASS))} m); give the arm mass "
        "[kg]: an arm_mass label on the runs, or neuract fit --arm-mass KG"
    )


class Pendulum:
    """Batched 1-DoF pendulum plant.

    mass, length, arm_mass: (B,) or scalars [kg, m, kg], one bench configuration per row.
    """

    n_dof = 1
    joint_names = ("pendulum",)

    def __init__(self, mass: Tensor | float, length: Tensor | float,
                 arm_mass: Tensor | float = 0.0, g: float = G,
                 dtype: torch.dtype = torch.float64) -> None:
        self.mass = torch.as_tensor(mass, dtype=dtype)
        self.length = torch.as_tensor(length, dtype=dtype)
        self.arm_mass = torch.as_tensor(arm_mass, dtype=dtype)
        self.g = g
        for name in ("mass", "length", "arm_mass"):
            v = getattr(self, name)
            if not torch.isfinite(v).all() or (v < 0).any():
                raise ConfigError(f"pendulum {name} must be finite and >= 0, got {v}")
        if (self.length <= 0).any():
            raise ConfigError(f"pendulum length must be > 0, got {self.length}")
        self._inertia = (self.mass + self.arm_mass / 3.0) * self.length**2
        self._moment = (self.mass + self.arm_mass / 2.0) * self.g * self.length

    @classmethod
    def from_meta(cls, metas: list[Mapping[str, Any]], dtype: torch.dtype = torch.float64,
                  arm_mass: float | None = None) -> Pendulum:
        """One row per log: each meta needs ``mass`` and ``length`` (``arm_mass`` optional:
        else ``arm_mass`` [kg] if given, else the K-Scale bench arm of that length). A given
        ``arm_mass`` also replaces a label the reader only assumed (its ``arm_mass_source``
        starts with ``assumed``: BAM's 0 for a log that records none)."""
        try:
            mass = [float(m["mass"]) for m in metas]
            length = [float(m["length"]) for m in metas]
        except KeyError as exc:
            raise ConfigError(f"pendulum metadata lacks {exc}; needs mass and length") from None

        def arm_of(m: Mapping[str, Any], ell: float) -> float:
            assumed = str(m.get("arm_mass_source", "")).startswith("assumed")
            if m.get("arm_mass") is not None and not (assumed and arm_mass is not None):
                return float(m["arm_mass"])
            return float(arm_mass) if arm_mass is not None else bench_arm_mass(ell)

        arm = [arm_of(m, ell) for m, ell in zip(metas, length)]
        return cls(torch.tensor(mass, dtype=dtype), torch.tensor(length, dtype=dtype),
                   torch.tensor(arm, dtype=dtype), dtype=dtype)

    @property
    def inertia(self) -> Tensor:
        """(B,) inertia about the pivot [kg m^2]."""
        return self._inertia

    @property
    def gravity_moment(self) -> Tensor:
        """(B,) (mass + arm_mass/2) g l [N m]: gravity torque amplitude."""
        return self._moment

    def mass_matrix(self, q: Tensor) -> Tensor:
        """M: (B, 1, 1) [kg m^2] (constant)."""
        return self._inertia.expand(q.shape[:-1])[..., None, None]

    def bias_forces(self, q: Tensor, qd: Tensor) -> Tensor:
        """b: (B, 1) gravity generalized force [N m], M qdd + b = tau."""
        return self._moment[..., None] * torch.sin(q)

    def to_mjcf(self, row: int = 0, timestep: float = 0.005) -> str:
        """MJCF of one configuration: hinge about y, arm along -z, point mass at the tip."""
        m = float(self.mass.reshape(-1)[row] if self.mass.ndim else self.mass)
        ell = float(self.length.reshape(-1)[row] if self.length.ndim else self.length)
        am = float(self.arm_mass.reshape(-1)[row] if self.arm_mass.ndim else self.arm_mass)
        arm_i = max(am * ell**2 / 12.0, 1e-9)
        tip_i = 1e-9  # a point mass: MuJoCo needs a positive inertia
        return f"""<mujoco model="pendulum_bench">
  <option timestep="{timestep}" integrator="Euler" gravity="0 0 -{self.g}"/>
  <worldbody>
    <body name="arm">
      <joint name="pendulum" type="hinge" axis="0 1 0"/>
      <inertial pos="0 0 {-ell / 2}" mass="{max(am, 1e-9)}"
                diaginertia="{arm_i} {arm_i} {tip_i}"/>
      <body name="tip" pos="0 0 {-ell}">
        <inertial pos="0 0 0" mass="{m}" diaginertia="{tip_i} {tip_i} {tip_i}"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

