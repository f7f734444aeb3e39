"""NeuralActuator on an identified parametric servo (``prior='servo'``, simulator mode): with a
zero residual it rolls out as the servo model itself, the servo is frozen through training and
travels in the checkpoint, and bad configurations are refused with the field named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _tiny import fitted_servo
from neuract.actuators import ActuatorConfig
from neuract.errors import ConfigError
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig, simulator
from neuract.neuralactuator.config import servo_json
from neuract.sim.simulate import JointParamsConfig

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16)
ACT = ActuatorConfig(type="sts3215", friction="stribeck", control_dt=0.016)
JOINTS = JointParamsConfig(armature=0.0, fit_armature=False, fit_offset=False)


@pytest.fixture(scope="module")
def fitted():
    """Twin SO-101 episodes, the arm models and a briefly fitted parametric servo."""
    return fitted_servo(ACT, JOINTS)


def _model(sm) -> NeuralActuator:
    cfg = NeuralActuatorConfig(n_joints=6, mode="simulator", prior="servo",
                               servo=servo_json(ACT, JOINTS), **TINY)
    m = NeuralActuator(cfg)
    m.set_servo(sm)
    return m.eval()


def _rollouts(sim, trajs):
    from neuract.eval.protocol import simulate_full

    return simulate_full(sim, trajs[0].slice(0, 200), "m", inputs=("q_goal", "voltage"),
                         history=8)


def test_zero_residual_rolls_out_as_the_fitted_servo(fitted):
    from neuract.pipeline import baselines as bl

    trajs, setup, sm = fitted
    m = _model(sm)
    ours = _rollouts(simulator(m, setup.robot, 2), trajs)
    ref = _rollouts(bl.system_simulator(sm, setup.robot64, 2), trajs)
    q = np.asarray(trajs[0]["q"])[:200]
    # float32 vs float64 and per-sample vs median sample spacing: far below the model error
    err_ref = np.abs(ref - q).mean()
    assert np.abs(ours - ref).mean() < 0.05 * err_ref
    # a nonzero residual changes the motion (the residual really acts)
    with torch.no_grad():
        m.head.bias[:6] = 0.3
    moved = _rollouts(simulator(m, setup.robot, 2), trajs)
    assert np.abs(moved - ref).mean() > 10 * np.abs(ours - ref).mean()


def test_training_keeps_the_servo_frozen_and_the_checkpoint_carries_it(fitted, tmp_path):
    from neuract.neuralactuator import load_checkpoint, save_checkpoint, train_neuralactuator
    from neuract.neuralactuator.train import NeuralActuatorTrainConfig as TrainConfig

    trajs, setup, sm = fitted
    cfg = _model(sm).cfg
    before = {k: v.clone() for k, v in sm.state_dict().items()}
    model, rep = train_neuralactuator(trajs, setup.robot, cfg,
                                      TrainConfig(steps=4, batch=4, horizon=4), servo=sm)
    assert rep["steps"] == 4
    for k, v in model.servo_model.state_dict().items():
        torch.testing.assert_close(v, before[k].to(v.dtype))
    assert model.head.weight[:6].abs().sum() > 0  # the residual was trained
    save_checkpoint(model, tmp_path / "ck")
    back = load_checkpoint(tmp_path / "ck")
    assert back.cfg.prior == "servo" and back.cfg.servo == cfg.servo
    a = _rollouts(simulator(model, setup.robot, 2), trajs)
    b = _rollouts(simulator(back, setup.robot, 2), trajs)
    np.testing.assert_array_equal(a, b)


def test_servo_prior_needs_its_model(fitted):
    from neuract.neuralactuator import train_neuralactuator

    trajs, setup, sm = fitted
    with pytest.raises(ConfigError, match="needs the fitted servo"):
        train_neuralactuator(trajs, setup.robot, _model(sm).cfg)


def test_bad_servo_configs_are_refused():
    js = servo_json(ACT, JOINTS)
    with pytest.raises(ConfigError, match="simulator-mode prior"):
        NeuralActuatorConfig(mode="estimator", prior="servo", servo=js).validate()
    with pytest.raises(ConfigError, match="NeuralActuatorConfig.servo"):
        NeuralActuatorConfig(mode="simulator", prior="servo", servo="{}").validate()
    with pytest.raises(ConfigError, match="used with prior='servo' or reference_steps"):
        NeuralActuatorConfig(mode="simulator", prior="pd", servo=js).validate()
    with pytest.raises(ConfigError, match="accepted"):
        NeuralActuatorConfig(mode="simulator", prior="spring").validate()
    with pytest.raises(ConfigError, match="set_servo needs prior='servo'"):
        pd = NeuralActuator(NeuralActuatorConfig(mode="simulator", **TINY))
        pd.set_servo(torch.nn.Linear(1, 1))


def test_resume_refuses_a_state_written_on_another_servo_fit(fitted, tmp_path):
    import copy

    from neuract.errors import CheckpointError
    from neuract.neuralactuator import train_neuralactuator
    from neuract.neuralactuator.train import NeuralActuatorTrainConfig as TrainConfig

    trajs, setup, sm = fitted
    cfg = _model(sm).cfg
    tc = TrainConfig(steps=4, batch=4, horizon=4, checkpoint=str(tmp_path / "state.st"),
                     checkpoint_every=2)
    model, _ = train_neuralactuator(trajs, setup.robot, cfg, tc, servo=sm)
    copy.deepcopy(model)  # the rollout leaves no autograd graph behind in the servo
    other = copy.deepcopy(sm)
    with torch.no_grad():
        other.actuator.kt.raw.add_(0.1)  # the same configuration, another fit
    with pytest.raises(CheckpointError, match="different run"):
        train_neuralactuator(trajs, setup.robot, cfg, tc, servo=other)


def test_an_unfitted_servo_prior_is_refused(fitted):
    from neuract.neuralactuator import train_neuralactuator

    trajs, setup, sm = fitted
    fresh = NeuralActuator(_model(sm).cfg)  # built from the config, never loaded
    with pytest.raises(ConfigError, match="never fitted"):
        train_neuralactuator(trajs, setup.robot, fresh.cfg, init=fresh)
