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

With ``--variants gate_lag`` (or ``gate_conv``, ``gate_decide``), the gate that
``bench_gate_lag.py`` (or ``bench_gate_conv.py``) retrained for the seed, or the fixed-lag
gate that ``bench_gate_decide.py`` decides at a shorter lag, is scored too, on the same fresh
episodes and own split (it must reproduce the F1 that benchmark recorded), with the change
from the run's gate and its paired interval (both gates on the same resampled episodes).

Run: ``.venv/bin/python benchmarks/studies/bench_gate_fresh_test.py [--seeds 0 7] [--variants
gate_lag]`` (about 10 min per seed here, a few more per variant; seeds whose run is missing
are left out, with a note; a variant not retrained for a seed stops it, naming the command),
or ``--summarize`` alone, after ``bench_neuralactuator_twin.py`` and
``bench_neuralactuator_twin_gate_seeds.py``. Writes
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

import numpy as np  # noqa: E402

from common import (  # noqa: E402
    GATE_SEEDS_PROVENANCE,
    GATE_VARIANTS,
    RESULTS,
    RETRAIN_SEEDS,
    ROOT,
    check_recorded,
    checkpoint_gate,
    fmt_ms,
    gate_seed_run_dir,
    load_gate,
    machine,
    main_run_test_split,
    read_results,
    seed_files,
    seeds_main,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402

SEEDS_DIR = RESULTS / "gate_fresh_test"
SEEDS = RETRAIN_SEEDS
"""the seeds scored by default: the twin benchmark's run and the gate-seeds benchmark's"""
FRESH_MINUTES = 120.0
"""minutes of fresh test episodes per seed (240 episodes of 30 s, 48 per task)"""
EPISODE_OFFSET = 200_000
"""first episode number of the fresh episodes (past the main, worn-motor, extra-gate and
long-episode benchmarks' episodes)"""
N_RESAMPLE = 2000
"""resamples of the fresh episodes (interval and split-size spread)"""
GATE_KEYS = ("f1", "precision", "recall", "n_detected", "n_events", "latency_median_s")
FORCE_EDGES = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, float("inf"))
"""external-force bins [N] of the contact samples' recall (contact = force >= 0.5 N)"""
ONSET_EDGES = (0, 3, 6, 12, 30, float("inf"))
"""bins of samples since a contact began (60 Hz: 3 samples = 50 ms) of the recall"""
VARIANTS = tuple(GATE_VARIANTS)
"""other gates ``--variants`` may score beside the run's own: retrained by
``bench_<name>.py`` (gate_lag, gate_conv) or decided at a shorter lag (gate_decide)"""


def variant(name: str):
    """The ``common.Variant`` of ``bench_<name>.py`` (one of :data:`VARIANTS`)."""
    if name not in VARIANTS:
        raise SystemExit(f"--variants: {name!r} is not a gate it knows; accepted: "
                         f"{', '.join(VARIANTS)}")
    return GATE_VARIANTS[name]


def load_variant(name: str, seed: int):
    """(the seed's estimator with the gate ``bench_<name>.py`` made, the F1 that benchmark
    recorded for it on the run's test split): ``common.load_gate``."""
    return load_gate(variant(name), seed)


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
    of each task without replacement (a test split of that size and task mix). ``counts``
    (E, 3) gives (n,) values; (G, E, 3), several gates' counts on the same episodes, gives
    (n, G), every gate scored on the same draw (paired)."""
    counts = np.asarray(counts)
    out = np.empty((n, *counts.shape[:-2]))
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
        out[i] = pooled_f1(counts[..., np.concatenate(pick), :])
    return out


def samples_since_onset(y: np.ndarray) -> np.ndarray:
    """For each sample of the labels ``y``: how many samples ago its contact interval began
    (0 at its first sample), -1 outside contact."""
    y = np.asarray(y, bool)
    idx = np.arange(len(y))
    start = np.maximum.accumulate(np.where(y & ~np.r_[False, y[:-1]], idx, 0))
    return np.where(y, idx - start, -1)


def binned_hits(y: np.ndarray, fired: np.ndarray, value: np.ndarray,
                edges: tuple[float, ...]) -> np.ndarray:
    """(2, len(edges) - 1): the contact samples (``y``) whose ``value`` lies in each bin
    [edges[i], edges[i + 1]), and how many of them the gate detected (``fired``)."""
    y, fired = np.asarray(y, bool), np.asarray(fired, bool)
    b = np.digitize(np.asarray(value, np.float64), edges) - 1
    ok = y & (b >= 0) & (b < len(edges) - 1)
    n = len(edges) - 1
    return np.stack([np.bincount(b[ok], minlength=n)[:n],
                     np.bincount(b[ok & fired], minlength=n)[:n]]).astype(np.int64)


def recall_rows(hits: np.ndarray, edges: tuple[float, ...]) -> list[dict]:
    """:func:`binned_hits` as rows: bin bounds (``hi`` None: unbounded), contact samples,
    recall (None if empty)."""
    return [{"lo": float(lo), "hi": None if hi == float("inf") else float(hi), "n": int(n),
             "recall": float(k / n) if n else None}
            for lo, hi, n, k in zip(edges[:-1], edges[1:], hits[0], hits[1])]


def score(models: list, trajs) -> list[tuple[dict, np.ndarray, np.ndarray, dict]]:
    """The estimator protocol of each of ``models`` on ``trajs``; each with the per-episode
    gate counts (E, 3), the episodes' tasks (E,) and the contact samples' recall by force and
    by time since the contact began (:data:`FORCE_EDGES`, :data:`ONSET_EDGES`;
    :func:`recall_rows`). The models read the same inputs (one estimator, different gates):
    each episode's history windows are computed once, for the first model
    (:func:`~neuract.neuralactuator.estimate_inputs`; ``estimate`` refuses them for a model
    that reads other inputs)."""
    from neuract.estimate import estimate, estimate_inputs
    from neuract.eval import evaluate_estimator

    inputs = {}
    out = []
    for model in models:
        counts, tasks = [], []
        hits = {"force": 0, "onset": 0}

        def est(tr, model=model, counts=counts, tasks=tasks, hits=hits):
            if id(tr) not in inputs:
                inputs[id(tr)] = estimate_inputs(models[0], tr)
            # the last model frees each episode's windows once it has used them
            x = inputs.pop(id(tr)) if model is models[-1] else inputs[id(tr)]
            o = estimate(model, tr, inputs=x)
            v = np.asarray(o["valid"], bool)
            y = np.asarray(tr["contact"], bool)
            fired = np.asarray(o["contact_prob"]) >= 0.5
            counts.append(episode_counts(y[v], fired[v]))
            tasks.append(tr.meta.labels["task"])
            force = np.linalg.norm(np.asarray(tr["ee_force"], np.float64), axis=1)
            hits["force"] += binned_hits(y[v], fired[v], force[v], FORCE_EDGES)
            hits["onset"] += binned_hits(y[v], fired[v], samples_since_onset(y)[v],
                                         ONSET_EDGES)
            return o

        rec = evaluate_estimator(est, trajs, "NeuralActuator")
        bins = {"recall_by_force_n": recall_rows(np.asarray(hits["force"]), FORCE_EDGES),
                "recall_by_samples_since_onset": recall_rows(np.asarray(hits["onset"]),
                                                             ONSET_EDGES)}
        out.append((rec, np.array(counts), np.array(tasks), bins))
    return out


def gate_by_task(rec: dict) -> dict:
    """F1, precision and recall of the gate per task from an estimator protocol record."""
    return {t: {k: m.get(k) for k in ("f1", "precision", "recall")}
            for t, m in (rec.get("gate_by_task") or {}).items()}


def _interval(x: np.ndarray) -> list[float]:
    """The central 95 % of ``x``."""
    return [float(np.quantile(x, 0.025)), float(np.quantile(x, 0.975))]


def run_seed(seed: int, variants: tuple[str, ...] = ()) -> dict | None:
    from neuract.pipeline.twin_data import contact_labelled
    from neuract.twin.generate import generate

    t0 = time.perf_counter()
    split = main_run_test_split(gate_seed_run_dir(seed))
    if split is None:
        print(f"seed {seed}: no run at {gate_seed_run_dir(seed).relative_to(ROOT)}; left out")
        return None
    model, cfg, gen, test = split
    others = {name: load_variant(name, seed) for name in variants}
    own_scores = score([model, *(m for m, _ in others.values())], test)
    own, _, own_tasks, _ = own_scores[0]
    recorded = check_recorded(seed, own["gate"]["f1"])
    own_others = {}
    for (name, (_, rec_f1)), sc in zip(others.items(), own_scores[1:]):
        own_others[name] = sc[0]["gate"]
        if abs(own_others[name]["f1"] - rec_f1) > 1e-6:
            raise SystemExit(f"seed {seed}: the {name} gate scores F1 "
                             f"{own_others[name]['f1']:.6f} on the run's test split here but "
                             f"bench_{name}.py recorded {rec_f1:.6f}; rerun it")
    fresh_gen = dataclasses.replace(gen, minutes=FRESH_MINUTES, episode_offset=EPISODE_OFFSET,
                                    workers=1)
    print(f"seed {seed}: the run's gate scores F1 {own['gate']['f1']:.4f} on its own split "
          f"again (recorded {recorded}); generating {fresh_gen.n_episodes()} fresh episodes "
          "...", flush=True)
    fresh = contact_labelled(generate(fresh_gen), cfg.data.contact_min_force_n)
    print(f"seed {seed}: scoring them (the run's gate"
          + "".join(f", the {name} gate" for name in others) + ") ...", flush=True)
    fresh_scores = score([model, *(m for m, _ in others.values())], fresh)
    rec, counts, tasks, bins = fresh_scores[0]
    recs, vbins, stacked = {}, {}, [counts]
    for name, (r, c, _, b) in zip(others, fresh_scores[1:]):
        recs[name], vbins[name] = r, b
        stacked.append(c)
    # contact samples per task: each episode's tp + fn
    contact = {str(t): int(counts[tasks == t][:, [0, 2]].sum()) for t in np.unique(tasks)}
    rng = np.random.default_rng(seed)
    boots = resample(np.stack(stacked), tasks, None, rng, N_RESAMPLE)  # (n, gates)
    boot = boots[:, 0]
    own_draw = {str(t): int((own_tasks == t).sum()) for t in np.unique(own_tasks)}
    split_f1 = resample(counts, tasks, own_draw, rng, N_RESAMPLE)
    n_contact = sum(contact.values())
    cond = rec.get("condition") or {}
    res = {"seed": seed, "gate_kind": checkpoint_gate(model),
           "own_split": {"episodes": len(test), "task_episodes": own_draw,
                         **{k: own["gate"].get(k) for k in GATE_KEYS}},
           "recorded_f1": recorded,
           "fresh": {"minutes": FRESH_MINUTES, "episodes": len(fresh),
                     "episode_offset": EPISODE_OFFSET,
                     **{k: rec["gate"].get(k) for k in GATE_KEYS},
                     "f1_interval_95": _interval(boot),
                     "push_share": contact.get("push", 0) / max(1, n_contact),
                     "contact_samples": contact,
                     "gate_by_task": gate_by_task(rec),
                     "force_mae": (rec.get("force") or {}).get("all"),
                     "force_mae_contact": (rec.get("force") or {}).get("contact"),
                     "condition_accuracy": cond.get("accuracy"), **bins},
           "split_size_f1": {"mean": float(split_f1.mean()), "sd": float(split_f1.std()),
                             "p05": float(np.quantile(split_f1, 0.05)),
                             "p95": float(np.quantile(split_f1, 0.95)),
                             "share_at_least_0_95": float((split_f1 >= 0.95).mean())},
           "variants": {
               name: {"gate_kind": checkpoint_gate(others[name][0]),
                      "own_split": {k: own_others[name].get(k) for k in GATE_KEYS},
                      "fresh": {**{k: recs[name]["gate"].get(k) for k in GATE_KEYS},
                                "f1_interval_95": _interval(boots[:, i + 1]), **vbins[name],
                                "gate_by_task": gate_by_task(recs[name])},
                      # paired: both gates on the same resampled episodes
                      "fresh_f1_minus_run_gate": {
                          "mean": float(recs[name]["gate"]["f1"] - rec["gate"]["f1"]),
                          "interval_95": _interval(boots[:, i + 1] - boot),
                          "share_above_0": float((boots[:, i + 1] > boot).mean())}}
               for i, name in enumerate(others)},
           "machine": machine(), "seconds": round(time.perf_counter() - t0, 1)}
    SEEDS_DIR.mkdir(parents=True, exist_ok=True)
    write_result(SEEDS_DIR / f"seed_{seed}.json", res)
    print(json.dumps(res, indent=1), flush=True)
    return res


def variants_table(rows: list[dict]) -> str:
    """Markdown table of the other gates (``--variants``) scored beside the runs' own ('' if
    none)."""
    table = []
    for r in rows:
        for name, v in (r.get("variants") or {}).items():
            fr, d = v["fresh"], v["fresh_f1_minus_run_gate"]
            lo, hi = fr["f1_interval_95"]
            dlo, dhi = d["interval_95"]
            table.append([r["seed"], f"{name} ({v['gate_kind']})",
                          f"{r['own_split']['f1']:.3f} / {v['own_split']['f1']:.3f}",
                          f"{r['fresh']['f1']:.3f} / {fr['f1']:.3f} ({lo:.3f}-{hi:.3f})",
                          f"{d['mean']:+.3f} ({dlo:+.3f} to {dhi:+.3f}), "
                          f"{100 * d['share_above_0']:.0f} %",
                          f"{fr['precision']:.3f} / {fr['recall']:.3f}",
                          _f3((fr["gate_by_task"].get("push") or {}).get("recall")),
                          f"{fmt_ms(r['fresh'].get('latency_median_s'))} / "
                          f"{fmt_ms(fr.get('latency_median_s'))}"])
    if not table:
        return ""
    return markdown_table(["seed", "other gate", "F1 own split (run's / other)",
                           "F1 fresh (run's / other, 95 % interval)",
                           "change, fresh (paired 95 % interval), resamples > 0",
                           "precision / recall, fresh", "push recall, fresh",
                           "median latency [ms]"], table)


def _bin_label(r: dict, unit: str) -> str:
    if r["hi"] is None:
        return f">= {r['lo']:g} {unit}"
    return f"{r['lo']:g}-{r['hi']:g} {unit}"


def recall_table(rows: list[dict]) -> str:
    """Markdown table of the fresh episodes' contact-sample recall by external force and by
    samples since the contact began, a row per seed and gate ('' if no row has them)."""
    lines, head = [], None
    for r in rows:
        gates = [("run's gate", r["fresh"])] + [
            (name, v["fresh"]) for name, v in (r.get("variants") or {}).items()]
        for name, fr in gates:
            if "recall_by_force_n" not in fr:
                continue
            fb, ob = fr["recall_by_force_n"], fr["recall_by_samples_since_onset"]
            head = head or (["seed", "gate"] + [_bin_label(b, "N") for b in fb]
                            + [_bin_label(b, "samples") for b in ob])
            lines.append([r["seed"], name] + [
                f"{_f3(b['recall'])} ({b['n']})" for b in fb + ob])
    return markdown_table(head, lines) if lines else ""


def _f3(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def summarize() -> int:
    rows, parts = read_results(seed_files(SEEDS_DIR))
    if not rows:
        print("no seed scored yet: run with --seeds first")
        return 2

    table = []
    for r in rows:
        fr, sp = r["fresh"], r["split_size_f1"]
        lo, hi = fr["f1_interval_95"]
        table.append([r["seed"], _f3(r["own_split"]["f1"]), f"{fr['episodes']}",
                      f"{fr['f1']:.3f} ({lo:.3f}-{hi:.3f})",
                      f"{_f3(fr['precision'])} / {_f3(fr['recall'])}",
                      f"{fr['n_detected']}/{fr['n_events']}",
                      _f3((fr["gate_by_task"].get("push") or {}).get("recall")),
                      f"{fr['push_share']:.3f}",
                      f"{sp['sd']:.3f} ({sp['p05']:.3f}-{sp['p95']:.3f})",
                      f"{100 * sp['share_at_least_0_95']:.0f} %",
                      _f3(fr["force_mae"]),
                      "-" if fr["condition_accuracy"] is None
                      else f"{100 * fr['condition_accuracy']:.1f} %"])
    own = np.array([r["own_split"]["f1"] for r in rows])
    fresh = np.array([r["fresh"]["f1"] for r in rows])
    out = {"seeds": [r["seed"] for r in rows], "rows": rows,
           "own_f1_mean": float(own.mean()), "fresh_f1_mean": float(fresh.mean()),
           "own_f1_sd": float(own.std(ddof=1)) if len(rows) > 1 else None,
           "fresh_f1_sd": float(fresh.std(ddof=1)) if len(rows) > 1 else None,
           "split_size_sd_mean": float(np.mean([r["split_size_f1"]["sd"] for r in rows])),
           "fresh_minutes": FRESH_MINUTES, "note": GATE_SEEDS_PROVENANCE}
    write_result(RESULTS / "gate_fresh_test.json", out, parts=parts)
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
          f"{GATE_SEEDS_PROVENANCE}{sds} Reproduce: `.venv/bin/python "
          "benchmarks/studies/bench_gate_fresh_test.py --seeds ... [--variants gate_lag "
          "gate_decide]`.\n\n"
          + markdown_table(["seed", "gate F1, own split", "fresh episodes",
                            "gate F1, fresh (95 % interval)", "precision / recall",
                            "events detected", "push recall", "push share",
                            "split-size sd (5-95 %)", "splits >= 0.95", "force MAE [N]",
                            "condition"], table) + "\n")
    rt = recall_table(rows)
    if rt:
        md += ("\nRecall of the fresh episodes' contact samples by their external force "
               "and by samples since their contact began (60 Hz: 3 samples = 50 ms), with "
               "the number of contact samples in each bin.\n\n" + rt + "\n")
    vt = variants_table(rows)
    if vt:
        md += ("\nOther gates (`--variants`: the gate retrained by `bench_gate_lag.py` or "
               "`bench_gate_conv.py`, or the fixed-lag gate decided at a shorter lag by "
               "`bench_gate_decide.py`), scored on the same fresh episodes as the "
               "run's own gate; the change is theirs minus the run's gate's F1, its 95 % "
               "interval from the same episode resamples for both (paired), and the share of "
               "resamples where the other gate scores higher. Latency: median detection "
               "latency of the run's gate / the other one on the fresh episodes (a "
               "fixed-lag gate's includes its wait).\n\n" + vt + "\n")
    write_text(RESULTS / "gate_fresh_test.md", md)
    print(md)
    return 0


def split_variants(argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """``argv`` without ``--variants NAME ...`` (the names up to the next option), and the
    names, each checked against :data:`VARIANTS`."""
    if "--variants" not in argv:
        return argv, ()
    i = argv.index("--variants")
    j = next((k for k in range(i + 1, len(argv)) if argv[k].startswith("--")), len(argv))
    names = tuple(argv[i + 1:j])
    if not names:
        raise SystemExit(f"--variants: one or more of {', '.join(VARIANTS)}")
    for n in names:
        variant(n)
    return argv[:i] + argv[j:], names


def main(argv: list[str]) -> int:
    # seed 0 is the twin benchmark's run, scored like the others; missing runs are left out
    argv, names = split_variants(argv)
    return seeds_main(argv, SEEDS, lambda seed: run_seed(seed, names), summarize,
                           bench_seed=None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
