"""Retrain only the recurrent contact gate of the twin benchmarks' trained estimators with a
changed gate (a convolution front, a fixed lag, ...), and score it beside the run's own gate:
the shared core of ``bench_gate_conv.py`` and ``bench_gate_lag.py``.

For each seed, the run's trained estimator is loaded from its checkpoint and only its
recurrent gate is trained again with the change. Everything else is as in the run: the same
training episodes and extra episodes of other units (generated again from the run's data
seed), the same schedule (the step with the best calibration F1 kept), the gate filter
calibrated on the same held-out calibration episodes, scored on the same test split. The
run's own checkpoint is scored again on that split first, and the benchmark stops if it does
not reproduce the F1 the run recorded (the data generation or the checkpoint changed since).
Estimator mode for every figure.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import bench_neuralactuator_twin as twin
import bench_neuralactuator_twin_gate_seeds as gate_seeds
from neuract.atomic import write_json, write_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SEEDS = [0, *gate_seeds.SEEDS]
"""the seeds run by default: the twin benchmark's and the gate-seeds benchmark's"""
GATE_KEYS = ("f1", "precision", "recall", "n_detected", "n_events", "latency_mean_s",
             "latency_median_s")


@dataclasses.dataclass(frozen=True)
class Variant:
    """A change of the recurrent gate: ``changes`` of both ``NeuralActuatorConfig`` and
    ``ExperimentConfig`` (fields they share, e.g. ``gate_conv``), ``name`` of its results
    (``benchmarks/results/<name>.{json,md}``, ``<name>/seed_<s>.json``, the retrained
    checkpoint under ``runs/bench_<name>_seed<s>/``), ``label`` its column, ``title`` and
    ``description`` the summary's heading and first paragraph."""

    name: str
    changes: dict
    label: str
    title: str
    description: str

    @property
    def seeds_dir(self) -> Path:
        return RESULTS / self.name

    def out_dir(self, seed: int) -> Path:
        return ROOT / "runs" / f"bench_{self.name}_seed{seed}"

    def checkpoint(self, seed: int) -> Path:
        """The estimator checkpoint ``bench_<name>.py`` saves for ``seed``."""
        return self.out_dir(seed) / "checkpoints" / "neuralactuator_estimator"


def load_gate(v: Variant, seed: int):
    """(the seed's estimator with the gate ``bench_<v.name>.py`` made for it, the F1 that
    benchmark recorded for it on the run's test split); stops, naming the command to run,
    where it has not been run for this seed."""
    ckpt = v.checkpoint(seed)
    rec = v.seeds_dir / f"seed_{seed}.json"
    if not (ckpt / "config.json").is_file() or not rec.is_file():
        raise SystemExit(f"seed {seed}: no {v.name} gate at {ckpt.relative_to(ROOT)} (or no "
                         f"{rec.relative_to(ROOT)}); run `.venv/bin/python "
                         f"benchmarks/bench_{v.name}.py --seeds {seed}` first")
    return twin.load_estimator(ckpt), json.loads(rec.read_text())["new_gate"]["f1"]


def run_data(seed: int) -> tuple:
    """(the seed's run's trained estimator, its benchmark config, the gate's training
    episodes, its calibration episodes, the test split), the episodes generated again from
    the run's data seed and labelled as the run scored them; stops where the run is missing
    or its test split is not reproduced."""
    from neuract.pipeline.splits import calibration_set as _calibration_set
    from neuract.pipeline.splits import calibration_split, has_contact
    from neuract.pipeline.twin_data import contact_labelled, twin_split

    run = gate_seeds.run_dir(seed)
    loaded = twin.main_run_episodes(run)
    if loaded is None:
        raise SystemExit(f"seed {seed}: no run at {run.relative_to(ROOT)}; run "
                         "bench_neuralactuator_twin.py (seed 0) or "
                         "bench_neuralactuator_twin_gate_seeds.py first")
    model, cfg, _, _, test_names = loaded
    if model.gate_rnn is None:
        raise SystemExit(f"seed {seed}: the run's estimator has no recurrent gate")
    print(f"seed {seed}: generating the run's data again ...", flush=True)
    thr = cfg.data.contact_min_force_n
    train, test, _ = twin_split(cfg.data)
    train, test = contact_labelled(train, thr), contact_labelled(test, thr)
    if sorted(tr.meta.name for tr in test) != sorted(test_names):
        raise SystemExit(f"seed {seed}: the regenerated test split differs from the run's")
    fit_eps, calib = calibration_split(train, cfg.experiment.calibration_fraction)
    g_eps = _calibration_set(calib, train, has_contact)
    if g_eps is None:
        raise SystemExit(f"seed {seed}: no calibration episodes with and without contact")
    return model, cfg, fit_eps, g_eps, test


def score_gate(model, test) -> dict:
    """The gate figures (:data:`GATE_KEYS`) of the estimator protocol on ``test``."""
    from neuract.eval import evaluate_estimator
    from neuract.neuralactuator import estimate

    g = evaluate_estimator(lambda tr: estimate(model, tr), test, "NeuralActuator")["gate"]
    return {k: g.get(k) for k in GATE_KEYS}


def run_seed(v: Variant, seed: int) -> dict:
    from neuract.neuralactuator.checkpoint import read_config, save_checkpoint
    from neuract.neuralactuator.estimate import gate_samples, select_gate_filter
    from neuract.neuralactuator.gate_rnn import gate_rows, train_gate_rnn
    from neuract.neuralactuator.model import RecurrentGate
    from neuract.pipeline.experiment_config import gate_train_config
    from neuract.pipeline.twin_gate import gate_extra_rows

    t0 = time.perf_counter()
    model, cfg, fit_eps, g_eps, test = run_data(seed)
    run = gate_seeds.run_dir(seed)

    def score(m) -> dict:
        return score_gate(m, test)

    plain = score(model)
    recorded = gate_seeds.check_recorded(seed, plain["f1"])
    print(f"seed {seed}: the run's gate scores F1 {plain['f1']:.4f} again "
          f"(recorded {recorded})", flush=True)

    # the same estimator, a new gate with the change
    H = model.cfg.gate_rnn
    model.cfg = model.cfg.replace(**v.changes)
    with torch.random.fork_rng(devices=[]):
        model.gate_rnn = RecurrentGate(model.cfg.n_features, H, model.cfg.gate_conv,
                                       model.cfg.gate_lag)
    exp = dataclasses.replace(cfg.experiment, **v.changes)
    fit_rows, calib_rows = gate_rows(model, fit_eps), gate_rows(model, g_eps)
    extra = gate_extra_rows(cfg.data, model, twin._progress())
    print(f"seed {seed}: {len(fit_rows)} + {len(extra)} training episodes, "
          f"{len(calib_rows)} calibration episodes; training the gate ...", flush=True)
    out = v.out_dir(seed)
    out.mkdir(parents=True, exist_ok=True)

    def progress(it, total, info):
        print(f"  gate step {it}/{total}: calibration F1 {info['calib_f1']:.4f}", flush=True)

    rep = train_gate_rnn(model, fit_rows + extra, calib_rows,
                         gate_train_config(exp, str(out / "train_gate.safetensors")), progress)
    del fit_rows, extra
    raw = gate_samples(model, g_eps)
    model.gate_tau_s, model.gate_threshold, model.gate_release, _ = select_gate_filter(
        model, g_eps, exp.gate_tau_grid, raw=raw)
    new = score(model)
    extra_facts = read_config(run / "checkpoints" / "neuralactuator_estimator")[1]["extra"]
    extra_facts.update(gate_threshold=model.gate_threshold, gate_tau_s=model.gate_tau_s,
                       gate_release=model.gate_release,
                       gate_retrained_by=f"bench_{v.name}.py")
    save_checkpoint(model, v.checkpoint(seed),
                    extra=extra_facts, overwrite=True)
    (out / "train_gate.safetensors").unlink(missing_ok=True)
    res = {"seed": seed, **v.changes, "hidden": H, "gru": plain, "gru_recorded_f1": recorded,
           "new_gate": new,
           "gate_train": {k: rep[k] for k in ("iterations", "seconds", "kept_iteration",
                                               "calib_f1", "n_train_episodes",
                                               "n_train_samples", "n_calib_episodes")},
           "filter": {"tau_s": model.gate_tau_s, "threshold": model.gate_threshold,
                      "release": model.gate_release},
           "seconds": round(time.perf_counter() - t0, 1)}
    write_json(v.seeds_dir / f"seed_{seed}.json", res)
    print(json.dumps(res, indent=1), flush=True)
    return res


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{1000 * x:.0f}"


def summarize(v: Variant) -> int:
    rows = [json.loads(p.read_text()) for p in sorted(v.seeds_dir.glob("seed_*.json"),
                                                       key=lambda p: int(p.stem[5:]))]
    if not rows:
        print("no seed run yet: run with --seeds first")
        return 2
    table = [f"| seed | run's gate F1 | {v.label} F1 | change | P / R | events | "
             "median latency [ms] (run's / new) | calibration F1 | gate training [min] |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g, c = r["gru"], r["new_gate"]
        table.append(f"| {r['seed']} | {g['f1']:.3f} | {c['f1']:.3f} | "
                     f"{c['f1'] - g['f1']:+.3f} | {c['precision']:.3f} / {c['recall']:.3f} | "
                     f"{c['n_detected']}/{c['n_events']} | "
                     f"{_ms(g.get('latency_median_s'))} / {_ms(c.get('latency_median_s'))} | "
                     f"{r['gate_train']['calib_f1']:.3f} | "
                     f"{r['gate_train']['seconds'] / 60:.0f} |")
    a = np.array([r["gru"]["f1"] for r in rows])
    b = np.array([r["new_gate"]["f1"] for r in rows])

    def sd(x: np.ndarray) -> float:
        return float(x.std(ddof=1)) if len(x) > 1 else 0.0

    table.append(f"| mean ± sd | {a.mean():.3f} ± {sd(a):.3f} | {b.mean():.3f} ± {sd(b):.3f} "
                 f"| {(b - a).mean():+.3f} | | | | | |")
    out = {"seeds": [r["seed"] for r in rows], "changes": v.changes, "rows": rows,
           "gru_f1_mean": float(a.mean()), "new_f1_mean": float(b.mean()),
           "note": gate_seeds.PROVENANCE}
    write_json(RESULTS / f"{v.name}.json", out)
    hidden = sorted({r["hidden"] for r in rows})
    md = (f"# {v.title}\n\n"
          "Each seed's trained estimator (the twin benchmark's run for seed 0, the gate-seeds "
          f"benchmark's for the others) with only its recurrent gate trained again "
          f"({'/'.join(map(str, hidden))} GRU units): {v.description} The same training and "
          "extra episodes, schedule and filter calibration; the run's gate F1 is the run's own "
          "checkpoint scored again on the same test split (it reproduces the recorded "
          "figure). Estimator mode; contact = external force >= 0.5 N. Target: F1 >= 0.95. "
          f"{gate_seeds.PROVENANCE} Reproduce: `.venv/bin/python benchmarks/bench_{v.name}.py "
          "--seeds ...`.\n\n" + "\n".join(table) + "\n")
    write_text(RESULTS / f"{v.name}.md", md)
    print(md)
    return 0


def main(v: Variant, argv: list[str]) -> int:
    # seed 0 is the twin benchmark's run, whose gate is retrained too
    run: Callable[[int], dict] = lambda seed: run_seed(v, seed)  # noqa: E731
    return twin.seeds_main(argv, SEEDS, run, lambda: summarize(v), bench_seed=None)
