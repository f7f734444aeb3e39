"""Twin benchmark: telemetry-seconds generated per wall-second on ONE core, and realism.

Writes ``benchmarks/results/twin.json`` and ``twin.md``:
- ``realtime_factor`` per robot: telemetry seconds / wall seconds of ``generate`` with one
  worker (one process), all five tasks, 500 Hz physics, 32 episodes in lockstep, 30 s each;
  ``cpu_realtime_factor`` uses the process CPU time instead (the machine is shared, so wall
  time includes other people's load); ``bare_mujoco_realtime_factor`` is the peer in the same
  run: MuJoCo stepping the same model with its own position actuators and no servo model,
  i.e. the ceiling the Python-side servo physics is measured against;
- ``realism``: the realism test's statistics (``neuract.twin.realism``), real NAD value, the
  four twin units and the tolerance band, per file, when ``../shared/data/nad`` is present;
  the statistics in ``realism.UNCHECKED`` are reported without a band (``band``/``ok``
  null, ``not_checked``: why).

Run: ``.venv/bin/python benchmarks/bench_twin.py`` (under a minute; 15 s on a quiet machine).
"""

from __future__ import annotations

import os
import platform
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from common import write_result  # noqa: E402  (benchmarks/ is on sys.path as a script)
from neuract.atomic import write_text  # noqa: E402
from neuract.twin.config import SimConfig  # noqa: E402
from neuract.twin.generate import GenerateConfig, generate  # noqa: E402
from neuract.twin.model import build_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
NAD = ROOT.parent / "shared" / "data" / "nad"


def speed(robot: str, n_envs: int = 32, episode_s: float = 30.0) -> dict:
    cfg = GenerateConfig(robot=robot, minutes=n_envs * episode_s / 60.0, units=4, seed=0,
                         workers=1, sim=SimConfig(episode_s=episode_s, n_envs=n_envs))
    generate(GenerateConfig(robot=robot, minutes=0.05, units=1,
                            sim=SimConfig(episode_s=3.0, n_envs=1)))  # warm-up (model build)
    w0, c0 = time.perf_counter(), time.process_time()
    trajs = generate(cfg)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    seconds = float(sum(tr.duration for tr in trajs))
    # peer: bare MuJoCo with its own position actuators, same model and rate, no servo model
    ref = build_model(robot, cfg.sim.physics_hz, position_kp=8.0)
    m = ref.model
    m.dof_armature[ref.motor_dof] = 0.027
    d = mujoco.MjData(m)
    steps = int(20.0 * cfg.sim.physics_hz)
    w1 = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(m, d)
    bare = 20.0 / (time.perf_counter() - w1)
    return {"robot": robot, "episodes": len(trajs), "telemetry_s": seconds, "wall_s": wall,
            "cpu_s": cpu, "realtime_factor": seconds / wall,
            "cpu_realtime_factor": seconds / cpu, "bare_mujoco_realtime_factor": bare,
            "ratio_to_bare_mujoco": (seconds / wall) / bare, "n_envs_lockstep": n_envs,
            "physics_hz": cfg.sim.physics_hz, "tasks": list(cfg.tasks)}


def realism_summary() -> list[dict]:
    from neuract.io.nad import find_nad_files, read_nad_csv
    from neuract.twin import realism

    out = []
    for path in find_nad_files(NAD):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            real = read_nad_csv(path)
        r = realism.stats(real)
        twins = [realism.stats(tr) for tr in realism.replay(real, n_units=4, seed=0)]
        rows = {}
        bands = realism.tolerance_bands(r)
        unchecked = [k for k in realism.UNCHECKED if k in r and any(k in t for t in twins)]
        for key in [*bands, *unchecked]:  # the unchecked ones reported beside, without a band
            vals = [t[key] for t in twins if key in t]
            med = float(np.median(vals))
            rows[key] = {"real": r[key], "twin_units": vals, "twin_median": med}
            if key in bands:
                lo, hi = bands[key]
                rows[key].update(band=[lo, hi], ok=bool(lo <= med <= hi))
            else:
                rows[key].update(band=None, ok=None, not_checked=realism.UNCHECKED[key])
        out.append({"file": str(path.relative_to(NAD)), "robot": real.meta.robot,
                    "payload_kg": real.meta.labels.get("payload_mass_kg"), "stats": rows})
    return out


def main() -> None:
    res = {"machine": f"{platform.processor() or platform.machine()}, "
                      f"{os.cpu_count()} cores (shared)",
           "speed": [speed("so101"), speed("omx")]}
    res["realtime_factor"] = {s["robot"]: s["realtime_factor"] for s in res["speed"]}
    if NAD.is_dir():
        res["realism"] = realism_summary()
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_result(RESULTS / "twin.json", res)
    lines = ["# Twin benchmark", "",
             "Telemetry-seconds generated per wall-second, one process, all five tasks, "
             "500 Hz physics, 32 episodes x 30 s in lockstep. Machine: " + res["machine"]
             + ".", "",
             "| robot | telemetry s | wall s | realtime factor | CPU-time factor | "
             "bare MuJoCo (peer) | ratio |", "|---|---|---|---|---|---|---|"]
    for s in res["speed"]:
        lines.append(f"| {s['robot']} | {s['telemetry_s']:.0f} | {s['wall_s']:.1f} | "
                     f"{s['realtime_factor']:.0f}x | {s['cpu_realtime_factor']:.0f}x | "
                     f"{s['bare_mujoco_realtime_factor']:.0f}x | "
                     f"{s['ratio_to_bare_mujoco']:.2f} |")
    if "realism" in res:
        lines += ["", "## Realism (twin replaying each real NAD file's goals, 4 units)", "",
                  "| file | statistic | real | twin units | band | ok |",
                  "|---|---|---|---|---|---|"]
        for f in res["realism"]:
            for key, row in f["stats"].items():
                units = " ".join(f"{v:.2f}" for v in row["twin_units"])
                if row["band"] is None:
                    lines.append(f"| {f['file']} | {key} | {row['real']:.2f} | {units} | "
                                 "not checked | - |")
                    continue
                lines.append(f"| {f['file']} | {key} | {row['real']:.2f} | {units} | "
                             f"[{row['band'][0]:.2f}, {row['band'][1]:.2f}] | "
                             f"{'yes' if row['ok'] else 'NO'} |")
        notes = {k: why for f in res["realism"] for k, row in f["stats"].items()
                 if (why := row.get("not_checked"))}
        lines += [""] + [f"Not checked: {k} ({why})." for k, why in notes.items()]
    write_text(RESULTS / "twin.md", "\n".join(lines) + "\n")
    print("\n".join(lines[:8 + len(res["speed"])]))


if __name__ == "__main__":
    main()
