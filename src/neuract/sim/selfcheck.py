"""``neuract selfcheck``: validate the differentiable rigid-body core on one robot, then roll it
out, and print a summary.

Checks, in order: mass matrix, bias forces, inverse/forward dynamics, external wrenches,
poses and Jacobians against MuJoCo at random states (and against Pinocchio on the same file
when it is installed); the regressor identity; a 1 s frictionless rollout against MuJoCo's
own rollout (same semi-implicit Euler with implicit damping); energy drift of an undamped RK4
rollout; the rollout gradient against a central finite difference.
"""

from __future__ import annotations

import importlib.util
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from neuract.errors import ConfigError
from neuract.robot import native
from neuract.robot.bundled import BUNDLED_ROBOTS, bundled_path
from neuract.robot.dynamics import kinetic_energy, potential_energy
from neuract.robot.loader import load_robot
from neuract.robot.validate import compare_with_mujoco, compare_with_pinocchio, mujoco_rollout
from neuract.sim.rollout import rollout

__all__ = ["SelfCheckConfig", "run"]

TOL = 1e-9


@dataclass
class SelfCheckConfig:
    """Validate the rigid-body core against MuJoCo/Pinocchio and roll out a robot."""

    robot: str = "so101"
    """bundled robot name (planar2, so101, omx, omx_arm, panda) or a path to an MJCF/URDF file"""
    n_states: int = 100
    """random states for the reference comparisons"""
    seconds: float = 1.0
    """duration of the rollout compared with MuJoCo [s]"""
    dt: float = 0.002
    """integration step [s]"""
    seed: int = 0
    """random seed"""


def _rollout_checks(robot, cfg: SelfCheckConfig) -> dict[str, float]:
    rng = np.random.default_rng(cfg.seed)
    n, T = robot.n_dof, int(round(cfg.seconds / cfg.dt))
    q0 = rng.uniform(-0.5, 0.5, n) * np.where(robot.is_hinge.numpy(), 1.0, 0.02)
    qd0 = rng.normal(size=n) * 0.5
    tau = rng.normal(size=(T, n)) * 0.1
    frictionless = robot.replace(frictionloss=torch.zeros_like(robot.frictionloss))
    t0 = time.perf_counter()
    out = rollout(frictionless, torch.as_tensor(q0), torch.as_tensor(qd0), torch.as_tensor(tau),
                  cfg.dt, implicit_damping=True)
    t_ours = time.perf_counter() - t0
    ref = mujoco_rollout(frictionless, q0, qd0, tau, cfg.dt, "euler")
    res = {"rollout_steps": float(T), "rollout_seconds_ours": t_ours,
           "rollout_max_q_error_vs_mujoco": float(np.abs(out.q.numpy() - ref).max()),
           "rollout_max_q_travel": float(np.abs(ref - q0).max())}

    conservative = frictionless.replace(damping=torch.zeros_like(robot.damping))
    o = rollout(conservative, torch.as_tensor(q0), torch.as_tensor(qd0),
                torch.zeros(T // 2, n, dtype=torch.float64), cfg.dt, integrator="rk4")
    E = kinetic_energy(conservative, o.q, o.qd) + potential_energy(conservative, o.q)
    res["rk4_energy_drift_J"] = float((E - E[0]).abs().max())
    res["rk4_energy_scale_J"] = float(kinetic_energy(conservative, o.q, o.qd).max())

    # gradient of a rollout loss w.r.t. the initial position vs a central finite difference
    q0t = torch.as_tensor(q0).requires_grad_(True)
    steps = torch.as_tensor(tau[:50])

    def loss(q_init):
        return rollout(robot, q_init, torch.as_tensor(qd0), steps, cfg.dt).q[-1].square().sum()

    (grad,) = torch.autograd.grad(loss(q0t), q0t)
    direction = torch.as_tensor(rng.normal(size=n))
    eps = 1e-6
    with torch.no_grad():
        fd = (loss(q0t + eps * direction) - loss(q0t - eps * direction)) / (2 * eps)
    res["gradient_rel_error_vs_finite_diff"] = float(
        (grad @ direction - fd).abs() / fd.abs().clamp_min(1e-12))
    return res


def check_config(cfg: SelfCheckConfig) -> None:
    """Refuse options the checks cannot run with, naming the option."""

    if not (isinstance(cfg.n_states, int) and 1 <= cfg.n_states <= 100_000):
        raise ConfigError(f"--n-states {cfg.n_states!r}; expected an integer in [1, 100000]")
    for name, v in (("--seconds", cfg.seconds), ("--dt", cfg.dt)):
        if not (math.isfinite(v) and v > 0):
            raise ConfigError(f"{name} {v!r}; expected a finite duration > 0 s")
    if not cfg.dt <= cfg.seconds:
        raise ConfigError(f"--dt {cfg.dt} is longer than --seconds {cfg.seconds}; expected "
                          "at least one step")
    if cfg.seconds / cfg.dt > 1_000_000:
        raise ConfigError(f"--seconds {cfg.seconds} / --dt {cfg.dt} is "
                          f"{cfg.seconds / cfg.dt:.3g} steps; expected at most 1e6")


def run(cfg: SelfCheckConfig) -> dict[str, float]:
    check_config(cfg)
    torch.manual_seed(cfg.seed)
    robot = load_robot(cfg.robot)
    print(f"neuract selfcheck: {robot!r}")
    print(f"  bodies {list(robot.body_names)}; sites {list(robot.site_names)}")
    print("  dynamics: " + ("the compiled kernel (neuract.robot.native); rows *_torch check "
                            "the torch path" if native.enabled() and native.available() else
                            f"the torch path ({native.build_error() or 'kernel switched off'})"))
    results: dict[str, float] = {}
    t0 = time.perf_counter()
    mj = compare_with_mujoco(robot, cfg.n_states, cfg.seed)
    share = mj.pop("passive_saturated_share")
    results.update({f"mujoco/{k}": v for k, v in mj.items()})
    path = bundled_path(cfg.robot) if cfg.robot in BUNDLED_ROBOTS else Path(cfg.robot)
    if importlib.util.find_spec("pinocchio") is not None and path.suffix in (".urdf", ".xml"):
        try:
            pin = compare_with_pinocchio(robot, path, cfg.n_states, cfg.seed)
            pin.pop("n_frames_compared")
            results.update({f"pinocchio/{k}": v for k, v in pin.items()})
        except Exception as exc:  # pinocchio cannot parse every MJCF MuJoCo accepts
            print(f"  (pinocchio comparison skipped: {exc})")
    results.update(_rollout_checks(robot, cfg))
    elapsed = time.perf_counter() - t0

    print(f"\n  reference comparisons at {cfg.n_states} random states (max relative error, "
          f"float64; pass < {TOL:g}):")
    worst = 0.0
    for k, v in results.items():
        if k.startswith(("mujoco/", "pinocchio/")):
            worst = max(worst, v)
            print(f"    {k:34s} {v:9.2e}  {'ok' if v < TOL else 'FAIL'}")
    print(f"  (passive torques: damping and friction loss at 5-20 rad/s, on the {share:.0%} of "
          f"joint samples where MuJoCo's friction-loss constraint acts as sliding friction; "
          f"potential energy: changes, bodies welded to the world being a constant)")
    results["mujoco_passive_compared_share"] = share
    print(f"\n  {results['rollout_steps']:.0f}-step frictionless rollout ({cfg.seconds:g} s, "
          f"dt {cfg.dt:g} s) vs MuJoCo's own: max joint error "
          f"{results['rollout_max_q_error_vs_mujoco']:.2e} (joints travelled up to "
          f"{results['rollout_max_q_travel']:.2f}); ours took "
          f"{results['rollout_seconds_ours']:.2f} s")
    print(f"  undamped RK4 energy drift {results['rk4_energy_drift_J']:.2e} J "
          f"(kinetic energy up to {results['rk4_energy_scale_J']:.2e} J)")
    print(f"  rollout gradient vs finite difference: relative error "
          f"{results['gradient_rel_error_vs_finite_diff']:.2e}")
    ok = (worst < TOL and results["rollout_max_q_error_vs_mujoco"] < 1e-8
          and results["gradient_rel_error_vs_finite_diff"] < 1e-5)
    print(f"\n  {'ALL CHECKS PASSED' if ok else 'SOME CHECKS FAILED'} in {elapsed:.1f} s")
    results["passed"] = float(ok)
    return results
