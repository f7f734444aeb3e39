"""The twin estimators' contact gate on a large fresh test set of each run's own units, and how
much of the spread between data seeds a 16-episode test split explains.

The twin benchmark (seed 0) and the gate-seeds benchmark (seeds 7, 11, 23, 31) each score
their estimator on a test split of 16 episodes (8 min, about 3 per task), and the gate's F1
moves by 0.921-0.959 between them. This script asks how much of that is the split. For each
seed whose run exists it loads the run's estimator (its calibrated gate as committed), and

- scores it again on the run's own test split, generated again (it must reproduce the F1 the
  run recorded: otherwise the checkpoint or the data generation changed, and it stops);
- generates ``FRESH_MINUTES`` of new episodes of the run's own units and task mix (the same
  data seed, episodes numbered from ``EPISODE_OFFSET``, past every episode the runs used, so
  no plan is shared with their training, calibration or test data) and scores the estimator
  protocol on them: gate F1, precision, recall, contact events and detection latency, the
  gate per task, the push task's share of the contact samples, force MAE and main-mix
  condition accuracy;
- from the fresh episodes' per-episode counts: a 95 % interval of the fresh F1 (episodes
  resampled with replacement within each task, ``N_RESAMPLE`` times), and the spread of the
  F1 over random test splits of the run's own size and task counts drawn from the fresh
  episodes (without replacement): the spread a 16-episode split alone gives one model.

Estimator mode for every figure; contact = external force >= 0.5 N, as the benchmarks score.

Run: ``.venv/bin/python benchmarks/bench_gate_fresh_test.py [--seeds 0 7]`` (about 10 min per
seed here; seeds whose run is missing are left out, with a note), or ``--summarize`` alone,
after ``bench_neuralactuator_twin.py`` and ``bench_neuralactuator_twin_gate_seeds.py``. Writes
``benchmarks/results/gate_fresh_test/seed_<s>.json`` and
``benchmarks/results/gate_fresh_test.{json,md}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bench_neuralactuator_twin as twin  # noqa: E402
import bench_neuralactuator_twin_gate_seeds as gate_seeds  # noqa: E402
from neuract.atomic import write_json, write_text  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SEEDS_DIR = RESULTS / "gate_fresh_test"
SEEDS = [0, *gate_seeds.SEEDS]
"""the seeds scored by default: the twin benchmark's run and the gate-seeds benchmark's"""
FRESH_MINUTES = 120.0
"""minutes of fresh test episodes per seed (240 episodes of 30 s, 48 per task)"""
EPISODE_OFFSET = 200_000
"""first episode number of the fresh episodes (past the main, worn-motor, extra-gate and
long-episode benchmarks' episodes)"""
N_RESAMPLE = 2000
"""resamples of the fresh episodes (interval and split-size spread)"""
GATE_KEYS = ("f1", "precision", "recall", "n_detected", "n_events", "latency_median_s")


def episode_counts(y: np.ndarray, fired: np.ndarray) -> np.ndarray:
    """(tp, fp, fn) of one episode's valid samples: labels ``y`` and decisions ``fired``."""
    y, fired = np.asarray(y, bool), np.asarray(fired, bool)
    return np.array([(fired & y).sum(), (fired & ~y).sum(), (~fired & y).sum()], np.int64)


def pooled_f1(counts: np.ndarray) -> np.ndarray:
    """Pooled F1 of (..., n_episodes, 3) per-episode (tp, fp, fn) counts, over the episodes
    (0 where the pooled episodes hold no contact sample and no false alarm)."""
    tp, fp, fn = np.moveaxis(np.asarray(counts, np.float64).sum(-2), -1, 0)
    den = 2 * tp + fp + fn
    return np.where(den > 0, 2 * tp / np.where(den > 0, den, 1.0), 0.0)


def resample(counts: np.ndarray, tasks: np.ndarray, draw: dict[str, int] | None,
             rng: np.random.Generator, n: int) -> np.ndarray:
    """F1 of ``n`` resamples of episodes, task by task: ``draw`` None resamples each task's
    episodes with replacement (as many as it has: a bootstrap); else ``draw[task]`` episodes
    of each task without replacement (a test split of that size and task mix)."""
    out = np.empty(n)
    groups = {str(t): np.flatnonzero(tasks == t) for t in np.unique(tasks)}
    for i in range(n):
        pick = []
        for t, idx in groups.items():
            if draw is None:
                pick.append(rng.choice(idx, size=len(idx), replace=True))
            elif draw.get(t, 0):
                if draw[t] > len(idx):
                    raise ValueError(f"task {t!r}: {draw[t]} episodes asked, {len(idx)} there")
                pick.append(rng.choice(idx, size=draw[t], replace=False))
        out[i] = pooled_f1(counts[np.concatenate(pick)])
    return out


def score(model, trajs) -> tuple[dict, np.ndarray, np.ndarray]:
    """The estimator protocol on ``trajs``; with the per-episode gate counts (E, 3) and the
    episodes' tasks (E,)."""
    from neuract.eval import evaluate_estimator
    from neuract.neuralactuator import estimate

    counts, tasks = [], []

    def est(tr):
        o = estimate(model, tr)
        v = np.asarray(o["valid"], bool)
        y = np.asarray(tr["contact"], bool)[v]
        counts.append(episode_counts(y, np.asarray(o["contact_prob"])[v] >= 0.5))
        tasks.append(tr.meta.labels["task"])
        return o

    rec = evaluate_estimator(est, trajs, "NeuralActuator")
    return rec, np.array(counts), np.array(tasks)


def run_seed(seed: int) -> dict | None:
    from neuract.pipeline.twin_experiment import contact_labelled
    from neuract.twin.generate import generate

    t0 = time.perf_counter()
    split = twin.main_run_test_split(gate_seeds.run_dir(seed))
    if split is None:
        print(f"seed {seed}: no run at {gate_seeds.run_dir(seed).relative_to(ROOT)}; left out")
        return None
    model, cfg, gen, test = split
    own, _, own_tasks = score(model, test)
    recorded = gate_seeds.check_recorded(seed, own["gate"]["f1"])
    fresh_gen = dataclasses.replace(gen, minutes=FRESH_MINUTES, episode_offset=EPISODE_OFFSET,
                                    workers=1)
    print(f"seed {seed}: the run's gate scores F1 {own['gate']['f1']:.4f} on its own split "
          f"again (recorded {recorded}); generating {fresh_gen.n_episodes()} fresh episodes "
          "...", flush=True)
    fresh = contact_labelled(generate(fresh_gen), cfg.data.contact_min_force_n)
    print(f"seed {seed}: scoring them ...", flush=True)
    rec, counts, tasks = score(model, fresh)
    # contact samples per task: each episode's tp + fn
    contact = {str(t): int(counts[tasks == t][:, [0, 2]].sum()) for t in np.unique(tasks)}
    rng = np.random.default_rng(seed)
    boot = resample(counts, tasks, None, rng, N_RESAMPLE)
    own_draw = {str(t): int((own_tasks == t).sum()) for t in np.unique(own_tasks)}
    split_f1 = resample(counts, tasks, own_draw, rng, N_RESAMPLE)
    n_contact = sum(contact.values())
    cond = rec.get("condition") or {}
    res = {"seed": seed, "gate_kind": twin.checkpoint_gate(model),
           "own_split": {"episodes": len(test), "task_episodes": own_draw,
                         **{k: own["gate"].get(k) for k in GATE_KEYS}},
           "recorded_f1": recorded,
           "fresh": {"minutes": FRESH_MINUTES, "episodes": len(fresh),
                     "episode_offset": EPISODE_OFFSET,
                     **{k: rec["gate"].get(k) for k in GATE_KEYS},
                     "f1_interval_95": [float(np.quantile(boot, 0.025)),
                                        float(np.quantile(boot, 0.975))],
                     "push_share": contact.get("push", 0) / max(1, n_contact),
                     "contact_samples": contact,
                     "gate_by_task": {t: {k: m.get(k) for k in ("f1", "precision", "recall")}
                                      for t, m in (rec.get("gate_by_task") or {}).items()},
                     "force_mae": (rec.get("force") or {}).get("all"),
                     "force_mae_contact": (rec.get("force") or {}).get("contact"),
                     "condition_accuracy": cond.get("accuracy")},
           "split_size_f1": {"mean": float(split_f1.mean()), "sd": float(split_f1.std()),
                             "p05": float(np.quantile(split_f1, 0.05)),
                             "p95": float(np.quantile(split_f1, 0.95)),
                             "share_at_least_0_95": float((split_f1 >= 0.95).mean())},
           "machine": twin.machine(), "seconds": round(time.perf_counter() - t0, 1)}
    SEEDS_DIR.mkdir(parents=True, exist_ok=True)
    write_json(SEEDS_DIR / f"seed_{seed}.json", res)
    print(json.dumps(res, indent=1), flush=True)
    return res


def summarize() -> int:
    rows = [json.loads(p.read_text()) for p in sorted(SEEDS_DIR.glob("seed_*.json"),
                                                       key=lambda p: int(p.stem[5:]))]
    if not rows:
        print("no seed scored yet: run with --seeds first")
        return 2

    def f3(x):
        return "-" if x is None else f"{x:.3f}"

    table = []
    for r in rows:
        fr, sp = r["fresh"], r["split_size_f1"]
        lo, hi = fr["f1_interval_95"]
        table.append([r["seed"], f3(r["own_split"]["f1"]), f"{fr['episodes']}",
                      f"{fr['f1']:.3f} ({lo:.3f}-{hi:.3f})",
                      f"{f3(fr['precision'])} / {f3(fr['recall'])}",
                      f"{fr['n_detected']}/{fr['n_events']}",
                      f3((fr["gate_by_task"].get("push") or {}).get("recall")),
                      f"{fr['push_share']:.3f}",
                      f"{sp['sd']:.3f} ({sp['p05']:.3f}-{sp['p95']:.3f})",
                      f"{100 * sp['share_at_least_0_95']:.0f} %",
                      f3(fr["force_mae"]),
                      "-" if fr["condition_accuracy"] is None
                      else f"{100 * fr['condition_accuracy']:.1f} %"])
    own = np.array([r["own_split"]["f1"] for r in rows])
    fresh = np.array([r["fresh"]["f1"] for r in rows])
    out = {"seeds": [r["seed"] for r in rows], "rows": rows,
           "own_f1_mean": float(own.mean()), "fresh_f1_mean": float(fresh.mean()),
           "own_f1_sd": float(own.std(ddof=1)) if len(rows) > 1 else None,
           "fresh_f1_sd": float(fresh.std(ddof=1)) if len(rows) > 1 else None,
           "split_size_sd_mean": float(np.mean([r["split_size_f1"]["sd"] for r in rows])),
           "fresh_minutes": FRESH_MINUTES, "note": gate_seeds.PROVENANCE}
    write_json(RESULTS / "gate_fresh_test.json", out)
    kinds = sorted({r["gate_kind"] for r in rows})
    sizes = "/".join(str(n) for n in sorted({r["own_split"]["episodes"] for r in rows}))
    sds = "" if len(rows) < 2 else (
        f" Over these seeds: own splits {own.mean():.3f} ± {out['own_f1_sd']:.3f}, fresh "
        f"{fresh.mean():.3f} ± {out['fresh_f1_sd']:.3f}.")
    md = ("# The contact gate on a large fresh test set of each run's units\n\n"
          f"Each seed's trained estimator ({'; '.join(kinds)}; the twin benchmark's run for seed "
          "0, the gate-seeds benchmark's for the others), its calibrated gate as committed, "
          f"scored on {FRESH_MINUTES:g} min of new episodes of its own units and task mix "
          f"(episodes numbered from {EPISODE_OFFSET}: no plan shared with the run's data) and, "
          f"again, on its own {sizes}-episode test split (it reproduces the recorded F1). The "
          "fresh F1 comes with a 95 % interval (episodes resampled within each task); 'split-size "
          "sd' is the spread of the F1 over random test splits of the run's own size and "
          "task counts drawn from the fresh episodes, and the share of them at or above the "
          "0.95 target. Estimator mode; contact = external force >= 0.5 N. "
          f"{gate_seeds.PROVENANCE}{sds} Reproduce: `.venv/bin/python "
          "benchmarks/bench_gate_fresh_test.py --seeds ...`.\n\n"
          + markdown_table(["seed", "gate F1, own split", "fresh episodes",
                            "gate F1, fresh (95 % interval)", "precision / recall",
                            "events detected", "push recall", "push share",
                            "split-size sd (5-95 %)", "splits >= 0.95", "force MAE [N]",
                            "condition"], table) + "\n")
    write_text(RESULTS / "gate_fresh_test.md", md)
    print(md)
    return 0


def main(argv: list[str]) -> int:
    # seed 0 is the twin benchmark's run, scored like the others; missing runs are left out
    return twin.seeds_main(argv, SEEDS, run_seed, summarize, bench_seed=None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
