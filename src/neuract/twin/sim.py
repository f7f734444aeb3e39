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

from neuract.twin.config import RobotTwinSpec, SimConfig
from neuract.twin.model import TwinModel
from neuract.twin.servo import (
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


def simulate(tm: TwinModel, spec: RobotTwinSpec, cfg: SimConfig, jobs: list[Job],
             record_physics: bool = False) -> list[EpisodeRecord]:
    """Run ``jobs`` in lockstep for ``cfg.episode_s`` seconds each; one record per job."""
    ni = cfg.nonideal
    E, n = len(jobs), tm.n
    dt = float(tm.model.opt.timestep)
    n_steps = int(round(cfg.episode_s / dt))
    lsb = 2 * np.pi / spec.registers.steps_per_rev
    p = ServoParams.stack([j.params for j in jobs])
    bus = UnitBus.stack([j.bus for j in jobs])
    lo = tm.ranges[:, 0] + 0.05
    hi = tm.ranges[:, 1] - 0.05

    # --- host schedule: ticks, goals sent, goal active at each physics step, sample steps
    ticks, goals, goal_idx, samples = [], [], np.zeros((E, n_steps), np.int64), []
    step_t = np.arange(n_steps) * dt
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

    # --- per-environment models and data
    models, datas = [], []
    m0 = tm.model
    mdof, mq = tm.motor_dof, tm.motor_qpos
    for e in range(E):
        m = copy.copy(m0)
        m.dof_armature[mdof] = p.armature[e]  # rotor inertia: mechanics, kept when ideal
        m.dof_damping[mdof] = p.viscous[e] if (ni.friction and ni.motor) else 0.0
        d = mujoco.MjData(m)
        q0 = G[e, 0] - (p.encoder_offset[e] * lsb if ni.noise else 0.0)
        d.qpos[mq] = q0
        models.append(m)
        datas.append(d)

    # pre-drawn per-step encoder noise (per environment stream: batch-independent)
    noise = np.zeros((E, n_steps, n))
    if ni.noise:
        for e, job in enumerate(jobs):
            noise[e] = job.rng.standard_normal((n_steps, n)) * p.encoder_noise[e]
    offset = p.encoder_offset * lsb if ni.noise else np.zeros((E, n))
    # payload and pushes on the physics grid
    payload = np.stack([job.plan.payload_at(step_t) for job in jobs])  # (E, n_steps)
    push = np.stack([job.plan.push_at(step_t) for job in jobs])  # (E, n_steps, 3)
    has_push = np.abs(push).max(axis=(1, 2)) > 0
    ee = tm.ee_body

    W = int(round(spec.registers.velocity_window / dt)) if spec.registers.velocity_window else 0
    hist = np.zeros((E, W + 1, n)) if W else None

    rec = {c: np.zeros((E, K, n)) for c in RECORD_CHANNELS}
    rec_win = np.zeros((E, K, n)) if W else None
    st = ServoState.initial(p)
    if not ni.thermal:
        st.temperature = p.ambient + p.temp_start
    nq = m0.nq
    qpos = np.zeros((E, nq))
    qvel = np.zeros((E, m0.nv))
    phys = np.zeros((n_steps, nq)) if record_physics else None
    ar = np.arange(E)
    # cached views into MjData/MjModel (attribute access costs more than the copy)
    full = np.array_equal(mdof, np.arange(m0.nv)) and np.array_equal(mq, np.arange(nq))
    qpos_v = [d.qpos for d in datas]
    qvel_v = [d.qvel for d in datas]
    qfrc_v = [d.qfrc_applied for d in datas]
    fric_v = [m.dof_frictionloss for m in models]
    pass_v = [d.qfrc_passive for d in datas]
    cons_v = [d.qfrc_constraint for d in datas]
    push_envs = [e for e in range(E) if has_push[e]]
    xfrc_v = {e: datas[e].xfrc_applied[ee] for e in push_envs}
    # payload changes as events: step -> [(env, mass)]
    events: dict[int, list[tuple[int, float]]] = {}
    for e in range(E):
        for s in np.flatnonzero(np.diff(payload[e], prepend=-1.0) != 0):
            events.setdefault(int(s), []).append((e, float(payload[e, s])))
    use_friction = ni.friction and ni.motor
    step = mujoco.mj_step
    E_range = range(E)

    for s in range(n_steps):
        for e in E_range:
            qpos[e] = qpos_v[e]
            qvel[e] = qvel_v[e]
        if record_physics:
            phys[s] = qpos[0]
        if full:
            q_out = qpos + st.gap
            w_m = qvel.copy()
        else:
            q_out = qpos[:, mq] + st.gap
            w_m = qvel[:, mdof]
        q_enc = q_out + offset + noise[:, s] * lsb
        if ni.quantisation:
            q_enc = np.round(q_enc / lsb) * lsb
        goal = G[ar, goal_idx[:, s]]
        v_bus = bus_voltage(bus, st, ni)
        out = servo_step(p, st, goal, q_enc, w_m, v_bus, dt, ni, cfg.kp_ideal)
        if W:
            if s == 0:
                hist[:] = q_enc[:, None]
            hist[:, s % (W + 1)] = q_enc
        for e, mass in events.get(s, ()):
            models[e].body_mass[ee] = mass
            models[e].body_inertia[ee] = 0.4 * mass * 0.03**2  # 3 cm solid sphere
        for e in push_envs:
            xfrc_v[e][:3] = push[e, s]
        tau, bound = out.tau_em, out.friction_bound
        if full:
            for e in E_range:
                qfrc_v[e][:] = tau[e]
                if use_friction:
                    fric_v[e][:] = bound[e]
                step(models[e], datas[e])
        else:
            for e in E_range:
                qfrc_v[e][mdof] = tau[e]
                if use_friction:
                    fric_v[e][mdof] = bound[e]
                step(models[e], datas[e])
        lo_i, hi_i = bounds[s], bounds[s + 1]
        if hi_i > lo_i:
            es, ks = all_e[lo_i:hi_i], all_k[lo_i:hi_i]
            rec["q_enc"][es, ks] = q_enc[es]
            rec["q_true"][es, ks] = q_out[es]
            rec["qd_true"][es, ks] = w_m[es]
            rec["duty"][es, ks] = out.duty[es]
            rec["current"][es, ks] = out.current[es]
            rec["v_servo"][es, ks] = out.v_servo[es]
            rec["temperature"][es, ks] = st.temperature[es]
            for e, k in zip(es.tolist(), ks.tolist()):
                rec["tau"][e, k] = (qfrc_v[e][mdof] + pass_v[e][mdof] + cons_v[e][mdof])
            if W:
                rec_win[es, ks] = hist[es, (s + 1) % (W + 1)]

    records = []
    for e, job in enumerate(jobs):
        k = len(ticks[e])
        ts = np.clip(samples[e], 0, n_steps - 1) * dt
        weight = np.zeros((k, 3))
        weight[:, 2] = -GRAVITY * job.plan.payload_at(ts)
        force = weight + job.plan.push_at(ts)
        contact = (np.linalg.norm(force, axis=1) > 1e-6).astype(np.float64)
        records.append(EpisodeRecord(
            t=ticks[e], q_goal=goals[e],
            channels={c: rec[c][e, :k].copy() for c in RECORD_CHANNELS},
            enc_steps_window=None if rec_win is None else np.round(rec_win[e, :k] / lsb),
            ee_force=force, contact=contact, payload=job.plan.payload_at(ts),
            physics_qpos=phys if (record_physics and e == 0) else None,
            physics_goal=G[e, goal_idx[e]] if (record_physics and e == 0) else None))
    return records
