"""Estimator mode one telemetry sample at a time, torch-free: the feature builder and the
decisions around a network runner.

:class:`StreamCore` keeps only what the causal features need: the last ``history`` feature
rows, the context channels' moving averages and last direction of motion, the identification
channels' running sums (since the last :meth:`StreamCore.reset`: call it where an episode
starts), the condition smoothing's running average, the contact gate filter's state (and,
through the network runner, a recurrent gate's GRU state). Each :meth:`StreamCore.step`
writes one feature row into the network's preallocated window and runs the network once.
:class:`neuract.runtime.Runtime` builds one from an exported ONNX file;
:class:`neuract.estimate.stream.StreamingEstimator` from a model in memory.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from neuract.errors import ConfigError, SchemaError
from neuract.runtime.channels import (
    CONTEXT_CHANNELS,
    EFFORT_CHANNELS,
    IDENT_CHANNELS,
    MOVE_SPEED,
    PHYSICS_CHANNELS,
    REFERENCE_CHANNELS,
    ident_decay,
    ident_from_sums,
    ident_regressors,
    source_channels,
)
from neuract.runtime.decide import CausalMean, check_gate_filter, log_odds, shift_probability


class StreamCore:
    """The estimator's outputs for one telemetry sample at a time (built by a subclass
    through :meth:`_build`).

    :meth:`step` takes a mapping with the sample's time ``t`` [s] and the model's source
    channels (:attr:`inputs`: each (n,) per joint, or one value for a bus-wide channel such
    as ``voltage``), and returns ``tau`` (n,) [N m], ``ee_force`` (3,) [N],
    ``contact_prob``, ``condition_prob_joint`` (n,), ``condition_prob`` and ``valid``
    (False, with NaN outputs, until ``history`` samples have arrived), and ``contact_t``, the
    time [s] of the sample ``contact_prob`` decides: ``t`` itself for a causal gate (NaN
    while not valid). A fixed-lag gate deciding at lag D (``gate_decision_lag``:
    ``gate_lag``, or a shorter ``gate_decide``) decides each sample once it has read the D
    samples after it: ``contact_prob`` then belongs to the valid sample D steps back
    (``contact_t`` its time; NaN for the first D valid samples), and :meth:`finish`, where
    the episode ends, decides its last D samples from the lags they allow, so that a
    streamed episode gets ``estimate``'s decisions. :meth:`reset` starts a new episode (a
    recurrent gate's state included).

    The thresholds and filters are ``estimate``'s (:attr:`gate_threshold`,
    :attr:`gate_tau_s`, :attr:`gate_release`, :attr:`condition_tau_s`,
    :attr:`condition_threshold`); :attr:`backend` and :attr:`physics_backend` say what runs
    the network and computes the physics channels.
    """

    def _build(self, cfg: Any, decisions: tuple, make_net: Callable[[], Any],
               make_pose: Callable[[str, str], Any], ref: Any = None) -> None:
        """Set up from ``cfg`` (``channels``, ``n_joints``, ``history``, ``context_s``,
        ``ident_memory``, ``physics`` (robot, site) or None, ``gate_decision_lag``), the
        resolved ``decisions`` (:func:`~neuract.runtime.decide.resolve_decisions`),
        ``make_net()``: the network runner (``x``: its (1, T, F) float32 window, ``name``,
        ``reset()``, and a call giving tau (n,), force (3,), gate logits (lags,) and condition
        logits (n, K)), ``make_pose(robot, site)``: the physics channels at one pose
        (``backend``; called when the model reads them) and ``ref``: the servo-reference
        channels' stream (``step(q, qd, q_goal, sample)``, ``reset()``; None without them)."""
        self._cfg = cfg
        self.lag = int(cfg.gate_decision_lag)
        """samples each contact decision waits for (``gate_decision_lag``: ``gate_lag``
        or a shorter ``gate_decide``; 0: a causal decision)"""
        self._ref = ref
        (self.condition_tau_s, self.condition_threshold, self.gate_threshold, self.gate_tau_s,
         self.gate_release) = decisions
        check_gate_filter(self.gate_tau_s, self.gate_threshold, self.gate_release)
        if not (math.isfinite(self.condition_tau_s) and self.condition_tau_s > 0):
            raise ConfigError(f"condition_tau_s={self.condition_tau_s!r}; expected a time "
                              "constant > 0 s")
        self._layout(cfg, make_pose)
        self._net = make_net()
        self._x = self._net.x
        self.backend = self._net.name
        """what runs the network: ``"onnxruntime"``, ``"onnxruntime-int8"`` or
        ``"torch-eager"``"""
        self._decision_rows()
        self._history = cfg.history
        self.reset()

    def _layout(self, cfg: Any, make_pose: Callable[[str, str], Any]) -> None:
        """The channels step() reads and computes, and the staging rows they go to."""
        need = source_channels(cfg.channels)
        self._ctx = [c for c in need if c in CONTEXT_CHANNELS]
        self._phys = [c for c in need if c in PHYSICS_CHANNELS]
        self._ident = any(c in IDENT_CHANNELS for c in need)
        computed = (*CONTEXT_CHANNELS, *PHYSICS_CHANNELS, *REFERENCE_CHANNELS, *IDENT_CHANNELS)
        # the channels step() reads besides t (the reference servo also reads q, qd, q_goal)
        extra = ("q", "qd", "q_goal") if self._ref is not None else ()
        self.inputs = tuple(c for c in need if c not in computed) + tuple(
            c for c in extra if c not in need)
        self._effort = next((c for c in EFFORT_CHANNELS if c in self.inputs), None)
        if (self._ctx or self._ident) and (self._effort is None or "qd" not in self.inputs):
            raise ConfigError("context and identification channels need qd and an effort "
                              "channel among the model's channels")
        if (self._phys or self._ident) and cfg.physics is None:
            raise ConfigError(f"channels {self._phys or list(IDENT_CHANNELS)} are computed "
                              "from the arm model; the model has no physics robot")
        self._pose = None
        if self._phys or self._ident:
            self._pose = make_pose(*cfg.physics)
        self.physics_backend = None if self._pose is None else self._pose.backend
        """what computes the physics channels: ``"mujoco"``, ``"torch"`` or None (the model
        reads none)"""
        # the sample's channels, one float64 row each: the model's channels (in its order,
        # so that one cast writes the feature row), then any other the sample carries
        n, C = cfg.n_joints, len(cfg.channels)
        rows = list(cfg.channels) + [c for c in self.inputs if c not in cfg.channels]
        self._row = {c: i for i, c in enumerate(rows)}
        self._stage = np.zeros((len(rows), n))
        self._in_rows = tuple((c, self._row[c]) for c in self.inputs)
        idx = sorted(self._row[c] for c in self.inputs)
        # the input rows (a slice where they are consecutive, as the model's channels are)
        self._in_idx = (slice(idx[0], idx[-1] + 1) if idx == list(range(idx[0], idx[-1] + 1))
                        else np.array(idx, dtype=np.intp))
        self._C = C
        ch = cfg.channels
        self._pe = ((ch.index("pos_error"), ch.index("q_goal"), ch.index("q"))
                    if "pos_error" in ch else None)

    def _decision_rows(self) -> None:
        """The decision thresholds as log-odds shifts, and the staging rows of the computed
        channels."""
        on, off = self.gate_threshold, self.gate_release
        self._on_shift = None if on == 0.5 else float(log_odds(on))
        self._off_shift = None if off == 0.5 else float(log_odds(off))
        th = self.condition_threshold
        # shift_threshold as q / (q + (1 - q) exp(shift)) (None: no shift)
        self._cond_scale = (None if np.ndim(th) == 0 and th == 0.5
                            else np.exp(np.asarray(log_odds(th), dtype=np.float64)))
        # the staging rows each computed channel goes to (those the model reads)
        row = self._row
        self._phys_rows = tuple((i, row[k]) for i, k in enumerate(PHYSICS_CHANNELS) if k in row)
        self._ctx_rows = tuple((i, row[k]) for i, k in enumerate(CONTEXT_CHANNELS) if k in row)
        self._rows_q = (row["q"], row["qd"], row["q_goal"],
                        row[self._effort] if self._effort is not None else -1)

    def reset(self) -> None:
        """Forget the episode so far (the next sample starts a new one). A fixed-lag gate's
        decisions still owed are dropped: :meth:`finish` returns them, then resets."""
        self._x.fill(0.0)
        self._win = self._x[0]  # (T, F)
        self._new = self._win[-1].reshape(-1, self._C)  # the last row as (n, channels)
        self._stage_t = self._stage[:self._C].T  # the staged model channels as (n, channels)
        self._filled = 0
        self._t_prev: float | None = None
        n = self._cfg.n_joints
        self._slow = np.zeros((2, n))  # effort and position-error averages
        self._context_s = float(self._cfg.context_s or 1.0)
        self._move = np.zeros(n)
        # running sums of the identification channels (features.ident_channels)
        self._id = {"sxx": np.zeros((n, 4, 4)), "sxy": np.zeros((n, 4)), "syy": np.zeros(n),
                    "count": np.zeros(n), "n_move": np.zeros(n), "err_move": np.zeros(n),
                    "err_still": np.zeros(n), "effort": np.zeros(n)}
        self._cond = CausalMean(self.condition_tau_s)
        self._gate = CausalMean(self.gate_tau_s) if self.gate_tau_s > 0 else None
        self._gate_on = False
        # a fixed-lag gate's last lag + 1 valid samples: their times and probabilities (lag + 1,)
        self._pending: deque = deque(maxlen=self.lag + 1)
        self._net.reset()
        if self._ref is not None:
            self._ref.reset()

    def _read(self, sample: Mapping[str, Any]) -> float:
        """The sample's time; its channels into the staging rows (checked)."""
        try:
            t = float(sample["t"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaError("a streamed sample needs its time 't' [s] as a number") from exc
        if not math.isfinite(t) or (self._t_prev is not None and t <= self._t_prev):
            raise SchemaError(f"sample time t={t!r} must be finite and after the previous "
                              f"sample's ({self._t_prev!r})")
        stage = self._stage
        for c, r in self._in_rows:
            if c not in sample:
                raise SchemaError(f"the streamed sample has no channel {c!r}, required by the "
                                  f"model (channels read: {list(self.inputs)})")
            try:
                stage[r] = sample[c]  # (n,), or one value broadcast (a bus-wide channel)
            except (TypeError, ValueError):
                stage[r] = self._channel(c, sample[c])
        # one sum over the input rows is finite unless some value is not (or the sum
        # overflows, where the check below finds every channel finite)
        if not math.isfinite(float(np.add.reduce(stage[self._in_idx], axis=None))):
            for c in self.inputs:
                self._channel(c, sample[c])  # raises for the first non-finite channel
        return t

    def _channel(self, c: str, value: Any) -> np.ndarray:
        """One channel's value as (n,) float64, or a SchemaError naming it."""
        n = self._cfg.n_joints
        try:
            v = np.asarray(value, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            v = np.zeros(0)
        if v.size == 1:
            v = np.repeat(v, n)  # a bus-wide channel, e.g. voltage
        if v.shape != (n,) or not np.isfinite(v).all():
            raise SchemaError(f"channel {c!r} = {value!r}; expected {n} finite values (or "
                              "one for a bus-wide channel)")
        return v

    def _features(self, t: float, sample: Mapping[str, Any]) -> None:
        """The computed channels into the staging rows, then the window's new feature row."""
        st, row = self._stage, self._row
        iq, iqd, iqg, ieff = self._rows_q
        if self._ref is not None:  # the supply voltage and torque enable as the servo reads them
            ref = self._ref.step(st[iq], st[iqd], st[iqg], sample)
            for k in REFERENCE_CHANNELS:
                if k in row:
                    st[row[k]] = ref[k]
        grav = None
        if self._pose is not None:
            grav, jac = self._pose(st[iq])
            for i, r in self._phys_rows:
                st[r] = grav if i == 0 else jac[i - 1]
        if self._ctx_rows:
            qd = st[iqd]
            np.copyto(self._move, np.sign(qd), where=np.abs(qd) > MOVE_SPEED)
            slow = self._slow
            if self._t_prev is None:  # the averages start at the first sample
                slow[0] = st[ieff]
                np.subtract(st[iqg], st[iq], out=slow[1])
            else:
                a = 1.0 - math.exp(-max(t - self._t_prev, 0.0) / self._context_s)
                slow[0] += a * (st[ieff] - slow[0])
                slow[1] += a * ((st[iqg] - st[iq]) - slow[1])
            for i, r in self._ctx_rows:
                st[r] = self._move if i == 0 else slow[i - 1]
        if self._ident:
            for k, v in self._ident_update(grav.copy()).items():
                if k in row:
                    st[row[k]] = v
        # the window moves one sample on; the new row is the staged channels in float32 (as
        # estimate's windows are built) and pos_error in float32 from them (as assemble
        # derives it)
        win = self._win
        win[:-1] = win[1:]
        new = self._new
        new[...] = self._stage_t
        if self._pe is not None:
            pe, qg, q = self._pe
            np.subtract(new[:, qg], new[:, q], out=new[:, pe])
        self._filled += 1

    def _ident_update(self, tau_gravity: np.ndarray) -> dict[str, np.ndarray]:
        """:func:`~neuract.neuralactuator.features.ident_channels`, one sample at a time: the
        same running sums (decayed by the forgetting factor), one more term each."""
        s, st, row = self._id, self._stage, self._row
        d = ident_decay(self._cfg.ident_memory)
        qd, effort = st[row["qd"]], st[row[self._effort]]
        x = ident_regressors(tau_gravity, qd)  # (n, 4)
        moving = np.abs(qd) > MOVE_SPEED
        ae = np.abs(st[row["q_goal"]] - st[row["q"]])
        for key, term in (("sxx", x[:, :, None] * x[:, None, :]), ("sxy", x * effort[:, None]),
                          ("syy", effort * effort), ("count", 1.0), ("n_move", moving),
                          ("err_move", ae * moving), ("err_still", ae * ~moving),
                          ("effort", np.abs(effort))):
            s[key] = d * s[key] + term
        return ident_from_sums(**s)

    def step(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        """The estimator's outputs for one more telemetry sample (see the class)."""
        t = self._read(sample)
        self._features(t, sample)
        self._t_prev = t
        if self._filled < self._history:
            n = len(self._move)
            return {"tau": np.full(n, np.nan), "ee_force": np.full(3, np.nan),
                    "contact_prob": np.nan, "contact_t": np.nan,
                    "condition_prob_joint": np.full(n, np.nan), "condition_prob": np.nan,
                    "valid": False}
        tau, force, gate, cond = self._net()
        c = cond.astype(np.float64)
        if c.shape[1] == 2:  # the degraded class's probability
            p_cond = 1.0 / (1.0 + np.exp(c[:, 0] - c[:, 1]))
        else:  # the degraded classes' probability
            e = np.exp(c - c.max(-1, keepdims=True))
            p_cond = e[:, 1:].sum(-1) / e.sum(-1)
        cj = self._cond.update(t, p_cond)
        if self._cond_scale is not None:  # shift_threshold: the threshold maps to 0.5
            q = np.minimum(np.maximum(cj, 1e-9), 1 - 1e-9)
            cj = q / (q + (1.0 - q) * self._cond_scale)
        out = {"tau": tau.astype(np.float64), "ee_force": force.astype(np.float64),
               "contact_prob": np.nan, "contact_t": np.nan, "condition_prob_joint": cj,
               "condition_prob": max(cj.tolist()), "valid": True}
        if not self.lag:  # (a fixed-lag gate decided at lag 0: its lag-0 logit)
            out["contact_prob"] = self._gate_decision(t, 1.0 / (1.0 + math.exp(-float(gate[0]))))
            out["contact_t"] = t
            return out
        # probabilities of lags 0 .. D
        self._pending.append((t, 1.0 / (1.0 + np.exp(-gate.astype(np.float64)))))
        if len(self._pending) == self.lag + 1:  # the sample D back has had its D samples
            t_s = self._pending[0][0]
            p = float(self._pending[-1][1][self.lag])
            out["contact_prob"], out["contact_t"] = self._gate_decision(t_s, p), t_s
        return out

    def finish(self) -> list[dict[str, float]]:
        """The episode has ended: the contact decisions still owed, for its last samples
        (a fixed-lag gate's last ``lag`` valid samples, each from the largest lag the episode
        allows, as ``estimate`` decides them), as ``{"contact_t", "contact_prob"}`` in sample
        order; then :meth:`reset`. A causal gate owes none."""
        owed, n = [], len(self._pending)
        # the last `lag` samples (fewer in a short episode), each from the probability of
        # the lag the last sample gives it; an older one was decided in step()
        for i in range(max(n - self.lag, 0), n):
            t_s = self._pending[i][0]
            p = float(self._pending[-1][1][n - 1 - i])
            owed.append({"contact_t": t_s, "contact_prob": self._gate_decision(t_s, p)})
        self.reset()
        return owed

    def _gate_decision(self, t: float, p: float) -> float:
        """:func:`~neuract.estimate.filters.gate_filter`, one sample at a time."""
        if self._gate is not None:
            p = float(self._gate.update(t, p))
        on, off = self.gate_threshold, self.gate_release
        if off >= on:
            return shift_probability(p, self._on_shift)
        # hysteresis: a contact starts at p >= on and lasts until p < off (NaN: below)
        if p >= on:
            self._gate_on = True
        elif not p >= off:
            self._gate_on = False
        return shift_probability(p, self._off_shift if self._gate_on else self._on_shift)


__all__ = ["StreamCore"]
