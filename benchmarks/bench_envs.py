"""Speed of the Gymnasium environments (neuract.envs) against their peers, in one run.

1. Single SO-101 environment, one step = one telemetry period (62 Hz, 8 physics steps):
   MuJoCo's own position servo of the shipped model (``actuator="mujoco"``) against a
   parametric neuract servo (STS3215 with Stribeck friction, the family ``neuract fit``
   identifies; its values do not change its cost) on MuJoCo's dynamics.
   ``parametric_vs_mujoco_ratio`` = parametric steps/s / MuJoCo steps/s (target >= 0.5).
2. A simulator-mode NeuralActuator (the default size, the PD prior) as the actuator: single
   environment steps/s (target >= 2,000), and 256 environments in one ``ArmVectorEnv``
   (env steps/s summed over rows) against the network's own batched throughput on the same
   256 windows (samples/s of the forward pass alone; target: the environment within 1.5x).

Environments are stepped directly (``ArmEnv`` / ``ArmVectorEnv``, no Gymnasium wrappers)
following their task's reference; torch runs with 1 thread; the backends alternate round by
round and each figure is the median over rounds. Other keys of ``envs.json`` (the MJCF
export's gap, written by ``bench_mjcf_export.py``) are kept.

    python benchmarks/bench_envs.py [--rounds 5] [--steps 150]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

import torch

from common import cpu_name, write_result  # noqa: E402  (benchmarks/ is on sys.path)
from neuract.actuators import ActuatorConfig, build_actuator
from neuract.atomic import write_text
from neuract.envs import ArmEnv, ArmVectorEnv
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
from neuract.neuralactuator.actuator import TransformerActuator
from neuract.neuralactuator.features import assemble
from neuract.sim.simulate import JointParams

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"parametric_vs_mujoco_ratio": 0.5, "neuralactuator_single_steps_per_s": 2000.0,
           "batched_env_cost_vs_network": 1.5}


def _servo():
    act = build_actuator(ActuatorConfig(type="sts3215", friction="stribeck"), 6)
    return act.double(), JointParams(6).double()


def _neural() -> TransformerActuator:
    torch.manual_seed(0)
    return TransformerActuator(NeuralActuator(NeuralActuatorConfig(mode="simulator",
                                                                   n_joints=6)))


def _single_rate(env: ArmEnv, steps: int) -> float:
    """Env steps/s over ``steps`` steps following the reference (resets when it ends)."""
    obs, _ = env.reset(seed=0)
    tgt = env.obs_layout["target"]
    t0 = time.perf_counter()
    for _ in range(steps):
        obs, _, _, trunc, _ = env.step(obs[tgt])
        if trunc:
            obs, _ = env.reset()
    return steps / (time.perf_counter() - t0)


def _vector_rate(vec: ArmVectorEnv, steps: int) -> float:
    obs, _ = vec.reset(seed=0)
    tgt = vec.obs_layout["target"]
    t0 = time.perf_counter()
    for _ in range(steps):
        obs, *_ = vec.step(obs[:, tgt])
    return steps * vec.num_envs / (time.perf_counter() - t0)


def _network_rate(act: TransformerActuator, batch: int, calls: int) -> float:
    """Samples/s of the network's forward pass on ``batch`` windows (what the actuator runs
    once per control step)."""
    m = act.model
    g = torch.Generator().manual_seed(0)
    shape = (batch, m.cfg.history, m.cfg.n_joints)
    parts = {k: 0.1 * torch.randn(shape, generator=g) for k in ("q_goal", "q", "qd")}
    x = assemble(parts, m.cfg.channels)
    with torch.no_grad():
        m.heads(x)
        t0 = time.perf_counter()
        for _ in range(calls):
            m.heads(x)
    return calls * batch / (time.perf_counter() - t0)


def measure(rounds: int, steps: int, batch: int) -> dict:
    mj = ArmEnv("so101", "free", actuator="mujoco")
    par = ArmEnv("so101", "free", actuator=_servo())
    na_act = _neural()
    na = ArmEnv("so101", "free", actuator=(na_act, na_act.joints))
    vec_act = _neural()
    vec = ArmVectorEnv(batch, "so101", "free", actuator=(vec_act, vec_act.joints))
    runs: dict[str, list[float]] = {k: [] for k in (
        "mujoco_steps_per_s", "parametric_steps_per_s", "neuralactuator_single_steps_per_s",
        "neuralactuator_batched_steps_per_s", "network_batched_samples_per_s")}
    for r in range(rounds):
        runs["mujoco_steps_per_s"].append(_single_rate(mj, steps * 4))
        runs["parametric_steps_per_s"].append(_single_rate(par, steps))
        runs["neuralactuator_single_steps_per_s"].append(_single_rate(na, steps))
        runs["neuralactuator_batched_steps_per_s"].append(_vector_rate(vec, max(3, steps // 30)))
        runs["network_batched_samples_per_s"].append(_network_rate(vec_act, batch, 5))
        print(f"round {r + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.0f}"
                                                      for k, v in runs.items()), flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratios = [p / m for p, m in zip(runs["parametric_steps_per_s"], runs["mujoco_steps_per_s"])]
    cost = [n / e for n, e in zip(runs["network_batched_samples_per_s"],
                                  runs["neuralactuator_batched_steps_per_s"])]
    return {**med, "parametric_vs_mujoco_ratio": statistics.median(ratios),
            "batched_env_cost_vs_network": statistics.median(cost), "per_round": runs,
            "batch": batch, "substeps": par.backend.substeps}


def _markdown(res: dict) -> str:
    rows = [("MuJoCo position servo, single env", f"{res['mujoco_steps_per_s']:,.0f} steps/s",
             ""),
            ("parametric STS3215 servo, single env", f"{res['parametric_steps_per_s']:,.0f} "
             "steps/s", ""),
            ("parametric / MuJoCo", f"{res['parametric_vs_mujoco_ratio']:.3f}", ">= 0.5"),
            ("NeuralActuator, single env", f"{res['neuralactuator_single_steps_per_s']:,.0f} "
             "steps/s", ">= 2,000"),
            (f"NeuralActuator, {res['batch']} envs",
             f"{res['neuralactuator_batched_steps_per_s']:,.0f} env steps/s", ""),
            (f"network alone, batch {res['batch']}",
             f"{res['network_batched_samples_per_s']:,.0f} samples/s", ""),
            ("network throughput / env throughput", f"{res['batched_env_cost_vs_network']:.2f}x",
             "<= 1.5x")]
    lines = ["# Gymnasium environments: speed", "",
             f"Run {res['date']} on {res['machine']['cpu']} ({res['machine']['logical_cores']} "
             f"cores, load {res['machine']['load_average_at_start']}); torch 1 thread; "
             f"medians of {len(res['per_round']['mujoco_steps_per_s'])} rounds. Reproduce: "
             "`python benchmarks/bench_envs.py`.", "",
             "| what | measured | target |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=UserWarning)
    res = measure(args.rounds, args.steps, args.batch)
    res["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    res["machine"] = {"platform": platform.platform(), "cpu": cpu_name(),
                      "logical_cores": os.cpu_count(),
                      "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
                      "torch": torch.__version__}
    res["targets"] = TARGETS
    path = RESULTS / "envs.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    keep = {k: v for k, v in old.items() if k == "mjcf_export_gap_deg"}
    write_result(path, {**keep, **res}, measured=res)
    write_text(RESULTS / "envs.md", _markdown(res))
    print(_markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
