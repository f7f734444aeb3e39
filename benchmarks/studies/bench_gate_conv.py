"""The recurrent contact gate with a causal convolution front, against the plain GRU gate, on
the twin benchmark's runs (seed 0) and the gate-seeds benchmark's (other data seeds).

Only each run's recurrent gate is trained again, now with ``common.GATE_CONV`` causal dilated
convolutions before the GRU (``NeuralActuatorConfig.gate_conv``; a receptive field of 127
samples, about 2 s at 60 Hz); everything else as in the run (``common.retrain_seed``).

Run: ``.venv/bin/python benchmarks/studies/bench_gate_conv.py [--seeds 0 7]`` (all five seeds by
default; about 1.5-2 h per seed on this 2-core machine: some 30 min for the data and the
extra units' rows, the rest the gate's 4000 steps; seeds can run in separate processes), or
``--summarize`` alone. The retrained checkpoint goes to ``runs/bench_gate_conv_seed<s>/``;
writes ``benchmarks/results/gate_conv/seed_<s>.json`` and
``benchmarks/results/gate_conv.{json,md}``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

from common import GATE_CONV_VARIANT, retrain_main  # noqa: E402

VARIANT = GATE_CONV_VARIANT
"""the gate change (``common.GATE_CONV_VARIANT``: ``common.GATE_CONV``)"""

if __name__ == "__main__":
    sys.exit(retrain_main(VARIANT, sys.argv[1:]))
