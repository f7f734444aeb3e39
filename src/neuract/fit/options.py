"""``neuract fit``'s options: :class:`FitConfig` and the recipe's option groups
(:class:`SplitConfig`, :class:`BaseConfig`), plain dataclasses read by
:mod:`neuract.fit.verb`, :mod:`neuract.fit.recipe` and :mod:`neuract.fit.saved`."""

from __future__ import annotations

from dataclasses import dataclass, field

from neuract.actuators import ActuatorConfig
from neuract.fit.trainer import TrainConfig
from neuract.sim.simulate import JointParamsConfig


@dataclass
class SplitConfig:
    """Runs held out for testing (never trained or validated on), scored after the fit."""

    test: str = ""
    """a rule on the runs' labels, e.g. "kp == 16 or mass == 0.969": comparisons (==, !=, <,
    <=, >, >=, in) of labels with numbers or quoted strings, joined by and / or / not
    (empty: no test runs)"""
    test_episodes: tuple[str, ...] = ()
    """runs held out for testing by name (with --split.test: those too)"""

    def any(self) -> bool:
        return bool(self.test.strip() or self.test_episodes)


@dataclass
class BaseConfig:
    """The physical base (the servo) of a residual network (--actuator.residual mlp|gru)."""

    fit: bool = False
    """fit the servo alone first (written to --out/base), then the residual network on it"""
    freeze: bool = False
    """keep the fitted servo's parameters fixed while the residual trains (default: trained
    with it); needs --base.fit or --init-from"""
    lr: float = 0.0
    """the servo stage's --train.lr (0: --train.lr)"""
    stage_iters: tuple[int, ...] = ()
    """the servo stage's --train.stage-iters (none: --train.stage-iters)"""


@dataclass
class FitConfig:
    """Fit an actuator model to recorded runs by differentiable simulation (positions only)."""

    data: str
    """dataset directory, directory of BAM *.json logs, or a .tgz of them"""
    out: str = "runs/fit"
    """output directory (checkpoint, resolved config, report)"""
    preset: str = ""
    """start from a named bundle of option values (options given beside it override them):
    sts3215-servo (the STS3215 bench's best servo model: M6 friction, latency, punch, error
    gain, backlash, error clamp, goal speed limit), sts3215-best (that servo fitted first,
    then a GRU residual network on it: the STS3215 benchmark's best model); docs/cli.md lists
    their values"""
    actuator: ActuatorConfig = field(default_factory=ActuatorConfig)
    joints: JointParamsConfig = field(default_factory=JointParamsConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    split: SplitConfig = field(default_factory=SplitConfig)
    base: BaseConfig = field(default_factory=BaseConfig)
    init: tuple[str, ...] = ()
    """initial values of fitted parameters, NAME=VALUE (names as the report lists them, or
    their last part: friction_viscous=0.06), or a JSON file of them (an earlier fit's
    report.json too)"""
    init_from: str = ""
    """an earlier fit's --out: its fitted parameters are the starting point (the same model,
    or a servo that becomes the base of --actuator.residual's network); its values win over
    --init"""
    robot: str = "pendulum"
    """'pendulum' (bench: one plant per run from its mass/length labels) or a robot name/path"""
    force_robot: bool = False
    """use a bundled --robot on data recorded on another arm (refused otherwise)"""
    arm_mass: float | None = None
    """pendulum: arm mass [kg] of runs whose labels give none or only assume one (BAM logs
    without it: 0) (default: the K-Scale bench arm of the run's length, 100 or 150 mm)"""
    val_fraction: float = 0.1
    """fraction of runs held out for validation / early stopping (split by run, train.seed)"""
    limit: int = 0
    """use at most this many runs (0 = all)"""
    duration: float = 0.0
    """simulate at most this many seconds of each run (0 = whole runs)"""
    threads: int = 1
    """torch CPU threads"""
    overwrite: bool = False
    """start afresh even if --out holds a checkpoint"""


__all__ = ["BaseConfig", "FitConfig", "SplitConfig"]
