"""Lockstep simulation of several twin episodes: MuJoCo C physics + batched servo physics.

``simulate(jobs, ...)`` steps ``E = len(jobs)`` environments together: per physics step one
batched numpy servo computation for all environments, then one ``mj_step`` per environment
(each environment has its own ``MjModel`` copy: its unit's armature, viscous friction,
backlash, payload and per-step friction bound). Telemetry is sampled at the host's jittered
tick times minus the read latency; goals reach the servo at the tick times plus the write
latency. The result per job is the raw sample record (SI, true values) that
:mod:`neuract.twin.telemetry` turns into register-quantised telemetry.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import mujoco
import numpy as np

from neuract.errors import ConfigError
from neuract.twin.config import RobotTwinSpec, SimConfig
from neuract.twin.model import TwinModel
from neuract.twin.servo import (
    Protection,
    ServoParams,
    ServoState,
    UnitBus,
    bus_voltage,
    servo_step,
)
from neuract.twin.tasks import GRAVITY, EpisodePlan

# raw record channels, each (K, n) unless noted
RECORD_CHANNELS = ("q_enc", "q_true", "qd_true", "duty", "current", "v_servo", "temperature",
                   "tau")
OVERLOAD_CHANNEL = "overload"
"""raw record channel (K, n), 1.0 where the servo's overload protection has tripped (the
status register's overload bits); only with ``SimConfig.overload_protection``"""


@dataclass
class Job:
    """One episode: a unit's hidden parameters, its plan and its private random stream."""

    unit: int
    episode: int
    params: ServoParams  # (1, n)
    bus: UnitBus  # (1,)
    plan: EpisodePlan
    rng: np.random.Generator


@dataclass
class EpisodeRecord:
    """Raw samples of one episode at the host's tick times (true SI values)."""

    t: np.ndarray  # (K,) host timestamps [s]
    q_goal: np.ndarray  # (K, n) goal the host sent [rad]
    channels: dict  # name -> (K, n)
    enc_steps_window: np.ndarray | None  # (K, n) encoder steps one speed window earlier
    ee_force: np.ndarray  # (K, 3) [N]
    contact: np.ndarray  # (K,)
    payload: np.ndarray  # (K,) [kg]
    physics_qpos: np.ndarray | None = None  # (n_steps, nq) when record_physics
    physics_goal: np.ndarray | None = None  # (n_steps, n) goal at the servo, idem


def _tick_times(rng: np.random.Generator, rate: float, jitter: float, duration: float,
                use_jitter: bool) -> np.ndarray:
    period = 1.0 / rate
    k = int(duration * rate * 1.5) + 4
    if use_jitter:
        p = np.clip(period + rng.normal(0.0, jitter, k), 0.8 * period, 1.4 * period)
        t = rng.uniform(0.2, 1.0) * period + np.concatenate([[0.0], np.cumsum(p[:-1])])
    else:
        t = period * np.arange(k)
    return t[t < duration - 0.01]


@dataclass
class _Schedule:
    """The host side of every environment: tick times, goals sent, the goal active at each
    physics step and the physics step each telemetry sample is read at."""

    ticks: list[np.ndarray]  # per env (K_e,) host timestamps [s]
    goals: list[np.ndarray]  # per env (K_e, n) goals sent [rad]
    samples: list[np.ndarray]  # per env (K_e,) physics step each sample is read at
    goal_idx: np.ndarray  # (E, n_steps) index of the goal at the servo at each physics step
    G: np.ndarray  # (E, K, n) goals, each env's padded with its last
    all_e: np.ndarray  # every env's samples sorted by step: the env ...
    all_k: np.ndarray  # ... and the sample index
    bounds: np.ndarray  # (n_steps + 1,) step s reads samples bounds[s]:bounds[s + 1]


def _host_schedule(tm: TwinModel, spec: RobotTwinSpec, cfg: SimConfig, jobs: list[Job],
                   bus: UnitBus, step_t: np.ndarray, dt: float, lsb: float) -> _Schedule:
    """Tick times (jittered), goals sent (quantised) and their timing on the physics grid."""
    ni = cfg.nonideal
    E, n, n_steps = len(jobs), tm.n, len(step_t)
    lo = tm.ranges[:, 0] + 0.05
    hi = tm.ranges[:, 1] - 0.05
    ticks, goals, goal_idx, samples = [], [], np.zeros((E, n_steps), np.int64), []
    for e, job in enumerate(jobs):
        t_host = _tick_times(job.rng, spec.rate_hz, float(bus.jitter[e]), cfg.episode_s,
                             ni.jitter)
        g = job.plan.goal(t_host, np.zeros(n), lo, hi)
        if ni.quantisation:
            g = np.round(g / lsb) * lsb
        lat_w = float(bus.latency_write[e]) if ni.latency else 0.0
        lat_r = float(bus.latency_read[e]) if ni.latency else 0.0
        goal_idx[e] = np.clip(np.searchsorted(t_host + lat_w, step_t + 1e-12, side="right") - 1,
                              0, len(t_host) - 1)
        samples.append(np.clip(np.round((t_host - lat_r) / dt).astype(np.int64), 0, n_steps - 1))
        ticks.append(t_host)
        goals.append(g)
    K = max(len(t) for t in ticks)
    G = np.zeros((E, K, n))
    for e in range(E):
        G[e, :len(goals[e])] = goals[e]
        G[e, len(goals[e]):] = goals[e][-1]
    # (step -> list of (env, k)) as sorted arrays
    all_e = np.concatenate([np.full(len(s), e) for e, s in enumerate(samples)])
    all_k = np.concatenate([np.arange(len(s)) for s in samples])
    all_s = np.concatenate(samples)
    order = np.lexsort((all_e, all_s))
    all_e, all_k, all_s = all_e[order], all_k[order], all_s[order]
    bounds = np.searchsorted(all_s, np.arange(n_steps + 1))
    return _Schedule(ticks, goals, samples, goal_idx, G, all_e, all_k, bounds)


class _Envs:
    """The E MuJoCo environments (one ``MjModel`` copy each: the unit's armature and viscous
    friction), with cached views into their data (attribute access costs more than the copy)."""

    def __init__(self, tm: TwinModel, p: ServoParams, G: np.ndarray, ni, lsb: float):
        self.models, self.datas = [], []
        m0 = tm.model
        self.mdof, self.mq = mdof, mq = tm.motor_dof, tm.motor_qpos
        for e in range(len(G)):
            m = copy.copy(m0)
            m.dof_armature[mdof] = p.armature[e]  # rotor inertia: mechanics, kept when ideal
            m.dof_damping[mdof] = p.viscous[e] if (ni.friction and ni.motor) else 0.0
            d = mujoco.MjData(m)
            q0 = G[e, 0] - (p.encoder_offset[e] * lsb if ni.noise else 0.0)
            d.qpos[mq] = q0
            self.models.append(m)
            self.datas.append(d)
        self.full = np.array_equal(mdof, np.arange(m0.nv)) and np.array_equal(mq,
                                                                               np.arange(m0.nq))
        self.qpos_v = [d.qpos for d in self.datas]
        self.qvel_v = [d.qvel for d in self.datas]
        self.qfrc_v = [d.qfrc_applied for d in self.datas]
        self.fric_v = [m.dof_frictionloss for m in self.models]
        self.pass_v = [d.qfrc_passive for d in self.datas]
        self.cons_v = [d.qfrc_constraint for d in self.datas]

    def step(self, tau: np.ndarray, bound: np.ndarray, use_friction: bool) -> None:
        """Apply the motor torques (and friction bounds) and take one ``mj_step`` each."""
        step, models, datas = mujoco.mj_step, self.models, self.datas
        qfrc_v, fric_v, mdof = self.qfrc_v, self.fric_v, self.mdof
        if self.full:
            for e in range(len(models)):
                qfrc_v[e][:] = tau[e]
                if use_friction:
                    fric_v[e][:] = bound[e]
                step(models[e], datas[e])
        else:
            for e in range(len(models)):
                qfrc_v[e][mdof] = tau[e]
                if use_friction:
                    fric_v[e][mdof] = bound[e]
                step(models[e], datas[e])

    def joint_torque(self, e: int) -> np.ndarray:
        """Applied + passive + constraint torque at the servo joints of env ``e`` [N m]."""
        mdof = self.mdof
        return (self.qfrc_v[e][mdof] + self.pass_v[e][mdof] + self.cons_v[e][mdof])


def _payload_events(payload: np.ndarray) -> dict[int, list[tuple[int, float]]]:
    """Payload changes as events: physics step -> [(env, mass [kg])]."""
    events: dict[int, list[tuple[int, float]]] = {}
    for e in range(payload.shape[0]):
        for s in np.flatnonzero(np.diff(payload[e], prepend=-1.0) != 0):
            events.setdefault(int(s), []).append((e, float(payload[e, s])))
    return events


def _encoder_noise(jobs: list[Job], p: ServoParams, ni, n_steps: int, n: int,
                   lsb: float) -> tuple[np.ndarray, np.ndarray]:
    """Pre-drawn per-step encoder noise [steps] (E, n_steps, n), drawn from each job's own
    stream (batch-independent), and the encoder offsets [rad] (E, n)."""
    E = len(jobs)
    noise = np.zeros((E, n_steps, n))
    if ni.noise:
        for e, job in enumerate(jobs):
            noise[e] = job.rng.standard_normal((n_steps, n)) * p.encoder_noise[e]
    offset = p.encoder_offset * lsb if ni.noise else np.zeros((E, n))
    return noise, offset


def _loads(jobs: list[Job], envs: _Envs, step_t: np.ndarray, ee: int):
    """Payload and pushes on the physics grid: the payload events (:func:`_payload_events`),
    the push forces (E, n_steps, 3) [N], the pushed envs and views of their end-effector
    ``xfrc_applied``."""
    payload = np.stack([job.plan.payload_at(step_t) for job in jobs])  # (E, n_steps)
    push = np.stack([job.plan.push_at(step_t) for job in jobs])  # (E, n_steps, 3)
    has_push = np.abs(push).max(axis=(1, 2)) > 0
    push_envs = [e for e in range(len(jobs)) if has_push[e]]
    xfrc_v = {e: envs.datas[e].xfrc_applied[ee] for e in push_envs}
    return _payload_events(payload), push, push_envs, xfrc_v


def _record(rec: dict, es: np.ndarray, ks: np.ndarray, q_enc: np.ndarray, q_out: np.ndarray,
            w_m: np.ndarray, out, temperature: np.ndarray) -> None:
    """Store the samples ``(es, ks)`` read at this physics step (all but ``tau``)."""
    rec["q_enc"][es, ks] = q_enc[es]
    rec["q_true"][es, ks] = q_out[es]
    rec["qd_true"][es, ks] = w_m[es]
    rec["duty"][es, ks] = out.duty[es]
    rec["current"][es, ks] = out.current[es]
    rec["v_servo"][es, ks] = out.v_servo[es]
    rec["temperature"][es, ks] = temperature[es]


def _episode_records(jobs: list[Job], sched: _Schedule, rec: dict, rec_win: np.ndarray | None,
                     phys: np.ndarray | None, n_steps: int, dt: float,
                     lsb: float) -> list[EpisodeRecord]:
    """One record per job from the sample arrays; the end-effector force from the plan."""
    records = []
    for e, job in enumerate(jobs):
        k = len(sched.ticks[e])
        ts = np.clip(sched.samples[e], 0, n_steps - 1) * dt
        weight = np.zeros((k, 3))
        weight[:, 2] = -GRAVITY * job.plan.payload_at(ts)
        force = weight + job.plan.push_at(ts)
        contact = (np.linalg.norm(force, axis=1) > 1e-6).astype(np.float64)
        first = phys is not None and e == 0
        records.append(EpisodeRecord(
            t=sched.ticks[e], q_goal=sched.goals[e],
            channels={c: rec[c][e, :k].copy() for c in rec},
            enc_steps_window=None if rec_win is None else np.round(rec_win[e, :k] / lsb),
            ee_force=force, contact=contact, payload=job.plan.payload_at(ts),
            physics_qpos=phys if first else None,
            physics_goal=sched.G[e, sched.goal_idx[e]] if first else None))
    return records


class Lockstep:
    """The twin's environments stepped together, physics step by physics step.

    :func:`simulate` runs every step at once; an environment that receives its goals one
    telemetry tick at a time (:mod:`neuract.envs`) sets them with :meth:`set_goal` and
    advances to the step at which the next sample is read (:meth:`sample_step`). A goal sent
    at tick ``k`` reaches the servo only after the host's write latency, and sample ``k + 1``
    is read before tick ``k + 1`` is sent, so advancing to that sample never uses a goal not
    yet set.
    """

    def __init__(self, tm: TwinModel, spec: RobotTwinSpec, cfg: SimConfig, jobs: list[Job],
                 record_physics: bool = False) -> None:
        self.tm, self.spec, self.cfg, self.jobs = tm, spec, cfg, jobs
        self.ni = ni = cfg.nonideal
        E, n = len(jobs), tm.n
        self.dt = dt = float(tm.model.opt.timestep)
        self.n_steps = n_steps = int(round(cfg.episode_s / dt))
        self.lsb = lsb = 2 * np.pi / spec.registers.steps_per_rev
        self.p = p = ServoParams.stack([j.params for j in jobs])
        self.bus = bus = UnitBus.stack([j.bus for j in jobs])
        step_t = np.arange(n_steps) * dt
        self.sched = _host_schedule(tm, spec, cfg, jobs, bus, step_t, dt, lsb)
        self.envs = envs = _Envs(tm, p, self.sched.G, ni, lsb)
        self.noise, self.offset = _encoder_noise(jobs, p, ni, n_steps, n, lsb)
        self.events, self.push, self.push_envs, self.xfrc_v = _loads(jobs, envs, step_t,
                                                                     tm.ee_body)
        W = int(round(spec.registers.velocity_window / dt)) if spec.registers.velocity_window \
            else 0
        self.W = W
        self.hist = np.zeros((E, W + 1, n)) if W else None
        self.rec = {c: np.zeros((E, self.sched.G.shape[1], n)) for c in RECORD_CHANNELS}
        if not isinstance(cfg.overload_protection, bool):
            raise ConfigError(f"SimConfig.overload_protection = {cfg.overload_protection!r}; "
                              "expected True or False")
        self.prot = None
        if cfg.overload_protection:
            self.prot = Protection.initial(spec.overload, spec.registers.current_supply_side,
                                           (E, n))
            self.rec[OVERLOAD_CHANNEL] = np.zeros((E, self.sched.G.shape[1], n))
        self.rec_win = np.zeros((E, self.sched.G.shape[1], n)) if W else None
        self.st = ServoState.initial(p)
        if not ni.thermal:
            self.st.temperature = p.ambient + p.temp_start
        self.qpos = np.zeros((E, tm.model.nq))
        self.qvel = np.zeros((E, tm.model.nv))
        self.phys = np.zeros((n_steps, tm.model.nq)) if record_physics else None
        self.ar = np.arange(E)
        self.s = 0  # the next physics step

    def set_goal(self, e: int, k: int, goal: np.ndarray) -> None:
        """Goal ``k`` of environment ``e`` [rad], quantised as the host writes it (ticks past
        the episode's last are ignored)."""
        sched = self.sched
        if k >= len(sched.goals[e]):
            return
        g = np.asarray(goal, dtype=np.float64)
        if self.ni.quantisation:
            g = np.round(g / self.lsb) * self.lsb
        sched.goals[e][k] = g
        sched.G[e, k] = g
        if k == len(sched.goals[e]) - 1:
            sched.G[e, k + 1:] = g

    def sample_step(self, e: int, k: int) -> int:
        """The physics step at which sample ``k`` of environment ``e`` is read."""
        return int(self.sched.samples[e][k])

    def advance(self, until: int) -> None:
        """Run physics steps up to and including step ``until`` (at most the last)."""
        until = min(until, self.n_steps - 1)
        while self.s <= until:
            self._step(self.s)
            self.s += 1

    def _step(self, s: int) -> None:
        ni, envs, st, p, sched = self.ni, self.envs, self.st, self.p, self.sched
        qpos, qvel, lsb, W = self.qpos, self.qvel, self.lsb, self.W
        E = len(self.jobs)
        for e in range(E):
            qpos[e] = envs.qpos_v[e]
            qvel[e] = envs.qvel_v[e]
        if self.phys is not None:
            self.phys[s] = qpos[0]
        if envs.full:
            q_out = qpos + st.gap
            w_m = qvel.copy()
        else:
            q_out = qpos[:, envs.mq] + st.gap
            w_m = qvel[:, envs.mdof]
        q_enc = q_out + self.offset + self.noise[:, s] * lsb
        if ni.quantisation:
            q_enc = np.round(q_enc / lsb) * lsb
        goal = sched.G[self.ar, sched.goal_idx[:, s]]
        v_bus = bus_voltage(self.bus, st, ni)
        out = servo_step(p, st, goal, q_enc, w_m, v_bus, self.dt, ni, self.cfg.kp_ideal,
                         self.prot)
        if W:
            if s == 0:
                self.hist[:] = q_enc[:, None]
            self.hist[:, s % (W + 1)] = q_enc
        ee = self.tm.ee_body
        for e, mass in self.events.get(s, ()):
            envs.models[e].body_mass[ee] = mass
            envs.models[e].body_inertia[ee] = 0.4 * mass * 0.03**2  # 3 cm solid sphere
        for e in self.push_envs:
            self.xfrc_v[e][:3] = self.push[e, s]
        envs.step(out.tau_em, out.friction_bound, ni.friction and ni.motor)
        lo_i, hi_i = sched.bounds[s], sched.bounds[s + 1]
        if hi_i > lo_i:
            es, ks = sched.all_e[lo_i:hi_i], sched.all_k[lo_i:hi_i]
            _record(self.rec, es, ks, q_enc, q_out, w_m, out, st.temperature)
            if self.prot is not None:
                self.rec[OVERLOAD_CHANNEL][es, ks] = self.prot.tripped[es]
            for e, k in zip(es.tolist(), ks.tolist()):
                self.rec["tau"][e, k] = envs.joint_torque(e)
            if W:
                self.rec_win[es, ks] = self.hist[es, (s + 1) % (W + 1)]

    def records(self) -> list[EpisodeRecord]:
        """One record per job (call after the last step)."""
        return _episode_records(self.jobs, self.sched, self.rec, self.rec_win, self.phys,
                                self.n_steps, self.dt, self.lsb)


def simulate(tm: TwinModel, spec: RobotTwinSpec, cfg: SimConfig, jobs: list[Job],
             record_physics: bool = False) -> list[EpisodeRecord]:
    """Run ``jobs`` in lockstep for ``cfg.episode_s`` seconds each; one record per job."""
    run = Lockstep(tm, spec, cfg, jobs, record_physics)
    run.advance(run.n_steps - 1)
    return run.records()
