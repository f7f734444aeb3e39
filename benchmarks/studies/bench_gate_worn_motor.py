"""What a worn motor does to the trained contact gate (estimator mode): a counterfactual.

Reads the twin benchmark's estimator checkpoint (``runs/bench_neuralactuator_twin``, written by
``bench_neuralactuator_twin.py``) and generates each of its test episodes that has worn
(degraded) motors again: as generated, with every motor healthy, and with one worn motor at a
time. The degradation is drawn as usual and only left unapplied
(``SimConfig.healthy_motors``), so the plan, payload, timing and noise of an episode are the
same in every version; only the hidden motor constants differ. Each version is scored with the
checkpoint's calibrated gate against the benchmark's contact label: false-alarm and missed
samples, and the estimated force's median magnitude on the false alarms. Also counts, from the
episode plans alone (nothing simulated), how many training episodes have each motor worn.

Writes ``benchmarks/results/gate_worn_motor.json`` and ``.md``.

Run: ``.venv/bin/python benchmarks/studies/bench_gate_worn_motor.py`` (about a minute, after
``bench_neuralactuator_twin.py``).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    ROOT,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.estimate import estimate  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402
from neuract.pipeline.twin_data import contact_labelled, worn_config  # noqa: E402
from neuract.twin.generate import (  # noqa: E402
    episode_name,
    episode_plan,
    episode_rng,
    episode_table,
    run_chunk,
)
from neuract.twin.model import build_model  # noqa: E402


def planned_worn(gen, rows) -> tuple[dict, list]:
    """({episode name: its plan's worn motors, bool (n,)}, joint names), the plans drawn as
    ``generate`` draws them (nothing simulated)."""
    tm = build_model(gen.robot, gen.sim.physics_hz)
    lo, hi = tm.ranges[:, 0] + 0.05, tm.ranges[:, 1] - 0.05
    out = {}
    for row in rows:
        _, unit, k, task = row
        plan = episode_plan(gen, task, lo, hi, episode_rng(gen.seed, unit, k))
        out[episode_name(row)] = (plan.degraded if plan.degraded is not None
                             else np.zeros(tm.n, bool))
    return out, tm.joint_names


def score(model, tr, threshold_n: float) -> dict:
    tr = contact_labelled([tr], threshold_n)[0]
    o = estimate(model, tr)
    v = o["valid"]
    y = np.asarray(tr["contact"], bool)[v]
    g = o["contact_prob"][v] >= 0.5
    fa = g & ~y
    fn = np.linalg.norm(o["ee_force"][v], axis=1)
    return {"false_alarms": int(fa.sum()), "missed": int((~g & y).sum()),
            "contact_samples": int(y.sum()), "samples": int(v.sum()),
            "false_alarm_force_median_n": float(np.median(fn[fa])) if fa.any() else None}


def main() -> int:
    from common import ESTIMATOR_CHECKPOINT, checkpoint_gate, machine, main_run_episodes

    torch.set_num_threads(1)
    run = main_run_episodes()
    if run is None:
        return 2
    model, cfg, gen, rows, test_names = run
    worn, joints = planned_worn(gen, rows)
    train_rows = [r for r in rows if episode_name(r) not in test_names]
    worn_train = [worn[episode_name(r)] for r in train_rows]
    extra = worn_config(cfg.data)  # the extra worn-motor training episodes, if any
    if extra is not None:
        plans, _ = planned_worn(extra, episode_table(extra))
        worn_train += list(plans.values())
    coverage = {j: int(sum(w[i] for w in worn_train)) for i, j in enumerate(joints)}
    n_worn_train = int(sum(w.any() for w in worn_train))
    out = {"checkpoint": str(ESTIMATOR_CHECKPOINT.relative_to(ROOT)),
           "gate_kind": checkpoint_gate(model), "machine": machine(),
           "contact_label_n": cfg.data.contact_min_force_n,
           "train_episodes": len(worn_train), "train_episodes_with_worn_motors": n_worn_train,
           "train_episodes_worn_per_motor": coverage, "episodes": []}
    table = []
    for row in rows:
        name = episode_name(row)
        if name not in test_names or not worn[name].any():
            continue
        idx = [int(i) for i in np.flatnonzero(worn[name])]
        versions = {"as generated (" + ", ".join(joints[i] for i in idx) + " worn)": ()}
        versions["all motors healthy"] = tuple(idx)
        if len(idx) > 1:
            for i in idx:
                versions[f"only {joints[i]} worn"] = tuple(j for j in idx if j != i)
        rec = {"episode": name, "worn": [joints[i] for i in idx], "versions": {}}
        for label, healthy in versions.items():
            g = dataclasses.replace(gen, sim=dataclasses.replace(gen.sim,
                                                                 healthy_motors=healthy))
            print(f"{name}: {label} ...", flush=True)
            s = score(model, run_chunk(g, [row])[0], cfg.data.contact_min_force_n)
            s["worn_motors"] = [joints[i] for i in idx if i not in healthy]
            rec["versions"][label] = s
            f = s["false_alarm_force_median_n"]
            table.append([name, label, s["false_alarms"], s["missed"], s["contact_samples"],
                          s["samples"], f"{f:.2f}" if f is not None else "—"])
        out["episodes"].append(rec)
    write_result(RESULTS / "gate_worn_motor.json", out)
    cov = ", ".join(f"{j} {c}" for j, c in coverage.items())
    md = ("# What a worn motor does to the contact gate (estimator mode)\n\n"
          f"Checkpoint: the twin benchmark's estimator (`{out['checkpoint']}`, "
          f"{out['gate_kind']}), its calibrated gate, contact = external force >= "
          f"{cfg.data.contact_min_force_n:g} N. Each test "
          "episode with worn motors is generated again with the same plan, payload, timing "
          "and noise: as in the benchmark, with every motor healthy, and with one worn motor "
          "at a time (`SimConfig.healthy_motors`: the degradation drawn, not applied). "
          f"Training episodes with worn motors: {n_worn_train} of {len(worn_train)}"
          + (f" (of them {len(worn_train) - len(train_rows)} extra "
             f"{'/'.join(cfg.data.worn_train_tasks)} episodes, every one with worn motors)"
             if extra is not None else "") + "; per "
          f"motor: {cov}. Machine: {out['machine']}. Reproduce: `.venv/bin/python "
          "benchmarks/studies/bench_gate_worn_motor.py` (after `bench_neuralactuator_twin.py`).\n\n"
          + markdown_table(["test episode", "version", "false-alarm samples", "missed samples",
                            "contact samples", "samples", "estimated |force| on false alarms, "
                            "median [N]"], table) + "\n")
    write_text(RESULTS / "gate_worn_motor.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
