"""The recurrent contact gate with a causal convolution front, against the plain GRU gate, on
the twin benchmark's runs (seed 0) and the gate-seeds benchmark's (other data seeds).

Only each run's recurrent gate is trained again, now with :data:`CONV` causal dilated
convolutions before the GRU (``NeuralActuatorConfig.gate_conv``; a receptive field of 127
samples, about 2 s at 60 Hz); everything else as in the run (:mod:`gate_retrain`).

Run: ``.venv/bin/python benchmarks/bench_gate_conv.py [--seeds 0 7]`` (all five seeds by
default; about 1.5-2 h per seed on this 2-core machine: some 30 min for the data and the
extra units' rows, the rest the gate's 4000 steps; seeds can run in separate processes), or
``--summarize`` alone. The retrained checkpoint goes to ``runs/bench_gate_conv_seed<s>/``;
writes ``benchmarks/results/gate_conv/seed_<s>.json`` and
``benchmarks/results/gate_conv.{json,md}``.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

from gate_retrain import Variant, main  # noqa: E402

CONV = 6
"""convolution layers before the GRU (dilations 1-32; what the session-25 probe used)"""
VARIANT = Variant(
    "gate_conv", {"gate_conv": CONV}, "with convolutions",
    "The recurrent gate with a causal convolution front, against the plain GRU gate",
    f"{CONV} causal dilated convolutions (kernel 3, dilations 1-{2 ** (CONV - 1)}, "
    f"{2 ** (CONV + 1) - 1} samples of receptive field) before the same GRU.")

if __name__ == "__main__":
    sys.exit(main(VARIANT, sys.argv[1:]))
