"""Roll out one command sequence in the SO-101 environment with each kind of actuator and
plot the joints side by side. Trains nothing.

    python examples/compare_actuators.py [--fit runs/fit] \\
        [--neuralactuator runs/demo/checkpoints/neuralactuator_simulator] [--out compare.png]

Kinds: MuJoCo's position servo of the shipped model; a parametric STS3215 servo (a
``neuract fit`` output with ``--fit``, else the servo family with its datasheet constants);
a simulator-mode NeuralActuator checkpoint (``--neuralactuator``; by default the one
``make demo`` trains, skipped if absent); and the twin's hidden servos of unit 0, the "real
robot" the others are compared with. The commands are the Track task's reference of one
episode, sent open loop: every kind gets the same goals.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

from neuract.actuators import ActuatorConfig, build_actuator
from neuract.envs import ArmEnv
from neuract.sim.simulate import JointParams

DEMO_NA = Path("runs/demo/checkpoints/neuralactuator_simulator")


def rollout(actuator, goals: np.ndarray, episode_s: float) -> np.ndarray:
    """Joint positions (T, n) [rad] read after each goal."""
    env = ArmEnv("so101", "free", actuator=actuator, episode_s=episode_s, seed=0)
    obs, _ = env.reset(options={"episode": 0})
    q = [obs[env.obs_layout["q"]]]
    for g in goals[:-1]:
        obs, *_ = env.step(g)
        q.append(obs[env.obs_layout["q"]])
    return np.array(q)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", type=Path, help="a neuract fit output directory (SO-101)")
    ap.add_argument("--neuralactuator", type=Path, default=DEMO_NA,
                    help="a simulator-mode NeuralActuator checkpoint directory")
    ap.add_argument("--episode-s", type=float, default=6.0)
    ap.add_argument("--out", type=Path, default=Path("compare_actuators.png"))
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)

    ref_env = ArmEnv("so101", "free", actuator="mujoco", episode_s=args.episode_s, seed=0)
    ref_env.reset(options={"episode": 0})
    goals = ref_env.backend.ref[0][1:ref_env.backend.n_steps + 2]
    datasheet = build_actuator(ActuatorConfig(type="sts3215", friction="stribeck"), 6)
    kinds = {"twin unit 0 (the robot)": "twin:0", "MuJoCo position servo": "mujoco",
             "parametric servo": str(args.fit) if args.fit else (datasheet.double(),
                                                                 JointParams(6).double())}
    if args.neuralactuator.is_dir():
        kinds["NeuralActuator"] = str(args.neuralactuator)
    else:
        print(f"no NeuralActuator checkpoint at {args.neuralactuator} (make demo trains one); "
              "skipped")
    runs = {name: rollout(act, goals, args.episode_s) for name, act in kinds.items()}
    robot = runs["twin unit 0 (the robot)"]
    for name, q in runs.items():
        n = min(len(q), len(robot))
        print(f"{name:28s} mean |q - robot| = {np.degrees(np.abs(q[:n] - robot[:n])).mean():.2f}"
              " deg")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return 0
    joints = ref_env.joint_names[:3]
    fig, axes = plt.subplots(1, len(joints), figsize=(5 * len(joints), 3.5), sharex=True)
    for j, ax in enumerate(axes):
        ax.plot(np.arange(len(goals)) / 62.0, np.degrees(goals[:, j]), "k:", label="goal")
        for name, q in runs.items():
            ax.plot(np.arange(len(q)) / 62.0, np.degrees(q[:, j]), label=name)
        ax.set_title(joints[j])
        ax.set_xlabel("t [s]")
    axes[0].set_ylabel("position [deg]")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
