"""Why the recurrent gate's F1 differs between twin data seeds: each seed's test split holds a
different mix of tasks, and the gate's misses are almost all in push pulses.

Reads the estimator checkpoints of the twin benchmark (seed 0, ``runs/bench_neuralactuator_twin``)
and of the gate-seeds benchmark (``runs/bench_twin_gate_seed<s>``, written by
``bench_neuralactuator_twin_gate_seeds.py``), generates each run's test episodes again (same
seed, same episodes) and scores its calibrated gate on them, as the benchmarks did. Per seed:

- the contact samples of each task, and the push task's share of them;
- the gate's recall and false alarms per task (false alarms counted in the task of their
  episode), and the pooled F1 (it must equal the F1 the seed's benchmark recorded);
- the missed push samples by where they lie in their contact event: within 10 or 20 samples of
  the event's first or last contact sample (a push is a raised-cosine force pulse of 0.5-2 s,
  0.5-6 N at its peak; the contact label is force >= 0.5 N, so an event starts and ends where
  the force is weakest);
- a *same-mix F1*: the F1 this seed's gate would have if its per-task recall and per-task
  false-alarm rate met the mean task mix of all the seeds scored (mean contact and no-contact
  samples per task). A diagnostic of the gate apart from its split; not the target metric,
  which is the pooled F1 on each seed's own test split.

Across seeds it reports the correlation of the pooled F1 with the push share.

Writes ``benchmarks/results/gate_seed_mix.json`` and ``.md``.

Run: ``.venv/bin/python benchmarks/studies/bench_gate_seed_mix.py`` (about 30 s per seed here, after
``bench_neuralactuator_twin.py`` and ``bench_neuralactuator_twin_gate_seeds.py``; seeds whose
run is missing are left out, and at least two are needed).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import (
    RESULTS,  # noqa: E402
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.estimate import estimate  # noqa: E402
from neuract.eval.gate import decision_f1, true_runs  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402

EDGE = (10, 20)
"""samples from an event's first or last contact sample counted as its edge"""
TASKS = ("lift", "pick", "push", "degraded")
"""the tasks with contact (``free`` has none)"""


def edge_misses(y: np.ndarray, fired: np.ndarray, k: int) -> tuple[int, int]:
    """Missed samples of one episode within ``k`` samples of their event's first contact
    sample, and (of the rest) within ``k`` of its last."""
    start = end = 0
    for a, b in true_runs(y):
        miss = np.flatnonzero(~fired[a:b])
        near_start = miss < k
        start += int(near_start.sum())
        end += int((~near_start & (miss >= b - a - k)).sum())
    return start, end


def score_seed(seed: int) -> dict | None:
    from common import check_recorded, checkpoint_gate, gate_seed_test_split

    split = gate_seed_test_split(seed)
    if split is None:
        return None
    model, _, _, trajs = split
    per = {t: {"contact": 0, "no_contact": 0, "tp": 0, "fp": 0} for t in TASKS + ("free",)}
    edges = {k: [0, 0] for k in EDGE}
    ys, fs = [], []
    for tr in trajs:
        o = estimate(model, tr)
        v = o["valid"]
        y = np.asarray(tr["contact"], bool)[v]
        fired = o["contact_prob"][v] >= 0.5
        ys.append(y)
        fs.append(fired)
        t = tr.meta.labels["task"]
        p = per[t]
        p["contact"] += int(y.sum())
        p["no_contact"] += int((~y).sum())
        p["tp"] += int((fired & y).sum())
        p["fp"] += int((fired & ~y).sum())
        if t == "push":
            for k in EDGE:
                s, e = edge_misses(y, fired, k)
                edges[k][0] += s
                edges[k][1] += e
    y, fired = np.concatenate(ys), np.concatenate(fs)
    f1 = decision_f1(fired, y)
    rec = check_recorded(seed, f1)
    push = per["push"]
    return {"seed": seed, "gate_kind": checkpoint_gate(model), "f1": f1, "recorded_f1": rec,
            "contact_samples": int(y.sum()),
            "push_share": push["contact"] / max(1, int(y.sum())),
            "missed": int((~fired & y).sum()), "false_alarms": int((fired & ~y).sum()),
            "missed_push": push["contact"] - push["tp"],
            "push_edge_misses": {str(k): {"start": s, "end": e} for k, (s, e) in edges.items()},
            "tasks": per}


def same_mix_f1(row: dict, mix: dict) -> float:
    """F1 of ``row``'s per-task recall and false-alarm rate on the task mix ``mix``
    (contact / no-contact samples per task)."""
    tp = fn = fp = 0.0
    for t, m in mix.items():
        p = row["tasks"][t]
        r = p["tp"] / p["contact"] if p["contact"] else 0.0
        fa = p["fp"] / p["no_contact"] if p["no_contact"] else 0.0
        tp += r * m["contact"]
        fn += (1 - r) * m["contact"]
        fp += fa * m["no_contact"]
    return 2 * tp / (2 * tp + fn + fp)


def main(argv: list[str]) -> int:
    from common import RETRAIN_SEEDS, machine

    torch.set_num_threads(1)
    seeds = [int(s) for s in argv] or RETRAIN_SEEDS
    rows = [r for r in (score_seed(s) for s in seeds) if r is not None]
    if len(rows) < 2:
        print("need the runs of at least two seeds (see the docstring)")
        return 2
    kinds = {r["gate_kind"] for r in rows}
    if len(kinds) > 1:
        raise SystemExit(f"the seeds' checkpoints hold different gates {sorted(kinds)}; rerun "
                         "the older benchmarks first")
    mix = {t: {k: float(np.mean([r["tasks"][t][k] for r in rows]))
               for k in ("contact", "no_contact")} for t in rows[0]["tasks"]}
    for r in rows:
        r["same_mix_f1"] = same_mix_f1(r, mix)
        r["push_recall"] = r["tasks"]["push"]["tp"] / max(1, r["tasks"]["push"]["contact"])
        r["other_recall"] = (sum(r["tasks"][t]["tp"] for t in TASKS if t != "push")
                             / max(1, sum(r["tasks"][t]["contact"] for t in TASKS
                                          if t != "push")))
    f1 = np.array([r["f1"] for r in rows])
    share = np.array([r["push_share"] for r in rows])
    corr = float(np.corrcoef(share, f1)[0, 1])
    sm = np.array([r["same_mix_f1"] for r in rows])
    out = {"gate_kind": kinds.pop(), "machine": machine(), "seeds": [r["seed"] for r in rows],
           "rows": rows, "mean_mix": mix, "corr_f1_push_share": corr,
           "f1_mean": float(f1.mean()), "f1_sd": float(f1.std(ddof=1)),
           "same_mix_f1_mean": float(sm.mean()), "same_mix_f1_sd": float(sm.std(ddof=1))}
    write_result(RESULTS / "gate_seed_mix.json", out)
    k1, k2 = (str(k) for k in EDGE)
    table = markdown_table(
        ["seed", "contact samples", "push share", "gate F1 (own split)", "push recall",
         "recall, other tasks", "false alarms", "missed (push)",
         f"push misses within {k1} / {k2} samples of the event's start",
         "... of its end", "same-mix F1"],
        [[r["seed"], r["contact_samples"], f"{r['push_share']:.3f}", f"{r['f1']:.3f}",
          f"{r['push_recall']:.3f}", f"{r['other_recall']:.3f}", r["false_alarms"],
          f"{r['missed']} ({r['missed_push']})",
          f"{r['push_edge_misses'][k1]['start']} / {r['push_edge_misses'][k2]['start']}",
          f"{r['push_edge_misses'][k1]['end']} / {r['push_edge_misses'][k2]['end']}",
          f"{r['same_mix_f1']:.3f}"] for r in sorted(rows, key=lambda r: r["push_share"])])
    md = ("# The recurrent gate's F1 across twin seeds, and each test split's task mix\n\n"
          f"Checkpoints: the twin benchmark's (seed 0) and the gate-seeds benchmark's estimators "
          f"({out['gate_kind']}), each with its calibrated gate, on its own test split generated "
          "again (estimator mode; contact = external force >= 0.5 N). Machine: "
          f"{out['machine']}. Reproduce: `.venv/bin/python "
          "benchmarks/studies/bench_gate_seed_mix.py` (after those benchmarks).\n\n"
          + table
          + f"\n\nCorrelation of the gate F1 with the push share over {len(rows)} seeds: "
          f"{corr:+.2f}. Gate F1 {out['f1_mean']:.3f} +- {out['f1_sd']:.3f} on the seeds' own "
          f"splits; same-mix F1 {out['same_mix_f1_mean']:.3f} +- {out['same_mix_f1_sd']:.3f}. "
          "The same-mix F1 puts each seed's per-task recall and false-alarm rate on the mean "
          "task mix of these seeds (a diagnostic, not the target metric). A push is a "
          "raised-cosine force pulse (0.5-2 s, 0.5-6 N peak): its contact event starts and "
          "ends where the force crosses 0.5 N, the weakest part of the pulse.\n")
    write_text(RESULTS / "gate_seed_mix.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
