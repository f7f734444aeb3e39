"""The fixed-lag recurrent contact gate against the run's causal gate, on the twin
benchmark's runs (seed 0) and the gate-seeds benchmark's (other data seeds).

Only each run's recurrent gate is trained again, now as a fixed-lag gate
(``NeuralActuatorConfig.gate_lag`` = ``common.GATE_LAG`` samples, 0.17 s at 60 Hz): it decides each
sample after reading LAG samples more, so its detection latency includes the wait (the
table's latency columns). Everything else as in the run (``common.retrain_seed``).

Run: ``.venv/bin/python benchmarks/studies/bench_gate_lag.py [--seeds 0 7]`` (all five seeds by
default; about 1-1.5 h per seed on this 2-core machine: some 30 min for the data and the
extra units' rows, the rest the gate's 4000 steps; seeds can run in separate processes), or
``--summarize`` alone. The retrained checkpoint goes to ``runs/bench_gate_lag_seed<s>/``;
writes ``benchmarks/results/gate_lag/seed_<s>.json`` and
``benchmarks/results/gate_lag.{json,md}``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

from common import GATE_LAG_VARIANT, retrain_main  # noqa: E402

VARIANT = GATE_LAG_VARIANT
"""the gate change (``common.GATE_LAG_VARIANT``: ``common.GATE_LAG``)"""

if __name__ == "__main__":
    sys.exit(retrain_main(VARIANT, sys.argv[1:]))
