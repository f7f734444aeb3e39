"""Firmware goal speed limit: step table, sequences, smooth variant, gradcheck, the servo's
frame-by-frame state (reset per row), equivalence with slewing the commands offline, and
known-truth recovery of the speed from positions only."""

from __future__ import annotations

import math

import pytest
import torch
from torch.func import functional_call

from neuract.actuators import (
    ActuatorConfig,
    ActuatorState,
    GoalSlew,
    ServoActuator,
    ServoConfig,
    build_actuator,
)
from neuract.errors import ConfigError
from neuract.robot.pendulum import Pendulum
from neuract.sim.simulate import JointParams, JointParamsConfig, simulate

D = torch.float64
DT = 0.01


def _t(x):
    return torch.tensor(x, dtype=D)


# (previous internal goal, target, next internal goal) at 5 rad/s and 10 ms: at most 0.05 rad
TABLE = [(0.0, 1.0, 0.05), (0.0, -1.0, -0.05), (0.0, 0.03, 0.03), (0.0, -0.05, -0.05),
         (0.5, 0.5, 0.5), (1.0, 0.0, 0.95), (-0.2, 3.0, -0.15), (0.02, 0.0, 0.0)]


@pytest.mark.parametrize("prev,target,want", TABLE)
def test_step_table(prev, target, want):
    s = GoalSlew(5.0).double()
    with torch.no_grad():
        assert float(s.step(_t([target]), _t([prev]), DT)) == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("smooth", [False, True])
def test_sequences_slow_ramp_step_and_fast_sine(smooth):
    s = GoalSlew(5.0, smooth=smooth).double()
    t = torch.arange(200, dtype=D) * DT
    with torch.no_grad():
        step = s((t >= 0.5).to(D).unsqueeze(-1) * 1.5, DT)[:, 0]
        ramp = s((0.5 * t).unsqueeze(-1), DT)[:, 0]  # 0.5 rad/s, far below the limit
        sine = s(torch.sin(2 * math.pi * 3.0 * t).unsqueeze(-1), DT)[:, 0]  # peak 18.8 rad/s
    speed = step.diff() / DT
    assert (speed <= 5.0 + 1e-6).all() and (speed >= -1e-9).all()  # bounded and monotone
    assert float(step[-1]) == pytest.approx(1.5, abs=1e-3)  # arrives
    if not smooth:
        assert torch.allclose(ramp, 0.5 * t, atol=1e-6)
        k = int(0.5 / DT)
        assert float(step[k + 10]) == pytest.approx(0.55, abs=1e-6)  # 11 frames of 0.05 rad
    else:  # tanh: at most the hard step, slightly less for slow targets
        assert (ramp <= 0.5 * t + 1e-9).all() and float((0.5 * t - ramp).max()) < 0.002
    assert float(sine[100:].abs().max()) < 0.5  # fast sine: the internal goal loses amplitude


@pytest.mark.parametrize("smooth", [True, False])
def test_gradcheck_step(smooth):
    s = GoalSlew(5.0, smooth=smooth).double()
    # hard: differences away from +-0.05 (the kinks)
    target = _t([1.0, -0.3, 0.02, 0.4]).requires_grad_()
    prev = _t([0.0, 0.0, 0.0, 0.37]).requires_grad_()
    raw = s.speed.raw.detach().clone().requires_grad_()
    step = _Step(s)
    f = lambda a, b, r: functional_call(step, {"inner.speed.raw": r}, (a, b))  # noqa: E731
    assert torch.autograd.gradcheck(f, (target, prev, raw))


class _Step(torch.nn.Module):
    """GoalSlew.step as a module call, so functional_call can swap the speed parameter."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, target, prev):
        return self.inner.step(target, prev, DT)


def test_invalid_speed_names_the_field():
    for bad in (0.0, -1.0, 1e3):
        with pytest.raises(ConfigError, match="goal_slew"):
            GoalSlew(bad)


def _state(q):
    return ActuatorState(q=q, qd=torch.zeros_like(q))


def test_servo_advances_its_internal_goal_per_frame_and_resets_rows():
    act = ServoActuator(ServoConfig(goal_slew=5.0)).double()
    q = torch.zeros(2, 1, dtype=D)
    act.reset()
    act.observe(torch.zeros(2, 1, dtype=D), _state(q))
    goals = []
    for _ in range(4):
        cmd = torch.ones(2, 1, dtype=D)
        act.observe(cmd, _state(q))
        goals.append(act.goal(cmd, None)[:, 0].tolist())
    assert sum(goals, []) == pytest.approx([0.05, 0.05, 0.1, 0.1, 0.15, 0.15, 0.2, 0.2],
                                           abs=1e-6)
    act.reset([1])  # row 1 restarts at its goal, row 0 keeps slewing
    act.observe(-torch.ones(2, 1, dtype=D), _state(q))
    assert act.goal(None, None)[:, 0].tolist() == pytest.approx([0.15, -1.0], abs=1e-6)
    act.reset()
    assert act._slew_goal is None


def test_built_from_the_flat_config():
    act = build_actuator(ActuatorConfig(type="sts3215", goal_slew=4.0))
    assert act.physical_parameters()["goal_slew.speed"] == pytest.approx(4.0, rel=1e-5)
    assert build_actuator(ActuatorConfig(type="sts3215")).goal_slew is None


def _bench():
    plant = Pendulum(_t([0.5, 1.0]), _t([0.1, 0.15]), _t([0.036, 0.05]))
    joints = JointParams(1, JointParamsConfig(armature=0.02, fit_armature=False,
                                              fit_offset=False)).double()
    T = 60
    cmd = torch.zeros(2, T, 1, dtype=D)
    cmd[0, 5:] = 1.4
    cmd[1, 5:30] = -1.0
    cmd[1, 30:] = 0.5
    return plant, joints, cmd, torch.zeros(2, 1, dtype=D), {"kp": torch.full((2, 1), 32.0,
                                                                              dtype=D)}


def test_servo_rollout_equals_offline_slewed_commands():
    plant, joints, cmd, z, inputs = _bench()
    with_slew = ServoActuator(ServoConfig(goal_slew=3.0)).double()
    plain = ServoActuator(ServoConfig()).double()
    with torch.no_grad():
        a = simulate(plant, with_slew, joints, z, z, cmd, DT, 2, inputs).q
        slewed = with_slew.goal_slew(cmd, DT)
        b = simulate(plant, plain, joints, z, z, slewed, DT, 2, inputs).q
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_known_truth_speed_recovered_from_positions_only():
    plant, joints, cmd, z, inputs = _bench()
    truth = ServoActuator(ServoConfig(goal_slew=3.0)).double()
    with torch.no_grad():
        q_ref = simulate(plant, truth, joints, z, z, cmd, DT, 2, inputs).q
    model = ServoActuator(ServoConfig(goal_slew=6.0)).double()
    opt = torch.optim.Adam([model.goal_slew.speed.raw], lr=0.05)
    for _ in range(50):
        opt.zero_grad()
        loss = (simulate(plant, model, joints, z, z, cmd, DT, 2, inputs).q - q_ref).abs().mean()
        loss.backward()
        opt.step()
    got = float(model.goal_slew.speed().detach())
    assert got == pytest.approx(3.0, rel=0.05), got


def test_gradcheck_short_smooth_rollout_through_both_firmware_effects():
    """Smooth servo (goal speed limit + error clamp + delay): gradcheck of a short rollout
    with respect to the speed limit and the clamp."""
    plant, joints, cmd, z, inputs = _bench()
    act = ServoActuator(ServoConfig(goal_slew=3.0, error_limit=0.4, delay=0.02, smooth=True,
                                    kp=8.0)).double()
    cmd = cmd[:, :15]

    class _Rollout(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = act

        def forward(self):
            return simulate(plant, self.act, joints, z, z, cmd, DT, 1, inputs).q

    roll = _Rollout()

    def f(speed_raw, limit_raw):
        return functional_call(roll, {"act.goal_slew.speed.raw": speed_raw,
                                      "act.error_limit.limit.raw": limit_raw}, ())

    raws = (act.goal_slew.speed.raw.detach().clone().requires_grad_(),
            act.error_limit.limit.raw.detach().clone().requires_grad_())
    assert torch.autograd.gradcheck(f, raws)
