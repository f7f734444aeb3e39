"""The recurrent contact gate with a causal convolution front, against the plain GRU gate, on
the twin benchmark's runs (seed 0) and the gate-seeds benchmark's (other data seeds).

For each seed, the run's trained estimator is loaded from its checkpoint and only its
recurrent gate is trained again, now with ``CONV`` causal dilated convolutions before the GRU
(``NeuralActuatorConfig.gate_conv``; a receptive field of 127 samples, about 2 s at 60 Hz).
Everything else is as in the run: the same training episodes and extra episodes of other
units (generated again from the run's data seed), the same schedule (``GATE_RNN_ITERS`` steps,
the step with the best calibration F1 kept), the gate filter calibrated on the same held-out
calibration episodes, scored on the same test split. The run's own checkpoint (the plain GRU
gate) is scored again on that split first, and the benchmark stops if it does not reproduce
the F1 the run recorded (the data generation or the checkpoint changed since).
Estimator mode for every figure.

Run: ``.venv/bin/python benchmarks/bench_gate_conv.py [--seeds 0 7]`` (:data:`SEEDS` by
default; about 1.5-2 h per seed on this 2-core machine: some 30 min for the data and the
extra units' rows, the rest the gate's 4000 steps; seeds can run in separate processes), or
``--summarize`` alone. The retrained checkpoint goes to
``runs/bench_gate_conv_seed<s>/``; writes ``benchmarks/results/gate_conv/seed_<s>.json`` and
``benchmarks/results/gate_conv.{json,md}``.
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
import torch  # noqa: E402

import bench_neuralactuator_twin as twin  # noqa: E402
import bench_neuralactuator_twin_gate_seeds as gate_seeds  # noqa: E402
from neuract.atomic import write_json, write_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SEEDS_DIR = RESULTS / "gate_conv"
SEEDS = [0, *gate_seeds.SEEDS]
"""the seeds run by default: the twin benchmark's and the gate-seeds benchmark's"""
CONV = 6
"""convolution layers before the GRU (dilations 1-32; what the session-25 probe used)"""


def out_dir(seed: int) -> Path:
    return ROOT / "runs" / f"bench_gate_conv_seed{seed}"


def run_seed(seed: int) -> dict:
    from neuract.eval import evaluate_estimator
    from neuract.neuralactuator import estimate
    from neuract.neuralactuator.checkpoint import read_config, save_checkpoint
    from neuract.neuralactuator.estimate import gate_samples, select_gate_filter
    from neuract.neuralactuator.gate_rnn import gate_rows, train_gate_rnn
    from neuract.neuralactuator.model import RecurrentGate
    from neuract.pipeline.experiment import (
        _calibration_set,
        calibration_split,
        gate_train_config,
        has_contact,
    )
    from neuract.pipeline.twin_experiment import contact_labelled, gate_extra_rows, twin_split

    t0 = time.perf_counter()
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

    def score(m) -> dict:
        g = evaluate_estimator(lambda tr: estimate(m, tr), test, "NeuralActuator")["gate"]
        return {k: g.get(k) for k in ("f1", "precision", "recall", "n_detected", "n_events",
                                      "latency_s")}

    plain = score(model)
    recorded = gate_seeds.check_recorded(seed, plain["f1"])
    print(f"seed {seed}: the run's GRU gate scores F1 {plain['f1']:.4f} again "
          f"(recorded {recorded})", flush=True)

    # the same estimator, a new gate with the convolution front
    H = model.cfg.gate_rnn
    model.cfg = model.cfg.replace(gate_conv=CONV)
    with torch.random.fork_rng(devices=[]):
        model.gate_rnn = RecurrentGate(model.cfg.n_features, H, CONV)
    exp = dataclasses.replace(cfg.experiment, gate_conv=CONV)
    fit_rows, calib_rows = gate_rows(model, fit_eps), gate_rows(model, g_eps)
    extra = gate_extra_rows(cfg.data, model, twin._progress())
    print(f"seed {seed}: {len(fit_rows)} + {len(extra)} training episodes, "
          f"{len(calib_rows)} calibration episodes; training the gate ...", flush=True)
    out = out_dir(seed)
    out.mkdir(parents=True, exist_ok=True)

    def progress(it, total, info):
        print(f"  gate step {it}/{total}: calibration F1 {info['calib_f1']:.4f}", flush=True)

    rep = train_gate_rnn(model, fit_rows + extra, calib_rows,
                         gate_train_config(exp, str(out / "train_gate.safetensors")), progress)
    del fit_rows, extra
    raw = gate_samples(model, g_eps)
    model.gate_tau_s, model.gate_threshold, model.gate_release, _ = select_gate_filter(
        model, g_eps, exp.gate_tau_grid, raw=raw)
    conv = score(model)
    extra_facts = read_config(run / "checkpoints" / "neuralactuator_estimator")[1]["extra"]
    extra_facts.update(gate_threshold=model.gate_threshold, gate_tau_s=model.gate_tau_s,
                       gate_release=model.gate_release, gate_retrained_by="bench_gate_conv.py")
    save_checkpoint(model, out / "checkpoints" / "neuralactuator_estimator",
                    extra=extra_facts, overwrite=True)
    (out / "train_gate.safetensors").unlink(missing_ok=True)
    res = {"seed": seed, "conv": CONV, "hidden": H, "gru": plain, "gru_recorded_f1": recorded,
           "conv_gate": conv,
           "gate_train": {k: rep[k] for k in ("iterations", "seconds", "kept_iteration",
                                               "calib_f1", "n_train_episodes",
                                               "n_train_samples", "n_calib_episodes")},
           "filter": {"tau_s": model.gate_tau_s, "threshold": model.gate_threshold,
                      "release": model.gate_release},
           "seconds": round(time.perf_counter() - t0, 1)}
    write_json(SEEDS_DIR / f"seed_{seed}.json", res)
    print(json.dumps(res, indent=1), flush=True)
    return res


def summarize() -> int:
    rows = [json.loads(p.read_text()) for p in sorted(SEEDS_DIR.glob("seed_*.json"),
                                                       key=lambda p: int(p.stem[5:]))]
    if not rows:
        print("no seed run yet: run with --seeds first")
        return 2
    table = ["| seed | GRU gate F1 | with convolutions F1 | change | P / R | events | "
             "calibration F1 | gate training [min] |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g, c = r["gru"], r["conv_gate"]
        table.append(f"| {r['seed']} | {g['f1']:.3f} | {c['f1']:.3f} | "
                     f"{c['f1'] - g['f1']:+.3f} | {c['precision']:.3f} / {c['recall']:.3f} | "
                     f"{c['n_detected']}/{c['n_events']} | "
                     f"{r['gate_train']['calib_f1']:.3f} | "
                     f"{r['gate_train']['seconds'] / 60:.0f} |")
    a = np.array([r["gru"]["f1"] for r in rows])
    b = np.array([r["conv_gate"]["f1"] for r in rows])

    def sd(v: np.ndarray) -> float:
        return float(v.std(ddof=1)) if len(v) > 1 else 0.0

    table.append(f"| mean ± sd | {a.mean():.3f} ± {sd(a):.3f} | {b.mean():.3f} ± {sd(b):.3f} "
                 f"| {(b - a).mean():+.3f} | | | | |")
    out = {"seeds": [r["seed"] for r in rows], "conv": CONV, "rows": rows,
           "gru_f1_mean": float(a.mean()), "conv_f1_mean": float(b.mean()),
           "note": gate_seeds.PROVENANCE}
    write_json(RESULTS / "gate_conv.json", out)
    hidden = sorted({r["hidden"] for r in rows})
    md = ("# The recurrent gate with a causal convolution front, against the plain GRU gate\n\n"
          f"Each seed's trained estimator (the twin benchmark's run for seed 0, the gate-seeds "
          f"benchmark's for the others) with only its recurrent gate trained again: {CONV} "
          f"causal dilated convolutions (kernel 3, dilations 1-{2 ** (CONV - 1)}, "
          f"{2 ** (CONV + 1) - 1} samples of receptive field) before the same GRU "
          f"({'/'.join(map(str, hidden))} units), the same training and extra episodes, "
          "schedule and filter calibration; the GRU gate's F1 is the run's own checkpoint "
          "scored again on the same test split (it reproduces the recorded figure). "
          "Estimator mode; contact = external force >= 0.5 N. Target: F1 >= 0.95. "
          f"{gate_seeds.PROVENANCE} Reproduce: `.venv/bin/python benchmarks/bench_gate_conv.py "
          "--seeds ...`.\n\n" + "\n".join(table) + "\n")
    write_text(RESULTS / "gate_conv.md", md)
    print(md)
    return 0


def main(argv: list[str]) -> int:
    # seed 0 is the twin benchmark's run, which this benchmark retrains the gate of too
    return twin.seeds_main(argv, SEEDS, run_seed, summarize, bench_seed=None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
