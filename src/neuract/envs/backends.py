"""What moves the arm in an environment: one backend per kind of actuator, batched over rows.

Every backend steps ``E`` rows (environments) together and reads what a host would read from
the servos after each telemetry period: :class:`Reading`. ``reset(rows, episodes)`` starts
the given rows on new episodes (the rest keep going), ``step(goals)`` sends one goal per row
and runs one telemetry period, ``read()`` returns the rows' current readings.

- :class:`TwinBackend`: the twin's hidden servos (:class:`neuract.twin.sim.Lockstep`), one
  lockstep run per row (rows' jittered host clocks differ; each row's goals must reach its
  servos in its own order). The readings are the twin's registers.
- :class:`MujocoServoBackend`: the shipped MJCF's own position actuators in plain MuJoCo.
- :class:`LearnedBackend`: any :class:`neuract.actuators.Actuator` (a ``neuract fit``
  parametric servo, a :class:`~neuract.neuralactuator.TransformerActuator`) on MuJoCo's mass
  matrix and bias forces, integrated by :func:`neuract.sim.simulate.step` as
  :func:`~neuract.sim.simulate.control_step` does (the integrator of ``neuract simulate``);
  one batched actuator call over all rows per physics step.

Fixed-rate backends (MuJoCo servo, learned) run ``substeps`` physics steps of
``period / substeps`` per telemetry period; payload and pushes follow the plan at each
physics step.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from neuract.actuators.base import Actuator, ActuatorState
from neuract.actuators.param import cached_params
from neuract.envs.batch_model import BatchModel
from neuract.envs.tasks import Episode, reference
from neuract.sim.simulate import JointParams
from neuract.sim.simulate import step as sim_step
from neuract.twin.config import RobotTwinSpec, SimConfig
from neuract.twin.model import TwinModel
from neuract.twin.sim import Lockstep
from neuract.twin.tasks import GRAVITY
from neuract.twin.telemetry import telemetry_channels

NOMINAL_SUPPLY_V = {"so101": 12.3, "omx": 12.9}
"""supply voltage the fixed-rate backends report and give the actuator [V] (the middle of the
twin's range of each arm's supply)"""
AMBIENT_C = 25.0


@dataclass
class Reading:
    """What the host reads from every row, and the privileged truth beside it.

    q, qd, effort, temperature: (E, n); voltage: (E,); t: (E,) episode time [s];
    effort: signed drive fraction in [-1, 1] (+ drives +q: duty of the twin's servos, the
    actuator torque over its limit otherwise). Privileged: tau (E, n) joint torque the
    actuator applies [N m]; ee_force (E, 3) external force at the end effector [N];
    contact (E,) bool; payload (E,) [kg]. overload (E, n) bool: the servos' overload
    protection has tripped (the status register a host reads; the twin with
    ``SimConfig.overload_protection`` only, else None).
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    effort: np.ndarray
    temperature: np.ndarray
    voltage: np.ndarray
    tau: np.ndarray
    ee_force: np.ndarray
    contact: np.ndarray
    payload: np.ndarray
    overload: np.ndarray | None = None


def _loads(ep: Episode, t: float) -> tuple[float, np.ndarray]:
    """Payload mass [kg] and push force (3,) [N] of ``ep`` at time ``t``."""
    tt = np.array([t])
    return float(ep.plan.payload_at(tt)[0]), ep.plan.push_at(tt)[0]


def _set_payload(model: mujoco.MjModel, body: int, mass: float) -> None:
    model.body_mass[body] = mass
    model.body_inertia[body] = 0.4 * mass * 0.03**2  # 3 cm solid sphere, as the twin


def _ee_force(payload, push: np.ndarray) -> np.ndarray:
    """External force at the end effector [N]: the payload's weight [kg] plus the push, (3,)
    or rows of them (E, 3)."""
    force = np.array(push, dtype=np.float64)
    force[..., 2] -= GRAVITY * np.asarray(payload)
    return force


class TwinBackend:
    """The twin's hidden servos; each row its own :class:`Lockstep` run."""

    def __init__(self, tm: TwinModel, spec: RobotTwinSpec, sim: SimConfig, n_envs: int):
        self.tm, self.spec, self.sim, self.E = tm, spec, sim, n_envs
        self.runs: list[Lockstep | None] = [None] * n_envs
        self.eps: list[Episode | None] = [None] * n_envs
        self.ref: list[np.ndarray | None] = [None] * n_envs
        self.k = np.zeros(n_envs, np.int64)

    def reset(self, rows, episodes: list[Episode], q0=None) -> None:
        for e, ep in zip(rows, episodes):
            run = Lockstep(self.tm, self.spec, self.sim, [ep.job])
            run.advance(run.sample_step(0, 0))
            self.runs[e], self.eps[e], self.k[e] = run, ep, 0
            self.ref[e] = reference(ep, self.tm, run.sched.ticks[0])

    def horizon(self, e: int) -> int:
        """Steps in row ``e``'s episode (samples after the first)."""
        return len(self.runs[e].sched.ticks[0]) - 1

    def step(self, goals: np.ndarray) -> None:
        for e, run in enumerate(self.runs):
            k = int(self.k[e])
            run.set_goal(0, k, goals[e])
            if k + 1 <= self.horizon(e):
                run.advance(run.sample_step(0, k + 1))
                self.k[e] = k + 1

    def read(self) -> Reading:
        rows = [self._read(e) for e in range(self.E)]
        return Reading(*(np.stack([r[i] for r in rows]) for i in range(11)))

    def _read(self, e: int) -> tuple:
        run, k, ep = self.runs[e], int(self.k[e]), self.eps[e]
        raw = {c: v[0, k:k + 1] for c, v in run.rec.items()}
        win = None if run.rec_win is None else np.round(run.rec_win[0, k:k + 1] / run.lsb)
        tele = telemetry_channels(raw, win, self.spec, self.sim.nonideal)
        effort = -tele["load"] if "load" in tele else tele["pwm"]
        t = float(run.sched.ticks[0][k])
        payload, push = _loads(ep, run.sample_step(0, k) * run.dt)
        force = _ee_force(payload, push)
        overload = tele.get("overload", np.zeros((1, len(tele["q"][0])), bool))[0]
        return (t, tele["q"][0], tele["qd"][0], effort[0], tele["temperature"][0],
                float(tele["voltage"][0].mean()), raw["tau"][0], force,
                bool(np.linalg.norm(force) > 1e-6), payload, overload)


class _FixedRate:
    """Shared by the fixed-rate backends: all rows in one MuJoCo model
    (:func:`~neuract.envs.batch_model.replicate`), episodes, loads and clocks."""

    def __init__(self, bm: BatchModel, tm: TwinModel, rate_hz: float, substeps: int):
        self.bm, self.tm, self.E, self.substeps = bm, tm, bm.E, substeps
        self.period = 1.0 / rate_hz
        self.h = self.period / substeps
        bm.model.opt.timestep = self.h
        E = self.E
        self.eps: list[Episode | None] = [None] * E
        self.ref: list[np.ndarray | None] = [None] * E
        self.payload: list[np.ndarray | None] = [None] * E
        self.push: list[np.ndarray | None] = [None] * E
        self.loaded = np.zeros(E, bool)  # rows whose episode has a payload or a push
        self.k = np.zeros(E, np.int64)
        self.n_steps = 0

    def horizon(self, e: int) -> int:
        return self.n_steps

    def _begin(self, e: int, ep: Episode) -> None:
        """Row ``e`` starts ``ep``: its reference at the control instants and its loads at
        every physics step, drawn once."""
        self.eps[e], self.k[e] = ep, 0
        n_ctrl = self.n_steps + 2
        self.ref[e] = reference(ep, self.tm, np.arange(n_ctrl) * self.period)
        t = np.arange(n_ctrl * self.substeps) * self.h
        self.payload[e], self.push[e] = ep.plan.payload_at(t), ep.plan.push_at(t)
        self.loaded[e] = bool(self.payload[e].any() or self.push[e].any())
        bm = self.bm
        _set_payload(bm.model, bm.ee[e], 0.0)
        bm.data.xfrc_applied[bm.ee[e]] = 0.0
        self._apply_loads(e, 0)

    def _apply_loads(self, e: int, i: int) -> None:
        """Row ``e``'s payload and push at physics step ``i``."""
        if not self.loaded[e]:
            return
        payload, ee = self.payload[e][i], self.bm.ee[e]
        if self.bm.model.body_mass[ee] != payload:
            _set_payload(self.bm.model, ee, payload)
        self.bm.data.xfrc_applied[ee, :3] = self.push[e][i]

    def _loads_at(self, i: np.ndarray) -> None:
        """Every loaded row's payload and push at its physics step ``i[e]``."""
        for e in np.flatnonzero(self.loaded):
            self._apply_loads(e, int(i[e]))

    def _loads_now(self) -> tuple[np.ndarray, np.ndarray]:
        """(E,) payload [kg] and (E, 3) end-effector force [N] at each row's control step."""
        i = self.k * self.substeps
        payload = np.array([self.payload[e][i[e]] for e in range(self.E)])
        push = np.stack([self.push[e][i[e]] for e in range(self.E)])
        return payload, _ee_force(payload, push)


class MujocoServoBackend(_FixedRate):
    """MuJoCo's own position servo of the shipped model (``replicate(shipped=True)``): one
    ``mj_step`` of the model of all rows per physics step."""

    def __init__(self, bm: BatchModel, tm: TwinModel, rate_hz: float, substeps: int,
                 voltage: float):
        super().__init__(bm, tm, rate_hz, substeps)
        self.voltage = voltage
        fr = bm.model.actuator_forcerange[bm.aadr]  # (E, n, 2)
        self.limit = np.maximum(np.abs(fr).max(-1), 1e-9)

    def reset(self, rows, episodes: list[Episode], q0: np.ndarray) -> None:
        bm, d = self.bm, self.bm.data
        for e, ep, q in zip(rows, episodes, q0):
            d.qpos[bm.qadr[e]] = q
            d.qvel[bm.dadr[e]] = 0.0
            d.ctrl[bm.aadr[e]] = q
            self._begin(e, ep)
        mujoco.mj_forward(bm.model, d)

    def step(self, goals: np.ndarray) -> None:
        bm = self.bm
        bm.data.ctrl[bm.aadr] = goals
        i0 = self.k * self.substeps
        for i in range(self.substeps):
            self._loads_at(i0 + i)
            mujoco.mj_step(bm.model, bm.data)
        self.k += 1

    def read(self) -> Reading:
        bm, d, E = self.bm, self.bm.data, self.E
        q, qd = d.qpos[bm.qadr].copy(), d.qvel[bm.dadr].copy()
        tau = d.actuator_force[bm.aadr].copy()
        payload, force = self._loads_now()
        return Reading(self.k * self.period, q, qd, np.clip(tau / self.limit, -1, 1),
                       np.full_like(q, AMBIENT_C), np.full(E, self.voltage), tau, force,
                       np.linalg.norm(force, axis=1) > 1e-6, payload)


class MjPlant:
    """MuJoCo's mass matrix and bias forces (with each row's payload and push) as a
    :class:`neuract.sim.simulate.Plant` for rows of states. The model is the bundled
    description with its joint armature (as :func:`neuract.robot.load_robot`'s plant, which
    ``neuract fit`` and ``neuract simulate`` use); its actuators and passive forces are not
    read."""

    def __init__(self, fixed: _FixedRate, dtype: torch.dtype):
        self.f, self.dtype = fixed, dtype
        self.n_dof = fixed.bm.n
        self.qd: torch.Tensor | None = None  # the velocities of the step about to run
        self._b: torch.Tensor | None = None

    def mass_matrix(self, q: torch.Tensor) -> torch.Tensor:
        """(E, n, n) at ``q``; computes the bias forces at (``q``, :attr:`qd`) in the same
        MuJoCo pass (the step asks for both at one state: set :attr:`qd` first)."""
        bm = self.f.bm
        M, b = bm.mass_bias(q.detach().cpu().numpy(), self.qd.detach().cpu().numpy())
        for e in np.flatnonzero(self.f.loaded):  # pushes: their generalized force
            push = bm.data.xfrc_applied[bm.ee[e], :3]
            if push.any():
                ext = np.zeros(bm.model.nv)
                mujoco.mj_applyFT(bm.model, bm.data, push, np.zeros(3),
                                  bm.data.xipos[bm.ee[e]], bm.ee[e], ext)
                b[e] -= ext[bm.dadr[e]]
        self._b = torch.from_numpy(b).to(self.dtype)
        return torch.from_numpy(M).to(self.dtype)

    def bias_forces(self, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """(E, n) gravity + Coriolis - the push, from :meth:`mass_matrix`'s pass."""
        if qd is not self.qd:
            raise RuntimeError("MjPlant: bias_forces at another velocity than the step's")
        return self._b


class _Recorder:
    """The actuator, remembering the last torque it applied and the state it saw."""

    def __init__(self, actuator: Actuator):
        self.a = actuator
        self.tau: torch.Tensor | None = None
        self.state: ActuatorState | None = None

    def observe(self, command, state) -> None:
        self.a.observe(command, state)

    def torque(self, command, state) -> torch.Tensor:
        self.tau = self.a.torque(command, state)
        self.state = state
        return self.tau


class LearnedBackend(_FixedRate):
    """A neuract :class:`Actuator` (and its joint parameters) on MuJoCo's dynamics."""

    def __init__(self, bm: BatchModel, tm: TwinModel, rate_hz: float, substeps: int,
                 voltage: float, actuator: Actuator, joints: JointParams):
        super().__init__(bm, tm, rate_hz, substeps)
        n_envs = bm.E
        p = next(iter(actuator.parameters()), None)
        self.dtype = p.dtype if p is not None else torch.float64
        self.act = actuator.to(self.dtype).eval()
        self.rec = _Recorder(self.act)
        self.joints = joints.to(self.dtype).eval()
        self.plant = MjPlant(self, self.dtype)
        self.q = torch.zeros(n_envs, bm.n, dtype=self.dtype)
        self.qd = torch.zeros_like(self.q)
        self.inputs = {"voltage": torch.full((n_envs, 1), voltage, dtype=self.dtype)}
        self.voltage = voltage
        self.act.reset()

    def reset(self, rows, episodes: list[Episode], q0: np.ndarray) -> None:
        rows = list(rows)
        for e, ep in zip(rows, episodes):
            self._begin(e, ep)
        idx = torch.as_tensor(rows)
        self.q[idx] = torch.as_tensor(np.asarray(q0), dtype=self.dtype)
        self.qd[idx] = 0.0
        self.act.reset(idx if len(rows) < self.E else None)
        self.rec.tau = None

    def step(self, goals: np.ndarray) -> None:
        cmd = torch.as_tensor(goals, dtype=self.dtype)
        q, qd, h = self.q, self.qd, self.h
        i0 = self.k * self.substeps
        # :func:`~neuract.sim.simulate.control_step`, with each row's loads at each substep
        with torch.no_grad(), cached_params():
            self.rec.observe(cmd, ActuatorState(q=q, qd=qd, dt=h, inputs=self.inputs))
            for i in range(self.substeps):
                self._loads_at(i0 + i)
                self.plant.qd = qd
                q, qd = sim_step(self.plant, self.rec, self.joints, cmd, q, qd, h, self.inputs)
        self.q, self.qd = q, qd
        self.k += 1

    def read(self) -> Reading:
        E = self.E
        q, qd = self.q.numpy().astype(np.float64), self.qd.numpy().astype(np.float64)
        if self.rec.tau is None:
            tau = np.zeros_like(q)
            effort = np.zeros_like(q)
        else:
            tau = self.rec.tau.detach().numpy().astype(np.float64)
            with torch.no_grad(), cached_params():
                lo, hi = self.act.torque_limits(self.rec.state)
            lo, hi = lo.numpy(), hi.numpy()
            effort = np.clip(np.where(tau >= 0, tau / np.maximum(hi, 1e-9),
                                      -tau / np.minimum(lo, -1e-9)), -1, 1)
        payload, force = self._loads_now()
        return Reading(self.k * self.period, q, qd, effort, np.full_like(q, AMBIENT_C),
                       np.full(E, self.voltage), tau, force,
                       np.linalg.norm(force, axis=1) > 1e-6, payload)


__all__ = ["LearnedBackend", "MjPlant", "MujocoServoBackend", "NOMINAL_SUPPLY_V", "Reading",
           "TwinBackend"]
