"""The gate of a finished twin benchmark run with one plain threshold, beside its gate filter.

For runs made before ``run_experiment`` recorded it: loads the run's estimator checkpoint and
config, regenerates its twin data and split, calibrates one plain contact threshold on the
same calibration episodes the gate filter was chosen on, scores the test episodes with it and
writes the figures into the benchmark's results file (``gate_plain``; the same model, so the
difference is the filter's alone).

Run: ``.venv/bin/python benchmarks/studies/gate_plain.py runs/bench_neuralactuator_twin
benchmarks/results/neuralactuator_twin.json`` (about a minute).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

import torch  # noqa: E402

from neuract.atomic import write_json  # noqa: E402
from neuract.config import load_resolved  # noqa: E402
from neuract.estimate import calibrate_gate  # noqa: E402
from neuract.pipeline.checkpoints import load_model  # noqa: E402
from neuract.pipeline.scoring import plain_gate
from neuract.pipeline.splits import calibration_set, calibration_split, has_contact
from neuract.pipeline.twin_data import contact_labelled, twin_split  # noqa: E402
from neuract.pipeline.twin_experiment import TwinExperimentConfig  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: gate_plain.py RUN_DIR RESULTS_JSON")
        return 2
    torch.set_num_threads(1)
    run, results = Path(argv[0]), Path(argv[1])
    cfg = load_resolved(TwinExperimentConfig, run / "config.json")
    model = load_model(run / "checkpoints" / "neuralactuator_estimator")
    train, test, _ = twin_split(cfg.data)  # as run_twin_experiment: with any extras
    train = contact_labelled(train, cfg.data.contact_min_force_n)
    test = contact_labelled(test, cfg.data.contact_min_force_n)
    out = json.loads(results.read_text())
    if out["data"]["test_episodes"] != [tr.meta.name for tr in test]:
        print(f"{results}: its test episodes are not this run's; not written")
        return 2
    _, calib = calibration_split(train, cfg.experiment.calibration_fraction)
    g_eps = calibration_set(calib, train, has_contact)
    if g_eps is None:
        print("no calibration episodes with both classes: nothing to compare")
        return 2
    out["gate_plain"] = plain_gate(model, test, calibrate_gate(model, g_eps))
    write_json(results, out)
    print(json.dumps(out["gate_plain"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
