"""A simulator-mode NeuralActuator as an Actuator: driven by the generic rollout
(``neuract.sim.simulate``) it gives the motion of the training rollout (``sim_rollout``), with
the PD prior and on a fitted servo, from a measured past or a steady start; bad use is refused."""

from __future__ import annotations

import pytest
import torch

from _tiny import fitted_servo
from neuract.actuators import ActuatorConfig, ActuatorState
from neuract.errors import ConfigError, SchemaError
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig, sim_rollout
from neuract.neuralactuator.actuator import TransformerActuator
from neuract.neuralactuator.checkpoint import save_checkpoint
from neuract.neuralactuator.config import ModelSize, servo_json
from neuract.robot import load_robot
from neuract.sim.simulate import JointParamsConfig, simulate

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4)
H, T, DT, SUB = 4, 40, 0.016, 2


def _inputs(n: int, B: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    goal = 0.3 * torch.randn(B, H - 1 + T, n, generator=g)
    q = goal[:, :H] + 0.02 * torch.randn(B, H, n, generator=g)
    qd = 0.1 * torch.randn(B, H, n, generator=g)
    past = {"q_goal": goal[:, :H], "q": q, "qd": qd}
    return past, goal[:, H - 1:], q[:, -1], qd[:, -1]


def _pd_model(n: int) -> NeuralActuator:
    torch.manual_seed(1)
    m = NeuralActuator(NeuralActuatorConfig(n_joints=n, mode="simulator", tau_max=(2.0,),
                                            **TINY))
    with torch.no_grad():  # a residual that matters
        m.head.weight.normal_(0, 0.05)
        m.head.bias[:n] = 0.2
    return m.eval()


def _both(model, robot, joints=None, volt=None):
    past, goal, q0, qd0 = _inputs(model.cfg.n_joints)
    dt = torch.full(goal.shape[:2], DT)
    with torch.no_grad():
        ref = sim_rollout(model, robot, past, q0, qd0, goal, dt, SUB, volt)
        act = TransformerActuator(model)
        act.prime({k: v[:, :-1] for k, v in past.items()})
        series = None if volt is None else {"voltage": volt.unsqueeze(-1)}
        out = simulate(robot, act, act.joints, q0, qd0, goal, DT, SUB, input_series=series)
    # sim_rollout returns the states after each command; simulate the states before it
    return ref[:, :-1], out.q[:, 1:], act


def test_pd_prior_rolls_out_as_the_training_rollout():
    robot = load_robot("so101", dtype=torch.float32)
    model = _pd_model(robot.n_dof)
    ref, ours, _ = _both(model, robot)
    moved = (ref - ref[:, :1]).abs().max()
    assert moved > 0.05  # the arm really moves
    torch.testing.assert_close(ours, ref, atol=2e-5, rtol=0)


def test_the_primed_past_matters_and_a_steady_start_is_the_default():
    robot = load_robot("so101", dtype=torch.float32)
    model = _pd_model(robot.n_dof)
    past, goal, q0, qd0 = _inputs(robot.n_dof)
    act = TransformerActuator(model)
    with torch.no_grad():
        steady = simulate(robot, act, act.joints, q0, qd0, goal, DT, SUB).q
        act.prime({k: v[:, :-1] for k, v in past.items()})
        primed = simulate(robot, act, act.joints, q0, qd0, goal, DT, SUB).q
        act.prime(None)
        again = simulate(robot, act, act.joints, q0, qd0, goal, DT, SUB).q
    assert (steady - primed).abs().max() > 1e-4
    torch.testing.assert_close(again, steady, atol=0, rtol=0)


@pytest.fixture(scope="module")
def fitted():
    act = ActuatorConfig(type="sts3215", friction="stribeck", control_dt=DT)
    joints = JointParamsConfig(armature=0.01, fit_armature=True, fit_offset=False)
    trajs, setup, sm = fitted_servo(act, joints)
    return act, joints, setup, sm


def test_servo_prior_rolls_out_as_the_training_rollout(fitted, tmp_path):
    act_cfg, joints, setup, sm = fitted
    torch.manual_seed(2)
    cfg = NeuralActuatorConfig(n_joints=6, mode="simulator", prior="servo",
                               servo=servo_json(act_cfg, joints), **TINY)
    model = NeuralActuator(cfg)
    model.set_servo(sm)
    with torch.no_grad():
        model.head.bias[:6] = 0.1
    model.eval()
    volt = torch.full((3, T), 11.5)
    ref, ours, act = _both(model, setup.robot, volt=volt)
    assert act.joints is model.servo_model.joints
    assert (ref - ref[:, :1]).abs().max() > 0.05
    torch.testing.assert_close(ours, ref, atol=2e-5, rtol=0)
    # the checkpoint gives the same actuator
    save_checkpoint(model, tmp_path / "ck")
    back = TransformerActuator.from_checkpoint(tmp_path / "ck")
    past, goal, q0, qd0 = _inputs(6)
    with torch.no_grad():
        a = simulate(setup.robot, act, act.joints, q0, qd0, goal, DT, SUB).q
        b = simulate(setup.robot, back, back.joints, q0, qd0, goal, DT, SUB).q
    torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_refusals():
    est = NeuralActuator(NeuralActuatorConfig(n_joints=6, mode="estimator", **TINY))
    with pytest.raises(ConfigError, match="simulator-mode"):
        TransformerActuator(est)
    act = TransformerActuator(_pd_model(6))
    with pytest.raises(ConfigError, match="observe"):
        act.torque(torch.zeros(1, 6), ActuatorState(q=torch.zeros(1, 6), qd=torch.zeros(1, 6)))
    with pytest.raises(SchemaError, match="lacks"):
        act.prime({"q": torch.zeros(1, 3, 6)})
    with pytest.raises(SchemaError, match="history - 1"):
        act.prime({k: torch.zeros(1, 5, 6) for k in ("q_goal", "q", "qd")})
    act.prime({k: torch.zeros(2, 3, 6) for k in ("q_goal", "q", "qd")})
    with pytest.raises(SchemaError, match="rows"):
        act.observe(torch.zeros(1, 6), ActuatorState(q=torch.zeros(1, 6), qd=torch.zeros(1, 6)))


def test_built_from_its_config_it_starts_as_the_servo_it_sits_on():
    from neuract.neuralactuator.actuator import (
        TransformerActuatorConfig,
        build_transformer_actuator,
    )

    robot = load_robot("so101", dtype=torch.float32)
    cfg = TransformerActuatorConfig(
        servo=ActuatorConfig(type="sts3215", friction="stribeck", control_dt=DT),
        joints=JointParamsConfig(armature=0.01),
        size=ModelSize(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4))
    act = build_transformer_actuator(cfg, robot.n_dof)
    assert act.model.cfg.prior == "servo" and act.model.cfg.history == 4
    servo = act.model.servo_model
    _, goal, q0, qd0 = _inputs(robot.n_dof)
    with torch.no_grad():
        ours = simulate(robot, act, act.joints, q0, qd0, goal, DT, SUB).q
        alone = simulate(robot, servo.actuator, servo.joints, q0, qd0, goal, DT, SUB).q
        assert (alone - alone[:, :1]).abs().max() > 0.05
        torch.testing.assert_close(ours, alone, atol=0, rtol=0)  # an untrained residual is 0
        act.model.head.bias[:6] = 0.2
        moved = simulate(robot, act, act.joints, q0, qd0, goal, DT, SUB).q
    assert (moved - alone).abs().max() > 1e-3
    with pytest.raises(ConfigError, match="servo.type"):
        TransformerActuatorConfig(servo=ActuatorConfig(type="nope")).network(6)
    with pytest.raises(ConfigError, match="joints.armature"):
        TransformerActuatorConfig(joints=JointParamsConfig(armature=-1.0)).network(6)
