"""Firmware clamp of the position error: table, smooth variant, gradcheck, servo duty ceiling,
and known-truth recovery of the limit from positions only."""

from __future__ import annotations

import math

import pytest
import torch
from torch.func import functional_call

from neuract.actuators import (
    ActuatorConfig,
    ActuatorState,
    ErrorLimit,
    ServoActuator,
    ServoConfig,
    build_actuator,
)
from neuract.errors import ConfigError
from neuract.robot.pendulum import Pendulum
from neuract.sim.simulate import JointParams, JointParamsConfig, simulate

D = torch.float64
KT, R, V, G = 3.6, 9.8, 12.0, 0.1649


def _t(x):
    return torch.tensor(x, dtype=D)


def _state(q=0.0, qd=0.0, kp=None):
    inputs = {} if kp is None else {"kp": _t([[kp]])}
    return ActuatorState(q=_t([[q]]), qd=_t([[qd]]), inputs=inputs)


# (error [rad], clamped error at limit 0.5 [rad])
TABLE = [(-3.0, -0.5), (-0.5, -0.5), (-0.3, -0.3), (0.0, 0.0), (1e-4, 1e-4), (0.49, 0.49),
         (0.5, 0.5), (0.51, 0.5), (2.0, 0.5)]


@pytest.mark.parametrize("err,want", TABLE)
def test_hard_clamp_table(err, want):
    lim = ErrorLimit(0.5).double()
    with torch.no_grad():
        assert float(lim(_t([err]))) == pytest.approx(want, abs=1e-6)


def test_smooth_variant_slope_asymptotes_and_bound():
    soft, hard = ErrorLimit(0.5, smooth=True).double(), ErrorLimit(0.5).double()
    e = torch.linspace(-4, 4, 801, dtype=D)
    with torch.no_grad():
        s, h = soft(e), hard(e)
    assert (s.abs() <= h.abs() + 1e-12).all()  # never asks for more than the hard clamp
    assert (torch.sign(s) == torch.sign(h)).all()
    assert (s[1:] > s[:-1]).all()  # strictly monotone: the error's sign and order survive
    assert float(s[-1]) == pytest.approx(0.5, rel=1e-4)
    eps = 1e-6
    with torch.no_grad():
        slope = float((soft(_t([eps])) - soft(_t([-eps]))) / (2 * eps))
    assert slope == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("smooth", [True, False])
def test_gradcheck_error_and_limit(smooth):
    lim = ErrorLimit(0.5, smooth=smooth).double()
    # hard clamp: keep away from the kinks at +-limit, where the derivative jumps
    e = _t([-1.3, -0.2, 0.05, 0.3, 0.9]).requires_grad_()
    raw = lim.limit.raw.detach().clone().requires_grad_()
    f = lambda e, raw: functional_call(lim, {"limit.raw": raw}, (e,))  # noqa: E731
    assert torch.autograd.gradcheck(f, (e, raw))


def test_invalid_limit_names_the_field():
    for bad in (0.0, -0.1, 10.0):
        with pytest.raises(ConfigError, match="error_limit"):
            ErrorLimit(bad)


def _servo(**kw):
    return ServoActuator(ServoConfig(kt=KT, R=R, voltage=V, error_gain=G, **kw)).double()


@pytest.mark.parametrize("kp,err", [(4, 0.3), (4, 0.6), (4, 1.5), (4, -1.5), (8, 1.0),
                                    (12, -0.8), (32, 0.05), (32, 1.5), (32, -1.5)])
def test_servo_duty_ceiling_binds_at_low_kp_only(kp, err):
    limit = 0.6
    s, plain = _servo(error_limit=limit), _servo()
    with torch.no_grad():
        duty = float(s.duty(_t([[err]]), _state(kp=kp)))
        ref = float(plain.duty(_t([[err]]), _state(kp=kp)))
    want = max(-1.0, min(1.0, kp * G * max(-limit, min(limit, err))))
    assert duty == pytest.approx(want, abs=1e-6)
    if abs(err) <= limit or kp * G * limit >= 1.0:
        assert duty == pytest.approx(ref, abs=1e-6)  # within the clamp or duty-clipped
    else:
        assert abs(duty) < abs(ref)


@pytest.mark.parametrize("qd", [-3.0, -0.5, 0.0, 0.5, 3.0])
def test_motor_torque_at_the_ceiling_in_all_quadrants(qd):
    s = _servo(error_limit=0.5, kp=4.0)
    with torch.no_grad():
        tau = float(s.torque(_t([[2.0]]), _state(qd=qd)))
        tau_neg = float(s.torque(_t([[-2.0]]), _state(qd=qd)))
    ceiling = 4 * G * 0.5
    assert tau == pytest.approx(KT * (ceiling * V - KT * qd) / R, rel=1e-6)
    assert tau_neg == pytest.approx(KT * (-ceiling * V - KT * qd) / R, rel=1e-6)


def test_built_from_the_flat_config_and_fitted():
    act = build_actuator(ActuatorConfig(type="sts3215", error_limit=0.7))
    params = act.physical_parameters()
    assert params["error_limit.limit"] == pytest.approx(0.7, rel=1e-5)
    assert act.error_limit.limit.raw.requires_grad
    assert build_actuator(ActuatorConfig(type="sts3215")).error_limit is None


def test_known_truth_limit_recovered_from_positions_only():
    """Steps at low kp, where the clamp sets the speed: fit the limit alone from q."""
    torch.manual_seed(0)
    plant = Pendulum(_t([0.5, 0.5, 1.0]), _t([0.1, 0.15, 0.1]), _t([0.036, 0.05, 0.036]))
    joints = JointParams(1, JointParamsConfig(armature=0.02, fit_armature=False,
                                              fit_offset=False)).double()
    T = 80
    cmd = torch.zeros(3, T, 1, dtype=D)
    cmd[0, 5:] = 1.4
    cmd[1, 5:] = -1.2
    cmd[2, 5:] = 0.9
    q0, qd0 = torch.zeros(3, 1, dtype=D), torch.zeros(3, 1, dtype=D)
    inputs = {"kp": torch.full((3, 1), 4.0, dtype=D)}
    truth = _servo(error_limit=0.55, kp=4.0)
    with torch.no_grad():
        q_ref = simulate(plant, truth, joints, q0, qd0, cmd, 0.01, 2, inputs).q
    model = _servo(error_limit=0.9, kp=4.0)
    for p in (model.kt, model.R):
        p.raw.requires_grad_(False)
    opt = torch.optim.Adam([model.error_limit.limit.raw], lr=0.05)
    for _ in range(60):
        opt.zero_grad()
        loss = (simulate(plant, model, joints, q0, qd0, cmd, 0.01, 2, inputs).q - q_ref
                ).abs().mean()
        loss.backward()
        opt.step()
    got = float(model.error_limit.limit().detach())
    assert got == pytest.approx(0.55, rel=0.05), got
    assert math.isfinite(float(loss.detach()))
