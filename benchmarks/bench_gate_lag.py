"""The fixed-lag recurrent contact gate against the run's causal gate, on the twin
benchmark's runs (seed 0) and the gate-seeds benchmark's (other data seeds).

Only each run's recurrent gate is trained again, now as a fixed-lag gate
(``NeuralActuatorConfig.gate_lag`` = :data:`LAG` samples, 0.17 s at 60 Hz): it decides each
sample after reading LAG samples more, so its detection latency includes the wait (the
table's latency columns). Everything else as in the run (:mod:`gate_retrain`).

Run: ``.venv/bin/python benchmarks/bench_gate_lag.py [--seeds 0 7]`` (all five seeds by
default; about 1-1.5 h per seed on this 2-core machine: some 30 min for the data and the
extra units' rows, the rest the gate's 4000 steps; seeds can run in separate processes), or
``--summarize`` alone. The retrained checkpoint goes to ``runs/bench_gate_lag_seed<s>/``;
writes ``benchmarks/results/gate_lag/seed_<s>.json`` and
``benchmarks/results/gate_lag.{json,md}``.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

from gate_retrain import Variant, main  # noqa: E402

LAG = 10
"""samples the gate reads after each sample before deciding it (chosen before the five-seed
runs, from a scratch probe on seeds 7 and 31: lags 6-30 gained there, 10 at a fifth of
30's wait)"""
VARIANT = Variant(
    "gate_lag", {"gate_lag": LAG}, f"fixed lag {LAG}",
    "The fixed-lag recurrent gate against the run's causal gate",
    f"a fixed-lag gate that decides each sample after reading {LAG} samples more "
    f"(one logit per lag 0-{LAG}, the decision from lag {LAG}); its latency includes "
    "the wait.")

if __name__ == "__main__":
    sys.exit(main(VARIANT, sys.argv[1:]))
