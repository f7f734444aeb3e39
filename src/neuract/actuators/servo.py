"""Position servo: firmware P/PI/PD loop -> PWM duty -> DC motor with back-EMF -> friction.

The firmware turns the position error into a PWM duty cycle (``duty = kp * error_gain * e``
for a Feetech STS3215, measured ``error_gain = 0.1649`` per firmware-kp per rad, clipped to
+-1). The H-bridge applies ``duty * V`` to the winding; the current follows from the winding
resistance and the back-EMF, ``i = (duty V - kt qd) / R``, optionally clipped by a current
limit; the output torque is ``kt i``. ``kt`` is the torque constant referred to the output
shaft (gear ratio included) [N m / A], equal to the back-EMF constant [V s / rad]. A friction
budget (:mod:`neuract.actuators.friction`), a backlash dead zone and a command delay
(:mod:`neuract.actuators.backlash`) complete the model, plus firmware details that matter
on real STS3215 data: a speed limit of the internal goal (:mod:`~.goal_slew`), a clamp of
the position error (:mod:`neuract.actuators.error_limit`,
a duty ceiling that binds at low kp), a minimum duty ("punch", Feetech's minimum startup
force) added in the direction of the error, and what the bridge does when torque is
disabled (coast: no current; brake: shorted winding, back-EMF current only; the K-Scale logs
fit coast far better).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from neuract.actuators.backlash import Backlash, CommandDelay
from neuract.actuators.base import Actuator, ActuatorState, History
from neuract.actuators.error_limit import ErrorLimit
from neuract.actuators.friction import BudgetFriction, FrictionConfig
from neuract.actuators.goal_slew import GoalSlew
from neuract.actuators.param import Param, scalar_params, softclip
from neuract.errors import ConfigError
from neuract.servos import SERVOS


@dataclass
class ServoConfig:
    """Firmware loop + DC motor parameters (SI units; firmware gains in register units).

    ``kp``/``voltage`` are defaults: a rollout may pass per-run values in
    ``ActuatorState.inputs["kp"]`` / ``["voltage"]`` (e.g. the logged firmware gain and the
    measured supply voltage); ``inputs["torque_enable"]`` (0/1) switches the motor off (the
    gearbox friction still acts).
    """

    kp: float = 32.0  # firmware P gain [-]
    ki: float = 0.0  # firmware I gain [-] (duty per error_gain per rad s)
    kd: float = 0.0  # firmware D gain [-] (duty per error_gain per rad/s)
    error_gain: float = 0.1649  # duty per (kp * rad) [1/rad]
    max_duty: float = 1.0  # PWM saturation [-]
    voltage: float = 12.0  # supply [V]
    kt: float = 3.6  # torque constant at the output shaft [N m/A] (= back-EMF [V s/rad])
    R: float = 9.8  # winding resistance [ohm]
    current_limit: float = 0.0  # [A]; 0 = no firmware current limit
    control_dt: float = 0.01  # spacing of history frames / integral update [s]
    friction: FrictionConfig | None = None
    backlash: float = 0.0  # gap width [rad]; 0 = no backlash
    delay: float = 0.0  # command latency [s]; 0 = no delay
    delay_frames: int = 8  # history frames kept for the delay line
    smooth: bool = False  # smooth clips (duty, current, backlash) for gradients
    fit_error_gain: bool = False  # fit a multiplicative correction of error_gain
    disabled: str = "coast"  # torque off: "coast" (bridge open, no current) or "brake" (shorted)
    punch: float = 0.0  # minimum duty in the error's direction (Feetech "minimum startup
    #                     force"); 0 = none, > 0 = fitted from this initial value
    punch_width: float = 0.005  # [rad] error over which the punch ramps in (tanh)
    error_limit: float = 0.0  # [rad] firmware clamp of the position error before the P law
    #                           (a kp-dependent duty ceiling); 0 = none, > 0 = fitted from it
    goal_slew: float = 0.0  # [rad/s] firmware speed limit of its internal goal, advanced once
    #                         per control frame; 0 = none, > 0 = fitted from this value


MAX_PUNCH = 0.5
"""largest minimum duty [-] a servo models (the fitted punch stays below it)"""

# Per-family defaults (kp, error_gain, max_duty, voltage, kt, R, current_limit), each constant
# sourced in the servo registry (neuract.servos): e.g. the STS3215's error gain 0.1649 is
# K-Scale's oscilloscope measurement; the XM430's is (4096 / 2 pi) / 128 / 885 per P-gain
# unit per rad (e-Manual KPP = P / 128, PWM 885 = 100 %).
SERVO_DEFAULTS: dict[str, dict[str, float]] = {
    name: fam.servo_defaults() for name, fam in SERVOS.items()}
STS3215 = SERVO_DEFAULTS["sts3215"]
XM430 = SERVO_DEFAULTS["xm430"]


class ServoActuator(Actuator):
    """Position servo with a firmware loop, a DC motor, friction, backlash and delay."""

    def __init__(self, cfg: ServoConfig | None = None, n_dof: int = 1) -> None:
        super().__init__()
        cfg = cfg or ServoConfig()
        for name in ("error_gain", "voltage", "kt", "R", "control_dt"):
            if not getattr(cfg, name) > 0:
                raise ConfigError(f"servo.{name} must be > 0, got {getattr(cfg, name)}")
        if cfg.disabled not in ("coast", "brake"):
            raise ConfigError(f"servo.disabled={cfg.disabled!r}; valid: coast, brake")
        if not 0 < cfg.max_duty <= 1:
            raise ConfigError(f"servo.max_duty must be in (0, 1], got {cfg.max_duty}")
        self.cfg = cfg
        s = (n_dof,)
        self.kt = Param(cfg.kt, lo=0.0, shape=s)
        self.R = Param(cfg.R, lo=0.0, shape=s)
        self.error_gain_ratio = Param(1.0, lo=0.1, hi=10.0, shape=s,
                                      fixed=not cfg.fit_error_gain)
        self.friction = BudgetFriction(cfg.friction, n_dof) if cfg.friction else None
        self.punch = Param(cfg.punch, lo=0.0, hi=MAX_PUNCH, shape=s) if cfg.punch > 0 else None
        self.backlash = (Backlash(cfg.backlash, cfg.smooth, n_dof) if cfg.backlash > 0
                         else None)
        self.error_limit = (ErrorLimit(cfg.error_limit, cfg.smooth, n_dof)
                            if cfg.error_limit > 0 else None)
        self.goal_slew = GoalSlew(cfg.goal_slew, cfg.smooth, n_dof) if cfg.goal_slew > 0 else None
        self._slew_goal: Tensor | None = None  # internal goal (..., n) [rad]
        self._slew_fresh: Tensor | None = None  # rows to restart at their goal
        self.delay = (CommandDelay(cfg.delay, cfg.control_dt, cfg.delay_frames, n_dof)
                      if cfg.delay > 0 else None)
        self.history_len = cfg.delay_frames if self.delay is not None else 1
        self._integral: Tensor | None = None
        self._goal_cache: tuple[Tensor, Tensor] | None = None

    # -- internal state (integral of the error) ---------------------------------------------
    def _reset_state(self, ids) -> None:
        self._goal_cache = None
        if self._slew_goal is None or ids is None:
            self._slew_goal = self._slew_fresh = None
        else:
            fresh = self._slew_fresh.clone()
            fresh[torch.as_tensor(ids, dtype=torch.long)] = True
            self._slew_fresh = fresh
        if self._integral is None or ids is None:
            self._integral = None
        else:
            integral = self._integral.clone()
            integral[torch.as_tensor(ids, dtype=torch.long)] = 0.0
            self._integral = integral

    def _observe_state(self, frame: Tensor, state: ActuatorState) -> None:
        if self.goal_slew is not None:  # advance the internal goal by one control frame
            target = self._delayed_goal(frame[..., 0], self.history)
            prev = self._slew_goal
            if prev is None or prev.shape != target.shape:
                self._slew_goal = target
            else:
                new = self.goal_slew.step(target, prev, self.cfg.control_dt)
                self._slew_goal = torch.where(self._slew_fresh, target, new)
            self._slew_fresh = torch.zeros_like(target, dtype=torch.bool)
        if self.cfg.ki == 0:
            return
        e = self.goal(frame[..., 0], self.history) - state.q
        prev = self._integral if self._integral is not None else torch.zeros_like(e)
        self._integral = prev + e * self.cfg.control_dt

    # -- model -----------------------------------------------------------------------------
    def goal(self, command: Tensor, history: History | None) -> Tensor:
        """(..., n) the goal the firmware acts on: the delayed command if a delay is set,
        then slew-limited if a goal slew is set (its state advances with :meth:`observe`;
        before the first frame the delayed command is used)."""
        if self.goal_slew is not None and self._slew_goal is not None:
            return self._slew_goal
        return self._delayed_goal(command, history)

    def _delayed_goal(self, command: Tensor, history: History | None) -> Tensor:
        if self.delay is None:
            return command
        h = self._history(history)
        # the delayed goal depends on the history only: compute it once per control frame
        if self._goal_cache is None or self._goal_cache[0] is not h.buf:
            self._goal_cache = (h.buf, self.delay(h))
        return self._goal_cache[1]

    def duty(self, command: Tensor, state: ActuatorState, history: History | None = None
             ) -> Tensor:
        """(..., n) PWM duty cycle in [-max_duty, max_duty] from the firmware loop."""
        c = self.cfg
        e = self.goal(command, history) - state.q
        if self.backlash is not None:
            e = self.backlash(e)
        if self.error_limit is not None:
            e = self.error_limit(e)
        kp = state.get("kp", c.kp)
        gain = c.error_gain * self.error_gain_ratio()
        u = kp * gain * e
        if c.kd:
            u = u - c.kd * gain * state.qd
        if c.ki and self._integral is not None:
            u = u + c.ki * gain * self._integral
        if self.punch is not None:  # firmware minimum duty, smoothly signed by the error
            u = u + self.punch() * torch.tanh(e / c.punch_width)
        if c.smooth:
            return softclip(u, c.max_duty)
        return u.clamp(-c.max_duty, c.max_duty)

    def motor_torque(self, duty: Tensor, state: ActuatorState) -> Tensor:
        """(..., n) DC-motor output torque [N m] for a duty cycle, with back-EMF and limits."""
        V = state.get("voltage", self.cfg.voltage)
        kt, R = self.kt(), self.R()
        enable = state.get("torque_enable")
        if enable is not None and self.cfg.disabled == "brake":
            duty, enable = duty * enable, None  # shorted winding: back-EMF current only
        current = (duty * V - kt * state.qd) / R
        if self.cfg.current_limit > 0:
            lim = self.cfg.current_limit
            current = softclip(current, lim) if self.cfg.smooth else current.clamp(-lim, lim)
        tau = kt * current
        return tau if enable is None else tau * enable

    def torque(self, command: Tensor, state: ActuatorState, history: History | None = None
               ) -> Tensor:
        """tau: (..., n) motor torque plus gearbox friction at the joint [N m]."""
        tau_m = self.motor_torque(self.duty(command, state, history), state)
        if self.friction is None:
            return tau_m
        tau_ext = state.tau_ext if state.tau_ext is not None else torch.zeros_like(tau_m)
        return tau_m + self.friction(tau_m, tau_ext, state.qd, state.inertia, state.dt)

    def torque_limits(self, state: ActuatorState) -> tuple[Tensor, Tensor]:
        """(lo, hi): the motor torque at full negative / positive duty in this state [N m]."""
        one = torch.ones_like(state.qd) * self.cfg.max_duty
        lo = self.motor_torque(-one, state)
        hi = self.motor_torque(one, state)
        return lo, hi

    def physical_parameters(self) -> dict[str, float]:
        return scalar_params(self)
