"""Cross-check a :class:`Robot` against MuJoCo (and Pinocchio) at random states.

Used by the tests and by ``neuract demo``. Every number is a relative error: for each state,
``max |ours - reference| / max |reference|`` (reference floored at 1e-12), maximised over states.
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import torch

from neuract.robot import native
from neuract.robot.dynamics import kinetic_energy, potential_energy

__all__ = ["random_states", "reference_model", "compare_with_mujoco", "compare_with_pinocchio",
           "passive_model",
           "mujoco_rollout"]


def random_states(robot, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n random (q, qd, qdd) (n, n_dof) float64 arrays; q inside the joint limits."""
    rng = np.random.default_rng(seed)
    lo = robot.q_lower.detach().cpu().double().numpy()
    hi = robot.q_upper.detach().cpu().double().numpy()
    hinge = robot.is_hinge.cpu().numpy()
    dflt = np.where(hinge, np.pi, 0.05)
    lo = np.where(np.isfinite(lo), lo, -dflt)
    hi = np.where(np.isfinite(hi), hi, dflt)
    q = rng.uniform(lo, hi, size=(n, robot.n_dof))
    scale = np.where(hinge, 1.0, 0.05)
    qd = rng.normal(size=(n, robot.n_dof)) * 2.0 * scale
    qdd = rng.normal(size=(n, robot.n_dof)) * 5.0 * scale
    return q, qd, qdd


def reference_model(robot) -> mujoco.MjModel:
    """A copy of ``robot.mj_model`` with constraints (limits, friction loss, equality,
    contacts), passive forces (springs, dampers) and actuators disabled: rigid bodies only."""
    m = copy.deepcopy(robot.mj_model)
    for bit in ("mjDSBL_CONSTRAINT", "mjDSBL_DAMPER", "mjDSBL_SPRING", "mjDSBL_ACTUATION"):
        m.opt.disableflags |= int(getattr(mujoco.mjtDisableBit, bit))
    return m


def _rel(ours: np.ndarray, ref: np.ndarray) -> float:
    ours = ours.reshape(ours.shape[0], -1)
    ref = ref.reshape(ref.shape[0], -1)
    den = np.maximum(np.abs(ref).max(-1), 1e-12)
    return float((np.abs(ours - ref).max(-1) / den).max())


def passive_model(robot) -> mujoco.MjModel:
    """A copy of ``robot.mj_model`` whose only constraint is the joints' friction loss
    (limits, equality, contacts, springs and actuators disabled; dampers on)."""
    m = copy.deepcopy(robot.mj_model)
    for bit in ("mjDSBL_LIMIT", "mjDSBL_EQUALITY", "mjDSBL_CONTACT", "mjDSBL_SPRING",
                "mjDSBL_ACTUATION"):
        m.opt.disableflags |= int(getattr(mujoco.mjtDisableBit, bit))
    return m


def _passive_reference(robot, q: np.ndarray, seed: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MuJoCo's joint damping plus friction-loss constraint forces at sliding speeds.

    Velocities of 5-20 rad/s in magnitude, random sign. Returns (qd, qfrc_damper +
    qfrc_constraint, saturated) where ``saturated`` (n, nv) marks the dofs whose friction-loss
    constraint force is ``-frictionloss * sign(qd)`` (MuJoCo's dry sliding friction), or that
    have none. MuJoCo's friction loss is a soft velocity constraint: where the rest of the
    dynamics already decelerates a joint faster than its reference acceleration, its force
    lies inside the bound or at the opposite one, which is not Coulomb friction.
    """
    m = passive_model(robot)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed + 2)
    qd = rng.uniform(5.0, 20.0, size=q.shape) * rng.choice([-1.0, 1.0], size=q.shape)
    ref, sat = [], []
    fl = m.dof_frictionloss
    for k in range(q.shape[0]):
        d.qpos[:], d.qvel[:] = q[k], qd[k]
        d.qfrc_applied[:] = 0.0
        mujoco.mj_forward(m, d)
        ref.append(d.qfrc_damper + d.qfrc_constraint)
        sat.append((fl == 0) | (np.abs(d.qfrc_constraint + fl * np.sign(qd[k]))
                                <= 1e-12 * (1 + fl)))
    return qd, np.stack(ref), np.stack(sat)


def _mujoco_state(m: mujoco.MjModel, d: mujoco.MjData, q: np.ndarray, qd: np.ndarray,
                  qdd: np.ndarray, wrench: np.ndarray, ref: dict[str, list]) -> None:
    """Append MuJoCo's quantities at one state (q, qd, qdd) (n_dof,) with body wrenches
    ``wrench`` (n_bodies, 6) to the lists of ``ref``."""
    nv, nb, ns = m.nv, m.nbody, m.nsite
    d.qpos[:], d.qvel[:], d.qacc[:] = q, qd, qdd
    mujoco.mj_inverse(m, d)
    mujoco.mj_energyPos(m, d)
    mujoco.mj_energyVel(m, d)
    ref["energy"].append(d.energy.copy())
    M = np.zeros((nv, nv))
    mujoco.mj_fullM(m, d, M)
    ref["M"].append(M)
    ref["bias"].append(d.qfrc_bias.copy())
    ref["inv"].append(d.qfrc_inverse.copy())
    ref["xpos"].append(d.xpos[1:].copy())
    ref["xmat"].append(d.xmat[1:].reshape(-1, 3, 3).copy())
    ref["spos"].append(d.site_xpos.copy())
    ref["smat"].append(d.site_xmat.reshape(-1, 3, 3).copy())
    jac, sjac = [], []
    ext = np.zeros(nv)
    for b in range(1, nb):
        jp, jr = np.zeros((3, nv)), np.zeros((3, nv))
        mujoco.mj_jacBody(m, d, jp, jr, b)
        jac.append(np.vstack([jp, jr]))
        mujoco.mj_applyFT(m, d, wrench[b - 1, :3].copy(), wrench[b - 1, 3:].copy(),
                          d.xpos[b].copy(), b, ext)
    for s in range(ns):
        jp, jr = np.zeros((3, nv)), np.zeros((3, nv))
        mujoco.mj_jacSite(m, d, jp, jr, s)
        sjac.append(np.vstack([jp, jr]))
    ref["jac"].append(np.stack(jac))
    ref["sjac"].append(np.stack(sjac) if sjac else np.zeros((0, 6, nv)))
    ref["ext"].append(ext)
    # forward dynamics with an external wrench: MuJoCo applies xfrc_applied at the COM
    d.xfrc_applied[1:, :3] = wrench[:, :3]
    d.xfrc_applied[1:, 3:] = wrench[:, 3:] + np.cross(d.xpos[1:] - d.xipos[1:], wrench[:, :3])
    d.qfrc_applied[:] = ref["inv"][-1]
    mujoco.mj_forward(m, d)
    ref["fwd"].append(d.qacc.copy())
    d.xfrc_applied[:] = 0.0  # and without: the compiled kernel's case (neuract.robot.native)
    mujoco.mj_forward(m, d)
    ref["fwd0"].append(d.qacc.copy())
    d.xfrc_applied[:] = 0.0
    d.qfrc_applied[:] = 0.0


def _mujoco_reference(m: mujoco.MjModel, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                      wrench: np.ndarray) -> dict[str, np.ndarray]:
    """MuJoCo's quantities at every state, each stacked over the states."""
    d = mujoco.MjData(m)
    ref = {k: [] for k in ("M", "bias", "inv", "fwd", "fwd0", "xpos", "xmat", "jac", "spos",
                           "smat", "sjac", "ext", "energy")}
    for k in range(q.shape[0]):
        _mujoco_state(m, d, q[k], qd[k], qdd[k], wrench[k], ref)
    return {k: np.stack(v) for k, v in ref.items()}


def compare_with_mujoco(robot, n_states: int = 100, seed: int = 0) -> dict[str, float]:
    """Relative errors of M, bias, inverse/forward dynamics, FK, Jacobians, external torques,
    the inertial-parameter regressor, kinetic energy, changes of potential energy (bodies
    welded to the world, a constant, are not part of the robot) and passive torques (damping
    and friction loss at sliding speeds, where MuJoCo's friction-loss constraint saturates;
    the key ``passive_saturated_share`` is the share of dofs compared, not an error)."""
    m = reference_model(robot)
    m.opt.enableflags |= int(mujoco.mjtEnableBit.mjENBL_ENERGY)
    nb, ns = m.nbody, m.nsite
    q, qd, qdd = random_states(robot, n_states, seed)
    rng = np.random.default_rng(seed + 1)
    wrench = rng.normal(size=(n_states, nb - 1, 6))
    ref = _mujoco_reference(m, q, qd, qdd, wrench)

    r = robot.to(dtype=torch.float64)
    qt, qdt, qddt = (torch.as_tensor(x) for x in (q, qd, qdd))
    wt = torch.as_tensor(wrench)
    tau_inv = r.inverse_dynamics(qt, qdt, qddt)
    with native.disabled():  # the torch path, the compiled kernel's reference
        fd_torch = r.forward_dynamics(qt, qdt, torch.as_tensor(ref["inv"])).numpy()
        M_torch, b_torch = r.mass_matrix(qt).numpy(), r.bias_forces(qt, qdt).numpy()
    pos, rot = r.forward_kinematics(qt)
    out = {
        "mass_matrix": _rel(r.mass_matrix(qt).numpy(), ref["M"]),
        "bias_forces": _rel(r.bias_forces(qt, qdt).numpy(), ref["bias"]),
        "mass_matrix_torch": _rel(M_torch, ref["M"]),
        "bias_forces_torch": _rel(b_torch, ref["bias"]),
        "inverse_dynamics": _rel(tau_inv.numpy(), ref["inv"]),
        "forward_dynamics_ext": _rel(
            r.forward_dynamics(qt, qdt, torch.as_tensor(ref["inv"]), wt).numpy(), ref["fwd"]),
        # without wrenches: the compiled kernel where it is available, and the torch path
        "forward_dynamics": _rel(
            r.forward_dynamics(qt, qdt, torch.as_tensor(ref["inv"])).numpy(), ref["fwd0"]),
        "forward_dynamics_torch": _rel(fd_torch, ref["fwd0"]),
        "body_pos": _rel(pos.numpy(), ref["xpos"]),
        "body_rot": _rel(rot.numpy(), ref["xmat"]),
        "body_jacobian": _rel(
            torch.stack([r.body_jacobian(qt, b) for b in range(nb - 1)], 1).numpy(), ref["jac"]),
        "external_torques": _rel(r.external_torques(qt, wt).numpy(), ref["ext"]),
        "regressor": _rel((r.regressor(qt, qdt, qddt) @ r.inertial_parameters()).numpy(),
                          ref["inv"] - m.dof_armature * qdd),
        "kinetic_energy": _rel(kinetic_energy(r, qt, qdt).numpy()[:, None],
                               ref["energy"][:, 1:2]),
        "potential_energy_change": _rel(
            (potential_energy(r, qt) - potential_energy(r, qt[:1])).numpy()[:, None],
            (ref["energy"][:, 0] - ref["energy"][0, 0])[:, None]),
    }
    qd_p, passive_ref, sat = _passive_reference(robot, q, seed)
    passive = r.passive_torques(torch.as_tensor(qd_p)).numpy()
    out["passive_torques"] = _rel(np.where(sat, passive, 0.0), np.where(sat, passive_ref, 0.0))
    out["passive_saturated_share"] = float(sat.mean())
    if ns:
        spos, srot = r.site_poses(qt)
        out["site_pos"] = _rel(spos.numpy(), ref["spos"])
        out["site_rot"] = _rel(srot.numpy(), ref["smat"])
        out["site_jacobian"] = _rel(
            torch.stack([r.site_jacobian(qt, s) for s in range(ns)], 1).numpy(), ref["sjac"])
    return out


def compare_with_pinocchio(robot, urdf_path, n_states: int = 100, seed: int = 0
                           ) -> dict[str, float]:
    """Relative errors against Pinocchio built from the same file (URDF, or MJCF through
    Pinocchio's own MJCF parser): M (CRBA), inverse dynamics (RNEA), forward dynamics (ABA),
    gravity and Coriolis torques, link poses and link Jacobians (frame origin, world axes).
    Armature is left out on both sides."""
    import pinocchio as pin

    if str(urdf_path).endswith(".xml"):
        pm = pin.buildModelFromMJCF(str(urdf_path))
        pm.armature[:] = 0.0
    else:
        pm = pin.buildModelFromUrdf(str(urdf_path))
    pd = pm.createData()
    idx = [pm.joints[pm.getJointId(name)].idx_q for name in robot.joint_names]
    vidx = [pm.joints[pm.getJointId(name)].idx_v for name in robot.joint_names]
    q, qd, qdd = random_states(robot, n_states, seed)
    tau = np.random.default_rng(seed + 3).normal(size=q.shape)
    r = robot.to(dtype=torch.float64)
    body = pin.FrameType.BODY
    frames = [(i, pm.getFrameId(name, body)) for i, name in enumerate(r.body_names)
              if pm.existFrame(name, body)]
    world = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    ref = {k: [] for k in ("M", "tau", "pos", "rot", "aba", "g", "c", "jac")}
    for k in range(n_states):
        qp, vp, ap, tp = (np.zeros(pm.nq) for _ in range(4))
        qp[idx], vp[idx], ap[idx], tp[idx] = q[k], qd[k], qdd[k], tau[k]
        M = pin.crba(pm, pd, qp)
        M = np.triu(M) + np.triu(M, 1).T
        ref["M"].append(M[np.ix_(vidx, vidx)])
        ref["tau"].append(pin.rnea(pm, pd, qp, vp, ap)[vidx])
        ref["aba"].append(pin.aba(pm, pd, qp, vp, tp)[vidx])
        g = pin.computeGeneralizedGravity(pm, pd, qp)
        ref["g"].append(g[vidx])
        ref["c"].append((pin.computeCoriolisMatrix(pm, pd, qp, vp) @ vp)[vidx])
        pin.computeJointJacobians(pm, pd, qp)
        pin.framesForwardKinematics(pm, pd, qp)
        ref["pos"].append(np.stack([pd.oMf[f].translation for _, f in frames]))
        ref["rot"].append(np.stack([pd.oMf[f].rotation for _, f in frames]))
        ref["jac"].append(np.stack([pin.getFrameJacobian(pm, pd, f, world)[:, vidx]
                                    for _, f in frames]))
    ref = {k: np.stack(v) for k, v in ref.items()}
    qt, qdt, qddt, taut = (torch.as_tensor(x) for x in (q, qd, qdd, tau))
    bp, br = r.forward_kinematics(qt)
    sel = [i for i, _ in frames]
    r0 = r.replace(armature=torch.zeros_like(r.armature))
    gravity = r0.bias_forces(qt, torch.zeros_like(qdt))
    return {
        "mass_matrix": _rel(r0.mass_matrix(qt).numpy(), ref["M"]),
        "rnea": _rel(r0.inverse_dynamics(qt, qdt, qddt).numpy(), ref["tau"]),
        "aba": _rel(r0.forward_dynamics(qt, qdt, taut).numpy(), ref["aba"]),
        "gravity": _rel(gravity.numpy(), ref["g"]),
        "coriolis": _rel((r0.bias_forces(qt, qdt) - gravity).numpy(), ref["c"]),
        "body_pos": _rel(bp[:, sel].numpy(), ref["pos"]),
        "body_rot": _rel(br[:, sel].numpy(), ref["rot"]),
        "body_jacobian": _rel(torch.stack([r.body_jacobian(qt, i) for i in sel], 1).numpy(),
                              ref["jac"]),
        "n_frames_compared": float(len(frames)),
    }


def mujoco_rollout(robot, q0: np.ndarray, qd0: np.ndarray, tau: np.ndarray, dt: float,
                   integrator: str = "euler") -> np.ndarray:
    """MuJoCo's own rollout of ``robot.mj_model`` under joint torques tau (T, n_dof).

    Constraints (joint limits, friction loss, contacts) and actuators are off, joint dampers
    ON (MuJoCo's Euler treats them implicitly). Returns q (T + 1, n_dof).
    """
    m = reference_model(robot)
    m.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_DAMPER)
    m.opt.timestep = dt
    m.opt.integrator = {"euler": mujoco.mjtIntegrator.mjINT_EULER,
                        "rk4": mujoco.mjtIntegrator.mjINT_RK4}[integrator]
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q0, qd0
    qs = [np.array(q0, dtype=np.float64)]
    for t in range(tau.shape[0]):
        d.qfrc_applied[:] = tau[t]
        mujoco.mj_step(m, d)
        qs.append(d.qpos.copy())
    return np.stack(qs)
