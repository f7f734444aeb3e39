"""Generate twin datasets in parallel, deterministically for a given seed.

Episode ``i`` belongs to unit ``i % units`` and runs task ``tasks[(i // units) % len(tasks)]``.
Randomness is keyed, never sequential: unit ``u``'s hidden parameters come from
``SeedSequence([seed, 0, u])`` and episode ``(u, k)``'s plan, timing and noise from
``SeedSequence([seed, 1, u, k])``; so results do not depend on the number of processes, on
how episodes are batched into lockstep groups, or on the order in which workers finish.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
import numbers
import os
import pickle
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neuract.atomic import atomic_path, write_text
from neuract.data.trajectory import Trajectory
from neuract.errors import ConfigError
from neuract.twin.config import ROBOT_SPECS, SimConfig
from neuract.twin.model import build_model
from neuract.twin.servo import degrade, sample_unit
from neuract.twin.sim import Job, simulate
from neuract.twin.tasks import TASKS, check_worn_tasks, make_plan
from neuract.twin.telemetry import to_trajectory


@dataclass(frozen=True)
class GenerateConfig:
    """What to generate: robot, tasks, total minutes, units, seed and simulation settings."""

    robot: str = "so101"
    tasks: tuple[str, ...] = TASKS
    minutes: float = 2.0
    units: int = 2
    seed: int = 0
    workers: int = 1
    sim: SimConfig = field(default_factory=SimConfig)
    episode_offset: int = 0
    """number of each unit's first episode: the episodes of a second dataset with the same
    seed and ``episode_offset`` past the first's are new episodes of the same units"""

    def n_episodes(self) -> int:
        return max(1, math.ceil(self.minutes * 60.0 / self.sim.episode_s))

    def validate(self) -> None:
        """Refuse bad values (ConfigError naming ``GenerateConfig.<field>``, which the verbs
        write as their options: ``--minutes``, ``--twin.minutes``; ``sim.episode_s`` as
        ``--episode-s``): an unknown robot or task, a seed < 0, minutes <= 0, less than one
        episode or more than fits in memory (:func:`check_minutes`), ..."""
        if self.robot not in ROBOT_SPECS:
            raise ConfigError(f"GenerateConfig.robot = {self.robot!r} unknown; twin robots: "
                              f"{', '.join(ROBOT_SPECS)}")
        bad = [t for t in self.tasks if t not in TASKS]
        if bad or not self.tasks:
            raise ConfigError(f"GenerateConfig.tasks = {list(self.tasks)}: unknown {bad}; tasks: "
                              f"{', '.join(TASKS)}")
        check_worn_tasks(self.sim.degraded_tasks, "GenerateConfig.sim.degraded_tasks")
        for name in ("episode_offset", "seed", "units", "workers"):
            v, lo = getattr(self, name), 1 if name in ("units", "workers") else 0
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ConfigError(f"GenerateConfig.{name} = {v!r}; expected an integer >= {lo}")
        for name, val, lo in (("sim.episode_s", self.sim.episode_s, 1.0),
                              ("sim.physics_hz", self.sim.physics_hz, 500.0),
                              ("sim.n_envs", self.sim.n_envs, 1),
                              ("sim.current_noise_lsb", self.sim.current_noise_lsb, 0.0)):
            if not (math.isfinite(val) and val >= lo):
                raise ConfigError(f"GenerateConfig.{name} = {val}; expected a finite number "
                                  f">= {lo:g}")
        # one episode's physics steps are held in memory: bound them (an hour at 2 kHz)
        steps = self.sim.episode_s * self.sim.physics_hz
        if steps > 7.2e6:
            raise ConfigError(f"GenerateConfig.sim.episode_s = {self.sim.episode_s} at "
                              f"GenerateConfig.sim.physics_hz = {self.sim.physics_hz} is "
                              f"{steps:.3g} physics steps per episode; expected at most 7.2e6 "
                              "(e.g. episodes of at most an hour at 2 kHz)")
        check_minutes(self.minutes, self.sim.episode_s, self.robot)


BYTES_PER_MINUTE = {"so101": 1.57e6, "omx": 1.03e6}
"""bytes one minute of a twin robot's episodes takes in memory (measured: 419 B per SO-101
sample at 62.3 Hz, 291 B per OMX sample at 58.8 Hz)"""

MEMORY_FACTOR = 3.0
"""peak memory of generating and writing a dataset over the bytes of its episodes (the
lockstep simulation's records, a worker's copy, one episode's table while it is written;
measured peak growth 2.5-3.5x over 2-20 minutes of SO-101 data)"""


def available_memory() -> int | None:
    """Bytes of memory this machine has available now (Linux ``MemAvailable``, else the
    physical memory); None where neither can be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None


def estimated_bytes(minutes: float, episode_s: float, robot: str) -> float:
    """Peak memory [bytes] of generating ``minutes`` of ``robot`` twin episodes of
    ``episode_s`` seconds (whole episodes; every episode is held until the dataset is
    written)."""
    n = max(1, math.ceil(minutes * 60.0 / episode_s))
    per_minute = BYTES_PER_MINUTE.get(robot, max(BYTES_PER_MINUTE.values()))
    return n * episode_s / 60.0 * per_minute * MEMORY_FACTOR


def check_minutes(minutes: float, episode_s: float, robot: str,
                  name: str = "GenerateConfig.minutes",
                  episode: str = "GenerateConfig.sim.episode_s") -> None:
    """Refuse an amount of twin data that is not a finite number > 0, is less than one
    episode of ``episode_s`` seconds (the twin generates whole episodes: amounts are rounded
    up to them, and less than one would silently become one), or needs more memory than this
    machine has available (:func:`estimated_bytes`). ``name`` / ``episode``: the fields the
    message names."""
    if isinstance(minutes, bool) or not isinstance(minutes, numbers.Real) or not (
            math.isfinite(minutes) and minutes > 0):
        raise ConfigError(f"{name} = {minutes!r}; expected a finite number > 0 minutes")
    if minutes * 60.0 < episode_s * (1 - 1e-9):
        raise ConfigError(f"{name} = {minutes:g} is less than one episode ({episode} = "
                          f"{episode_s:g} s, {episode_s / 60:g} min): the twin generates whole "
                          f"episodes; expected at least {episode_s / 60:g} minutes, or shorter "
                          "episodes")
    need, have = estimated_bytes(minutes, episode_s, robot), available_memory()
    if have is not None and need > have:
        per_minute = BYTES_PER_MINUTE.get(robot, max(BYTES_PER_MINUTE.values()))
        most = have / (per_minute * MEMORY_FACTOR)
        raise ConfigError(f"{name} = {minutes:g} needs about {need / 1e9:.3g} GB of memory "
                          f"(every episode is held until written: about "
                          f"{per_minute * MEMORY_FACTOR / 1e6:.2g} MB per minute of {robot} "
                          f"telemetry); this machine has {have / 1e9:.3g} GB available: "
                          f"expected at most {most:.0f} minutes (generate more in several "
                          "datasets with other seeds)")


def unit_rng(seed: int, unit: int) -> np.random.Generator:
    """Generator of unit ``unit``'s hidden parameters (independent of episodes and workers)."""
    return np.random.default_rng(np.random.SeedSequence([seed, 0, unit]))


def episode_rng(seed: int, unit: int, episode: int) -> np.random.Generator:
    """Generator of one episode's task plan and noise (independent of batching and workers)."""
    return np.random.default_rng(np.random.SeedSequence([seed, 1, unit, episode]))


def episode_table(cfg: GenerateConfig) -> list[tuple[int, int, int, str]]:
    """(index, unit, episode-of-unit, task) of every episode (episodes of a unit numbered
    from ``cfg.episode_offset``)."""
    out = []
    for i in range(cfg.n_episodes()):
        unit, k = i % cfg.units, i // cfg.units
        out.append((i, unit, k + cfg.episode_offset, cfg.tasks[k % len(cfg.tasks)]))
    return out


def episode_name(row: tuple[int, int, int, str]) -> str:
    """The trajectory name of an :func:`episode_table` row, e.g. ``unit003/ep0059_degraded``."""
    _, unit, k, task = row
    return f"unit{unit:03d}/ep{k:04d}_{task}"


_MODEL_CACHE: dict = {}


def _model(robot: str, physics_hz: float):
    key = (robot, physics_hz)
    if key not in _MODEL_CACHE:
        _MODEL_CACHE[key] = build_model(robot, physics_hz)
    return _MODEL_CACHE[key]


def _jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, np.ndarray):
        return [_jsonable(float(v)) for v in x.ravel()]
    return x


def _worn_allowed(healthy, tm) -> np.ndarray:
    """(n,) bool: the motors a plan may degrade, all but ``SimConfig.healthy_motors``
    (validated: joint indices of ``tm``)."""
    if not isinstance(healthy, (tuple, list)) or not all(
            isinstance(j, (int, np.integer)) and not isinstance(j, bool) and 0 <= j < tm.n
            for j in healthy):
        raise ConfigError(f"sim.healthy_motors = {healthy!r}; expected joint indices in "
                          f"0..{tm.n - 1} ({', '.join(tm.joint_names)})")
    keep = np.ones(tm.n, bool)
    keep[list(healthy)] = False
    return keep


def episode_plan(cfg: GenerateConfig, task: str, lo: np.ndarray, hi: np.ndarray,
                 rng: np.random.Generator):
    """The plan of one episode of ``task`` as ``cfg`` draws it from the episode's generator
    ``rng`` (:func:`episode_rng`; ``rng`` goes on to draw the rest of the episode)."""
    return make_plan(task, cfg.robot, cfg.sim.episode_s, lo, hi, rng, cfg.sim.payload_range_kg,
                     cfg.sim.push_force_n, cfg.sim.degraded_fraction, cfg.sim.degraded_tasks)


def make_job(cfg: GenerateConfig, spec, tm, unit: int, episode: int, task: str,
             keep: np.ndarray | None = None, push_end_s: float = np.inf) -> Job:
    """Episode ``episode`` of ``unit`` doing ``task``, drawn as :func:`generate` draws it:
    the unit's hidden servos (:func:`unit_rng`), the plan from the episode's generator
    (:func:`episode_rng`, which goes on to draw the rest of the episode) and the degraded
    motors it picks (``keep``: the motors it may degrade; default all but
    ``cfg.sim.healthy_motors``)."""
    keep = _worn_allowed(cfg.sim.healthy_motors, tm) if keep is None else keep
    lo, hi = tm.ranges[:, 0] + 0.05, tm.ranges[:, 1] - 0.05
    params, bus = sample_unit(spec, tm.n, unit_rng(cfg.seed, unit))
    rng = episode_rng(cfg.seed, unit, episode)
    plan = episode_plan(cfg, task, lo, hi, rng)
    plan.push_end_t = float(push_end_s)
    if plan.degraded is not None and plan.degraded.any():
        plan.degraded = plan.degraded & keep  # (the draws do not depend on the mask)
        params = degrade(params, plan.degraded, spec, rng)
    return Job(unit, episode, params, bus, plan, rng)


def run_chunk(cfg: GenerateConfig, rows: list[tuple[int, int, int, str]],
              push_end_s: Sequence[float] | None = None) -> list[Trajectory]:
    """Simulate the episodes ``rows`` in lockstep and return their trajectories.

    push_end_s: per row, the episode time [s] from which its pushes are cut off (force zero;
    ``inf``: none cut); rows may repeat with different cut times. None: no push cut."""
    if push_end_s is not None:
        ends = list(push_end_s)
        if len(ends) != len(rows) or not all(
                isinstance(v, numbers.Real) and not isinstance(v, bool) and float(v) >= 0
                for v in ends):
            raise ConfigError(f"push_end_s = {ends!r}; expected one time >= 0 s (or inf) per "
                              f"row ({len(rows)} rows)")
    else:
        ends = [np.inf] * len(rows)
    spec = ROBOT_SPECS[cfg.robot]()
    tm = _model(cfg.robot, cfg.sim.physics_hz)
    keep = _worn_allowed(cfg.sim.healthy_motors, tm)
    jobs = []
    for (_, unit, k, task), end in zip(rows, ends):
        job = make_job(cfg, spec, tm, unit, k, task, keep, push_end_s=float(end))
        plan, params, rng = job.plan, job.params, job.rng
        cut = cfg.sim.external_forces_until_s
        if cut < np.inf:  # counterfactual: later external forces left out
            plan.pushes = [p for p in plan.pushes if p[0] < cut]
            if plan.attach_t >= cut:
                plan.payload_kg = 0.0
        jobs.append(Job(unit, k, params, job.bus, plan, rng))
    records = simulate(tm, spec, cfg.sim, jobs)
    trajs = []
    for row, job, rec in zip(rows, jobs, records):
        i, unit, k, task = row
        plan = job.plan
        deg = plan.degraded
        labels = {
            "task": task, "mode": plan.mode, "unit": unit, "episode": k, "index": i,
            "seed": cfg.seed, "split": "train",
            "payload_mass_kg": plan.payload_kg,
            "payload_attach_s": _jsonable(float(plan.attach_t)),
            "payload_release_s": _jsonable(float(plan.release_t)),
            "pushes": [{"t0_s": float(t0), "duration_s": float(d),
                        "force_n": [float(v) for v in vec]} for t0, d, vec in plan.pushes],
            **({"push_end_s": float(plan.push_end_t)} if np.isfinite(plan.push_end_t) else {}),
            "degraded_joints": [tm.joint_names[j] for j in np.flatnonzero(deg)]
            if deg is not None else [],
            "condition_per_joint": [int(x) for x in (deg if deg is not None
                                                     else np.zeros(tm.n, bool))],
            "hidden": {"servo": job.params.to_labels(), "bus": job.bus.to_labels()},
            "firmware": {"kp": float(job.params.kp[0, 0]), "kd": float(job.params.kd[0, 0])},
        }
        name = episode_name(row)
        trajs.append(to_trajectory(rec, spec, cfg.sim.nonideal, tm.joint_names, name, labels,
                                   deg, current_noise_lsb=cfg.sim.current_noise_lsb,
                                   rng=job.rng))
    return trajs


def _worker(args):
    cfg, rows = args
    return run_chunk(cfg, rows)


class EpisodeSpool:
    """Finished episodes of one generation kept on disk as they arrive (one file each,
    written atomically), so that a run that fails part-way (a dead worker, a lost cluster)
    loses none of them and a rerun with the same settings generates only the rest.

    The folder records the settings it belongs to (``cfg`` but its worker count, which does
    not change a byte); episodes of other settings found there are dropped."""

    def __init__(self, folder: str | os.PathLike, cfg: GenerateConfig) -> None:
        self.folder = Path(folder)
        self.key = repr(dataclasses.replace(cfg, workers=1))

    def load(self) -> dict[int, Trajectory]:
        """The episodes kept for these settings, by episode index (none where the folder
        is absent or holds another generation's)."""
        key = self.folder / "settings.txt"
        try:
            same = key.read_text() == self.key
        except OSError:
            same = False
        if not same:
            if self.folder.is_dir():
                shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True, exist_ok=True)
            write_text(key, self.key)
            return {}
        out: dict[int, Trajectory] = {}
        for p in sorted(self.folder.glob("episode_*.pkl")):
            try:
                i = int(p.stem.removeprefix("episode_"))
                with open(p, "rb") as f:
                    out[i] = pickle.load(f)
            except (OSError, ValueError, EOFError, pickle.UnpicklingError):
                continue  # unreadable: generated again
        return out

    def add(self, trajs: Sequence[Trajectory]) -> None:
        for tr in trajs:
            i = int(tr.meta.labels["index"])
            with atomic_path(self.folder / f"episode_{i:06d}.pkl") as tmp:
                with open(tmp, "wb") as f:
                    pickle.dump(tr, f, protocol=pickle.HIGHEST_PROTOCOL)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _batches(rows: list, size: int) -> list[list]:
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def generate(cfg: GenerateConfig, on_chunk: Callable[[int], None] | None = None, *,
             ray: str | None = None, spool: EpisodeSpool | None = None,
             ray_retries: int = 2) -> list[Trajectory]:
    """All episodes of ``cfg`` (ordered by episode index); ``on_chunk(n_done)`` reports.

    ray: a Ray cluster's address ('auto', 'local' or HOST:PORT, :func:`neuract.scale.ray.
    connect`): the episodes run there as tasks of episode batches, at most ``cfg.workers``
    at a time, each retried ``ray_retries`` times when its worker dies. spool: where finished
    episodes are kept as they arrive (:class:`EpisodeSpool`); the episodes it already holds
    are not generated again. Neither changes a byte of the result."""
    cfg.validate()
    rows = episode_table(cfg)
    kept = spool.load() if spool is not None else {}
    out: list[Trajectory] = [kept[r[0]] for r in rows if r[0] in kept]
    rows = [r for r in rows if r[0] not in kept]
    if on_chunk and out:
        on_chunk(len(out))

    def take(res: list[Trajectory]) -> None:
        if spool is not None:
            spool.add(res)
        out.extend(res)
        if on_chunk:
            on_chunk(len(res))

    size = cfg.sim.n_envs
    if not rows:
        pass
    elif ray is not None:
        from neuract.scale import ray as scale_ray

        # as many batches as workers at least (lockstep batches no larger than --n-envs)
        size = max(1, min(size, math.ceil(len(rows) / cfg.workers)))
        owned = scale_ray.connect(ray, cfg.workers)
        try:
            for _, res in scale_ray.run_batches(run_chunk, [(cfg, ch) for ch in
                                                            _batches(rows, size)],
                                                in_flight=cfg.workers, retries=ray_retries):
                take(res)
        finally:
            if owned:
                scale_ray.shutdown()
    elif cfg.workers <= 1 or len(rows) <= size:
        for ch in _batches(rows, size):
            take(run_chunk(cfg, ch))
    else:
        chunks = _batches(rows, size)
        ctx = mp.get_context("spawn")
        with ctx.Pool(min(cfg.workers, len(chunks))) as pool:
            for res in pool.imap_unordered(_worker, [(cfg, ch) for ch in chunks]):
                take(res)
    out.sort(key=lambda tr: tr.meta.labels["index"])
    return out
