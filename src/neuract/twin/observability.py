"""Which contact samples the telemetry can show at all: each contact event of a twin episode
against its counterfactual, the same episode with that event's external force left out.

The twin is deterministic per episode key (plan, timing and noise come from one generator,
:mod:`neuract.twin.generate`), so generating an episode again with
``SimConfig(external_forces_until_s=s)`` gives its telemetry as it would have been without
the pushes and payloads that start at or after ``s``. For a contact event (a run of contact
samples) let ``s`` be the start of the push or payload that begins it: the two versions are
identical register for register up to the first sample where a telemetry channel differs. A
causal estimator reading the telemetry gives the same output in both, so it cannot report the
contact there without also reporting one on the force-free episode: those contact samples are
*hidden*, and an event with no sample after the first difference is hidden whole.

Every sample from the first difference on counts as visible, however small the difference (one
encoder step, one load count) and even where the force later changes nothing more, so the
visible share R is an upper bound of what an estimator can detect, and ``2 R / (1 + R)``
(every other sample right) an upper bound of its gate F1 on these episodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from neuract.errors import SchemaError
from neuract.eval.gate import true_runs
from neuract.twin.config import ROBOT_SPECS
from neuract.twin.generate import run_chunk

DEFLECTION_BINS = (0, 1, 2, 4, 8)
"""lower edges of the deflection histogram [encoder steps]"""
TELEMETRY = ("q", "qd", "load", "current", "pwm", "voltage", "temperature")
"""the channels a servo reports (those a trajectory has are compared)"""


def counterfactual_config(cfg: Any, until_s: float = 0.0) -> Any:
    """The :class:`~neuract.twin.generate.GenerateConfig` of the same data plan with the
    external forces (pushes, payloads) that start at or after ``until_s`` [s] left out."""
    return dataclasses.replace(cfg, sim=dataclasses.replace(
        cfg.sim, external_forces_until_s=float(until_s)))


def first_difference(factual: Any, counterfactual: Any,
                     channels: Sequence[str] = TELEMETRY,
                     tolerance: dict[str, float] | None = None) -> int:
    """Index of the first sample where any telemetry channel of ``factual`` differs from
    ``counterfactual`` (the same episode without external forces); ``len(factual)`` if none
    does. tolerance: per channel, the largest difference that does not count (in the
    channel's units, e.g. ``k * register_lsb(spec)[c]``); None: any difference counts."""
    if factual.meta.name != counterfactual.meta.name or len(factual) != len(counterfactual):
        raise SchemaError(f"episodes {factual.meta.name!r} ({len(factual)} samples) and "
                          f"{counterfactual.meta.name!r} ({len(counterfactual)}) are not the "
                          "same episode with and without external forces")
    if not np.array_equal(np.asarray(factual["t"]), np.asarray(counterfactual["t"])):
        raise SchemaError(f"episode {factual.meta.name!r}: the two versions are sampled at "
                          "different times; generate both from the same seed and plan")
    T = len(factual)
    first = T
    for c in channels:
        if c not in factual:
            continue
        a = np.asarray(factual[c], dtype=np.float64).reshape(T, -1)
        b = np.asarray(counterfactual[c], dtype=np.float64).reshape(T, -1)
        tol = (tolerance or {}).get(c, 0.0)
        differs = (a != b) if tol <= 0 else (np.abs(a - b) > tol * (1 + 1e-6))
        diff = np.flatnonzero(differs.any(axis=1))
        if diff.size:
            first = min(first, int(diff[0]))
    return first


def register_lsb(spec: Any) -> dict[str, float]:
    """One register count of each :data:`TELEMETRY` channel of a
    :class:`~neuract.twin.config.RobotTwinSpec`, in the trajectory's units (position [rad],
    velocity [rad/s], load and pwm [fraction of full duty], current [A], voltage [V],
    temperature [degC])."""
    r = spec.registers
    step = 2 * np.pi / r.steps_per_rev
    return {"q": step,
            "qd": step / r.velocity_window if r.velocity_window else r.velocity_lsb,
            "load": r.load_lsb / r.load_full_scale, "pwm": r.load_lsb / r.load_full_scale,
            "current": r.current_lsb, "voltage": r.volt_lsb, "temperature": r.temp_lsb}


def _bin_names() -> list[str]:
    """'0', '1', '2-3', '4-7', '>=8' for :data:`DEFLECTION_BINS`."""
    edges = list(DEFLECTION_BINS)
    return [f"{lo}" if hi - lo == 1 else f"{lo}-{hi - 1}" for lo, hi in zip(edges, edges[1:])
            ] + [f">={edges[-1]}"]


def force_starts(labels: dict) -> list[float]:
    """Start times [s] of an episode's pushes and payload (from its twin labels)."""
    out = [float(p["t0_s"]) for p in labels.get("pushes", [])]
    if float(labels.get("payload_mass_kg") or 0.0) > 0:
        attach = labels.get("payload_attach_s")
        if attach is not None:
            out.append(float(attach))
    return sorted(out)


def _row(tr: Any, cfg: Any) -> tuple[int, int, int, str]:
    """The :func:`~neuract.twin.generate.episode_table` row of a twin episode of ``cfg``."""
    lab = tr.meta.labels
    if lab.get("seed") != cfg.seed:
        raise SchemaError(f"episode {tr.meta.name!r} has seed {lab.get('seed')}, the "
                          f"config {cfg.seed}: pass the config that generated it")
    return int(lab["index"]), int(lab["unit"]), int(lab["episode"]), str(lab["task"])


def _contact(tr: Any, min_force_n: float) -> np.ndarray:
    """(T,) contact samples of a twin episode: its label, with ``|ee_force| >= min_force_n``
    [N] when > 0."""
    c = np.asarray(tr["contact"], bool)
    if min_force_n > 0:
        c = c & (np.linalg.norm(np.asarray(tr["ee_force"], np.float64), axis=1) >= min_force_n)
    return c


def contact_visibility(cfg: Any, factual: Sequence[Any], min_force_n: float = 0.0,
                       progress=None) -> dict[str, Any]:
    """Hidden and visible contact samples and events of twin episodes ``factual`` generated
    by ``cfg`` (:class:`~neuract.twin.generate.GenerateConfig`), each event against its own
    counterfactual (see the module docstring).

    Contact: the twin's label, with ``|ee_force| >= min_force_n`` [N] when > 0 (the gate
    label of the experiments). Returns pooled counts, ``visible_share`` (R), ``f1_ceiling``
    (2R / (1 + R)), ``events`` / ``events_hidden`` (no visible sample), the
    ``onset_delay_s`` of visible events whose first samples are hidden (a lower bound of
    any detection latency), ``deflection_steps`` (share of the contact samples by how far the
    force has moved the arm from where it would be without it: the largest joint difference
    in encoder steps, bins from :data:`DEFLECTION_BINS`) and the counts per task.
    ``progress(done, total)``."""

    lsb = 2 * np.pi / ROBOT_SPECS[cfg.robot]().registers.steps_per_rev
    deflection = np.zeros(len(DEFLECTION_BINS), dtype=np.int64)

    eps = [tr for tr in factual if "contact" in tr and np.asarray(tr["contact"]).any()]
    totals = {"contact_samples": 0, "hidden_samples": 0, "events": 0, "events_hidden": 0}
    per_task: dict[str, dict[str, int]] = {}
    delays: list[float] = []
    for n_done, tr in enumerate(eps):
        if progress:
            progress(n_done, len(eps))
        lab = tr.meta.labels
        row = _row(tr, cfg)
        c = _contact(tr, min_force_n)
        t = np.asarray(tr["t"], dtype=np.float64)
        starts = force_starts(lab)
        firsts: dict[float, tuple[int, np.ndarray]] = {}  # start -> (first diff, steps)
        tc = per_task.setdefault(row[3], {k: 0 for k in totals})
        for i0, i1 in true_runs(c):
            began = [s for s in starts if s <= t[i0]]
            if not began:
                raise SchemaError(f"episode {tr.meta.name!r}: contact at {t[i0]:.3f} s before "
                                  f"any push or payload (starts {starts})")
            s = began[-1]
            if s not in firsts:
                (cf,) = run_chunk(counterfactual_config(cfg, s), [row])
                steps = np.rint(np.abs(np.asarray(tr["q"], np.float64)
                                       - np.asarray(cf["q"], np.float64)).max(1) / lsb)
                firsts[s] = (first_difference(tr, cf), steps)
            k, steps = firsts[s]
            deflection += np.bincount(np.searchsorted(DEFLECTION_BINS, steps[i0:i1],
                                                      side="right") - 1,
                                      minlength=len(DEFLECTION_BINS))
            hidden = int(np.clip(k - i0, 0, i1 - i0))
            for d in (totals, tc):
                d["contact_samples"] += i1 - i0
                d["hidden_samples"] += hidden
                d["events"] += 1
                d["events_hidden"] += int(hidden == i1 - i0)
            if 0 < hidden < i1 - i0:
                delays.append(float(t[k] - t[i0]))
    if progress:
        progress(len(eps), len(eps))

    def share(d):
        n = d["contact_samples"]
        return (n - d["hidden_samples"]) / n if n else None

    R = share(totals)
    return {**totals, "visible_share": R,
            "f1_ceiling": 2 * R / (1 + R) if R is not None else None,
            "onset_delay_s": {"n": len(delays),
                              "median": float(np.median(delays)) if delays else None,
                              "p90": float(np.quantile(delays, 0.9)) if delays else None,
                              "max": float(np.max(delays)) if delays else None},
            "deflection_steps": dict(zip(_bin_names(),
                                         (deflection / max(deflection.sum(), 1)).tolist())),
            "per_task": {k: {**v, "visible_share": share(v)}
                         for k, v in sorted(per_task.items())}}


def _mark(lag: np.ndarray, j: int, end: int) -> None:
    """Samples ``j .. end - 1`` read the same as in a world whose contact label first differs
    at ``j``: raise their lag to ``k - j``."""
    k = np.arange(j, end)
    lag[k] = np.maximum(lag[k], k - j)


def _tolerances(stride: Any, batch: Any, tolerances_lsb: Sequence[float]) -> list[float]:
    """The checked arguments of :func:`hidden_lag`: its register tolerances as a list."""
    for k, v in (("stride", stride), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise SchemaError(f"hidden_lag {k}={v!r}; expected an integer >= 1")
    tols = list(tolerances_lsb)
    if not tols or not all(isinstance(k, (int, float, np.integer, np.floating))
                           and not isinstance(k, bool) and k >= 0 for k in tols):
        raise SchemaError(f"hidden_lag tolerances_lsb={tolerances_lsb!r}; expected register "
                          "counts >= 0")
    return tols


def _episode_lags(tr: Any, cfg: Any, min_force_n: float, stride: int, batch: int,
                  tols: list[float], tol: dict[float, dict[str, float]],
                  lags: dict[float, np.ndarray]) -> None:
    """Mark the hidden lags of one push episode ``tr`` (no payload) in ``lags`` (per
    tolerance, (T,)), against its onset and release counterfactuals (:func:`hidden_lag`)."""
    row = _row(tr, cfg)
    c = _contact(tr, min_force_n)
    t = np.asarray(tr["t"], dtype=np.float64)
    starts = force_starts(tr.meta.labels)  # the pushes' (the episode has no payload)
    onset: dict[float, dict[float, int]] = {}
    for i0, i1 in true_runs(c):
        began = [s for s in starts if s <= t[i0]]
        if not began:
            continue
        s = began[-1]
        if s not in onset:
            (cf,) = run_chunk(counterfactual_config(cfg, s), [row])
            onset[s] = {k: first_difference(tr, cf, tolerance=tol[k]) for k in tols}
        for k in tols:
            _mark(lags[k], i0, min(i1, onset[s][k]))
        cuts = list(range(i0, i1, stride))
        for b0 in range(0, len(cuts), batch):
            part = cuts[b0:b0 + batch]
            for j, w in zip(part, run_chunk(cfg, [row] * len(part),
                                            push_end_s=[float(t[j]) for j in part])):
                for k in tols:
                    _mark(lags[k], j, min(i1, first_difference(tr, w, tolerance=tol[k])))


def hidden_lag(cfg: Any, factual: Sequence[Any], min_force_n: float = 0.0,
               stride: int = 1, batch: int = 16, tolerances_lsb: Sequence[float] = (0,),
               progress=None) -> dict[float, list[np.ndarray]]:
    """Per register tolerance ``k`` of ``tolerances_lsb`` and per episode of ``factual`` (twin
    episodes generated by ``cfg``), a (T,) int array: for each push contact sample, for how
    many samples its telemetry has been register for register the same (within ``k``
    register counts, :func:`register_lsb`; 0: exactly) as in a world where that contact is
    not there; -1 where it has not (and at samples that are not push contact).

    Two kinds of such worlds per push contact event (a run of contact samples; contact: the
    twin's label, with ``|ee_force| >= min_force_n`` when > 0):

    * *onset*: the episode without the push that begins the event (as
      :func:`contact_visibility`); the two worlds' contact labels first differ at the
      event's first sample ``i0``, so a sample ``k`` before the first register that differs
      gets ``k - i0``;
    * *release*: for each event sample ``j`` (every ``stride``-th), the episode with its pushes
      cut off at sample ``j``'s time (force zero from then on;
      ``run_chunk(..., push_end_s=...)``); the labels first differ at ``j``, so a sample
      ``k >= j`` before the first register that differs gets ``k - j``.

    A sample's value is the largest over these worlds. 0 is the instant itself: no register
    at sample ``j`` can show a force cut off at ``j``'s time, so every push contact sample is
    at least 0 with ``stride=1``. A value of ``L`` says that the telemetry up to that sample
    is the same as if the push had ended ``L`` samples before: a push that the servo's gear
    friction holds the arm against (deflected and still) can end without changing any
    register for a while. With ``k`` >= 1, differences of up to ``k`` counts (within the
    registers' resolution and the twin's sensor noise) do not count either: the telemetry
    then differs, but by no more than ``k`` counts. With ``k`` = 0 a causal estimator gives
    such a sample the same output as in the other world, where it is not contact, so it is
    right in only one of the two. (A cut-off push is not in the twin's own distribution of
    pushes, full raised-cosine pulses, so an estimator trained on the twin can still report
    such a sample right by betting on how long the twin's pushes last; the telemetry holds
    no evidence for it.)

    Samples of payload events and episodes with a payload are not examined (cutting the
    pushes leaves the weight); ``stride`` > 1 examines fewer cut points, so its values are
    lower bounds. ``batch``: counterfactual episodes simulated together.
    ``progress(done, total)`` per episode."""

    tols = _tolerances(stride, batch, tolerances_lsb)
    lsb = register_lsb(ROBOT_SPECS[cfg.robot]())
    tol = {k: {c: k * v for c, v in lsb.items()} for k in tols}
    out: dict[float, list[np.ndarray]] = {k: [] for k in tols}
    for n_done, tr in enumerate(factual):
        if progress:
            progress(n_done, len(factual))
        T = len(tr)
        lags = {k: np.full(T, -1, dtype=np.int64) for k in tols}
        for k in tols:
            out[k].append(lags[k])
        lab = tr.meta.labels
        if ("contact" not in tr or not lab.get("pushes")
                or float(lab.get("payload_mass_kg") or 0.0) > 0):
            continue
        _episode_lags(tr, cfg, min_force_n, stride, batch, tols, tol, lags)
    if progress:
        progress(len(factual), len(factual))
    return out


__all__ = ["TELEMETRY", "contact_visibility", "counterfactual_config", "first_difference",
           "force_starts", "hidden_lag", "register_lsb"]
