"""The trained contact gate on episodes ten times longer than it trained on (estimator mode).

The twin benchmark's estimator, recurrent gate included, trains and is scored on 30-s episodes;
the recurrent gate carries its state over an episode. A running robot streams for much longer.
This script reads the twin benchmark's checkpoint (``runs/bench_neuralactuator_twin``, written
by ``bench_neuralactuator_twin.py``), generates new push episodes of ``EPISODE_S`` seconds for
the benchmark's own units (the same data seed, episodes numbered past every episode the
benchmark used, so no plan is shared with its training or test data), and scores the
calibrated gate against the benchmark's contact label in consecutive ``BLOCK_S``-s blocks of
the episodes, pooled over the episodes: if the gate's state drifts as an episode goes on, the
later blocks score lower. The benchmark's own push test episodes (30 s) are scored beside them.

Writes ``benchmarks/results/gate_long_episodes.json`` and ``.md``.

Run: ``.venv/bin/python benchmarks/studies/bench_gate_long_episodes.py`` (a few minutes, after
``bench_neuralactuator_twin.py``); ``--run DIR`` scores another run of the benchmark's
configuration (its ``checkpoints/`` and ``results.json``; e.g. a seeds benchmark's run, on its
own data seed), ``--out FILE.json`` writes elsewhere.
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
from neuract.eval.gate import gate_counts  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402
from neuract.pipeline.twin_data import contact_labelled  # noqa: E402
from neuract.twin.generate import episode_name, generate, run_chunk  # noqa: E402

EPISODE_S = 300.0
"""length of the long episodes [s] (ten times the benchmark's)"""
EPISODES_PER_UNIT = 2
BLOCK_S = 60.0
"""the scoring blocks [s]"""
EPISODE_OFFSET = 100_000
"""first episode number of the long episodes (past every episode of the benchmark's main,
worn-motor and test data)"""


def counts(eps, t0: float, t1: float):
    """Pooled gate counts of the samples with ``t0 <= t - t[0] < t1``."""
    total = None
    for tr, o in eps:
        t = np.asarray(tr["t"], float)
        rel = t - t[0]
        v = o["valid"] & (rel >= t0) & (rel < t1)
        c = gate_counts(o["contact_prob"], tr["contact"], t, 0.5, v)
        total = c if total is None else total + c
    return total


def reset_every(model, n: int):
    """``model`` with its recurrent gate's state cleared every ``n`` samples (as at an
    episode's start), or None for a model without one."""
    import copy

    if getattr(model, "gate_rnn", None) is None:
        return None
    m = copy.copy(model)
    run = model.recurrent_gate

    def gate(x_last, state=None):
        return torch.cat([run(x_last[s:s + n])[0] for s in range(0, len(x_last), n)]), None

    m.recurrent_gate = gate
    return m


def row(label: str, c) -> list:
    m = c.metrics()

    def f(x):
        return f"{x:.3f}" if x is not None else "—"

    return [label, f(m.get("f1")), f(m.get("precision")), f(m.get("recall")),
            f"{m['n_detected']}/{m['n_events']}", int(c.tp + c.fn), int(c.fp)]


def main(argv: list[str]) -> int:
    from common import MAIN_RUN, machine, main_run_episodes

    torch.set_num_threads(1)
    run_dir = Path(argv[argv.index("--run") + 1]) if "--run" in argv else MAIN_RUN
    checkpoint = run_dir / "checkpoints" / "neuralactuator_estimator"
    run = main_run_episodes(run_dir)
    if run is None:
        return 2
    model, cfg, gen, rows, test_names = run
    thr = cfg.data.contact_min_force_n
    long_gen = dataclasses.replace(
        gen, tasks=("push",), minutes=EPISODE_S / 60 * EPISODES_PER_UNIT * gen.units,
        episode_offset=EPISODE_OFFSET, workers=1,
        sim=dataclasses.replace(gen.sim, episode_s=EPISODE_S))
    print(f"generating {long_gen.n_episodes()} push episodes of {EPISODE_S:g} s ...", flush=True)
    long_eps = contact_labelled(generate(long_gen), thr)
    dt = float(np.median(np.diff(np.asarray(long_eps[0]["t"], float))))
    reset = reset_every(model, int(round(gen.sim.episode_s / dt)))
    scored, scored_reset = [], []
    for k, tr in enumerate(long_eps):
        print(f"estimating long episode {k + 1}/{len(long_eps)} ...", flush=True)
        scored.append((tr, estimate(model, tr)))
        if reset is not None:
            scored_reset.append((tr, estimate(reset, tr)))
    test_rows = [r for r in rows if r[3] == "push" and episode_name(r) in test_names]
    short = [(tr, estimate(model, tr)) for tr in contact_labelled(run_chunk(gen, test_rows), thr)]
    table, blocks = [], []
    c = counts(short, 0.0, np.inf)
    table.append(row(f"benchmark's push test episodes ({len(short)} x {gen.sim.episode_s:g} s)",
                     c))
    short_rec = {"episodes": len(short), **c.metrics()}
    variants = {"state carried over the episode": scored}
    if scored_reset:
        variants[f"state cleared every {gen.sim.episode_s:g} s"] = scored_reset
    whole = {}
    for what, eps in variants.items():
        t0 = 0.0
        while t0 < EPISODE_S - 1e-9:
            c = counts(eps, t0, t0 + BLOCK_S)
            blocks.append({"gate_state": what, "from_s": t0, "to_s": t0 + BLOCK_S,
                           **c.metrics()})
            table.append(row(f"long episodes, {t0:g}-{t0 + BLOCK_S:g} s; {what}", c))
            t0 += BLOCK_S
        c = counts(eps, 0.0, np.inf)
        whole[what] = c.metrics()
        table.append(row(f"long episodes, whole ({len(eps)} x {EPISODE_S:g} s); {what}", c))
    out = {"checkpoint": str(checkpoint.resolve().relative_to(ROOT)), "machine": machine(),
           "contact_label_n": thr, "episode_s": EPISODE_S, "episodes": len(scored),
           "episode_offset": EPISODE_OFFSET, "block_s": BLOCK_S,
           "gate": "recurrent" if getattr(model, "gate_rnn", None) is not None else "head",
           "blocks": blocks, "whole": whole, "benchmark_push_test": short_rec}
    if "--out" in argv:  # elsewhere than the results (e.g. for another run's checkpoint)
        out_json = Path(argv[argv.index("--out") + 1])
    else:
        out_json = RESULTS / "gate_long_episodes.json"
    write_result(out_json, out)
    md = ("# The contact gate on 300-s episodes (estimator mode)\n\n"
          f"Checkpoint: the twin benchmark's estimator (`{out['checkpoint']}`, gate: "
          f"{out['gate']}), its calibrated gate, contact = external force >= {thr:g} N. "
          f"{len(scored)} new push episodes of {EPISODE_S:g} s of the benchmark's "
          f"{gen.units} units (data seed {gen.seed}, episodes numbered from "
          f"{EPISODE_OFFSET}: no plan shared with the benchmark's data), scored in "
          f"{BLOCK_S:g}-s blocks pooled over the episodes; the estimator and its gate trained "
          f"on {gen.sim.episode_s:g}-s episodes. A recurrent gate is scored twice: its state "
          f"carried over each episode (as `estimate` and the stream run it), and cleared "
          f"every {gen.sim.episode_s:g} s as at the start of the episodes it trained on (the "
          "Transformer's features are the same in both). Contact events: labelled contact "
          "intervals (detected / all; an interval cut by a block boundary counts in both blocks). "
          "Machine: "
          f"{out['machine']}. Reproduce: `.venv/bin/python "
          "benchmarks/studies/bench_gate_long_episodes.py` (after "
          "`bench_neuralactuator_twin.py`).\n\n"
          + markdown_table(["episodes", "gate F1", "precision", "recall",
                            "contact events detected", "contact samples",
                            "false-alarm samples"], table) + "\n")
    write_text(out_json.with_suffix(".md"), md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
