"""Run every ``benchmarks/bench_*.py`` script in turn (``make bench``).

Each script writes its own ``benchmarks/results/<name>.json`` and a Markdown twin. The scripts
that read another benchmark's trained run (:data:`READS_RUNS`) go last, in that order; the
others in name order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

READS_RUNS = ("bench_gate_long_episodes", "bench_gate_stiction", "bench_gate_worn_motor",
              "bench_int8_accuracy", "bench_gate_seed_mix", "bench_gate_ambiguity",
              "bench_gate_conv", "bench_gate_lag", "bench_gate_decide",
              "bench_gate_fresh_test")
"""scripts that read the checkpoints of ``bench_neuralactuator_twin.py`` (and, for the last
six, ``bench_neuralactuator_twin_gate_seeds.py``; ``bench_gate_decide`` reads
``bench_gate_lag``'s)"""


def order(scripts: list[Path]) -> list[Path]:
    """``scripts`` in run order: name order, those of :data:`READS_RUNS` last."""
    last = {n: k for k, n in enumerate(READS_RUNS)}
    return sorted(scripts, key=lambda p: (p.stem in last, last.get(p.stem, 0), p.name))


def main() -> int:
    here = Path(__file__).resolve().parent
    failed = []
    for script in order(list(here.glob("bench_*.py"))):
        print(f"== {script.name}", flush=True)
        rc = subprocess.call([sys.executable, str(script)], cwd=here.parent)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
