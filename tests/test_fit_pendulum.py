"""The torch pendulum bench matches MuJoCo on the equivalent generated MJCF."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from neuract.actuators.base import Actuator
from neuract.errors import ConfigError
from neuract.fit.simulate import JointParams, JointParamsConfig, simulate
from neuract.robot.pendulum import Pendulum, bench_arm_mass


class _Zero(Actuator):
    def torque(self, command, state, history=None):
        return torch.zeros_like(state.q)


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
    p = Pendulum(torch.tensor([mass]), torch.tensor([length]), torch.tensor([arm]))
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
    joints = JointParams(1, JointParamsConfig(armature=0.02, fit_offset=False)).double()
    out = simulate(p, _Zero(), joints, torch.tensor([[1.2]], dtype=torch.float64),
                   torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, 300, 1,
                                                                       dtype=torch.float64),
                   dt=0.003, substeps=3)
    np.testing.assert_allclose(out.q[0, :, 0].detach().numpy(), ref, atol=1e-5)


def test_from_meta_uses_bench_arm_masses_and_rejects_unknown_lengths():
    p = Pendulum.from_meta([{"mass": 0.5, "length": 0.1}, {"mass": 0.5, "length": 0.15}])
    assert p.arm_mass.tolist() == [bench_arm_mass(0.1), bench_arm_mass(0.15)] == [0.036, 0.05]
    with pytest.raises(ConfigError, match="arm_mass"):
        Pendulum.from_meta([{"mass": 0.5, "length": 0.12}])
    with pytest.raises(ConfigError, match="length"):
        Pendulum.from_meta([{"mass": 0.5}])
