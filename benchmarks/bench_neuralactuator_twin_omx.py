"""NeuralActuator on the OpenManipulator-X twin, against every baseline, in one run.

The twin benchmark's pipeline on the second robot: OpenManipulator-X (4 arm joints, XM430
servos at their default position gains, current telemetry at ~58.8 Hz), ``MINUTES`` of twin
data from 4 units, all five tasks, 5 % of each task's episodes held out. The configuration is
the SO-101 benchmark's (servo prior, physics and context channels, labelled-head windows,
held-out calibration) with fewer estimator steps (``EST_STEPS``) for a shorter run; nothing
was tuned for this robot.

Writes ``benchmarks/results/neuralactuator_twin_omx.{json,md}``; the run (report.html,
checkpoints) under ``runs/bench_neuralactuator_twin_omx``.
Run: ``.venv/bin/python benchmarks/bench_neuralactuator_twin_omx.py`` (about 45 min on a
shared 2-core machine, most of it the recurrent gate: its extra episodes and training).
"""

from __future__ import annotations

import dataclasses
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    ROOT,
    describe_twin,
    progress_printer,
    twin_config,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.pipeline.report import public, summary_markdown  # noqa: E402
from neuract.pipeline.twin_experiment import run_twin_experiment  # noqa: E402

MINUTES = 72.0
EST_STEPS = 1500
REFERENCE_STEPS = 0
"""servo-reference channels: none. An earlier run of this benchmark (gate head) with
400-sample segments (as the SO-101 twin benchmark) gave torque 2.02x, force 0.163 N, gate F1
0.911 and condition 91.3 % (balanced 52.2 %), against 2.13x / 0.159 N / 0.932 / 90.8 %
(62.8 %) without them"""


def main() -> int:
    torch.set_num_threads(1)
    cfg = twin_config()
    cfg = dataclasses.replace(
        cfg, out=ROOT / "runs" / "bench_neuralactuator_twin_omx",
        # (no extra worn-motor push episodes: measured without them)
        data=dataclasses.replace(cfg.data, robot="omx", minutes=MINUTES, worn_train_minutes=0.0),
        experiment=dataclasses.replace(cfg.experiment, est_steps=EST_STEPS,
                                       reference_steps=REFERENCE_STEPS))
    res = run_twin_experiment(cfg, progress_printer())
    out = public(res)
    out["benchmark"] = describe_twin(cfg)
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_result(RESULTS / "neuralactuator_twin_omx.json", out)
    b = out["benchmark"]
    pre = (f"Dataset: {b['dataset']}. Split: {b['split']}. Machine: {b['machine']}. The SO-101 "
           f"twin benchmark's configuration with {EST_STEPS} estimator steps; contact = "
           "external force >= 0.5 N. Full report: runs/bench_neuralactuator_twin_omx/"
           "report.html. Reproduce: `.venv/bin/python "
           "benchmarks/bench_neuralactuator_twin_omx.py`.")
    md = summary_markdown(out, "NeuralActuator on the OpenManipulator-X twin", pre)
    write_text(RESULTS / "neuralactuator_twin_omx.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
