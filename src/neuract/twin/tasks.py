"""Episode plans shaped like NAD's tasks: goal trajectories, payloads, pushes, degraded motors.

A plan is pure data drawn from one ``numpy.random.Generator``: the goal the host sends
(evaluated at the host's tick times), the payload carried at the end effector and when, the
external pushes (world-frame force at the end-effector point), and which motors are degraded.

Tasks (``TASKS``):
- ``free``: free motion, one of teleop-like random via-points (minimum-jerk segments with
  pauses and hand tremor), multi-joint sinusoids, or chirps (0.05 -> 1 Hz);
- ``lift``: go up and stay still with a payload of 0-500 g held from the start;
- ``pick``: pick-and-place: reach, close the gripper, the payload attaches, carry, release;
- ``push``: slow motion / holds with known pushes (raised-cosine force pulses, 0.5-6 N);
- ``degraded``: pick-and-place or free motion where half of the episodes have one or two
  degraded motors (labels per motor).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neuract.errors import ConfigError

TASKS = ("free", "lift", "pick", "push", "degraded")
GRAVITY = 9.81

# home poses (rad) in each robot's joint order, inside the ranges, similar to NAD's poses
HOME = {
    "so101": np.array([0.0, -0.2, 0.4, 1.0, 0.0, 0.2]),
    "omx": np.array([0.0, -0.3, 0.3, 1.2]),
}
# typical excursion per joint during free motion (rad)
SPAN = {
    "so101": np.array([0.8, 0.6, 0.6, 0.7, 0.9, 0.4]),
    "omx": np.array([0.9, 0.6, 0.6, 0.6]),
}
# SO-101 gripper joint (index) opening / closed-on-object angles
GRIPPER = {"so101": (5, 0.9, 0.05), "omx": None}


@dataclass
class EpisodePlan:
    """What happens in one episode (times in seconds from the episode start)."""

    task: str
    mode: str
    via_t: np.ndarray  # (P,) via-point times
    via_q: np.ndarray  # (P, n) via-point goals [rad]
    sine: tuple | None = None  # (amp (n,), f0 (n,), f1 (n,), phase (n,)) for sine/chirp
    tremor: np.ndarray | None = None  # (Kt, n) tremor samples at 100 Hz [rad]
    payload_kg: float = 0.0
    attach_t: float = np.inf
    release_t: float = np.inf
    pushes: list = field(default_factory=list)  # [(t0, duration, force (3,))]
    degraded: np.ndarray | None = None  # (n,) bool
    push_end_t: float = np.inf
    """every push force is zero from this time on (a counterfactual: the push cut off there,
    :func:`neuract.twin.observability.hidden_lag`; the drawn plan is unchanged)"""

    def goal(self, t: np.ndarray, home: np.ndarray, lo: np.ndarray, hi: np.ndarray
             ) -> np.ndarray:
        """(K, n) goal positions at times ``t`` (K,) [rad], clipped to [lo, hi]."""
        q = _minjerk(self.via_t, self.via_q, t)
        if self.sine is not None:
            amp, f0, f1, ph = self.sine
            dur = max(float(self.via_t[-1]), 1e-9)
            ramp = np.clip(t / 1.5, 0.0, 1.0)[:, None]
            # chirp: instantaneous frequency f0 -> f1 linearly over the episode
            phase = 2 * np.pi * (f0 * t[:, None] + 0.5 * (f1 - f0) * t[:, None] ** 2 / dur) + ph
            q = q + ramp * amp * np.sin(phase)
        if self.tremor is not None:
            tt = np.arange(len(self.tremor)) / 100.0
            q = q + np.stack([np.interp(t, tt, self.tremor[:, j])
                              for j in range(q.shape[1])], axis=1)
        return np.clip(q, lo, hi)

    def payload_at(self, t: np.ndarray) -> np.ndarray:
        """(K,) payload mass carried at times ``t`` [kg]."""
        held = (t >= self.attach_t) & (t < self.release_t)
        return np.where(held, self.payload_kg, 0.0)

    def push_at(self, t: np.ndarray) -> np.ndarray:
        """(K, 3) external push force at the end effector, world frame [N]."""
        f = np.zeros((len(t), 3))
        for t0, dur, vec in self.pushes:
            s = (t - t0) / dur
            w = np.where((s >= 0) & (s <= 1), 0.5 - 0.5 * np.cos(2 * np.pi * s), 0.0)
            f += w[:, None] * np.asarray(vec)[None, :]
        f[np.asarray(t) >= self.push_end_t] = 0.0
        return f


def _minjerk(via_t: np.ndarray, via_q: np.ndarray, t: np.ndarray) -> np.ndarray:
    idx = np.clip(np.searchsorted(via_t, t, side="right") - 1, 0, len(via_t) - 2)
    t0, t1 = via_t[idx], via_t[idx + 1]
    s = np.clip((t - t0) / np.maximum(t1 - t0, 1e-9), 0.0, 1.0)
    w = s**3 * (10 - 15 * s + 6 * s**2)
    return via_q[idx] + w[:, None] * (via_q[idx + 1] - via_q[idx])


def _tremor(rng: np.random.Generator, duration: float, n: int, amp: float) -> np.ndarray:
    k = int(duration * 100) + 2
    white = rng.normal(0.0, 1.0, (k, n))
    alpha = 0.08  # first-order low-pass at ~1.3 Hz
    out = np.empty_like(white)
    acc = np.zeros(n)
    for i in range(k):
        acc = (1 - alpha) * acc + alpha * white[i]
        out[i] = acc
    return amp * out / max(out.std(), 1e-12)


def _teleop_vias(rng, duration, home, span, lo, hi, slow=1.0):
    ts, qs = [0.0], [home.copy()]
    t, q = 0.0, home.copy()
    while t < duration:
        if rng.random() < 0.3:  # pause: the operator holds still
            t += rng.uniform(0.5, 2.5)
            ts.append(t)
            qs.append(q.copy())
            continue
        move = rng.random(len(home)) < 0.7
        target = np.where(move, home + rng.uniform(-1, 1, len(home)) * span, q)
        target = np.clip(target, lo, hi)
        dist = np.max(np.abs(target - q))
        t += slow * max(0.6, dist / rng.uniform(0.4, 1.2))
        ts.append(t)
        qs.append(target)
        q = target
    ts.append(t + 1.0)
    qs.append(q.copy())
    return np.array(ts), np.array(qs)


WORN_TASKS = ("pick", "push", "degraded")
"""tasks whose episodes can have worn motors (``make_plan``'s ``degraded_tasks``): the 'free'
and 'lift' plans are drawn without one"""


def check_worn_tasks(tasks, field: str, empty_ok: bool = True) -> None:
    """Raise a ConfigError naming ``field`` unless ``tasks`` is a tuple (or list) of
    :data:`WORN_TASKS` (non-empty unless ``empty_ok``)."""
    if (not isinstance(tasks, (tuple, list)) or (not tasks and not empty_ok)
            or any(t not in WORN_TASKS for t in tasks)):
        raise ConfigError(f"{field} = {tasks!r}; expected a {'' if empty_ok else 'non-empty '}"
                          "tuple of the twin tasks that can have worn motors "
                          f"({', '.join(WORN_TASKS)}), e.g. ('degraded',) or ('push',)")


def make_plan(task: str, robot: str, duration: float, lo: np.ndarray, hi: np.ndarray,
              rng: np.random.Generator, payload_range: tuple[float, float] = (0.0, 0.5),
              push_range: tuple[float, float] = (0.5, 6.0), degraded_fraction: float = 0.5,
              degraded_tasks: tuple[str, ...] = ("degraded",)) -> EpisodePlan:
    """Draw the plan of one episode of ``task`` for ``robot``; lo/hi: (n,) goal limits.
    An episode of one of ``degraded_tasks`` has one or two degraded motors with probability
    ``degraded_fraction`` (drawn after the rest of the plan; :data:`WORN_TASKS` only)."""
    if task not in TASKS:
        raise ConfigError(f"twin task {task!r} unknown; tasks: {', '.join(TASKS)}")
    home = np.clip(HOME[robot] + rng.normal(0, 0.05, len(lo)), lo, hi)
    span = SPAN[robot]
    n = len(lo)
    tremor = _tremor(rng, duration, n, rng.uniform(0.001, 0.004))
    if task == "free":
        mode = ("teleop", "sine", "chirp")[rng.integers(3)]
        if mode == "teleop":
            vt, vq = _teleop_vias(rng, duration, home, span, lo, hi)
            return EpisodePlan(task, mode, vt, vq, tremor=tremor)
        vt, vq = np.array([0.0, duration + 1.0]), np.stack([home, home])
        amp = span * rng.uniform(0.2, 0.6, n) * (rng.random(n) < 0.8)
        if mode == "sine":
            f = rng.uniform(0.1, 0.6, n)
            sine = (amp, f, f, rng.uniform(0, 2 * np.pi, n))
        else:
            sine = (amp * 0.6, np.full(n, 0.05), np.full(n, rng.uniform(0.6, 1.0)),
                    rng.uniform(0, 2 * np.pi, n))
        return EpisodePlan(task, mode, vt, vq, sine=sine)
    if task == "lift":
        up = np.clip(home + np.array(span) * rng.uniform(-0.6, 0.6, n) * 0.6, lo, hi)
        t_up = rng.uniform(1.0, 3.0)
        vt = np.array([0.0, t_up, t_up + rng.uniform(1.5, 3.0), duration + 1.0])
        vq = np.stack([home, home, up, up])
        mass = float(rng.choice([0.0, 0.2, 0.3, 0.4, 0.5]))
        mass = min(max(mass, payload_range[0]), payload_range[1])
        return EpisodePlan(task, "hold", vt, vq, tremor=tremor * 0.5, payload_kg=mass,
                           attach_t=0.0)
    if task in ("pick", "degraded") and (task == "pick" or rng.random() < 0.6):
        plan = _pick(robot, duration, home, span, lo, hi, rng, payload_range, tremor)
    elif task == "degraded":
        vt, vq = _teleop_vias(rng, duration, home, span, lo, hi)
        plan = EpisodePlan(task, "teleop", vt, vq, tremor=tremor)
    else:  # push
        vt, vq = _teleop_vias(rng, duration, home, span * 0.5, lo, hi, slow=2.0)
        plan = EpisodePlan(task, "push", vt, vq, tremor=tremor * 0.5)
        t = rng.uniform(0.5, 2.0)
        while t < duration - 1.0:
            dur = rng.uniform(0.5, 2.0)
            mag = rng.uniform(*push_range)
            if rng.random() < 0.5:  # axis-aligned like NAD's force_{x,y,z}_{plus,minus}
                vec = np.zeros(3)
                vec[rng.integers(3)] = mag * rng.choice([-1.0, 1.0])
            else:
                d = rng.normal(size=3)
                vec = mag * d / np.linalg.norm(d)
            plan.pushes.append((t, dur, vec))
            t += dur + rng.uniform(0.3, 2.5)
    plan.task = task
    if task in degraded_tasks:
        deg = np.zeros(n, bool)
        if rng.random() < degraded_fraction:
            k = 1 if rng.random() < 0.7 else 2
            deg[rng.choice(min(n, 4), size=k, replace=False)] = True
        plan.degraded = deg
    return plan


def _pick(robot, duration, home, span, lo, hi, rng, payload_range, tremor) -> EpisodePlan:
    n = len(home)
    grip = GRIPPER[robot]
    ts, qs = [0.0], [home.copy()]
    t = 0.0
    mass = float(rng.uniform(*payload_range)) if payload_range[1] > 0 else 0.0
    attach = release = np.inf
    first = True
    while t < duration:
        pick = np.clip(home + span * rng.uniform(-0.5, 0.5, n), lo, hi)
        place = np.clip(home + span * rng.uniform(-0.5, 0.5, n), lo, hi)
        if grip is not None:
            j, open_, closed = grip
            pick[j] = place[j] = open_
        seq = [(pick, rng.uniform(1.2, 2.5))]
        if grip is not None:
            held = pick.copy()
            held[grip[0]] = grip[2]
            seq.append((held, 0.6))
            carry = place.copy()
            carry[grip[0]] = grip[2]
        else:
            held, carry = pick, place
            seq.append((held, 0.6))
        t_attach = t + sum(d for _, d in seq) + 0.1
        seq += [(held, 0.3), (carry, rng.uniform(1.5, 3.0)), (carry, 0.5)]
        t_release = t + sum(d for _, d in seq)
        seq += [(place, 0.6), (home, rng.uniform(1.2, 2.0)), (home, rng.uniform(0.3, 1.0))]
        for q, d in seq:
            t += d
            ts.append(t)
            qs.append(np.clip(q, lo, hi))
        if first:  # the payload label follows the first pick of the episode
            attach, release, first = t_attach, t_release, False
    ts.append(t + 1.0)
    qs.append(home.copy())
    return EpisodePlan("pick", "pick_place", np.array(ts), np.array(qs), tremor=tremor * 0.5,
                       payload_kg=mass, attach_t=attach, release_t=release)
