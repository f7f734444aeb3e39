"""``neuract control``: replay test of a controller built on a dynamics model.

The plant is the rigid-body robot (bundled name or MJCF/URDF path), optionally carrying
extra payloads on its last link, or a model written by ``neuract identify`` (``--plant``,
e.g. fitted to the real arm); the controller (computed torque, gravity compensation or
PD) uses either the nominal robot (``--model true``) or a model written by ``neuract
identify``. Multi-sine references at several speeds are replayed for every payload and the
report gives tracking RMS, max error, settling time, effort and failure rate by payload and
by speed band (``report.json`` + ``report.md``, resolved ``config.json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from neuract.errors import ConfigError

CONTROLLERS = ("computed_torque", "gravity_compensation", "pd")


@dataclass
class ControlConfig:
    """Replay multi-sine references through a model-based controller on a simulated arm."""

    robot: str = "planar2"
    """bundled robot name or MJCF/URDF path (the simulated plant)"""
    out: Path = Path("runs/control")
    """output directory (must not exist unless --overwrite)"""
    model: str = "true"
    """controller's model: 'true' (the nominal robot) or an output dir of `neuract identify`"""
    plant: str = "robot"
    """simulated plant: 'robot' (the nominal robot, payloads added) or an output dir of
    `neuract identify` (e.g. a model fitted to the real arm, friction included)"""
    controller: str = "computed_torque"
    """computed_torque | gravity_compensation | pd"""
    kp: float = 100.0
    kd: float = 20.0
    ki: float = 0.0
    amplitude: float = 0.5
    """peak reference excursion per joint [rad]"""
    speeds: tuple[float, ...] = (0.5, 1.0, 2.0)
    """time-scale factors of the reference (1: base frequencies 0.3-2.5 rad/s)"""
    payloads: tuple[float, ...] = (0.0, 0.5)
    """extra point masses at the last link's centre of mass [kg]"""
    duration: float = 5.0
    dt: float = 0.004
    noise_q: float = 0.0
    noise_qd: float = 0.0
    tau_limit: float = 0.0
    """symmetric torque limit [N m]; 0: none"""
    settle_tol: float = 0.01
    fail_tol: float = 0.2
    home: str = "mid"
    """reference centre: 'mid' (middle of each joint's range; 0 where unlimited) or 'zero'"""
    seed: int = 0
    overwrite: bool = False


def _reference(n: int, t: np.ndarray, amp: float, speed: float):
    from neuract.control.sensors2025_protocol import AMPS, FREQS

    a = np.asarray(AMPS) / np.sum(AMPS) * amp
    w = np.asarray(FREQS) * speed
    ph = 0.7 * np.arange(n)[:, None]
    arg = w[None, :, None] * t[None, None, :] + ph[..., None]  # (n, 5, T)
    q = (a[None, :, None] * (np.sin(arg) - np.sin(ph[..., None]))).sum(1).T
    qd = (a[None, :, None] * w[None, :, None] * np.cos(arg)).sum(1).T
    qdd = -(a[None, :, None] * w[None, :, None] ** 2 * np.sin(arg)).sum(1).T
    return q, qd, qdd


def with_payload(robot, mass: float):
    """Copy of ``robot`` with a point mass [kg] added at its last link's centre of mass."""
    if mass == 0:
        return robot
    pi = robot.inertial_parameters().reshape(robot.n_dof, 10).clone()
    m, h = pi[-1, 0], pi[-1, 1:4]
    c = h / m if float(m) > 0 else torch.zeros(3, dtype=pi.dtype)
    s = (c @ c) * torch.eye(3, dtype=pi.dtype) - torch.outer(c, c)
    add = torch.cat([torch.tensor([mass], dtype=pi.dtype), mass * c,
                     mass * torch.stack([s[0, 0], s[1, 1], s[2, 2], s[0, 1], s[0, 2], s[1, 2]])])
    pi[-1] = pi[-1] + add
    return robot.with_inertial_parameters(pi)


def load_identified(path: Path, robot):
    """The model written by ``neuract identify`` in directory ``path``."""
    from neuract.models import HybridModel, LagrangianModel, MLPModel, RigidBodyModel

    def rigid(p):
        return RigidBodyModel(robot.regressor, torch.tensor(p["beta"]), robot.n_dof,
                              p["columns"], torch.tensor(p["fv"]), torch.tensor(p["fc"]))

    if (path / "params.json").is_file():
        return rigid(json.loads((path / "params.json").read_text()))
    meta_path = path / "model.json"
    if not meta_path.is_file():
        raise ConfigError(f"model={str(path)!r}: no params.json or model.json in it")
    from safetensors.torch import load_file

    meta = json.loads(meta_path.read_text())
    kind = meta["type"]
    model = {"mlp": lambda: MLPModel(meta["n_dof"]),
             "lagrangian": lambda: LagrangianModel(meta["n_dof"]),
             "hybrid": lambda: HybridModel(rigid(meta["params"]))}[kind]()
    model.load_state_dict(load_file(str(path / "model.safetensors")), strict=False)
    return model


def run(cfg: ControlConfig) -> dict:
    from neuract.atomic import atomic_dir, write_json, write_text
    from neuract.config import save_resolved
    from neuract.control.computed_torque import (
        ComputedTorque,
        PIDController,
        gravity_compensation,
    )
    from neuract.control.replay import Episode, replay
    from neuract.models import RobotModel
    from neuract.robot import load_robot

    if cfg.controller not in CONTROLLERS:
        raise ConfigError(f"controller={cfg.controller!r}; accepted: {', '.join(CONTROLLERS)}")
    if cfg.dt <= 0 or cfg.duration <= cfg.dt:
        raise ConfigError(f"dt={cfg.dt}, duration={cfg.duration}: need 0 < dt < duration")
    robot = load_robot(cfg.robot)
    nominal = RobotModel(robot)
    model = nominal if cfg.model == "true" else load_identified(Path(cfg.model), robot)
    if cfg.plant == "robot":
        plant = nominal
    else:
        plant = load_identified(Path(cfg.plant), robot)
        if any(m != 0 for m in cfg.payloads):
            raise ConfigError(f"payloads={cfg.payloads}: payloads can only be added to the "
                              "nominal robot plant (--plant robot)")
    lim = cfg.tau_limit or None

    def make():
        if cfg.controller == "computed_torque":
            return ComputedTorque(model, cfg.kp, cfg.kd, cfg.ki, tau_limit=lim)
        if cfg.controller == "gravity_compensation":
            return gravity_compensation(model, cfg.kp, cfg.kd, cfg.ki, tau_limit=lim)
        return PIDController(cfg.kp, cfg.kd, cfg.ki, tau_limit=lim)

    if cfg.home not in ("mid", "zero"):
        raise ConfigError(f"home={cfg.home!r}; accepted: 'mid', 'zero'")
    lo, hi = robot.q_lower.double().numpy(), robot.q_upper.double().numpy()
    finite = np.isfinite(lo) & np.isfinite(hi)
    mid = 0.5 * (np.where(finite, lo, 0.0) + np.where(finite, hi, 0.0))  # 0 where unlimited
    home = mid if cfg.home == "mid" else np.zeros(len(lo))
    t = np.arange(int(cfg.duration / cfg.dt)) * cfg.dt
    episodes = []
    for mass in cfg.payloads:
        p = RobotModel(with_payload(robot, mass)) if cfg.plant == "robot" else plant
        for s in cfg.speeds:
            q, qd, qdd = _reference(robot.n_dof, t, cfg.amplitude, s)
            episodes.append(Episode(q + home, qd, qdd, {"payload": f"{mass:g} kg",
                                                 "speed_factor": f"{s:g}"}, p))
    rep = replay(episodes, make, plant, cfg.dt, cfg.settle_tol, cfg.fail_tol, cfg.noise_q,
                 cfg.noise_qd, lim, cfg.seed)
    report = {"robot": cfg.robot, "model": cfg.model, "plant": cfg.plant,
              "controller": cfg.controller,
              "summary": rep.summary(), "by_payload": rep.by_context("payload"),
              "by_speed_band": rep.by_context("speed"),
              "by_speed_factor": rep.by_context("speed_factor"), "episodes": rep.episodes}
    with atomic_dir(cfg.out, overwrite=cfg.overwrite) as out:
        save_resolved(cfg, out)
        write_json(Path(out) / "report.json", report)
        md = [f"# neuract control: {cfg.controller} with model `{cfg.model}` on `{cfg.robot}`",
              "", "| group | RMS [rad] | max [rad] | settling [s] | effort [N m] | failure |",
              "|---|---|---|---|---|---|"]
        for key in ("by_payload", "by_speed_band"):
            for val, r in report[key].items():
                md.append(f"| {key[3:]} {val} | {r['rms']:.2e} | {r['max']:.2e} | "
                          f"{r['settling_time']:.2f} | {r['effort']:.2f} | "
                          f"{r['failure_rate']:.0%} |")
        write_text(Path(out) / "report.md", "\n".join(md) + "\n")
    s = report["summary"]
    print(f"control: {cfg.controller} ({cfg.model}) on {cfg.robot}: RMS {s['rms']:.3g} rad, "
          f"failure rate {s['failure_rate']:.0%} -> {cfg.out}")
    return report


__all__ = ["ControlConfig", "run"]
