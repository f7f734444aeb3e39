"""The torch pendulum bench matches MuJoCo on the equivalent generated MJCF."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from neuract.actuators.base import Actuator
from neuract.errors import ConfigError
from neuract.robot.pendulum import Pendulum, bench_arm_mass
from neuract.sim.simulate import JointParams, JointParamsConfig, simulate


class _Zero(Actuator):
    def torque(self, command, state, history=None):
        return torch.zeros_like(state.q)


def _joints64(**kw) -> JointParams:
    """JointParams built in float64 (built in float32 and converted, 0.02 reads 0.0200000035)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return JointParams(1, JointParamsConfig(fit_offset=False, **kw))
    finally:
        torch.set_default_dtype(old)


CONFIGS = [(0.535, 0.1, 0.036), (1.1682, 0.15, 0.050), (0.3, 0.2, 0.0)]


@pytest.mark.parametrize("mass,length,arm", CONFIGS)
def test_mass_matrix_and_gravity_match_mujoco(mass, length, arm):
    p = Pendulum(mass, length, arm)
    m = mujoco.MjModel.from_xml_string(p.to_mjcf())
    d = mujoco.MjData(m)
    for q in np.linspace(-3, 3, 7):
        d.qpos[:] = q
        d.qvel[:] = 0.7
        mujoco.mj_forward(m, d)
        M = np.zeros((1, 1))
        mujoco.mj_fullM(m, d, M)  # MuJoCo 4: (model, data, dst)
        qt = torch.tensor([[q]], dtype=torch.float64)
        assert float(p.mass_matrix(qt)) == pytest.approx(M[0, 0], rel=1e-6)
        assert float(p.bias_forces(qt, qt * 0 + 0.7)) == pytest.approx(d.qfrc_bias[0], rel=1e-6,
                                                                       abs=1e-9)


def test_passive_rollout_matches_mujoco_euler():
    mass, length, arm = 0.741, 0.15, 0.05
    p = Pendulum(*(torch.tensor([x], dtype=torch.float64) for x in (mass, length, arm)))
    xml = p.to_mjcf(timestep=0.001).replace(
        '<joint name="pendulum" type="hinge" axis="0 1 0"/>',
        '<joint name="pendulum" type="hinge" axis="0 1 0" armature="0.02"/>')
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qpos[:] = 1.2
    ref = []
    for _ in range(300):  # 100 control steps of 3 ms, 3 substeps of 1 ms
        ref.append(d.qpos[0])
        mujoco.mj_step(m, d, nstep=3)
    # MuJoCo's tip is a point mass with a 1e-9 placeholder inertia about the hinge: added here
    joints = _joints64(armature=0.02 + 1e-9)
    out = simulate(p, _Zero(), joints, torch.tensor([[1.2]], dtype=torch.float64),
                   torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, 300, 1,
                                                                       dtype=torch.float64),
                   dt=0.003, substeps=3)
    np.testing.assert_allclose(out.q[0, :, 0].detach().numpy(), ref, rtol=0, atol=1e-9)


def _mujoco_pendulum(p, extra: str, eulerdamp: bool = True):
    xml = p.to_mjcf(timestep=0.001).replace(
        '<joint name="pendulum" type="hinge" axis="0 1 0"/>',
        f'<joint name="pendulum" type="hinge" axis="0 1 0" {extra}/>')
    m = mujoco.MjModel.from_xml_string(xml)
    if not eulerdamp:  # explicit damping in MuJoCo's Euler integrator, as in sim.simulate
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    return m, mujoco.MjData(m)


def test_sliding_rollout_with_damping_and_friction_loss_matches_mujoco():
    """sim.simulate's passive path (damping plus friction loss as a clipped budget) equals
    MuJoCo's Euler step with explicit damping while the pendulum slides, where MuJoCo's
    friction-loss constraint force is -frictionloss * sign(qd) (checked at every step)."""
    p = Pendulum(*(torch.tensor([x], dtype=torch.float64) for x in (0.741, 0.15, 0.05)))
    damping, friction = 0.01, 0.05
    m, d = _mujoco_pendulum(
        p, f'armature="0.02" damping="{damping}" frictionloss="{friction}"', eulerdamp=False)
    d.qpos[:], d.qvel[:] = 0.3, 20.0
    ref = []
    for _ in range(100):  # 100 control steps of 3 ms, 3 substeps of 1 ms
        ref.append(d.qpos[0])
        for _ in range(3):
            mujoco.mj_step(m, d)
            assert d.qfrc_constraint[0] == pytest.approx(-friction * np.sign(d.qvel[0]),
                                                         abs=1e-12)
    assert abs(d.qvel[0]) > 1.0  # still sliding at the end
    # MuJoCo's tip is a point mass with a 1e-9 placeholder inertia about the hinge: added here
    joints = _joints64(armature=0.02 + 1e-9, damping=damping, frictionloss=friction)
    out = simulate(p, _Zero(), joints, torch.tensor([[0.3]], dtype=torch.float64),
                   torch.tensor([[20.0]], dtype=torch.float64),
                   torch.zeros(1, 100, 1, dtype=torch.float64), dt=0.003, substeps=3)
    np.testing.assert_allclose(out.q[0, :, 0].detach().numpy(), ref, rtol=0, atol=1e-9)
    # without the passive terms the same rollout ends elsewhere (the comparison is live)
    free = simulate(p, _Zero(), JointParams(1, JointParamsConfig(armature=0.02,
                                                                 fit_offset=False)).double(),
                    torch.tensor([[0.3]], dtype=torch.float64),
                    torch.tensor([[20.0]], dtype=torch.float64),
                    torch.zeros(1, 100, 1, dtype=torch.float64), dt=0.003, substeps=3)
    assert abs(float(free.q[0, -1, 0].detach()) - ref[-1]) > 1e-3


def test_friction_loss_holds_and_releases_a_resting_pendulum():
    """Dry friction in sim.simulate: at rest, a gravity torque below ``frictionloss`` leaves
    the pendulum exactly where it is; above it, the first step accelerates it by
    (tau_g - frictionloss) / inertia (closed form)."""
    mass, length, arm, armature = 0.5, 0.1, 0.036, 0.02
    p = Pendulum(torch.tensor([mass]), torch.tensor([length]), torch.tensor([arm]))
    q0 = torch.tensor([[0.4]], dtype=torch.float64)
    tau_g = float(-p.bias_forces(q0, torch.zeros_like(q0)))
    inertia = float(p.mass_matrix(q0)) + armature
    dt = 0.001
    for friction, moves in ((abs(tau_g) * 1.05, False), (abs(tau_g) * 0.5, True)):
        joints = JointParams(1, JointParamsConfig(armature=armature, frictionloss=friction,
                                                  fit_offset=False)).double()
        with torch.no_grad():
            out = simulate(p, _Zero(), joints, q0, torch.zeros_like(q0),
                           torch.zeros(1, 50, 1, dtype=torch.float64), dt=dt)
        if not moves:
            assert torch.equal(out.q, q0.expand(1, 50, 1).reshape(1, 50, 1))
            assert torch.equal(out.qd, torch.zeros_like(out.qd))
        else:
            qdd = (tau_g - np.sign(tau_g) * friction) / inertia
            # rel 1e-6: JointParams keeps a 1e-6 floor on the (unfitted) damping
            assert float(out.qd[0, 1, 0]) == pytest.approx(dt * qdd, rel=1e-6)
            assert float(out.q[0, 1, 0]) == pytest.approx(0.4 + dt * dt * qdd, rel=1e-6)


def test_from_meta_uses_bench_arm_masses_and_rejects_unknown_lengths():
    p = Pendulum.from_meta([{"mass": 0.5, "length": 0.1}, {"mass": 0.5, "length": 0.15}])
    assert p.arm_mass.tolist() == [bench_arm_mass(0.1), bench_arm_mass(0.15)] == [0.036, 0.05]
    with pytest.raises(ConfigError, match="arm_mass"):
        Pendulum.from_meta([{"mass": 0.5, "length": 0.12}])
    with pytest.raises(ConfigError, match="length"):
        Pendulum.from_meta([{"mass": 0.5}])
