"""System identification inside the RL loop (issue 43 part B): does identifying the servo
from the robot's own telemetry close the sim-to-real gap of a PPO policy?

Task: point-to-point on the SO-101 (``free`` task's reference held for 1 s: a step to a new
goal each second), action = a bounded residual on the reference goal at the telemetry rate,
reward = tracking error + a small effort term (:mod:`neuract.policy.rl`). Policies:

(i) PPO in MuJoCo with the shipped model's position servo;
(ii) the loop (:mod:`neuract.policy.sysid_loop`): (i) deployed on the twin's training units,
     telemetry recorded, a parametric STS3215 servo identified pose-only with
     ``neuract.fit.identify``, PPO continued in the identified simulator, K iterations;
     side by side, the neural loop: the same, plus a simulator-mode NeuralActuator trained
     pose-only on the recordings with that servo as its frozen prior, PPO continued in the
     network's simulator;
(iii) oracle: PPO on the training units' hidden servos, the budget of (i) + (ii).

All are evaluated on unseen twin units: tracking RMS [mrad], final-position drift [mrad],
overshoot [%], settle time [s] per policy and iteration; ``gap_closed`` = the fraction of the
(i) -> (iii) RMS gap the loop's last iteration closes (target >= 0.75), for each loop.

Run: ``.venv/bin/python benchmarks/bench_rl_sysid_loop.py`` (the parametric loop alone took
26 minutes on a shared 2-core machine; with the neural loop about 45-60) or ``--quick`` (a
tiny loop, a minute or two: checks the machinery, its numbers mean nothing);
``--identifications parametric`` runs one loop. Writes ``benchmarks/results/rl_sysid_loop.json``
and ``.md`` (``--quick``: ``rl_sysid_loop_quick.*``).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

os.environ.setdefault("OMP_NUM_THREADS", "1")

from common import (  # noqa: E402  (benchmarks/ is on sys.path as a script)
    RESULTS,
    machine,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.policy.rl import PPOConfig  # noqa: E402
from neuract.policy.sysid_loop import LoopConfig, quick_config, run_experiment  # noqa: E402

KEYS = ("tracking_rms_mrad", "drift_mrad", "overshoot_pct", "settle_s")


def full_config(seed: int, iterations: int, kinds: tuple[str, ...]) -> LoopConfig:
    """The full experiment's sizes (PPO with 8 rows, 4 training and 4 unseen units)."""
    return LoopConfig(train_units=(0, 1, 2, 3), eval_units=(8, 9, 10, 11), identifications=kinds,
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
    kinds = list(res["gap_closed"])
    for kind in kinds:
        for it in res[f"loop_{kind}"]:
            lines.append(_row(f"(ii) loop, {kind}, iteration {it['iteration']}", it))
    lines += [_row("(iii) oracle (true servo)", res["oracle"]), ""]
    for kind in kinds:
        lines.append(f"gap closed ({kind}, last iteration): {res['gap_closed'][kind]:.3f} "
                     "(target >= 0.75)")
    lines += ["", res["neural_adds"], "", f"Wall time: {res['wall_s']:.0f} s on "
              f"{res['machine']}.", ""]
    return "\n".join(lines)


def neural_adds(res: dict) -> str:
    """Whether the NeuralActuator loop's last iteration tracks better than the parametric's."""
    g = res["gap_closed"]
    if "neural" not in g or "parametric" not in g:
        return "NeuralActuator identification: not run in this benchmark run."
    p, n = (res["tracking_rms_mrad"][f"loop_{k}"][-1] for k in ("parametric", "neural"))
    verdict = "adds" if n < p else "does not add"
    return (f"The NeuralActuator {verdict} over the parametric servo here: last iteration "
            f"{n:.2f} against {p:.2f} mrad (gap closed {g['neural']:.3f} against "
            f"{g['parametric']:.3f}).")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tiny loop (machinery check)")
    ap.add_argument("--iterations", type=int, default=3, help="K loop iterations")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--identifications", default="parametric,neural",
                    help="comma-separated loops: parametric, neural")
    args = ap.parse_args(argv)
    kinds = tuple(k.strip() for k in args.identifications.split(",") if k.strip())
    cfg = (replace(quick_config(args.seed), identifications=kinds) if args.quick
           else full_config(args.seed, args.iterations, kinds))
    t0 = time.perf_counter()
    res = run_experiment(cfg)
    res["wall_s"] = time.perf_counter() - t0
    res["quick"] = bool(args.quick)
    res["machine"] = machine()
    res["neural_adds"] = neural_adds(res)
    name = "rl_sysid_loop_quick" if args.quick else "rl_sysid_loop"
    write_result(RESULTS / f"{name}.json", res)
    write_text(RESULTS / f"{name}.md", markdown(res, args.quick))
    print(f"tracking RMS [mrad]: {res['tracking_rms_mrad']}")
    print(f"gap closed: {res['gap_closed']}  ({res['wall_s']:.0f} s) -> "
          f"{RESULTS / (name + '.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
