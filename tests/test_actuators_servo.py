"""Firmware loop and DC motor: four torque-speed quadrants, saturation, limits, variants."""

from __future__ import annotations

import math

import pytest
import torch

from neuract.actuators import (
    ACTUATORS,
    ActuatorConfig,
    ActuatorState,
    ServoActuator,
    ServoConfig,
    build_actuator,
)
from neuract.errors import ConfigError

KT, R, V = 3.6, 9.8, 12.0
approx = lambda x: pytest.approx(x, rel=1e-6, abs=1e-9)  # noqa: E731 float32 params


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


def _f(x):
    return float(x.detach()) if isinstance(x, torch.Tensor) else float(x)


def _state(q=0.0, qd=0.0, **inputs):
    t = lambda x: _t([[_f(x)]])  # noqa: E731
    return ActuatorState(q=t(q), qd=t(qd), inputs={k: t(v) for k, v in inputs.items()})


def _servo(**kw):
    return ServoActuator(ServoConfig(kt=KT, R=R, voltage=V, **kw)).double()


# (duty, qd [rad/s], quadrant): I motoring forward, II braking while moving forward,
# III motoring backward, IV braking while moving backward; plus stall points.
QUADRANTS = [
    (1.0, 2.0, "I"), (0.3, 0.5, "I"), (-1.0, 2.0, "II"), (0.1, 5.0, "II"),
    (-1.0, -2.0, "III"), (-0.3, -0.5, "III"), (1.0, -2.0, "IV"), (-0.1, -5.0, "IV"),
    (1.0, 0.0, "stall+"), (-1.0, 0.0, "stall-"), (0.0, 0.0, "rest"), (0.0, 3.0, "coast"),
]


@pytest.mark.parametrize("duty,qd,quadrant", QUADRANTS)
def test_dc_motor_quadrants(duty, qd, quadrant):
    s = _servo()
    tau = _f(s.motor_torque(_t([[duty]]), _state(qd=qd)))
    expected = KT * (duty * V - KT * qd) / R  # i = (u - back-EMF) / R, tau = kt i
    assert tau == pytest.approx(expected, rel=1e-6)
    sign = {"I": 1, "II": -1, "III": -1, "IV": 1, "stall+": 1, "stall-": -1, "rest": 0,
            "coast": -1}[quadrant]
    assert math.copysign(1, tau) == sign or (sign == 0 and tau == 0)
    # mechanical power tau*qd: positive when motoring (I, III), negative when braking
    if quadrant in ("I", "III"):
        assert tau * qd > 0
    if quadrant in ("II", "IV", "coast"):
        assert tau * qd < 0


@pytest.mark.parametrize("kp", [4, 8, 16, 32])
@pytest.mark.parametrize("err", [-2.0, -0.3, -0.01, 0.0, 0.01, 0.1, 0.3, 2.0])
def test_sts3215_error_gain_and_duty_saturation(kp, err):
    s = build_actuator(ActuatorConfig(type="sts3215", friction="none")).double()
    duty = _f(s.duty(_t([[err]]), _state(kp=kp)))
    assert duty == pytest.approx(max(-1.0, min(1.0, kp * 0.1649 * err)), abs=1e-6)


def test_saturated_torque_is_the_envelope_and_limits_bound_every_duty():
    s = _servo()
    for qd in (-3.0, 0.0, 3.0):
        st = _state(qd=qd, kp=32)
        tau = _f(s.torque(_t([[5.0]]), st))  # huge error -> duty = +1
        lo, hi = s.torque_limits(st)
        assert tau == approx(_f(hi))
        assert _f(s.torque(_t([[-5.0]]), st)) == approx(_f(lo))
        for duty in torch.linspace(-1, 1, 11):
            t = _f(s.motor_torque(duty.reshape(1, 1), st))
            assert _f(lo) - 1e-12 <= t <= _f(hi) + 1e-12


def test_current_limit_clips_torque_in_all_quadrants():
    s = _servo(current_limit=0.5)
    for duty in (-1.0, 1.0):
        for qd in (-2.0, 0.0, 2.0):
            tau = _f(s.motor_torque(_t([[duty]]), _state(qd=qd)))
            free = KT * (duty * V - KT * qd) / R
            assert tau == approx(max(-KT * 0.5, min(KT * 0.5, free)))


def test_measured_voltage_input_overrides_config():
    s = _servo()
    t12 = _f(s.motor_torque(_t([[1.0]]), _state()))
    t15 = _f(s.motor_torque(_t([[1.0]]), _state(voltage=15.0)))
    assert t15 / t12 == approx(15.0 / 12.0)


def test_pd_and_pi_loops():
    pd = _servo(kp=10.0, kd=2.0, error_gain=0.1)
    st = _state(q=0.0, qd=1.0)
    assert _f(pd.duty(_t([[0.2]]), st)) == approx(0.1 * (10 * 0.2 - 2 * 1))
    pi = _servo(kp=10.0, ki=5.0, error_gain=0.1, control_dt=0.01)
    st0 = _state()
    for _ in range(3):
        pi.observe(_t([[0.2]]), st0)
    # integral after 3 frames: 3 * 0.2 * 0.01
    assert _f(pi.duty(_t([[0.2]]), st0)) == approx(
        0.1 * (10 * 0.2 + 5 * 3 * 0.2 * 0.01))
    pi.reset([0])
    assert _f(pi.duty(_t([[0.2]]), st0)) == approx(0.1 * 10 * 0.2)


def test_xm430_error_gain_matches_register_semantics():
    s = build_actuator(ActuatorConfig(type="xm430", friction="none")).double()
    err = 0.01  # rad
    pulses = err * 4096 / (2 * math.pi)
    expected = (800 / 128) * pulses / 885  # duty = KP_reg/128 * e[pulses] / 885
    assert _f(s.duty(_t([[err]]), _state())) == approx(expected)


def test_registry_lists_valid_names_on_unknown_type():
    assert {"servo", "sts3215", "xm430", "mlp", "gru", "transformer"} <= set(ACTUATORS.names())
    with pytest.raises(ConfigError, match="valid actuator types: .*sts3215"):
        build_actuator(ActuatorConfig(type="nope"))
    with pytest.raises(ConfigError, match="valid friction types"):
        build_actuator(ActuatorConfig(type="sts3215", friction="nope"))


def test_invalid_servo_config_names_the_field():
    with pytest.raises(ConfigError, match="servo.R"):
        ServoActuator(ServoConfig(R=0.0))
    with pytest.raises(ConfigError, match="max_duty"):
        ServoActuator(ServoConfig(max_duty=1.5))


@pytest.mark.parametrize("mode", ["coast", "brake"])
def test_torque_disabled_coasts_or_brakes(mode):
    s = ServoActuator(ServoConfig(kt=KT, R=R, voltage=V, disabled=mode)).double()
    for qd in (-2.0, 0.0, 2.0):
        st = _state(qd=qd, torque_enable=0.0)
        tau = _f(s.motor_torque(_t([[1.0]]), st))
        expected = 0.0 if mode == "coast" else -KT * KT * qd / R  # shorted winding
        assert tau == approx(expected)
        on = _f(s.motor_torque(_t([[1.0]]), _state(qd=qd, torque_enable=1.0)))
        assert on == approx(KT * (V - KT * qd) / R)
    with pytest.raises(ConfigError, match="disabled"):
        ServoActuator(ServoConfig(disabled="float"))


def test_punch_adds_a_minimum_duty_in_the_error_direction():
    s = ServoActuator(ServoConfig(kt=KT, R=R, voltage=V, kp=4.0, punch=0.05,
                                  punch_width=0.001)).double()
    for err in (-0.2, -0.01, 0.01, 0.2):
        duty = _f(s.duty(_t([[err]]), _state()))
        assert duty == approx(4 * 0.1649 * err + 0.05 * math.tanh(err / 0.001))
    assert _f(s.duty(_t([[0.0]]), _state())) == approx(0.0)
    assert _f(s.duty(_t([[5.0]]), _state())) == approx(1.0)  # still clipped


def test_smooth_variant_saturates_duty_and_current_with_tanh():
    """smooth=True: duty max_duty tanh(u / max_duty), current lim tanh(i / lim): the slope and
    the bounds of the hard clips, with a gradient everywhere."""
    s = _servo(kp=8.0, max_duty=0.8, current_limit=0.5, smooth=True)
    hard = _servo(kp=8.0, max_duty=0.8, current_limit=0.5)
    for err in (-3.0, -0.2, 0.05, 0.5, 3.0):
        u = 8.0 * 0.1649 * err
        assert _f(s.duty(_t([[err]]), _state())) == approx(0.8 * math.tanh(u / 0.8))
        assert abs(_f(s.duty(_t([[err]]), _state()))) <= abs(_f(hard.duty(_t([[err]]),
                                                                          _state()))) + 1e-12
    for duty, qd in ((1.0, 0.0), (0.3, 2.0), (-0.05, 0.1)):
        i = (duty * V - KT * qd) / R
        assert _f(s.motor_torque(_t([[duty]]), _state(qd=qd))) == approx(KT * 0.5 *
                                                                          math.tanh(i / 0.5))
