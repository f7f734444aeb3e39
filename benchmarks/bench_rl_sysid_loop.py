"""System identification inside the RL loop (issue 43 part B): does identifying the servo
from the robot's own telemetry close the sim-to-real gap of a PPO policy?

Task: point-to-point on the SO-101 (``free`` task's reference held for 1 s: a step to a new
goal each second), action = a bounded residual on the reference goal at the telemetry rate,
reward = tracking error + a small effort term (:mod:`neuract.policy.rl`). Policies:

(i) PPO in MuJoCo with the shipped model's position servo;
(ii) the loop (:mod:`neuract.policy.sysid_loop`): (i) deployed on the twin's training units,
     telemetry recorded, a parametric STS3215 servo identified pose-only with
     ``neuract.fit.identify``, PPO continued in the identified simulator, K iterations;
(iii) oracle: PPO on the training units' hidden servos, the budget of (i) + (ii).

All are evaluated on unseen twin units: tracking RMS [mrad], final-position drift [mrad],
overshoot [%], settle time [s] per policy and iteration; ``gap_closed`` = the fraction of the
(i) -> (iii) RMS gap the loop's last iteration closes (target >= 0.75).

Run: ``.venv/bin/python benchmarks/bench_rl_sysid_loop.py`` (not yet run at this scale; from
PPO's measured 2,000 MuJoCo steps/s with 8 rows, the twin's ~1,100 and a learned servo's
~1,700 samples/s, an estimated 20-30 minutes on 2 cores) or ``--quick`` (a tiny loop,
under a minute: checks the machinery, its numbers mean nothing). Writes
``benchmarks/results/rl_sysid_loop.json`` and ``.md`` (``--quick``: ``rl_sysid_loop_quick.*``).
NeuralActuator identification is not in the loop yet (the JSON says so).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

os.environ.setdefault("OMP_NUM_THREADS", "1")

from common import RESULTS, machine  # noqa: E402  (benchmarks/ is on sys.path as a script)
from neuract.atomic import write_json, write_text  # noqa: E402
from neuract.policy.rl import PPOConfig  # noqa: E402
from neuract.policy.sysid_loop import LoopConfig, quick_config, run_experiment  # noqa: E402

KEYS = ("tracking_rms_mrad", "drift_mrad", "overshoot_pct", "settle_s")


def full_config(seed: int, iterations: int) -> LoopConfig:
    """The full experiment's sizes (PPO with 8 rows, 4 training and 4 unseen units)."""
    return LoopConfig(train_units=(0, 1, 2, 3), eval_units=(8, 9, 10, 11),
                      iterations=iterations, record_episodes=2, eval_episodes=2,
                      base_timesteps=200_000, continue_timesteps=60_000, episode_s=4.0,
                      ppo=replace(PPOConfig(), n_envs=8, n_steps=256, seed=seed), seed=seed)


def _row(name: str, m: dict) -> str:
    return f"| {name} | " + " | ".join(f"{m[k]:.3g}" for k in KEYS) + " |"


def markdown(res: dict, quick: bool) -> str:
    cfg = res["config"]
    lines = ["# System identification inside the RL loop (SO-101, point-to-point)", "",
             ("**--quick run: a machinery check, the numbers mean nothing.**\n" if quick
              else ""),
             f"Evaluated on unseen twin units {list(cfg['eval_units'])}; trained on "
             f"{list(cfg['train_units'])}.",
             "", "| policy | tracking RMS [mrad] | drift [mrad] | overshoot [%] | settle [s] |",
             "|---|---|---|---|---|", _row("reference sent (no policy)", res["reference"]),
             _row("(i) MuJoCo servo", res["mujoco"])]
    for it in res["loop_parametric"]:
        lines.append(_row(f"(ii) loop, parametric, iteration {it['iteration']}", it))
    lines += [_row("(iii) oracle (true servo)", res["oracle"]), "",
              f"gap closed (parametric, last iteration): {res['gap_closed']['parametric']:.3f} "
              "(target >= 0.75)", "", "NeuralActuator identification: not run (not "
              "implemented in the loop yet).", "", f"Wall time: {res['wall_s']:.0f} s on "
              f"{res['machine']}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tiny loop (machinery check)")
    ap.add_argument("--iterations", type=int, default=3, help="K loop iterations")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    cfg = quick_config(args.seed) if args.quick else full_config(args.seed, args.iterations)
    t0 = time.perf_counter()
    res = run_experiment(cfg)
    res["wall_s"] = time.perf_counter() - t0
    res["quick"] = bool(args.quick)
    res["machine"] = machine()
    res["gap_closed"]["neural"] = None
    res["neural_identification"] = "not implemented in the loop yet"
    name = "rl_sysid_loop_quick" if args.quick else "rl_sysid_loop"
    write_json(RESULTS / f"{name}.json", res)
    write_text(RESULTS / f"{name}.md", markdown(res, args.quick))
    print(f"tracking RMS [mrad]: {res['tracking_rms_mrad']}")
    print(f"gap closed: {res['gap_closed']}  ({res['wall_s']:.0f} s) -> "
          f"{RESULTS / (name + '.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
