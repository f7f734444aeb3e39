"""Physics channels of estimator-mode NeuralActuator: gravity torque and end-effector
Jacobian of the arm model at the measured pose, computed when a trajectory lacks them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.errors import ConfigError, SchemaError
from neuract.estimate import estimate
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig, windows
from neuract.neuralactuator.features import PHYSICS_CHANNELS, channels_for
from neuract.neuralactuator.physics import physics_channels

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4)


def test_physics_channels_are_gravity_and_jacobian_rows():
    from neuract.robot import load_robot

    robot = load_robot("so101", dtype=torch.float64)
    q = np.random.default_rng(0).uniform(-1, 1, (5, 6))
    ch = physics_channels(q, "so101", "gripperframe")
    qt = torch.from_numpy(q)
    np.testing.assert_allclose(ch["tau_gravity"], robot.bias_forces(qt, 0 * qt).numpy(),
                               atol=1e-12)
    J = robot.site_jacobian(qt, "gripperframe")[..., :3, :].numpy()
    for a, k in enumerate(("jac_x", "jac_y", "jac_z")):
        np.testing.assert_allclose(ch[k], J[:, a], atol=1e-12)
    # J^T f of a downward 1 N force: the z row, negated
    f = np.array([0.0, 0.0, -1.0])
    np.testing.assert_allclose(np.einsum("tan,a->tn", J, f), -ch["jac_z"], atol=1e-12)
    with pytest.raises(ConfigError, match="not a site"):
        physics_channels(q, "so101", "nowhere")
    with pytest.raises(ConfigError, match="joints"):
        physics_channels(q[:, :4], "so101", "gripperframe")


def test_config_channels_and_estimates_with_physics():
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    assert channels_for("estimator", "load", physics=True)[-4:] == PHYSICS_CHANNELS
    with pytest.raises(ConfigError, match="physics_site"):
        NeuralActuatorConfig(physics_robot="so101").validate()
    with pytest.raises(ConfigError, match="estimator"):
        NeuralActuatorConfig(mode="simulator", physics_robot="so101",
                             physics_site="gripperframe").validate()
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", physics_robot="so101",
                               physics_site="gripperframe", **TINY)
    tr = generate(GenerateConfig(robot="so101", tasks=("lift",), minutes=0.1, units=1, seed=1,
                                 sim=SimConfig(episode_s=6.0)))[0]
    with pytest.raises(SchemaError, match="physics"):
        windows(tr, cfg.channels, 6, 4)  # computed channels need the arm model
    x = windows(tr, cfg.channels, 6, 4, physics=cfg.physics)
    C = len(cfg.channels)
    assert x.shape[-1] == 6 * C
    g = physics_channels(np.asarray(tr["q"]), "so101", "gripperframe")["tau_gravity"]
    # last token of window 10 = sample 13; tau_gravity of joint 2 sits at j * C + its index
    i = cfg.channels.index("tau_gravity")
    np.testing.assert_allclose(x[10, -1, 2 * C + i].item(), g[13, 2], rtol=1e-5, atol=1e-6)
    model = NeuralActuator(cfg)
    out = estimate(model, tr)  # computes the physics channels itself
    assert np.isfinite(out["ee_force"][3:]).all()


def test_est_rollout_matches_mujoco_euler():
    """The estimator's pose-only rollout (semi-implicit Euler, torques linear between samples,
    read at each substep's midpoint) on the bundled SO-101 equals MuJoCo's Euler integrator
    (rigid bodies only) driven by the same substep torques, 1e-8 rad."""
    import mujoco

    from neuract.neuralactuator.rollout import est_rollout
    from neuract.robot import load_robot
    from neuract.robot.validate import reference_model

    robot = load_robot("so101", dtype=torch.float64)
    rng = np.random.default_rng(7)
    n, H, substeps, dt = robot.n_dof, 150, 2, 0.004
    q0, qd0 = rng.uniform(-0.5, 0.5, n), rng.normal(size=n)
    tau = rng.normal(size=(H + 1, n)) * 0.2
    tau_ext = rng.normal(size=(H + 1, n)) * 0.05
    got = est_rollout(robot, torch.as_tensor(q0)[None], torch.as_tensor(qd0)[None],
                      torch.as_tensor(tau)[None], torch.as_tensor(tau_ext)[None],
                      torch.full((1, H), dt, dtype=torch.float64), substeps=substeps)[0]
    m = reference_model(robot)
    m.opt.timestep = dt / substeps
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q0, qd0
    u = tau + tau_ext
    ref = []
    for k in range(H):
        for s in range(substeps):
            a = (s + 0.5) / substeps
            d.qfrc_applied[:] = (1 - a) * u[k] + a * u[k + 1]
            mujoco.mj_step(m, d)
        ref.append(d.qpos.copy())
    ref = np.stack(ref)
    assert np.abs(ref - q0).max() > 0.1  # the arm really moved
    assert np.abs(got.numpy() - ref).max() < 1e-8
