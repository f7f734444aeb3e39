"""One BAM pendulum-bench JSON log (Rhoban BAM format; K-Scale STS3215 runs).

A log is one JSON object: file-level metadata (``mass`` [kg], ``length`` [m], ``kp``,
``trajectory``, ``motor``, ``vin``, ...) and ``entries``, a list of samples with
``timestamp`` [s], ``position`` [rad], ``speed`` [rad/s], ``goal_position`` [rad],
``torque_enable``, ``input_volts`` [V], ``temp`` [degC] and, depending on the servo,
``current`` (K-Scale STS3215: mA, unsigned magnitude) or ``load`` (XL330: raw Present PWM as
unsigned 16 bit; STS3215/STS3250: always 0). See the PROVENANCE.md of each data folder.

Channel mapping (one joint, named ``pendulum``): t, q, qd, q_goal, torque_enable, voltage,
temperature, current [A] (if logged), pwm [duty fraction] (XL330 raw logs only), valid.
Not mapped: K-Scale ``torque`` (undocumented unsigned quantity 0..20, not N m) and all-zero
``load``. The file-level ``vin`` is metadata only (measured voltage is ``input_volts``).

Labels: the file-level metadata, plus (:func:`bench_labels`)

- ``family``: the servo family (:data:`neuract.servos.SERVOS`, the ``--actuator.type`` to fit
  with) the log's ``motor`` names; an unknown motor is refused, naming the file and the
  accepted motors. A log without ``motor`` gets no family.
- ``arm_mass`` [kg] and ``arm_mass_source``, for every log with a known family: the log's own
  ``arm_mass`` (BAM's Dynamixel recorder writes ``arm-mass``); else, for an STS3215 run of a
  K-Scale bench arm length, that arm's mass (:data:`KSCALE_ARM_MASS`); else 0, BAM's own
  convention for a log without one (its log loader sets ``arm_mass`` 0: the arm is taken as
  massless, its mass lumped into ``mass``), with a source saying it is assumed
  (:data:`ARM_MASS_ASSUMED`; ``neuract fit --arm-mass`` replaces an assumed value).

Repairs, both counted in ``traj.meta.counts`` and reported with a :class:`DataRepairWarning`:

- ``dropped_samples``: bus-read dropouts (``temp == 0`` or ``input_volts == 0``) are removed.
- ``masked_samples``: short position bursts (failed reads that passed the rule above): a run
  of 1 to ``MAX_SPIKE_LEN`` samples that all lie more than ``spike_threshold`` [rad] away
  from both bracketing samples, which agree with each other; in the K-Scale logs these read
  about -pi, one sample long in most runs, two samples in raw
  ``sysid_sts3215_sin_time_square_2025-03-17_225205`` and three (interpolated towards -pi)
  in processed ``sysid_sts3215_sin_sin_2025-03-17_224334``. They are masked: ``valid`` is
  False for those samples and q, qd, current, voltage and temperature are replaced by
  linear interpolation in time between the two bracketing samples, so the arrays stay
  finite. Losses should weight samples by ``valid``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from neuract.data.plausibility import check_trajectory
from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.errors import SchemaError
from neuract.io.common import check_joint_count, warn_repair
from neuract.io.registers import dxl_pwm_to_fraction, mA_to_A, twos_complement16
from neuract.servos import ServoFamily, accepted_motors, family_of_motor

KSCALE_ARM_MASS = {0.1: 0.036, 0.15: 0.050}
"""K-Scale runs carry no arm mass; their experiment configs list it per arm length
(kscale_sts3215_12v/orig_docs/experiment_configs/*.yaml): length [m] -> arm mass [kg]."""
KSCALE_ARM_MASS_SOURCE = "kscale experiment_configs (by length)"
ARM_MASS_ASSUMED = ("assumed 0: the log gives none (BAM's convention, "
                    "https://github.com/Rhoban/bam bam/logs.py)")
"""``arm_mass_source`` of an arm mass the reader assumed (a fit's --arm-mass replaces it)"""

SPIKE_THRESHOLD_RAD = 0.5
"""A one-sample jump larger than this [rad] (50 rad/s at 100 Hz, ~8x the fastest real motion
of the benches) away from both neighbours is a failed read."""
MAX_SPIKE_LEN = 3
"""Longest run of consecutive failed position reads that is masked (see module doc). Going
out by more than ``SPIKE_THRESHOLD_RAD`` and back within MAX_SPIKE_LEN + 1 sample periods
needs over 12 rad/s even at the slowest bench rate (~50 Hz), above the benches' fastest
recorded motion (8.6 rad/s STS3250, 13.6 rad/s XL330 at ~190 Hz, where it would need 70 rad/s)."""

def _column(
    entries: list[Mapping[str, Any]], key: str, src: str, dtype: type = np.float64
) -> np.ndarray:
    try:
        vals = [e[key] for e in entries]
    except KeyError:
        i = next(i for i, e in enumerate(entries) if key not in e)
        raise SchemaError(
            f"{src}: entry {i} has no field {key!r}; fields present: {sorted(entries[i])}"
        ) from None
    except TypeError:
        i = next(i for i, e in enumerate(entries) if not isinstance(e, Mapping))
        raise SchemaError(
            f"{src}: entry {i} is {type(entries[i]).__name__}; expected an "
            "object with timestamp, position, ..."
        ) from None
    try:
        arr = np.asarray(vals, dtype=dtype)
    except (TypeError, ValueError):
        for i, v in enumerate(vals):
            try:
                dtype(v)
            except (TypeError, ValueError):
                raise SchemaError(
                    f"{src}: entry {i}, field {key!r}: value {v!r}; expected a number"
                ) from None
        raise
    if dtype is np.float64:
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raw = vals[int(bad[0])]
            shown = "null" if raw is None else repr(raw)
            raise SchemaError(
                f"{src}: entry {int(bad[0])}, field {key!r}: value "
                f"{shown}; expected a finite number ({bad.size} "
                "non-finite in this field)"
            )
    return arr


def find_spikes(
    q: np.ndarray, threshold: float = SPIKE_THRESHOLD_RAD, max_len: int = MAX_SPIKE_LEN
) -> np.ndarray:
    """Sorted indices of the samples of ``q`` (T,) [rad] in short failed-read bursts: runs of
    1 to ``max_len`` samples, each more than ``threshold`` away from both bracketing samples,
    which differ from each other by less than ``threshold`` (see module doc)."""
    q = np.asarray(q, dtype=np.float64)
    n = q.shape[0]
    hit = np.zeros(n, dtype=bool)
    for length in range(1, max_len + 1):
        if n < length + 2:
            break
        prev, nxt = q[: n - length - 1], q[length + 1 :]
        ok = np.abs(nxt - prev) < threshold
        for k in range(1, length + 1):
            mid = q[k : n - length - 1 + k]
            ok &= (np.abs(mid - prev) > threshold) & (np.abs(mid - nxt) > threshold)
        for s in np.flatnonzero(ok) + 1:
            hit[s : s + length] = True
    return np.flatnonzero(hit)


def _burst_brackets(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted sample indices ``idx``, the last unmasked index before and the first after
    each one's run of consecutive indices."""
    lo = idx.copy()
    hi = idx.copy()
    for i in range(1, idx.size):
        if idx[i] == idx[i - 1] + 1:
            lo[i] = lo[i - 1]
    for i in range(idx.size - 2, -1, -1):
        if idx[i + 1] == idx[i] + 1:
            hi[i] = hi[i + 1]
    return lo - 1, hi + 1


def _check_log(data: Any, source: str, robot: str) -> list[Any]:
    """The ``entries`` of a decoded BAM log, after checking its shape (see module doc)."""
    if not isinstance(data, Mapping) or "entries" not in data:
        if isinstance(data, Mapping):
            keys = sorted(map(str, data))
            found = f"a JSON object with keys {keys[:12]}{' ...' if len(keys) > 12 else ''}"
        else:
            found = f"a JSON {type(data).__name__}"
        raise SchemaError(
            f"{source}: not a BAM log: found {found}; expected a JSON object with "
            "'entries' (a list of samples) and run metadata (mass, length, kp, trajectory)"
        )
    check_joint_count(robot, 1, source)  # a BAM log is one servo
    entries = data["entries"]
    if not isinstance(entries, list) or not entries:
        raise SchemaError(f"{source}: 'entries' is empty; expected at least one sample")
    return entries


def servo_family(meta: Mapping[str, Any], source: str) -> ServoFamily | None:
    """The servo family a log's ``motor`` names; None without ``motor``; a SchemaError naming
    the file, the motor and the accepted motors for an unknown one."""
    if "motor" not in meta:
        return None
    fam = family_of_motor(meta["motor"])
    if fam is None:
        raise SchemaError(
            f"{source}: motor {meta['motor']!r} is not a servo family neuract knows; accepted "
            f"motors: {accepted_motors()}"
        )
    return fam


def bench_labels(meta: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The labels the reader adds to a log's metadata: ``family``, ``arm_mass`` and
    ``arm_mass_source`` (see module doc)."""
    fam = servo_family(meta, source)
    if fam is None:
        return {}
    out: dict[str, Any] = {"family": fam.name}
    if meta.get("arm_mass") is not None:
        return out
    if meta.get("arm-mass") is not None:  # BAM's Dynamixel recorder writes the hyphenated key
        return out | {"arm_mass": meta["arm-mass"], "arm_mass_source": "the log's 'arm-mass'"}
    length = meta.get("length")
    arm = None
    if fam.name == "sts3215" and isinstance(length, int | float) and not isinstance(length, bool):
        arm = KSCALE_ARM_MASS.get(round(float(length), 3))
    if arm is not None:
        return out | {"arm_mass": arm, "arm_mass_source": KSCALE_ARM_MASS_SOURCE}
    return out | {"arm_mass": 0.0, "arm_mass_source": ARM_MASS_ASSUMED}


def _pwm(load: np.ndarray, meta: Mapping[str, Any],
         fam: ServoFamily | None) -> np.ndarray | None:
    """PWM duty fraction from the ``load`` field of a raw XL330 log; None for any other log."""
    raw_xl330 = (
        fam is not None and fam.name == "xl330"
        and "dt" not in meta
        and np.all(load == np.round(load))
        and load.min() >= 0
        and load.max() <= 65535
    )
    if raw_xl330:  # raw Present PWM register, uint16 two's complement, +/-885 = 100 %
        return dxl_pwm_to_fraction(twos_complement16(load))
    # else: all zero (Feetech: not implemented) or interpolated raw uint16 (processed
    # XL330 logs, corrupted near sign changes): not mapped
    return None


def _channels(
    entries: list[Any], meta: Mapping[str, Any], source: str, fam: ServoFamily | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The mapped channels of the kept samples ((T,) time, (T, 1) the rest) and the entry
    index of each kept sample (the others are bus-read dropouts)."""
    fields = set(entries[0])
    t = _column(entries, "timestamp", source)
    q = _column(entries, "position", source)
    keep = np.ones(t.shape[0], dtype=bool)
    if "temp" in fields:
        temp = _column(entries, "temp", source)
        keep &= temp != 0
    if "input_volts" in fields:
        volts = _column(entries, "input_volts", source)
        keep &= volts != 0
    if not keep.any():
        raise SchemaError(
            f"{source}: every entry is a bus-read dropout (temp or input_volts "
            "== 0); no usable samples"
        )
    ch: dict[str, np.ndarray] = {"t": t, "q": q}
    if "speed" in fields:
        ch["qd"] = _column(entries, "speed", source)
    if "goal_position" in fields:
        ch["q_goal"] = _column(entries, "goal_position", source)
    if "torque_enable" in fields:
        ch["torque_enable"] = _column(entries, "torque_enable", source, dtype=np.bool_)
    if "input_volts" in fields:
        ch["voltage"] = volts
    if "temp" in fields:
        ch["temperature"] = temp
    if "current" in fields:  # K-Scale STS3215: mA, unsigned magnitude
        ch["current"] = mA_to_A(_column(entries, "current", source))
    if "load" in fields:
        pwm = _pwm(_column(entries, "load", source), meta, fam)
        if pwm is not None:
            ch["pwm"] = pwm
    ch = {k: v[keep] for k, v in ch.items()}
    for k in ("q", "qd", "q_goal", "current", "voltage", "temperature", "pwm", "torque_enable"):
        if k in ch:
            ch[k] = ch[k][:, None]
    return ch, np.flatnonzero(keep)


BAM_FIELDS = {"t": "timestamp", "q": "position", "qd": "speed", "q_goal": "goal_position",
              "torque_enable": "torque_enable", "voltage": "input_volts", "temperature": "temp",
              "current": "current", "pwm": "load"}
"""channel -> the BAM entry field it is read from"""


def _where(source: str, kept: np.ndarray):
    def where(ch: str, j: int | None, i: int | None) -> str:
        field = BAM_FIELDS.get(ch, ch)
        if i is None:
            return f"{source}: field {field!r}"
        return f"{source}: entry {int(kept[i])}, field {field!r}"

    return where


def _fix(ch: str, j: int | None, unit: str) -> str:
    field = BAM_FIELDS.get(ch, ch)
    if not unit:
        return f"a BAM log's {field!r} must hold the measured supply: repair the log"
    return (f"BAM logs hold {field!r} in fixed units; this log's look like {unit}: convert them "
            "in the log")


def _mask_spikes(ch: dict[str, np.ndarray], spike_threshold: float) -> int:
    """Mask the short position bursts of ``ch`` in place (``valid`` False, the analog channels
    interpolated in time across each burst); returns the number of samples masked."""
    spikes = find_spikes(ch["q"][:, 0], spike_threshold)
    valid = np.ones_like(ch["q"], dtype=bool)
    if spikes.size:
        valid[spikes] = False
        tt = ch["t"]
        before, after = _burst_brackets(spikes)
        w = (tt[spikes] - tt[before]) / (tt[after] - tt[before])
        for k in ("q", "qd", "current", "voltage", "temperature", "pwm"):
            if k in ch:
                x = ch[k].copy()
                x[spikes] = (1 - w[:, None]) * x[before] + w[:, None] * x[after]
                ch[k] = x
    ch["valid"] = valid
    return int(spikes.size)


def parse_bam_log(
    data: Mapping[str, Any],
    source: str,
    *,
    robot: str = "pendulum",
    name: str | None = None,
    spike_threshold: float = SPIKE_THRESHOLD_RAD,
    warn: bool = True,
) -> Trajectory:
    """Build a :class:`Trajectory` from a decoded BAM log (see module doc)."""
    entries = _check_log(data, source, robot)
    meta = {k: v for k, v in data.items() if k != "entries"}
    fam = servo_family(meta, source)
    ch, kept = _channels(entries, meta, source, fam)
    n_drop = len(entries) - kept.size
    n_masked = _mask_spikes(ch, spike_threshold)
    counts = {"dropped_samples": n_drop, "masked_samples": n_masked}
    if warn and (n_drop or n_masked):
        warn_repair(
            f"{source}: dropped {n_drop} bus-read dropout sample(s) (temp or "
            f"input_volts == 0) and masked {n_masked} sample(s) of short position "
            f"burst(s) (failed reads)"
        )
    labels = dict(meta) | bench_labels(meta, source)
    labels.setdefault("task", meta.get("trajectory"))
    rate = meta.get("sample_rate")
    if "dt" in meta:
        rate = 1.0 / float(meta["dt"])
    tmeta = TrajectoryMeta(
        robot=robot,
        joint_names=("pendulum",),
        source=source,
        rate_hz=None,
        name=name or Path(source.split("::")[-1]).stem,
        labels=labels,
        counts=counts,
    )
    traj = Trajectory(ch, tmeta)
    if rate is not None:
        # nominal rate from the file (sample_rate / 1/dt); measured median spacing otherwise
        traj = traj.replace(rate_hz=float(rate))
    check_trajectory(traj, where=_where(source, kept), fix=_fix)
    return traj


def read_bam_log(
    path: str | os.PathLike | IO[bytes], *, source: str | None = None, **kwargs: Any
) -> Trajectory:
    """Read one BAM JSON log (a path or an open binary file) as a one-joint Trajectory."""
    if hasattr(path, "read"):
        src = source or getattr(path, "name", "<stream>")
        text = path.read()
    else:
        src = source or str(path)
        p = Path(path)
        if not p.is_file():
            raise SchemaError(f"{src}: file not found")
        text = p.read_bytes()
    if not text.strip():
        raise SchemaError(f"{src}: empty file; expected a BAM JSON log")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(
            f"{src}: invalid or truncated JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except UnicodeDecodeError as exc:
        raise SchemaError(
            f"{src}: not a text file (byte {exc.start} is not {exc.encoding}); expected a "
            "BAM JSON log"
        ) from None
    return parse_bam_log(data, src, **kwargs)
