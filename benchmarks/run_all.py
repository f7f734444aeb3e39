"""Run every ``benchmarks/bench_*.py`` script in turn (``make bench``); with ``--studies``, the
studies in ``benchmarks/studies/bench_*.py`` after them.

Each script writes its own ``benchmarks/results/<name>.json`` and a Markdown twin. The scripts
that read another benchmark's trained run (:data:`READS_RUNS`) go last in their group, in that
order; the others in name order. ``--list`` prints the run order without running anything.

    python benchmarks/run_all.py [--studies] [--list]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STUDIES = HERE / "studies"
READS_RUNS = ("bench_int8_accuracy",
              "bench_gate_long_episodes", "bench_gate_stiction", "bench_gate_worn_motor",
              "bench_gate_seed_mix", "bench_gate_ambiguity", "bench_gate_conv", "bench_gate_lag",
              "bench_gate_decide", "bench_gate_fresh_test")
"""scripts that read the checkpoints of ``bench_neuralactuator_twin.py`` (the first; the
studies after it, some also ``bench_neuralactuator_twin_gate_seeds.py``'s;
``bench_gate_decide`` reads ``bench_gate_lag``'s)"""


def order(scripts: list[Path]) -> list[Path]:
    """``scripts`` in run order: the user-facing benchmarks, then the studies; within each,
    name order, those of :data:`READS_RUNS` last."""
    last = {n: k for k, n in enumerate(READS_RUNS)}
    return sorted(scripts, key=lambda p: (p.parent == STUDIES, p.stem in last,
                                          last.get(p.stem, 0), p.name))


def scripts(studies: bool = False) -> list[Path]:
    """The scripts ``run_all`` runs, in order (the studies too with ``studies``)."""
    found = list(HERE.glob("bench_*.py"))
    if studies:
        found += STUDIES.glob("bench_*.py")
    return order(found)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", action="store_true",
                    help="also run the studies in benchmarks/studies/ (after the benchmarks)")
    ap.add_argument("--list", action="store_true", help="print the run order and stop")
    args = ap.parse_args(argv)
    todo = scripts(args.studies)
    if args.list:
        print("\n".join(str(p.relative_to(HERE.parent)) for p in todo))
        return 0
    failed = []
    for script in todo:
        print(f"== {script.relative_to(HERE.parent)}", flush=True)
        rc = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
