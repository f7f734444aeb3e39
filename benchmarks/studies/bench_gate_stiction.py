"""Which contacts the trained gate misses, measured against the gear's breakaway friction.

Reads the twin benchmark's estimator checkpoint (``runs/bench_neuralactuator_twin``, written by
``bench_neuralactuator_twin.py``) and generates its test episodes again (same seed, same
episodes). At every sample the true external force F is mapped to joint torques at the
measured pose, ``tau_ext = J^T F`` (the arm model's end-effector Jacobian), and each joint's
torque is divided by that motor's breakaway friction (Coulomb + Stribeck, the twin's hidden
parameters, worn motors included): ``r = max_j |tau_ext_j| / breakaway_j``. Below r = 1 the
force alone cannot start any resting joint's gear (the friction at rest is at least the
breakaway, more while the motor carries a load), so a still arm moves only inside the
backlash unless the force adds to a torque already near the friction bound.

Reported, on the benchmark's contact label (external force >= 0.5 N):

- the trained gate's recall per band of r (its calibrated decision, as the benchmark scores it);
- the F1 of *stiction oracles* that know the true force and report contact wherever
  r >= c, for several c: the F1 a gate reaches if it sees every contact that loads some joint
  beyond c times its breakaway friction and none below;
- the F1 of *noisy-force oracles* that threshold the true force plus Gaussian noise of
  sigma per axis, independent per sample, at their best threshold: how precise a force
  estimate the 0.5 N gate target asks for;
- where the missed samples lie in time, per contact event (a run of contact samples): in
  events the gate never detects, before an event's first detection, after its last, or in
  gaps between; and two bounds built on the gate's own detections: every sample from an
  event's first detection to its end detected (what a causal gate could add by holding a
  detected contact exactly until it ends), and every sample of each detected event detected
  (what a decision delayed until the event is over could add; not causal).

Writes ``benchmarks/results/gate_stiction.json`` and ``.md``.

Run: ``.venv/bin/python benchmarks/studies/bench_gate_stiction.py`` (about a minute, after
``bench_neuralactuator_twin.py``).
"""

from __future__ import annotations

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
from neuract.eval.gate import decision_f1, true_runs  # noqa: E402
from neuract.neuralactuator.physics import physics_channels  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402

R_BANDS = (0.0, 1.0, 1.5, 2.0, 3.0, 5.0)
"""edges of the bands of r = max_j |J^T F|_j / breakaway_j (the last band is unbounded)"""
ORACLE_C = (0.5, 1.0, 1.5, 2.0, 3.0)
"""stiction-oracle cut-offs c (contact reported where r >= c)"""
NOISE_SIGMA_N = (0.1, 0.2, 0.3, 0.4, 0.5)
"""noisy-force oracles' noise [N per axis]"""
NOISE_THRESHOLDS_N = np.round(np.arange(0.3, 2.01, 0.05), 2)
"""force thresholds [N] the noisy-force oracles choose from"""


def stiction_ratio(traj, physics: tuple[str, str]) -> np.ndarray:
    """(T,) r = max over joints of |J^T F| / breakaway friction, F the true external force."""
    servo = traj.meta.labels["hidden"]["servo"]
    breakaway = np.asarray(servo["coulomb"]) + np.asarray(servo["stribeck"])
    ph = physics_channels(np.asarray(traj["q"]), *physics)
    jac = np.stack([ph["jac_x"], ph["jac_y"], ph["jac_z"]], axis=1)  # (T, 3, n)
    tau = np.abs(np.einsum("tin,ti->tn", jac, np.asarray(traj["ee_force"])))
    return (tau / breakaway).max(axis=1)


def band_name(lo: float, hi: float | None) -> str:
    return f"{lo:g}-{hi:g}" if hi is not None else f">= {lo:g}"


def miss_timing(y: np.ndarray, fired: np.ndarray) -> dict:
    """Missed samples of one episode by where they lie in their contact event (``whole``: the
    event is never detected; ``before_first`` / ``after_last``: before the event's first
    detection / after its last; ``gaps``: between detections), and the decisions of the two
    bounds: ``held`` (detected from each event's first detection to its end) and ``filled``
    (each detected event detected whole)."""
    out = {"whole": 0, "before_first": 0, "after_last": 0, "gaps": 0}
    held, filled = fired.copy(), fired.copy()
    for a, b in true_runs(y):
        w = np.flatnonzero(fired[a:b])
        if w.size == 0:
            out["whole"] += b - a
            continue
        out["before_first"] += int(w[0])
        out["after_last"] += int(b - a - 1 - w[-1])
        out["gaps"] += int((~fired[a + w[0]:a + w[-1] + 1]).sum())
        held[a + w[0]:b] = True
        filled[a:b] = True
    return {"counts": out, "held": held, "filled": filled}


def main() -> int:
    from common import ESTIMATOR_CHECKPOINT, checkpoint_gate, machine, main_run_test_split

    torch.set_num_threads(1)
    split = main_run_test_split()
    if split is None:
        return 2
    model, cfg, _, trajs = split
    thr = cfg.data.contact_min_force_n
    y, fired, ratio, force, task, held, filled = [], [], [], [], [], [], []
    timing = {"whole": 0, "before_first": 0, "after_last": 0, "gaps": 0}
    for tr in trajs:
        o = estimate(model, tr)
        v = o["valid"]
        y.append(np.asarray(tr["contact"], bool)[v])
        fired.append(o["contact_prob"][v] >= 0.5)
        ratio.append(stiction_ratio(tr, model.cfg.physics)[v])
        force.append(np.asarray(tr["ee_force"])[v])
        task.append(np.full(int(v.sum()), tr.meta.labels["task"]))
        m = miss_timing(y[-1], fired[-1])
        held.append(m["held"])
        filled.append(m["filled"])
        for k, c in m["counts"].items():
            timing[k] += c
    y, fired, ratio, force, task, held, filled = (
        np.concatenate(a) for a in (y, fired, ratio, force, task, held, filled))
    bands = []
    for lo, hi in zip(R_BANDS, R_BANDS[1:] + (None,), strict=True):
        w = y & (ratio >= lo) & ((ratio < hi) if hi is not None else True)
        bands.append({"r": [lo, hi], "contact_samples": int(w.sum()),
                      "push_samples": int((w & (task == "push")).sum()),
                      "recall": float(fired[w].mean()) if w.any() else None,
                      "missed": int((w & ~fired).sum())})
    oracles = [{"c": c, "f1": decision_f1(ratio >= c, y),
                "recall": float((ratio >= c)[y].mean())} for c in ORACLE_C]
    rng = np.random.default_rng(0)
    noisy = []
    for s in NOISE_SIGMA_N:
        mag = np.linalg.norm(force + rng.normal(0.0, s, force.shape), axis=1)
        f1s = [decision_f1(mag >= t, y) for t in NOISE_THRESHOLDS_N]
        k = int(np.argmax(f1s))
        noisy.append({"sigma_n": s, "f1": f1s[k], "threshold_n": float(NOISE_THRESHOLDS_N[k])})
    out = {"checkpoint": str(ESTIMATOR_CHECKPOINT.relative_to(ROOT)),
           "gate_kind": checkpoint_gate(model), "machine": machine(),
           "contact_label_n": thr, "test_episodes": len(trajs), "samples": int(y.size),
           "contact_samples": int(y.sum()),
           "gate": {"f1": decision_f1(fired, y), "false_alarms": int((fired & ~y).sum()),
                    "missed": int((~fired & y).sum())},
           "recall_by_ratio": bands, "stiction_oracles": oracles, "noisy_force_oracles": noisy,
           "missed_by_timing": timing,
           "bounds": {"held_f1": decision_f1(held, y), "filled_f1": decision_f1(filled, y)}}
    write_result(RESULTS / "gate_stiction.json", out)
    g = out["gate"]
    md = ("# Which contacts the gate misses: external torque against breakaway friction\n\n"
          f"Checkpoint: the twin benchmark's estimator (`{out['checkpoint']}`, "
          f"{out['gate_kind']}) with its calibrated gate, on the benchmark's {len(trajs)} test "
          "episodes generated again; "
          f"contact = external force >= {thr:g} N ({out['contact_samples']} of "
          f"{out['samples']} samples). *r* = max over joints of |J^T F| / breakaway friction "
          "(Coulomb + Stribeck, the twin's hidden parameters, worn motors included; J at the "
          "measured pose, F the true force): below 1 the force alone cannot start a resting "
          "joint's gear. The gate's F1 "
          f"on these samples: {g['f1']:.3f} ({g['false_alarms']} false alarms, "
          f"{g['missed']} missed). Machine: {out['machine']}. Reproduce: `.venv/bin/python "
          "benchmarks/studies/bench_gate_stiction.py` (after `bench_neuralactuator_twin.py`).\n\n"
          "## The gate's recall by r\n\n"
          + markdown_table(["r", "contact samples", "of them push", "recall", "missed"],
                           [[band_name(*b["r"]), b["contact_samples"], b["push_samples"],
                             "—" if b["recall"] is None else f"{b['recall']:.2f}", b["missed"]]
                            for b in bands])
          + "\n\n## Oracles (true force known)\n\n"
          "Stiction oracle: contact reported wherever r >= c. Noisy-force oracle: |F + noise| "
          "above the best of the thresholds 0.3-2 N, Gaussian noise sigma per axis, "
          "independent per sample (an estimator's errors are not independent in time, so "
          "this is a yardstick, not a bound).\n\n"
          + markdown_table(["oracle", "F1", "recall"],
                           [[f"stiction, r >= {o['c']:g}", f"{o['f1']:.3f}",
                             f"{o['recall']:.3f}"] for o in oracles]
                           + [[f"noisy force, sigma {n['sigma_n']:g} N (threshold "
                               f"{n['threshold_n']:g} N)", f"{n['f1']:.3f}", ""]
                              for n in noisy])
          + "\n\n## When the missed samples fall\n\n"
          "Per contact event (a run of contact samples), the gate's missed samples: in events it "
          "never detects, before the event's first detection, after its last, and in gaps "
          "between detections.\n\n"
          + markdown_table(["whole event missed", "before first detection",
                            "after last detection", "gaps", "all"],
                           [[timing["whole"], timing["before_first"], timing["after_last"],
                             timing["gaps"], sum(timing.values())]])
          + "\n\nBounds built on the gate's own detections (false alarms unchanged): every "
          "sample from an event's first detection to its end detected (a causal gate that "
          "holds a detected contact exactly until it ends): F1 "
          f"{out['bounds']['held_f1']:.3f}; every sample of each detected event detected (a "
          "decision made after the event is over, not causal): F1 "
          f"{out['bounds']['filled_f1']:.3f}.\n")
    write_text(RESULTS / "gate_stiction.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
