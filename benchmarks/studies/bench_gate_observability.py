"""How much of each contact the SO-101 twin's telemetry shows at all (the gate's ceiling).

For every contact event (contact = external force >= 0.5 N, the twin benchmark's gate label)
of the twin benchmark's data (seed 0, 144 min), the episode is generated again without that
event's push or payload (same motion plan, timing and noise;
``SimConfig(external_forces_until_s=...)``) and compared register for register
(:mod:`neuract.twin.observability`). Contact samples before the first difference cannot be
told from the force-free episode by any causal estimator; the rest can in principle, however
small the difference. Also: how far the force has moved the arm at each contact sample, in
encoder steps, against the force-free episode.

Run: ``.venv/bin/python benchmarks/studies/bench_gate_observability.py`` (about 5 min on one core).
Writes ``benchmarks/results/gate_observability.{json,md}``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

from common import (  # noqa: E402
    RESULTS,
    describe_twin,
    twin_config,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402
from neuract.pipeline.splits import split_by_task  # noqa: E402
from neuract.pipeline.twin_data import generate_config, generate_twin  # noqa: E402
from neuract.twin.observability import contact_visibility  # noqa: E402


def _progress(name):
    def progress(done, total):
        if done % 20 == 0 or done == total:
            print(f"  {name}: {done}/{total} episodes", flush=True)

    return progress


def _row(name: str, r: dict) -> list:
    d = r["deflection_steps"]
    return [name, r["events"], r["events_hidden"], r["contact_samples"],
            f"{100 * (1 - r['visible_share']):.2f} %", f"{r['f1_ceiling']:.4f}",
            _ms(r["onset_delay_s"]["median"]), _ms(r["onset_delay_s"]["p90"]),
            f"{100 * d['0']:.1f} %", f"{100 * d['1']:.1f} %",
            f"{100 * (d['0'] + d['1'] + d['2-3']):.1f} %"]


def _ms(v):
    return "—" if v is None else f"{1000 * v:.0f} ms"


def main() -> int:
    t0 = time.time()
    data = twin_config().data
    gen = generate_config(data)
    trajs = generate_twin(data)
    _, test = split_by_task(trajs, data.test_fraction)
    thr = data.contact_min_force_n
    res = {"test": contact_visibility(gen, test, thr, _progress("test split")),
           "all": contact_visibility(gen, trajs, thr, _progress("all episodes"))}
    out = {"dataset": describe_twin(twin_config())["dataset"],
           "contact_label": f"contact = external force >= {thr:g} N",
           "n_test_episodes": len(test), "n_episodes": len(trajs), **res,
           "seconds": round(time.time() - t0, 1)}
    write_result(RESULTS / "gate_observability.json", out)
    head = ["episodes", "events", "events hidden whole", "contact samples",
            "hidden samples", "gate F1 ceiling", "onset delay median", "onset delay p90",
            "deflection 0 steps", "1 step", "<= 3 steps"]
    rows = [_row(f"twin benchmark test split ({len(test)})", res["test"]),
            _row(f"all {len(trajs)} episodes", res["all"])]
    tasks = [[f"all, task {k}", v["events"], v["events_hidden"], v["contact_samples"],
              f"{100 * (1 - v['visible_share']):.2f} %", "", "", "", "", "", ""]
             for k, v in res["all"]["per_task"].items()]
    md = ("# What the SO-101 twin's telemetry shows of each contact (gate ceiling)\n\n"
          f"Dataset: {out['dataset']}; {out['contact_label']} (the twin benchmark's gate "
          "label). Every contact event is compared with the same episode generated without "
          "its push or payload (same plan, timing and noise). *Hidden*: contact samples before "
          "the first telemetry register that differs (no causal estimator can report them "
          "without also reporting contact on the force-free episode). *Gate F1 ceiling*: "
          "2R/(1+R), R the visible share, every other sample right; every sample after the "
          "first difference counts as visible, so this is an upper bound. *Onset delay*: "
          "from the event's first contact sample to the first difference, over events whose "
          "start is hidden. *Deflection*: at each contact sample, the largest joint position "
          "difference from the force-free episode in encoder steps (0.088 deg): how far the "
          "force has moved the arm. Reproduce: "
          "`.venv/bin/python benchmarks/studies/bench_gate_observability.py`.\n\n"
          + markdown_table(head, rows + tasks) + "\n")
    write_text(RESULTS / "gate_observability.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
