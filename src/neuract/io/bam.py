"""BAM pendulum-bench JSON logs (Rhoban BAM format; K-Scale STS3215 runs).

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

import contextlib
import gzip
import io
import json
import lzma
import os
import tarfile
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from neuract.data.trajectory import Trajectory, TrajectoryMeta
from neuract.errors import SchemaError
from neuract.io.common import check_joint_count, warn_repair
from neuract.io.registers import dxl_pwm_to_fraction, mA_to_A, twos_complement16

SPIKE_THRESHOLD_RAD = 0.5
"""A one-sample jump larger than this [rad] (50 rad/s at 100 Hz, ~8x the fastest real motion
of the benches) away from both neighbours is a failed read."""
MAX_SPIKE_LEN = 3
"""Longest run of consecutive failed position reads that is masked (see module doc). Going
out by more than ``SPIKE_THRESHOLD_RAD`` and back within MAX_SPIKE_LEN + 1 sample periods
needs over 12 rad/s even at the slowest bench rate (~50 Hz), above the benches' fastest
recorded motion (8.6 rad/s STS3250, 13.6 rad/s XL330 at ~190 Hz, where it would need 70 rad/s)."""

# K-Scale runs carry no arm mass; their experiment configs list it per arm length
# (kscale_sts3215_12v/orig_docs/experiment_configs/*.yaml): length [m] -> arm mass [kg].
KSCALE_ARM_MASS = {0.1: 0.036, 0.15: 0.050}


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
    meta = {k: v for k, v in data.items() if k != "entries"}
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
    n_drop = int((~keep).sum())
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
        load = _column(entries, "load", source)
        raw_xl330 = (
            str(meta.get("motor", "")).lower().startswith("xl330")
            and "dt" not in meta
            and np.all(load == np.round(load))
            and load.min() >= 0
            and load.max() <= 65535
        )
        if raw_xl330:  # raw Present PWM register, uint16 two's complement, +/-885 = 100 %
            ch["pwm"] = dxl_pwm_to_fraction(twos_complement16(load))
        # else: all zero (Feetech: not implemented) or interpolated raw uint16 (processed
        # XL330 logs, corrupted near sign changes): not mapped
    ch = {k: v[keep] for k, v in ch.items()}
    for k in ("q", "qd", "q_goal", "current", "voltage", "temperature", "pwm", "torque_enable"):
        if k in ch:
            ch[k] = ch[k][:, None]
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
    counts = {"dropped_samples": n_drop, "masked_samples": int(spikes.size)}
    if warn and (n_drop or spikes.size):
        warn_repair(
            f"{source}: dropped {n_drop} bus-read dropout sample(s) (temp or "
            f"input_volts == 0) and masked {spikes.size} sample(s) of short position "
            f"burst(s) (failed reads)"
        )
    labels = dict(meta)
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


TAR_ERRORS = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError)
"""What a truncated or corrupted (gzipped) tarball raises while it is read."""


def tar_error(tar_path: str | os.PathLike, exc: BaseException, member: str | None = None):
    """A :class:`SchemaError` naming the archive (and the member being read) for ``exc``."""
    at = f" while reading member {member!r}" if member else ""
    return SchemaError(
        f"{tar_path}: truncated or corrupted archive{at} ({type(exc).__name__}: {exc}); "
        "expected a complete .tar/.tgz of BAM JSON logs"
    )


@contextlib.contextmanager
def tar_errors(tar_path: str | os.PathLike, member: str | None = None) -> Iterator[None]:
    """Turn what a truncated or corrupted archive raises in the block into :func:`tar_error`."""
    try:
        yield
    except TAR_ERRORS as exc:
        raise tar_error(tar_path, exc, member) from None


def is_tar(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a (possibly compressed) tarball; a truncated one raises naming it."""
    with tar_errors(path):
        return tarfile.is_tarfile(path)


def tar_members(tar_path: str | os.PathLike) -> list[str]:
    """Names of the ``.json`` members of a log tarball, in archive order."""
    with tar_errors(tar_path), tarfile.open(tar_path) as tf:
        return [m.name for m in tf.getmembers() if m.isfile() and m.name.endswith(".json")]


def _read_member(
    tf: tarfile.TarFile, m: tarfile.TarInfo, tar_path: str | os.PathLike, **kwargs: Any
) -> Trajectory:
    """One member of an open log tarball as a Trajectory (K-Scale labels added)."""
    with tar_errors(tar_path, m.name):
        text = tf.extractfile(m).read()
    traj = read_bam_log(io.BytesIO(text), source=f"{tar_path}::{m.name}", **kwargs)
    return _kscale_labels(traj)


def iter_tar_logs(
    tar_path: str | os.PathLike,
    members: list[str] | None = None,
    limit: int | None = None,
    warn: bool = True,
    **kwargs: Any,
) -> Iterator[Trajectory]:
    """Read BAM logs straight from a tarball (nothing is extracted to disk).

    members: member names to read (default all ``.json`` members, in archive order);
    limit: stop after this many. One summary :class:`DataRepairWarning` at the end.
    """
    tar_path = Path(tar_path)
    wanted = set(members) if members is not None else None
    totals = {"dropped_samples": 0, "masked_samples": 0, "runs": 0}
    n = 0
    with tar_errors(tar_path):
        tf = tarfile.open(tar_path)
    with tf:
        members = iter(tf)
        while True:
            if limit is not None and n >= limit:
                break
            with tar_errors(tar_path):
                m = next(members, None)
            if m is None:
                break
            if not (m.isfile() and m.name.endswith(".json")):
                continue
            if wanted is not None and m.name not in wanted:
                continue
            traj = _read_member(tf, m, tar_path, warn=False, **kwargs)
            for k in ("dropped_samples", "masked_samples"):
                totals[k] += traj.meta.counts[k]
            totals["runs"] += bool(
                traj.meta.counts["dropped_samples"] or traj.meta.counts["masked_samples"]
            )
            n += 1
            yield traj
    if warn and (totals["dropped_samples"] or totals["masked_samples"]):
        warn_repair(
            f"{tar_path}: {n} runs read; dropped {totals['dropped_samples']} bus-read "
            f"dropout sample(s) and masked {totals['masked_samples']} sample(s) of short "
            f"position burst(s) in {totals['runs']} run(s)"
        )


def _kscale_labels(traj: Trajectory) -> Trajectory:
    lab = traj.meta.labels
    if "arm_mass" in lab or lab.get("motor") != "sts3215" or "length" not in lab:
        return traj
    arm = KSCALE_ARM_MASS.get(round(float(lab["length"]), 3))
    if arm is None:
        return traj
    labels = dict(lab, arm_mass=arm, arm_mass_source="kscale experiment_configs (by length)")
    return traj.replace(labels=labels)


def iter_kscale_runs(
    tar_path: str | os.PathLike,
    limit: int | None = None,
    members: list[str] | None = None,
    **kwargs: Any,
) -> Iterator[Trajectory]:
    """K-Scale STS3215 pendulum runs (``raw.tgz`` or ``processed.tgz``), read from the tar.

    Each trajectory's labels hold ``mass`` [kg], ``length`` [m], ``kp``, ``trajectory``,
    ``arm_mass`` [kg] (from the experiment configs) and the rest of the file metadata.
    """
    yield from iter_tar_logs(tar_path, members=members, limit=limit, **kwargs)


def iter_bam_logs(
    source: str | os.PathLike, limit: int | None = None, **kwargs: Any
) -> Iterator[Trajectory]:
    """BAM logs from a file, a directory of ``*.json`` (recursively) or a ``.tgz``/``.tar``."""
    src = Path(source)
    if src.is_dir():
        files = sorted(src.rglob("*.json"))
        if not files:
            raise SchemaError(f"{src}: no *.json BAM logs found")
        for i, f in enumerate(files):
            if limit is not None and i >= limit:
                return
            rel = f.relative_to(src).with_suffix("")
            yield read_bam_log(f, name=str(rel).replace(os.sep, "/"), **kwargs)
    elif src.is_file() and is_tar(src):
        yield from iter_tar_logs(src, limit=limit, **kwargs)
    elif src.is_file():
        yield read_bam_log(src, **kwargs)
    else:
        raise SchemaError(f"{src}: no such file or directory")


__all__ = [
    "MAX_SPIKE_LEN",
    "SPIKE_THRESHOLD_RAD",
    "find_spikes",
    "iter_bam_logs",
    "iter_kscale_runs",
    "iter_tar_logs",
    "parse_bam_log",
    "read_bam_log",
    "tar_members",
]
