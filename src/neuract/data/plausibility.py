"""Plausibility of telemetry values: every bound a value must meet, each with its reason, in
one place.

Every reader in :mod:`neuract.io` calls :func:`check_trajectory` on each episode it produces,
and :class:`~neuract.data.dataset.Dataset` on each episode it loads (so a dataset written
before these checks existed is checked when ``fit``, ``simulate`` or ``evaluate`` read it).
A reader passes how to name a value's place in its file (``where``), the units its columns
were declared in (``declared``) and how a user fixes a unit (``fix``: the mapping field or
option to change).

Per channel and column (values in the channel's SI unit, :mod:`neuract.data.schema`):

- outside the **hard** bound (:data:`RULES`; positions: :func:`position_rules`): a
  :class:`~neuract.errors.DataError` naming file, row, column, channel, value, the bound and
  its reason;
- a **likely unit mistake**: values that break the hard bound but, read in another unit of
  the same quantity (degrees for radians, milliseconds for seconds, ...), all lie in the
  typical range; the DataError names that cause and the option or field that fixes it;
- outside the **typical** range but inside the hard bound: kept and counted; one
  :class:`ImplausibleValueWarning` per episode sums them up.

Also checked: the recorded sample rate (median spacing) against :data:`RATE` and against the
format's nominal rate (:data:`NOMINAL_RATIO`); positions declared in degrees that only make
sense as radians; a supply voltage of 0 V on every sample (no measurement); and the physical
labels of :data:`LABEL_RULES` (a pendulum's mass and length).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neuract.data.schema import CHANNELS
from neuract.data.trajectory import Trajectory
from neuract.data.units import ALIASES, UNITS
from neuract.errors import DataError

Where = Callable[[str, int | None, int | None], str]
"""(channel, column index or None, sample index or None) -> the place in the file, e.g.
``"log.csv line 7 (data row 6), column 'pos1'"``"""
Fix = Callable[[str, int | None, str], str | None]
"""(channel, column index or None, the unit the values are likely in) -> how the user
declares that unit (a mapping field, an option); None: this input cannot be told so (the
unit mistake is then not suggested)"""


class ImplausibleValueWarning(UserWarning):
    """Values inside the hard bounds but outside the typical range were kept; one warning per
    episode counts them."""


@dataclass(frozen=True)
class Bound:
    """The closed interval [lo, hi] in a channel's SI unit, and why a value must lie in it."""

    lo: float
    hi: float
    reason: str

    def outside(self, x: np.ndarray | float) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return (x < self.lo) | (x > self.hi)

    def text(self, unit: str) -> str:
        return f"[{self.lo:.6g}, {self.hi:.6g}] {unit}"


@dataclass(frozen=True)
class Rule:
    """The bounds of one channel column."""

    hard: Bound
    typical: Bound | None = None
    slips: tuple[str, ...] = ()
    """units (names in :data:`neuract.data.units.UNITS`) the values are likely in when they
    break the hard bound, tried in this order"""
    slip_beyond: float = 0.0
    """a unit mistake is suggested only when some value's magnitude exceeds this (positions:
    a full turn, which no limited joint reads in radians; a value just past a joint's range
    is no sign of degrees)"""


RULES: dict[str, Rule] = {
    "qd": Rule(
        Bound(-1000.0, 1000.0, "about 9500 rpm at the joint: beyond any geared servo or arm "
              "joint"),
        Bound(-100.0, 100.0, "about 950 rpm; servos turn at up to 5-15 rad/s, arm joints at a "
              "few rad/s"),
        ("deg/s", "step4096/s"),
    ),
    "qdd": Rule(
        Bound(-1e6, 1e6, "beyond any joint's acceleration, differentiation noise included"),
        None,
        ("deg/s^2",),
    ),
    "current": Rule(
        Bound(-500.0, 500.0, "beyond the rating of any servo or arm joint drive"),
        Bound(-50.0, 50.0, "servos draw a few A (STS3215 stall about 2.7 A, XM430 2.3 A), arm "
              "joint drives tens of A"),
        ("mA",),
    ),
    "load": Rule(
        Bound(-1.05, 1.05, "the load register's range: 100 % duty (STS3215: 1023 counts of "
              "0.1 %)"),
        None,
        ("%", "permille"),
    ),
    "pwm": Rule(
        Bound(-1.05, 1.05, "the PWM register's range: 100 % duty (Dynamixel Present PWM: "
              "+/-885 counts)"),
        None,
        ("%", "permille"),
    ),
    "voltage": Rule(
        Bound(0.0, 80.0, "a supply voltage is not negative; servo buses run at 5-24 V, arm "
              "joint drives at up to 48-60 V DC"),
        Bound(4.5, 60.0, "below 4.5 V no servo runs (a 0 V sample is a failed read)"),
        ("dV", "mV"),
    ),
    "temperature": Rule(
        Bound(-55.0, 200.0, "-55 degC is the lowest rating of electronic parts, 200 degC "
              "beyond any servo's sensor and housing (absolute zero: -273.15 degC)"),
        Bound(-10.0, 85.0, "servos operate at about -5 to 70-80 degC, where their firmware "
              "shuts them down"),
        ("K",),
    ),
    "tau": Rule(
        Bound(-1e4, 1e4, "beyond the peak torque of any robot arm joint"),
        Bound(-500.0, 500.0, "servos give a few N m, arm joints up to a few hundred N m"),
        ("mN m",),
    ),
    "ee_force": Rule(
        Bound(-1e5, 1e5, "beyond any arm's payload or force sensor range"),
        Bound(-1000.0, 1000.0, "end-effector force sensors read up to a few hundred N"),
        ("mN",),
    ),
    "condition": Rule(Bound(0.0, 1.0, "motor condition: 0 normal, 1 degraded")),
}
"""channel -> bounds of every column (positions: :func:`position_rules`)"""

RATE = Rule(
    Bound(2.0, 20_000.0, "below 2 Hz a log holds no actuator dynamics (servo loops settle in "
          "10-100 ms), and no servo bus or joint drive streams faster than 20 kHz"),
    Bound(10.0, 5_000.0, "servo buses stream at 30-1000 Hz, arm controllers at up to 1-4 kHz"),
    ("ms", "us", "ns", "s"),
)
"""bounds of the recorded sample rate (1 / median sample spacing) [Hz]"""
NOMINAL_RATIO = Bound(0.5, 2.0, "the recorded rate stays within a factor 2 of the format's "
                      "nominal rate")
"""bounds of recorded rate / the format's nominal rate (LeRobot ``fps``, a BAM log's
``sample_rate`` or ``dt``, the NAD recording rate)"""

POSITION_MARGIN_RAD = 0.5
POSITION_MARGIN_SHARE = 0.5
"""the hard bound of a joint with a model range widens it on each side by the larger of
POSITION_MARGIN_RAD and POSITION_MARGIN_SHARE of its span: a calibration's zero may differ
from the model's (LeRobot's calibrated mid-range, a NAD arm's encoder zero)"""
POSITION_TYPICAL_MARGIN_RAD = 0.05
"""the typical range of such a joint: its model range widened by this (rounding)"""
BENCH_RANGES: dict[str, tuple[float, float, str]] = {
    "pendulum": (-math.pi, math.pi, "the single-turn position register of the bench servo"),
}
"""robot -> position range of every joint, for robots without a model"""
UNKNOWN_POSITION = Rule(
    Bound(-1000.0, 1000.0, "no joint range is known for this joint; 1000 rad (159 turns) "
          "bounds any joint, multi-turn ones included"),
    Bound(-4 * math.pi, 4 * math.pi, "two turns each way"),
    ("deg",),
)
DEG_AS_RAD_LIMIT = math.pi + 0.05
DEG_AS_RAD_MIN_SPAN = 0.5
"""positions declared in degrees are likely radians when every value of every column lies
within +/- DEG_AS_RAD_LIMIT degrees (a half turn as radians) while some column moves over at
least DEG_AS_RAD_MIN_SPAN (half a degree, or 29 degrees as radians), on a robot whose every
joint has a known range (an arm that only moves a few degrees about its model's zero pose
in every joint is not what a recording holds)"""

LABEL_RULES: dict[str, tuple[Bound, str]] = {
    "mass": (Bound(0.0, 1000.0, "a mass, >= 0 (a pendulum bench's tip mass)"), "kg"),
    "arm_mass": (Bound(0.0, 1000.0, "a mass, >= 0 (a pendulum bench's arm)"), "kg"),
    "payload_mass_kg": (Bound(0.0, 1000.0, "a payload mass, >= 0"), "kg"),
    "length": (Bound(1e-6, 100.0, "a length, > 0 (a pendulum bench's arm)"), "m"),
}
"""episode label -> (bounds, unit): labels the physics uses (a plant's mass and length)"""

_UNIT_WORDS = {
    "rad": "radians", "deg": "degrees", "s": "seconds", "ms": "milliseconds",
    "us": "microseconds", "ns": "nanoseconds", "A": "amperes", "mA": "milliamperes",
    "V": "volts", "dV": "decivolts", "mV": "millivolts", "degC": "degrees Celsius",
    "K": "kelvin", "rad/s": "rad/s", "deg/s": "deg/s", "step4096/s": "encoder steps/s",
    "1": "fractions", "%": "percent", "permille": "per mille (raw 0.1 % register counts)",
}


@functools.lru_cache(maxsize=32)
def joint_ranges(robot: str) -> dict[str, tuple[float, float]]:
    """joint name -> (lower, upper) [rad] of the limited hinge joints of ``robot``'s model (a
    bundled name or an MJCF/URDF path); {} when no model loads."""
    try:
        from neuract.robot.bundled import BUNDLED_ROBOTS, bundled_path

        if robot in BUNDLED_ROBOTS:
            path = bundled_path(robot)
        elif Path(robot).suffix.lower() in (".xml", ".mjcf", ".urdf") and Path(robot).is_file():
            path = Path(robot)
        else:
            return {}
        import mujoco

        model = mujoco.MjModel.from_xml_path(str(path))
    except Exception:  # no model, or one MuJoCo cannot load: no ranges
        return {}
    out = {}
    hinge = int(mujoco.mjtJoint.mjJNT_HINGE)
    for j in range(model.njnt):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        if name and model.jnt_limited[j] and int(model.jnt_type[j]) == hinge:
            out[name] = (float(model.jnt_range[j, 0]), float(model.jnt_range[j, 1]))
    return out


def position_rules(robot: str, joint_names: Sequence[str]) -> list[Rule]:
    """The bounds of each joint's position [rad]: the model's joint range plus a margin
    (:data:`POSITION_MARGIN_RAD`), a bench's register range (:data:`BENCH_RANGES`), else
    :data:`UNKNOWN_POSITION`."""
    ranges = joint_ranges(robot)
    rules = []
    for name in joint_names:
        if name in ranges:
            (lo, hi), why = ranges[name], f"the joint range of robot {robot!r}"
        elif robot in BENCH_RANGES:
            lo, hi, why = BENCH_RANGES[robot]
        else:
            rules.append(UNKNOWN_POSITION)
            continue
        m = max(POSITION_MARGIN_RAD, POSITION_MARGIN_SHARE * (hi - lo))
        rng = f"[{lo:.4g}, {hi:.4g}] rad"
        rules.append(Rule(
            Bound(lo - m, hi + m, f"{why} {rng} plus a {m:.3g} rad margin for calibration "
                  "offsets"),
            Bound(lo - POSITION_TYPICAL_MARGIN_RAD, hi + POSITION_TYPICAL_MARGIN_RAD,
                  f"{why} {rng}"),
            ("deg",),
            2 * math.pi,
        ))
    return rules


def _unit(name: str) -> str:
    return ALIASES.get(name, name)


def _words(unit: str) -> str:
    return _UNIT_WORDS.get(unit, unit)


def _label(traj: Trajectory, ch: str, j: int | None) -> str:
    kind = CHANNELS[ch].kind
    if j is None or kind in ("time", "scalar"):
        return ch
    if kind == "joint":
        return f"{ch} (joint {traj.meta.joint_names[j]!r})"
    return f"{ch} (axis {'xyz'[j]!r})"


def _default_where(traj: Trajectory) -> Where:
    src = traj.meta.source or traj.meta.name or "<trajectory>"

    def where(ch: str, j: int | None, i: int | None) -> str:
        at = f" sample {i}" if i is not None else ""
        return f"{src}{at}, channel {_label(traj, ch, j)}"

    return where


def _default_fix(ch: str, j: int | None, unit: str) -> str:
    if not unit:
        return f"leave {ch} out"
    return f"declare {ch} in {unit} (or convert its values to {CHANNELS[ch].unit})"


def _slip(values: np.ndarray, target: Bound, declared: str, candidates: Sequence[str],
          fix: Fix, ch: str, j: int | None) -> tuple[str, str] | None:
    """(unit, fix text) of the first candidate unit in which every value (given in SI,
    converted from ``declared``) lies in ``target``; None if none does."""
    d = UNITS[declared]
    raw = (np.asarray(values, dtype=np.float64) - d.offset) / d.scale
    for u in candidates:
        if u == declared or UNITS[u].quantity != d.quantity:
            continue
        true = raw * UNITS[u].scale + UNITS[u].offset
        if not target.outside(true).any():
            text = fix(ch, j, u)
            if text is not None:
                return u, text
    return None


@dataclass
class _Unusual:
    what: str
    n: int
    bound: Bound
    unit: str
    value: float
    at: str
    hint: str = ""

    def text(self) -> str:
        return (f"{self.what}: {self.n} outside {self.bound.text(self.unit)} "
                f"({self.bound.reason}), e.g. {self.value:.6g} {self.unit} at {self.at}"
                f"{self.hint}")


class _Check:
    """One episode's check (see :func:`check_trajectory`)."""

    def __init__(self, traj: Trajectory, where: Where, fix: Fix,
                 declared: Mapping[str, str | Sequence[str]]) -> None:
        self.traj, self.where, self.fix = traj, where, fix
        self.declared = declared
        self.unusual: list[_Unusual] = []
        self.src = traj.meta.source or traj.meta.name or "<trajectory>"

    def units(self, ch: str, n: int) -> list[str]:
        d = self.declared.get(ch, CHANNELS[ch].unit)
        names = [d] * n if isinstance(d, str) else list(d)
        return [_unit(u) if _unit(u) in UNITS else CHANNELS[ch].unit for u in names]

    def column(self, ch: str, j: int | None, col: np.ndarray, rule: Rule, declared: str) -> None:
        si = CHANNELS[ch].unit
        what = _label(self.traj, ch, j)
        bad = rule.hard.outside(col)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            head = (f"{self.where(ch, j, i)}: {what} = {col[i]:.6g} {si} is outside the hard "
                    f"bound {rule.hard.text(si)} ({rule.hard.reason})")
            target = rule.typical or rule.hard
            slip = (_slip(col, target, declared, rule.slips + (si,), self.fix, ch, j)
                    if np.abs(col).max() > rule.slip_beyond else None)
            if slip is not None:
                u, how = slip
                raise DataError(
                    f"{head}; likely cause: {_words(u)} read as {_words(declared)} (read as "
                    f"{u}, every value of this column lies in {target.text(si)}); fix: {how}")
            raise DataError(f"{head}; {int(bad.sum())} value(s) of this column are outside")
        if ch == "voltage" and col.size and not col.any():
            how = self.fix(ch, j, "")
            raise DataError(
                f"{self.where(ch, j, None)}: {what} is 0 V on every one of {col.size} samples: "
                "not a measurement (no servo runs without supply)"
                + (f"; fix: {how}" if how else ""))
        if rule.typical is not None:
            off = rule.typical.outside(col)
            if off.any():
                i = int(np.flatnonzero(off)[0])
                slip = (_slip(col, rule.typical, declared, rule.slips, self.fix, ch, j)
                        if np.abs(col).max() > rule.slip_beyond else None)
                hint = f" (if the values are in {slip[0]}: {slip[1]})" if slip else ""
                self.unusual.append(_Unusual(what, int(off.sum()), rule.typical, si,
                                             float(col[i]), self.where(ch, j, i), hint))

    def degrees_that_are_radians(self, ch: str, x: np.ndarray, rules: list[Rule],
                                 units: list[str]) -> None:
        """Refuse positions declared in degrees that every sign says are radians (see
        :data:`DEG_AS_RAD_LIMIT`)."""
        if not units or any(u != "deg" for u in units) or UNKNOWN_POSITION in rules:
            return  # only where every joint's range is known
        raw = x / UNITS["deg"].scale
        span = raw.max(axis=0) - raw.min(axis=0)
        if np.abs(raw).max() > DEG_AS_RAD_LIMIT or span.max() < DEG_AS_RAD_MIN_SPAN:
            return
        if any(r.hard.outside(raw[:, j]).any() for j, r in enumerate(rules)):
            return
        j = int(np.argmax(span))
        how = self.fix(ch, j, "rad")
        if how is None:
            return
        raise DataError(
            f"{self.where(ch, j, None)}: {_label(self.traj, ch, j)} declared in deg: every "
            f"value of every {ch} column lies within +/-{DEG_AS_RAD_LIMIT:.3g} deg while "
            f"this one moves over {span[j]:.3g} deg, as radians would (a half turn at most); "
            f"likely cause: radians read as degrees; fix: {how}")

    def rate(self, nominal: float | None) -> None:
        t = self.traj["t"]
        if t.shape[0] < 2:
            return
        dt = float(np.median(np.diff(t)))
        rate = 1.0 / dt
        declared = self.units("t", 1)[0]
        dur = float(t[-1] - t[0])
        long = f"{dur:.4g} s" + (f" = {dur / 60:.4g} min" if dur > 120 else "")
        head = (f"{self.where('t', None, None)}: median sample spacing {dt:.4g} s, a rate of "
                f"{rate:.4g} Hz ({long} in all)")

        def slip(accept: Callable[[float], bool]) -> tuple[str, float, str] | None:
            for u in RATE.slips:
                if u == declared or UNITS[u].quantity != "time":
                    continue
                true = rate * UNITS[declared].scale / UNITS[u].scale
                if accept(true):
                    how = self.fix("t", None, u)
                    if how is not None:
                        return u, true, how
            return None

        def refuse(bound: str, found: tuple[str, float, str] | None) -> None:
            if found is None:
                raise DataError(f"{head} is outside {bound}")
            u, true, how = found
            raise DataError(f"{head} is outside {bound}; likely cause: timestamps in "
                            f"{_words(u)} read as {_words(declared)} (read as {u}: "
                            f"{true:.4g} Hz); fix: {how}")

        if RATE.hard.outside(rate):
            refuse(f"the hard bound {RATE.hard.text('Hz')} ({RATE.hard.reason})",
                   slip(lambda r: not RATE.typical.outside(r)))
        if nominal is not None and NOMINAL_RATIO.outside(rate / nominal):
            near = slip(lambda r: not NOMINAL_RATIO.outside(r / nominal))
            if near is not None:
                refuse(f"{NOMINAL_RATIO.text('x')} the nominal rate {nominal:.4g} Hz "
                       f"({NOMINAL_RATIO.reason})", near)
            self.unusual.append(_Unusual("sample rate", 1, Bound(
                nominal * NOMINAL_RATIO.lo, nominal * NOMINAL_RATIO.hi,
                f"within a factor 2 of the nominal {nominal:.4g} Hz"), "Hz", rate,
                self.where("t", None, None)))
        elif RATE.typical.outside(rate):
            found = slip(lambda r: not RATE.typical.outside(r))
            hint = f" (if the timestamps are in {found[0]}: {found[2]})" if found else ""
            self.unusual.append(_Unusual("sample rate", 1, RATE.typical, "Hz", rate,
                                         self.where("t", None, None), hint))

    def labels(self) -> None:
        for key, (bound, unit) in LABEL_RULES.items():
            v = self.traj.meta.labels.get(key)
            if v is None:
                continue
            ok = isinstance(v, int | float) and not isinstance(v, bool)
            if not ok or not math.isfinite(v) or bound.outside(v):
                raise DataError(f"{self.src}: field {key!r} = {v!r}; expected a number in "
                                f"{bound.text(unit)} ({bound.reason})")


def check_trajectory(
    traj: Trajectory,
    *,
    where: Where | None = None,
    fix: Fix | None = None,
    declared: Mapping[str, str | Sequence[str]] | None = None,
    nominal_rate_hz: float | None = None,
) -> dict[str, int]:
    """Check every value of ``traj`` against the bounds of this module (see module doc).

    where: names a value's place in the input (default: source, sample and channel).
    fix: how the user declares a unit (default: "convert the values"); None from it leaves
    that unit out of the suggestions. declared: channel -> the unit its columns were
    declared in (one name, or one per column); default the channel's SI unit.
    nominal_rate_hz: the format's nominal rate; default ``traj.meta.rate_hz``.

    Raises :class:`~neuract.errors.DataError` on a value outside a hard bound or in a likely
    wrong unit; warns once (:class:`ImplausibleValueWarning`) about unusual values kept.
    Returns what -> number of unusual values kept.
    """
    chk = _Check(traj, where or _default_where(traj), fix or _default_fix, declared or {})
    chk.labels()
    chk.rate(nominal_rate_hz if nominal_rate_hz is not None else traj.meta.rate_hz)
    n = len(traj)
    for ch in traj.channels:
        if ch in ("q", "q_goal"):
            rules = position_rules(traj.meta.robot, traj.meta.joint_names)
        elif ch in RULES:
            rules = [RULES[ch]] * (traj[ch].size // max(n, 1))
        else:
            continue
        x = traj[ch].astype(np.float64).reshape(n, -1)
        units = chk.units(ch, x.shape[1])
        scalar = CHANNELS[ch].kind in ("time", "scalar")
        for j in range(x.shape[1]):
            chk.column(ch, None if scalar else j, x[:, j], rules[j], units[j])
        if ch in ("q", "q_goal"):
            chk.degrees_that_are_radians(ch, x, rules, units)
    if chk.unusual:
        total = sum(u.n for u in chk.unusual)
        warnings.warn(
            f"{chk.src}: {total} unusual value(s) kept (inside the hard bounds): "
            + "; ".join(u.text() for u in chk.unusual),
            ImplausibleValueWarning,
            stacklevel=2,
        )
    return {u.what: u.n for u in chk.unusual}


__all__ = [
    "BENCH_RANGES",
    "Bound",
    "ImplausibleValueWarning",
    "LABEL_RULES",
    "NOMINAL_RATIO",
    "RATE",
    "RULES",
    "Rule",
    "UNKNOWN_POSITION",
    "check_trajectory",
    "joint_ranges",
    "position_rules",
]
