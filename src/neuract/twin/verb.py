"""``neuract twin``: simulate servo arms with hidden actuator physics and write a dataset.

    neuract twin --robot so101 --tasks free lift pick push degraded --minutes 10 \
        --units 4 --seed 0 --out runs/twin_so101
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from neuract.atomic import check_dest
from neuract.data.dataset import DATASET_DEST
from neuract.twin.tasks import TASKS


@dataclass
class TwinConfig:
    """Generate a digital-twin dataset (telemetry + hidden ground truth) for SO-101 or OMX."""

    out: Path
    """output dataset directory (parquet per episode + meta/)"""
    robot: str = "so101"
    """so101 (STS3215, ~62 Hz) or omx (XM430, ~58.8 Hz)"""
    tasks: tuple[str, ...] = TASKS
    """tasks to cycle through: free lift pick push degraded"""
    minutes: float = 2.0
    """total telemetry minutes to generate, in whole episodes of --episode-s (rounded up);
    less than one episode is refused, and so is more than fits in this machine's available
    memory (every episode is held until the dataset is written: about 5 MB per minute)"""
    units: int = 2
    """number of simulated physical arms (hidden parameters differ per unit)"""
    seed: int = 0
    """random seed (an integer >= 0); the same seed gives the same bytes"""
    workers: int = 1
    """parallel processes, or with --ray the episode batches running at once on the cluster
    (results do not depend on it)"""
    ray: str | None = None
    """run the episodes on a Ray cluster (pip install 'neuract[scale]'): auto (the cluster
    `ray start --head` runs on this machine), local (one started for this run with --workers
    CPUs) or HOST:PORT of a running head; the dataset's bytes are the same as without it.
    Finished episodes are kept beside --out until the dataset is written: a run stopped by a
    dead worker or a lost cluster is completed by running it again"""
    episode_s: float = 30.0
    """episode length [s] (>= 1)"""
    n_envs: int = 32
    """episodes stepped in lockstep per process"""
    physics_hz: float = 500.0
    """MuJoCo physics rate [Hz] (>= 500)"""
    current_noise_lsb: float = 0.0
    """std of the current register's reading noise [register LSBs] (>= 0; 0: none, as in
    every benchmark here); 0.7 (SO-101) and 0.3 (OMX) bring the share of rest samples whose
    register changes near the NAD files' (benchmarks/results/twin_current_noise.md)"""
    overwrite: bool = False
    """replace an existing output directory"""


def run(cfg: TwinConfig) -> None:
    from rich.console import Console

    from neuract.data.dataset import write_dataset
    from neuract.errors import ClusterError
    from neuract.progress import reporter
    from neuract.twin.config import SimConfig
    from neuract.twin.generate import EpisodeSpool, GenerateConfig, generate

    gen = GenerateConfig(robot=cfg.robot, tasks=tuple(cfg.tasks), minutes=cfg.minutes,
                         units=cfg.units, seed=cfg.seed, workers=cfg.workers,
                         sim=SimConfig(physics_hz=cfg.physics_hz, episode_s=cfg.episode_s,
                                       n_envs=cfg.n_envs,
                                       current_noise_lsb=cfg.current_noise_lsb))
    gen.validate()
    check_dest(cfg.out, cfg.overwrite, **DATASET_DEST)  # before generating
    console = Console(stderr=True)
    n = gen.n_episodes()
    t0 = time.perf_counter()
    stage, done = f"twin {cfg.robot} (episodes)", [0]

    def advance(k: int) -> None:
        done[0] += k
        progress(stage, done[0], n)

    out = Path(cfg.out)
    owned = False
    if cfg.ray is not None:  # an unreachable cluster is refused before anything is written
        from neuract.scale import ray as scale_ray

        owned = scale_ray.connect(cfg.ray, cfg.workers)
    spool = EpisodeSpool(out.parent / f".{out.name}.partial", gen)
    try:
        with reporter() as progress:
            progress(stage, 0, n)
            trajs = generate(gen, on_chunk=advance, ray=cfg.ray, spool=spool)
    except ClusterError as exc:
        raise ClusterError(f"{exc}; {done[0]} of {n} episodes are kept in "
                           f"{str(spool.folder)!r}: run the same command again to generate "
                           "the rest") from None
    finally:
        if owned:
            scale_ray.shutdown()
    wall = time.perf_counter() - t0
    out = write_dataset(trajs, cfg.out, overwrite=cfg.overwrite,
                        config=dataclasses.replace(cfg, out=Path(cfg.out)))
    spool.remove()
    seconds = sum(tr.duration for tr in trajs)
    console.print(f"wrote {len(trajs)} episodes ({seconds / 60:.1f} min of telemetry) to {out} "
                  f"in {wall:.1f} s ({seconds / max(wall, 1e-9):.0f}x real time, "
                  f"{cfg.workers} worker(s){' on Ray' if cfg.ray else ''})")
