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
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from neuract.atomic import atomic_dir, check_dest, write_json, write_text
from neuract.config import save_resolved
from neuract.control.computed_torque import ComputedTorque, PIDController, gravity_compensation
from neuract.control.replay import Episode, json_safe, replay
from neuract.control.sensors2025_protocol import AMPS, FREQS
from neuract.errors import CheckpointError, ConfigError
from neuract.models import (
    HybridModel,
    LagrangianModel,
    MLPModel,
    RigidBodyModel,
    RobotModel,
)
from neuract.robot import load_robot

CONTROLLERS = ("computed_torque", "gravity_compensation", "pd")


DEST = {"marker": "config.json", "kind": lambda j: j.get("type") == "ControlConfig"}
"""what makes a directory an earlier output of this verb (``--overwrite`` replaces only such
a directory)"""

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
    `neuract identify` (e.g. a model fitted to the real arm, friction included); identified
    models must match --robot's joints"""
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
    """episode length [s]; at most 200000 control steps (duration / dt) per episode"""
    dt: float = 0.004
    """control period [s]"""
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


@dataclass
class _Identified:
    """Reading the output directory ``path`` of ``neuract identify`` for ``robot``; ``where``
    (the CLI option and path) and ``robot_arg`` word the errors."""

    path: Path
    robot: Any
    where: str
    robot_arg: str

    def read_json(self, name: str) -> dict:
        try:
            obj = json.loads((self.path / name).read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{self.where}: {name} is not valid JSON ({exc}); rerun "
                                  "`neuract identify`") from None
        if not isinstance(obj, dict):
            raise CheckpointError(f"{self.where}: {name} holds no JSON object; rerun "
                                  "`neuract identify`")
        return obj

    def check_robot(self, n_dof, names, identified_on) -> None:
        robot, where, robot_arg = self.robot, self.where, self.robot_arg
        on = f" (identified on robot {identified_on!r})" if identified_on else ""
        if n_dof != robot.n_dof:
            raise ConfigError(
                f"{where}: the model has {n_dof} joints{on}, but --robot {robot_arg!r} has "
                f"{robot.n_dof}; accepted: a model identified on a robot with the same "
                "joints (pass the matching --robot)")
        if names is not None and list(names) != list(robot.joint_names):
            raise ConfigError(
                f"{where}: the model's joints {list(names)}{on} differ from --robot "
                f"{robot_arg!r}'s joints {list(robot.joint_names)}; accepted: a model "
                "identified on the same robot (pass the matching --robot)")

    def rigid(self, p: dict, source: str) -> RigidBodyModel:
        """The rigid-body model of the parameters ``p`` (read from ``source``)."""
        robot, where = self.robot, self.where
        try:
            beta, columns = list(p["beta"]), [int(c) for c in p["columns"]]
            fv, fc = list(p["fv"]), list(p["fc"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: {source} lacks a valid {exc} entry; rerun "
                                  "`neuract identify`") from None
        self.check_robot(int(p.get("n_dof", len(fv))), p.get("joint_names"),
                         p.get("robot"))
        width = 10 * robot.n_dof
        if (len(fv) != robot.n_dof or len(fc) != robot.n_dof or len(beta) != len(columns)
                or any(not 0 <= c < width for c in columns)):
            raise CheckpointError(f"{where}: {source} is inconsistent (beta/columns/fv/fc "
                                  f"sizes do not fit {robot.n_dof} joints); rerun "
                                  "`neuract identify`")
        return RigidBodyModel(robot.regressor, torch.tensor(beta, dtype=torch.float64),
                              robot.n_dof, columns, torch.tensor(fv, dtype=torch.float64),
                              torch.tensor(fc, dtype=torch.float64))

    def network(self) -> Any:
        """The network model described by ``model.json``, its weights loaded."""
        where = self.where
        meta = self.read_json("model.json")
        kind = meta.get("type")
        kinds = ("mlp", "lagrangian", "hybrid")
        if kind not in kinds:
            raise CheckpointError(f"{where}: model.json type {kind!r}; accepted: "
                                  f"{', '.join(kinds)}")
        if kind == "hybrid":
            if not isinstance(meta.get("params"), dict):
                raise CheckpointError(f"{where}: model.json of a hybrid model lacks its rigid-"
                                      "body 'params'; rerun `neuract identify`")
            model = HybridModel(self.rigid(meta["params"], "model.json params"))
        else:
            n_dof = meta.get("n_dof")
            if not isinstance(n_dof, int) or n_dof < 1:
                raise CheckpointError(f"{where}: model.json n_dof {n_dof!r}; accepted: a "
                                      "positive integer (rerun `neuract identify`)")
            self.check_robot(n_dof, meta.get("joint_names"), meta.get("robot"))
            model = MLPModel(n_dof) if kind == "mlp" else LagrangianModel(n_dof)
        weights = self.path / "model.safetensors"
        if not weights.is_file():
            raise CheckpointError(f"{where}: model.safetensors missing; rerun "
                                  "`neuract identify`")
        try:
            model.load_state_dict(load_file(str(weights)), strict=False)
        except (SafetensorError, RuntimeError, OSError) as exc:
            raise CheckpointError(f"{where}: model.safetensors does not load into a {kind} "
                                  f"model ({str(exc).splitlines()[0]}); rerun "
                                  "`neuract identify`") from None
        return model


def load_identified(path: Path, robot, option: str = "--model", robot_arg: str | None = None):
    """The model written by ``neuract identify`` in directory ``path``.

    Refuses (``ConfigError``) a model identified on a robot with another number of joints or
    other joint names than ``robot``, and (``CheckpointError``) unreadable model files.
    ``option`` (the CLI option that named ``path``) and ``robot_arg`` only word the errors.
    """
    where = f"{option} {str(path)!r}"
    robot_arg = robot_arg or getattr(robot, "name", "?")
    if not path.is_dir():
        first = "'true'" if option == "--model" else "'robot'"
        raise ConfigError(f"{where}: no such directory; accepted: {first} or an output "
                          "directory of `neuract identify`")
    src = _Identified(path, robot, where, robot_arg)
    if (path / "params.json").is_file():
        return src.rigid(src.read_json("params.json"), "params.json")
    if not (path / "model.json").is_file():
        raise ConfigError(f"{where}: no params.json or model.json in it; accepted: an output "
                          "directory of `neuract identify`")
    return src.network()


MAX_STEPS = 200_000
"""Most control steps (``--duration / --dt``) one episode may take."""


def _check_options(cfg: ControlConfig) -> int:
    """Validate every option up front; returns the number of control steps per episode."""
    def number(opt: str, x, accepted: str, ok) -> None:
        if not (isinstance(x, (int, float)) and math.isfinite(x) and ok(x)):
            raise ConfigError(f"{opt} {x!r}; accepted: {accepted}")

    if cfg.controller not in CONTROLLERS:
        raise ConfigError(f"--controller {cfg.controller!r}; accepted: {', '.join(CONTROLLERS)}")
    if cfg.home not in ("mid", "zero"):
        raise ConfigError(f"--home {cfg.home!r}; accepted: 'mid', 'zero'")
    number("--dt", cfg.dt, "a finite time step > 0 [s]", lambda x: x > 0)
    number("--duration", cfg.duration, f"a finite duration > --dt ({cfg.dt:g}) [s]",
           lambda x: x > cfg.dt)
    steps = int(cfg.duration / cfg.dt)
    if steps > MAX_STEPS:
        raise ConfigError(
            f"--duration {cfg.duration:g} / --dt {cfg.dt:g} = {steps} control steps per "
            f"episode; accepted: at most {MAX_STEPS} (e.g. {MAX_STEPS * 0.004:g} s at "
            "--dt 0.004)")
    for opt, x in (("--kp", cfg.kp), ("--kd", cfg.kd), ("--ki", cfg.ki)):
        number(opt, x, "a finite gain >= 0", lambda v: v >= 0)
    number("--amplitude", cfg.amplitude, "a finite excursion >= 0 [rad]", lambda x: x >= 0)
    number("--noise-q", cfg.noise_q, "a finite standard deviation >= 0 [rad]",
           lambda x: x >= 0)
    number("--noise-qd", cfg.noise_qd, "a finite standard deviation >= 0 [rad/s]",
           lambda x: x >= 0)
    number("--tau-limit", cfg.tau_limit, "a finite torque limit >= 0 [N m] (0: none)",
           lambda x: x >= 0)
    number("--settle-tol", cfg.settle_tol, "a finite tolerance > 0 [rad]", lambda x: x > 0)
    number("--fail-tol", cfg.fail_tol, "a finite tolerance > 0 [rad]", lambda x: x > 0)
    if not cfg.speeds:
        raise ConfigError("--speeds (none given); accepted: one or more factors > 0")
    nyquist = math.pi / (max(FREQS) * cfg.dt)
    for s in cfg.speeds:
        number("--speeds", s, "finite time-scale factors > 0", lambda x: x > 0)
        if s >= nyquist:
            raise ConfigError(
                f"--speeds {s:g} with --dt {cfg.dt:g}: the fastest reference component "
                f"({max(FREQS) * s:g} rad/s) is not resolved by the control rate; accepted: "
                f"factors < {nyquist:.4g} at this --dt")
    if not cfg.payloads:
        raise ConfigError("--payloads (none given); accepted: one or more masses >= 0 [kg]")
    for m in cfg.payloads:
        number("--payloads", m, "finite masses >= 0 [kg]", lambda x: x >= 0)
    if cfg.plant != "robot" and any(m != 0 for m in cfg.payloads):
        raise ConfigError(f"--payloads {' '.join(f'{m:g}' for m in cfg.payloads)} with --plant "
                          f"{cfg.plant!r}: payloads can only be added to the nominal robot "
                          "plant; accepted: --payloads 0 or --plant robot")
    # before any work
    check_dest(cfg.out, cfg.overwrite, inputs=(cfg.model, cfg.plant, cfg.robot), **DEST)
    return steps


def _fmt(x: float, spec: str, missing: str = "-") -> str:
    return f"{x:{spec}}" if math.isfinite(x) else missing


def _controller_factory(cfg: ControlConfig, model, lim: float | None):
    """A function making a fresh controller of ``cfg.controller`` on ``model``."""

    def make():
        if cfg.controller == "computed_torque":
            return ComputedTorque(model, cfg.kp, cfg.kd, cfg.ki, tau_limit=lim)
        if cfg.controller == "gravity_compensation":
            return gravity_compensation(model, cfg.kp, cfg.kd, cfg.ki, tau_limit=lim)
        return PIDController(cfg.kp, cfg.kd, cfg.ki, tau_limit=lim)

    return make


def _episodes(cfg: ControlConfig, robot, plant, steps: int) -> list[Episode]:
    """One reference episode per payload and speed, around the home position."""
    lo, hi = robot.q_lower.double().numpy(), robot.q_upper.double().numpy()
    finite = np.isfinite(lo) & np.isfinite(hi)
    mid = 0.5 * (np.where(finite, lo, 0.0) + np.where(finite, hi, 0.0))  # 0 where unlimited
    home = mid if cfg.home == "mid" else np.zeros(len(lo))
    t = np.arange(steps) * cfg.dt
    episodes = []
    for mass in cfg.payloads:
        p = RobotModel(with_payload(robot, mass)) if cfg.plant == "robot" else plant
        for s in cfg.speeds:
            q, qd, qdd = _reference(robot.n_dof, t, cfg.amplitude, s)
            episodes.append(Episode(q + home, qd, qdd, {"payload": f"{mass:g} kg",
                                                 "speed_factor": f"{s:g}"}, p))
    return episodes


def _report(cfg: ControlConfig, rep, fail_why: str) -> dict:
    return {"robot": cfg.robot, "model": cfg.model, "plant": cfg.plant,
            "controller": cfg.controller,
            "summary": rep.summary(), "by_payload": rep.by_context("payload"),
            "by_speed_band": rep.by_context("speed"),
            "by_speed_factor": rep.by_context("speed_factor"), "episodes": rep.episodes,
            "notes": {
                "failed": f"an episode fails when its {fail_why}; group metrics average "
                          "the episodes that did not fail (null when all failed)",
                "settling_time": "first time after which the worst-joint error stays below "
                                 f"--settle-tol {cfg.settle_tol:g} rad; null: never settled"}}


def _report_md(cfg: ControlConfig, report: dict, fail_why: str) -> str:
    """``report.md``: the metrics by payload and by speed band."""
    md = [f"# neuract control: {cfg.controller} with model `{cfg.model}` on `{cfg.robot}`",
          "", "| group | RMS [rad] | max [rad] | settling [s] | effort [N m] | failure |",
          "|---|---|---|---|---|---|"]
    for key in ("by_payload", "by_speed_band"):
        for val, r in report[key].items():
            if r["failure_rate"] >= 1:
                cells = ["all failed"] * 4
            else:
                cells = [_fmt(r["rms"], ".2e"), _fmt(r["max"], ".2e"),
                         _fmt(r["settling_time"], ".2f", "never settled"),
                         _fmt(r["effort"], ".2f")]
            md.append(f"| {key[3:]} {val} | " + " | ".join(cells)
                      + f" | {r['failure_rate']:.0%} |")
    md += ["", f"Failure: {fail_why}; the metrics average the episodes that did not "
           "fail. Settling: first time after which the worst-joint error stays below "
           f"--settle-tol {cfg.settle_tol:g} rad (\"never settled\": not within the run)."]
    return "\n".join(md) + "\n"


def _print_summary(cfg: ControlConfig, s: dict, fail_why: str) -> None:
    n_eps, n_failed = s["n"], round(s["failure_rate"] * s["n"])
    head = f"control: {cfg.controller} ({cfg.model}) on {cfg.robot}: "
    if n_failed == n_eps:
        print(head + f"all {n_eps} episodes failed ({fail_why}) -> {cfg.out}")
    else:
        settle = (f"settling {s['settling_time']:.2f} s" if math.isfinite(s["settling_time"])
                  else f"never settled within --settle-tol {cfg.settle_tol:g} rad")
        failed = f"failure rate {s['failure_rate']:.0%}" + (
            f" ({n_failed} of {n_eps} episodes: {fail_why})" if n_failed else "")
        print(head + f"RMS {s['rms']:.3g} rad, {settle}, {failed} -> {cfg.out}")


def run(cfg: ControlConfig) -> dict:
    steps = _check_options(cfg)
    robot = load_robot(cfg.robot)
    nominal = RobotModel(robot)
    model = (nominal if cfg.model == "true" else
             load_identified(Path(cfg.model), robot, "--model", cfg.robot))
    plant = (nominal if cfg.plant == "robot" else
             load_identified(Path(cfg.plant), robot, "--plant", cfg.robot))
    lim = cfg.tau_limit or None
    make = _controller_factory(cfg, model, lim)
    episodes = _episodes(cfg, robot, plant, steps)
    rep = replay(episodes, make, plant, cfg.dt, cfg.settle_tol, cfg.fail_tol, cfg.noise_q,
                 cfg.noise_qd, lim, cfg.seed)
    fail_why = (f"worst-joint tracking error above --fail-tol {cfg.fail_tol:g} rad, or the "
                "simulation diverged")
    report = _report(cfg, rep, fail_why)
    with atomic_dir(cfg.out, overwrite=cfg.overwrite, **DEST) as out:
        save_resolved(cfg, out)
        write_json(Path(out) / "report.json", json_safe(report))
        write_text(Path(out) / "report.md", _report_md(cfg, report, fail_why))
    _print_summary(cfg, report["summary"], fail_why)
    return report


__all__ = ["ControlConfig", "run"]
