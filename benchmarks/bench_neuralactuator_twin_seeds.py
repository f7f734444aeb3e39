"""NeuralActuator's twin estimation figures over several data seeds: error bars for the twin
benchmark, whose single test split holds only 16 episodes.

Each seed generates its own twin data (``TwinDataConfig(seed=s)``, otherwise the twin
benchmark's: 144 min, 5 tasks, 4 units, 5 % of each task's episodes held out) and trains the
benchmark's estimator-mode NeuralActuator with the same configuration; the parametric servo
baselines are fitted as in the benchmark (torque ratio against the one chosen on the training
episodes), the simulator-mode models and rollouts are left out (the estimator's figures do
not depend on them). Seed 0 is the twin benchmark itself: its figures are read from
``neuralactuator_twin.json``, not recomputed.

Run: ``.venv/bin/python benchmarks/bench_neuralactuator_twin_seeds.py [--seeds 7 11 13]``
(the default seeds; about 15 min per seed on one core, so seeds can run in separate
processes, each followed by the summary), or ``--summarize`` alone. Every seed here uses the
gate head (``gate_rnn=0``; the recurrent gate's seeds: ``bench_neuralactuator_twin_gate_seeds.py``).
The summary refuses to pool seeds whose estimators decide contact with different gates: since
the twin benchmark (seed 0) uses the recurrent gate, it refuses until seed 0 is scored with
the gate head too; the committed summary is from before (session 19).
Writes ``benchmarks/results/twin_seeds/seed_<s>.json`` and
``benchmarks/results/neuralactuator_twin_seeds.{json,md}``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bench_neuralactuator_twin as twin  # noqa: E402
from neuract.atomic import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SEEDS_DIR = RESULTS / "twin_seeds"


def figures(res: dict) -> dict:
    """The target figures of one twin run's public results."""
    est = {e["model"]: e for e in res["estimation"]}
    na = est["NeuralActuator"]
    best = res["best_parametric"]["name"]
    par = est[best]["torque_rmse_mean"]
    cond = na.get("condition") or {}
    return {"gate_kind": gate_kind(res), "torque_rmse": na["torque_rmse_mean"],
            "best_parametric": best,
            "parametric_torque_rmse": par, "torque_ratio": par / na["torque_rmse_mean"],
            "force_mae": (na.get("force") or {}).get("all"),
            "gate_f1": (na.get("gate") or {}).get("f1"),
            "gate_f1_plain": (res.get("gate_plain") or {}).get("f1"),
            "gate_f1_raw_label": (res.get("gate_raw_label") or {}).get("f1"),
            "condition_accuracy": cond.get("accuracy"),
            "condition_svm": (est.get("condition svm", {}).get("condition") or {}).get("accuracy"),
            "condition_rf": (est.get("condition random_forest", {}).get("condition")
                             or {}).get("accuracy"),
            "n_test_episodes": res["data"].get("n_test_episodes")}


def gate_kind(res: dict) -> str:
    """Which contact gate a run's estimator decides with: ``head`` (the Transformer's gate
    head) or ``recurrent <H> units`` (``, <n> convolutions`` with a convolution front,
    ``, fixed lag <D>`` with a lag, `` decided at <k>`` with a shorter decision lag;
    ``+ extra units`` when it also trained on other units'
    episodes, with their tasks)."""
    g = ((res.get("models") or {}).get("NeuralActuator[estimator]") or {}).get("gate_rnn") or {}
    if not g.get("trained"):
        return "head"
    kind = (f"recurrent {g['hidden']} units"
            + (f", {g['conv']} convolutions" if g.get("conv") else "")
            + (f", fixed lag {g['lag']}" if g.get("lag") else "")
            + (f" decided at {g['decide']}" if "decide" in g else ""))
    if not g.get("extra_episodes"):
        return kind
    tasks = (res.get("data") or {}).get("gate_train_tasks")
    return kind + " + extra units" + (f" ({', '.join(tasks)})" if tasks else "")


def run_seed(seed: int) -> dict:
    # the gate head, as this file's committed seeds (the recurrent gate's seeds:
    # bench_neuralactuator_twin_gate_seeds.py)
    res = twin.estimator_run(f"bench_twin_seed{seed}", f"twin seed {seed}",
                             {"seed": seed, "gate_train_minutes": 0.0}, gate_rnn=0)
    out = {"seed": seed, **figures(res)}
    write_json(SEEDS_DIR / f"seed_{seed}.json", out)
    print(json.dumps(out, indent=1))
    return out


KEYS = (("torque_ratio", "torque ratio (parametric / ours, target >= 2)", "{:.2f}x"),
        ("torque_rmse", "torque RMSE [N m]", "{:.3f}"),
        ("force_mae", "force MAE [N] (target <= 0.3)", "{:.3f}"),
        ("gate_f1", "gate F1 (target >= 0.95)", "{:.3f}"),
        ("gate_f1_plain", "gate F1, same model, one plain threshold", "{:.3f}"),
        ("gate_f1_raw_label", "gate F1, raw label", "{:.3f}"),
        ("condition_accuracy", "condition accuracy, main mix (target >= 0.95)", "{:.3f}"),
        ("condition_svm", "condition SVM", "{:.3f}"),
        ("condition_rf", "condition random forest", "{:.3f}"))


def seed_table(rows: list[dict]) -> tuple[list, dict]:
    """(Markdown rows, stats) of the seeds' figures: per :data:`KEYS` figure, every seed's
    value, the mean and the sample sd (NaN-aware)."""
    table, stats = [], {}
    for k, name, fmt in KEYS:
        v = np.array([np.nan if r.get(k) is None else r[k] for r in rows], dtype=float)
        mean, sd = float(np.nanmean(v)), float(np.nanstd(v, ddof=1)) if len(v) > 1 else 0.0
        stats[k] = {"values": v.tolist(), "mean": mean, "sd": sd}
        table.append([name] + [fmt.format(x) for x in v] + [fmt.format(mean), fmt.format(sd)])
    return table, stats


def summarize() -> int:
    main = json.loads((RESULTS / "neuralactuator_twin.json").read_text())
    rows = [{"seed": 0, **figures(main)}]
    rows += [json.loads(p.read_text()) for p in sorted(SEEDS_DIR.glob("seed_*.json"),
                                                       key=lambda p: int(p.stem[5:]))]
    kinds = {r["seed"]: r.get("gate_kind", "head") for r in rows}  # older files: the head
    if len(set(kinds.values())) > 1:
        print(f"the seeds' estimators decide contact with different gates ({kinds}): rerun "
              "the seeds whose gate differs from seed 0's (the twin benchmark's) with the "
              "current configuration before summarizing")
        return 2
    seeds = [r["seed"] for r in rows]
    table, stats = seed_table(rows)
    out = {"seeds": seeds, "rows": rows, "stats": stats,
           "note": "seed 0 = the twin benchmark (neuralactuator_twin.json); other seeds: the "
                   "same estimator configuration on their own twin data and split"}
    return twin.write_seeds_summary(
        "neuralactuator_twin_seeds", out, "NeuralActuator on the SO-101 twin, over data seeds",
        "Each seed: its own 144 min of twin data, 5 % of each task's episodes held out "
        f"({rows[0].get('n_test_episodes')} test episodes), the twin benchmark's "
        "estimator-mode configuration (estimator mode for every figure here). Seed 0 is the "
        "twin benchmark itself. Reproduce: `.venv/bin/python "
        "benchmarks/bench_neuralactuator_twin_seeds.py --seeds ...` then `--summarize`.", table)


def main(argv: list[str]) -> int:
    return twin.seeds_main(argv, [7, 11, 13], run_seed, summarize)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
