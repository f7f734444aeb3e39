"""How much of each push the SO-101 twin's telemetry leaves ambiguous, and what that costs the
recurrent gate's F1, per twin data seed.

For every push contact sample of a seed's test split, :func:`neuract.twin.observability.hidden_lag`
finds for how many samples its telemetry has been register for register the same as in a world
where the contact is not there: the episode without the push (onset), or with its pushes cut off
at an earlier sample of the event (release; every event sample is tried as a cut point). A lag
of ``L`` says the telemetry up to that sample reads the same as if the push had ended ``L``
samples before (60 Hz: 6 samples = 0.1 s). A causal estimator is right on such a sample in only
one of the two worlds; the twin's pushes are full raised-cosine pulses, never cut off, so a gate
trained on the twin can still report it right by betting on how long the twin's pushes last,
with no evidence in the telemetry.

Reads the estimator checkpoints of the twin benchmark (seed 0) and of the gate-seeds benchmark
(seeds 7, 11, 23, 31), generates each run's test episodes again, scores its calibrated gate on
them (the F1 must equal the one its benchmark recorded) and reports per seed:

- the share of the contact samples (all tasks) whose lag is at least 1, 3, 6, 15 and 30 samples,
  with registers compared exactly and within one count (a difference of one encoder step or
  one load count is within the twin's sensor noise);
- the gate's recall on push contact samples with lag >= 6 and on those below;
- *F1 if found where shown*: the F1 the gate would have if it also detected every contact
  sample with lag < 6 (its false alarms and its decisions on lag >= 6 samples as now);
- *evidence-only F1*: the F1 of a gate right on every sample except those with lag >= 6,
  which it misses (no false alarm): 2R/(1+R), R the share of contact samples with lag < 6.

Writes ``benchmarks/results/gate_ambiguity.json`` and ``.md``.

Run: ``.venv/bin/python benchmarks/studies/bench_gate_ambiguity.py [SEED ...]`` (about 4 min
per seed here, after ``bench_neuralactuator_twin.py`` and
``bench_neuralactuator_twin_gate_seeds.py``; seeds whose run is missing are left out).
"""

from __future__ import annotations

import os
import sys
import time
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
from neuract.eval.gate import decision_f1  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402
from neuract.twin.observability import hidden_lag  # noqa: E402

TOLERANCES = (0, 1)
"""register counts within which two telemetry samples count as the same (0: exactly)"""
LAGS = (1, 3, 6, 15, 30)
"""lag thresholds reported [samples]"""
SHOWN = 6
"""lag below which a contact counts as shown by the telemetry (0.1 s at 60 Hz)"""


def gate_figures(y: np.ndarray, fired: np.ndarray, lag: np.ndarray, push: np.ndarray,
                 shown: int = SHOWN) -> dict:
    """The benchmark's figures from pooled valid samples: labels ``y``, gate decisions
    ``fired``, lags ``lag`` (-1: none) and whether each sample is of a push episode."""
    amb = y & (lag >= shown)
    n = int(y.sum())
    R = 1 - amb.sum() / n if n else float("nan")
    pv = y & push & ~amb
    return {"contact_samples": n, "push_contact_samples": int((y & push).sum()),
            "lag_share": {str(k): float((y & (lag >= k)).sum() / max(n, 1)) for k in LAGS},
            "f1": decision_f1(fired, y),
            "false_alarms": int((fired & ~y).sum()),
            "missed": int((y & ~fired).sum()), "missed_ambiguous": int((amb & ~fired).sum()),
            "recall_ambiguous": float(fired[amb].mean()) if amb.any() else None,
            "recall_push_shown": float(fired[pv].mean()) if pv.any() else None,
            "f1_if_found_where_shown": decision_f1(fired | (y & ~amb), y),
            "evidence_only_f1": float(2 * R / (1 + R))}


def score_seed(seed: int) -> dict | None:
    from common import check_recorded, gate_seed_test_split

    t0 = time.time()
    split = gate_seed_test_split(seed)
    if split is None:
        return None
    model, cfg, gen, trajs = split
    thr = cfg.data.contact_min_force_n

    def progress(done, total):
        print(f"  seed {seed}: counterfactuals of {done}/{total} episodes "
              f"({time.time() - t0:.0f} s)", flush=True)

    lags = hidden_lag(gen, trajs, thr, tolerances_lsb=TOLERANCES, progress=progress)
    ys, fs, ps, vs = [], [], [], []
    for tr in trajs:
        o = estimate(model, tr)
        v = o["valid"]
        vs.append(v)
        ys.append(np.asarray(tr["contact"], bool)[v])
        fs.append(o["contact_prob"][v] >= 0.5)
        ps.append(np.full(int(v.sum()), tr.meta.labels["task"] == "push"))
    y, fired, push = map(np.concatenate, (ys, fs, ps))
    by_tol = {str(k): gate_figures(y, fired, np.concatenate([g[v] for g, v in zip(lags[k], vs)]),
                                   push) for k in TOLERANCES}
    first = by_tol[str(TOLERANCES[0])]
    out = {"seed": seed, "f1": first["f1"], "false_alarms": first["false_alarms"],
           "missed": first["missed"], "contact_samples": first["contact_samples"],
           "push_contact_samples": first["push_contact_samples"], "tolerance_lsb": by_tol,
           "seconds": round(time.time() - t0, 1)}
    out["recorded_f1"] = check_recorded(seed, out["f1"])
    return out


def main(argv: list[str]) -> int:
    from common import RETRAIN_SEEDS, machine

    torch.set_num_threads(1)
    seeds = [int(s) for s in argv] or RETRAIN_SEEDS
    rows = [r for r in (score_seed(s) for s in seeds) if r is not None]
    if not rows:
        print("no seed's run found (see the docstring)")
        return 2
    out = {"machine": machine(), "seeds": [r["seed"] for r in rows], "shown_lag": SHOWN,
           "tolerances_lsb": list(TOLERANCES), "rows": rows}
    write_result(RESULTS / "gate_ambiguity.json", out)

    def fmt(v):
        return "—" if v is None else f"{v:.3f}"

    table = markdown_table(
        ["seed", "contact samples (push)", "gate F1", "false alarms", "same within",
         *[f"lag >= {k}" for k in LAGS], f"recall, push lag < {SHOWN}",
         f"recall, lag >= {SHOWN}", f"missed (lag >= {SHOWN})", "F1 if found where shown",
         "evidence-only F1"],
        [[r["seed"], f"{r['contact_samples']} ({r['push_contact_samples']})", f"{r['f1']:.3f}",
          r["false_alarms"], "exactly" if k == 0 else f"{k} count{'s' if k > 1 else ''}",
          *[f"{100 * g['lag_share'][str(L)]:.1f} %" for L in LAGS],
          fmt(g["recall_push_shown"]), fmt(g["recall_ambiguous"]),
          f"{g['missed']} ({g['missed_ambiguous']})", f"{g['f1_if_found_where_shown']:.3f}",
          f"{g['evidence_only_f1']:.3f}"]
         for r in sorted(rows, key=lambda r: r["f1"]) for k in TOLERANCES
         for g in [r["tolerance_lsb"][str(k)]]])
    md = ("# What the twin's telemetry leaves ambiguous in each push, and the gate's F1\n\n"
          "Per seed, its test split (estimator mode; contact = external force >= 0.5 N). "
          "*Lag* of a push contact sample: for how many samples its telemetry has read, "
          "register for register, the same as in a world without that contact (the episode "
          "without the push, or with its pushes cut off at an earlier sample of the event), "
          "exactly or within one register count (one encoder step, 4 load counts, ...); "
          f"shares are of all contact samples. {SHOWN} samples = 0.1 s. *F1 if found where "
          f"shown*: the gate's F1 if it also detected every contact sample with lag < {SHOWN}, "
          f"its false alarms and its decisions on lag >= {SHOWN} as now. *Evidence-only F1*: "
          f"2R/(1+R), R the share of contact samples with lag < {SHOWN}: a gate right "
          f"everywhere but on lag >= {SHOWN}, which it misses. The twin's pushes are full "
          "raised-cosine pulses, so a gate trained on the twin can report a lagged sample "
          "right by betting on how long its pushes last, without evidence. Machine: "
          f"{out['machine']}. Reproduce: `.venv/bin/python "
          "benchmarks/studies/bench_gate_ambiguity.py` (after the twin and gate-seeds "
          "benchmarks).\n\n" + table + "\n")
    write_text(RESULTS / "gate_ambiguity.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
