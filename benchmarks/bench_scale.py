"""Scaling on this machine: twin generation on 1 vs 2 Ray workers, fit on 1 vs 2 torchrun
processes, in one run.

Writes ``benchmarks/results/scale.json`` and ``scale.md``:
- ``twin_speedup_2w``: wall time of ``generate`` with one Ray task at a time over that with
  two (a local Ray cluster of 2 CPUs, started once, its start not timed; 16 SO-101 episodes of
  15 s in lockstep batches of 4); ``twin_bytes_identical``: the two datasets' episode files
  and meta are byte-identical to the single-process run's;
- ``ddp_speedup_2p``: ``neuract fit``'s training time (report ``fit_seconds``) in one process
  over that under ``torchrun --nproc_per_node 2`` (gloo), on a 2-minute twin dataset, one CPU
  thread per process; ``ddp_loss_max_abs_diff``: the largest difference between the two runs'
  learning curves (float64 training loss per iteration).

The machine has 2 cores shared with other jobs (``load_average_1min_before``: the load when
the run started; above 2, the second worker has no core of its own): the ratios say what a
second worker brings here, not on a cluster.
Run: ``PYTHONPATH=src .venv/bin/python benchmarks/bench_scale.py`` (2-4 minutes).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import ray  # noqa: E402

from common import RESULTS, ROOT, machine, write_result  # noqa: E402
from neuract.atomic import write_text  # noqa: E402
from neuract.data.dataset import write_dataset  # noqa: E402
from neuract.twin.config import SimConfig  # noqa: E402
from neuract.twin.generate import GenerateConfig, generate  # noqa: E402

TWIN = dict(robot="so101", minutes=16 * 15 / 60, units=4, seed=0,
            sim=SimConfig(episode_s=15.0, n_envs=4))
FIT = ["--robot", "so101", "--train.horizons", "0.5", "1.0", "2.0", "--train.stage-iters",
       "4", "4", "4", "--train.val-every", "12", "--threads", "1"]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted((path / "data").glob("*.parquet")) + [path / "meta" / "info.json"]:
        h.update(p.read_bytes())
    return h.hexdigest()


def twin(tmp: Path) -> dict:
    ref = _digest(write_dataset(generate(GenerateConfig(**TWIN, workers=1)), tmp / "ref"))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        generate(GenerateConfig(**{**TWIN, "minutes": 0.5, "sim": SimConfig(episode_s=15.0,
                                                                              n_envs=2)},
                                workers=2), ray="local")  # warm-up: workers started, imported
        wall, same = {}, True
        for w in (1, 2):
            t0 = time.perf_counter()
            trajs = generate(GenerateConfig(**TWIN, workers=w), ray="local")
            wall[w] = time.perf_counter() - t0
            same &= _digest(write_dataset(trajs, tmp / f"ray{w}")) == ref
    finally:
        ray.shutdown()
    return {"twin_seconds_1w": wall[1], "twin_seconds_2w": wall[2],
            "twin_speedup_2w": wall[1] / wall[2], "twin_bytes_identical": bool(same)}


def _fit(cmd: list[str], out: Path, data: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run([*cmd, "fit", "--data", str(data), "--out", str(out), *FIT], check=True,
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads((out / "report.json").read_text())


def ddp(tmp: Path) -> dict:
    data = write_dataset(generate(GenerateConfig(robot="so101", minutes=2.0, units=2, seed=1,
                                                 sim=SimConfig(episode_s=10.0, n_envs=12))),
                         tmp / "fitdata")
    torchrun = Path(sys.executable).with_name("torchrun")
    one = _fit([sys.executable, "-m", "neuract"], tmp / "fit1", data)
    two = _fit([str(torchrun), "--nproc_per_node", "2", "--master_port", "29533", "-m",
                "neuract"], tmp / "fit2", data)
    a = [r["train_loss"] for r in one["learning_curve"]]
    b = [r["train_loss"] for r in two["learning_curve"]]
    assert len(a) == len(b) == 12, (len(a), len(b))
    return {"ddp_seconds_1p": one["fit_seconds"], "ddp_seconds_2p": two["fit_seconds"],
            "ddp_speedup_2p": one["fit_seconds"] / two["fit_seconds"],
            "ddp_loss_max_abs_diff": max(abs(x - y) for x, y in zip(a, b)),
            "ddp_iterations": len(a)}


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    try:
        load = os.getloadavg()[0]  # other people's jobs share the 2 cores
        res = {"machine": machine(), "cpus": os.cpu_count(), "load_average_1min_before": load,
               **twin(tmp), **ddp(tmp)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = write_result(RESULTS / "scale.json", res, script=__file__)
    md = ["# Scaling on this machine (1 vs 2 workers)", "",
          f"Machine: {res['machine']} ({res['cpus']} CPUs, shared; 1-minute load average "
          f"{res['load_average_1min_before']:.1f} when the run started). "
          "Generated by `benchmarks/bench_scale.py`.", "",
          "| what | 1 worker [s] | 2 workers [s] | speed-up | same result |",
          "| --- | --- | --- | --- | --- |",
          f"| twin on Ray (16 x 15 s SO-101 episodes) | {res['twin_seconds_1w']:.1f} | "
          f"{res['twin_seconds_2w']:.1f} | {res['twin_speedup_2w']:.2f}x | "
          f"{'byte-identical' if res['twin_bytes_identical'] else 'NO'} |",
          f"| fit under torchrun (12 iterations, gloo) | {res['ddp_seconds_1p']:.1f} | "
          f"{res['ddp_seconds_2p']:.1f} | {res['ddp_speedup_2p']:.2f}x | loss curves within "
          f"{res['ddp_loss_max_abs_diff']:.1e} |", ""]
    write_text(RESULTS / "scale.md", "\n".join(md))
    print(json.dumps({k: v for k, v in out.items() if k != "provenance"}, indent=1))


if __name__ == "__main__":
    main()
