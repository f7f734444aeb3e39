"""NeuralActuator accuracy on the SO-101 twin, against every baseline, in one run.

Dataset: ``neuract twin`` SO-101 data (hidden servo physics: firmware P/D loop, DC motor,
current limit, saturation, Stribeck + load-dependent friction, backlash, thermal, sag),
all five tasks (free, lift, pick, push, degraded), 4 units, ``MINUTES`` of telemetry; split by
episode (5 % of each task's episodes held out). Protocol: ``neuract.eval`` -- windowed
open-loop rollouts at 10, 50, 100, 300, 600 samples (simulator mode, same measured 8-step past
for every model), and estimator-mode torque RMSE (true torque known on the twin), force MAE,
gate F1 and condition accuracy.

Writes ``benchmarks/results/neuralactuator_twin.json`` and ``.md`` and the full run
(report.html, checkpoints) under ``runs/bench_neuralactuator_twin``.

Run: ``.venv/bin/python benchmarks/bench_neuralactuator_twin.py`` (about 1.5 h on a shared
2-core machine: the committed run took 92 min, 60 of them the recurrent gate with its extra
units' episodes), then ``--condition`` (the motor-condition experiment on 72 min of
degraded-task episodes, about 10 min, merged into the same results); ``--quick`` for the
demo-sized run; ``--render`` rewrites the Markdown from the JSON. The configuration itself
(``twin_config``, ``twin_condition_config``) is in ``common.py``: the checkpoint and seeds
benchmarks read it too.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    describe_twin,
    progress_printer,
    twin_condition_config,
    twin_config,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.pipeline.report import (  # noqa: E402
    condition_balanced,
    episode_end_count,
    markdown_table,
    public,
    summary_markdown,
)
from neuract.pipeline.twin_experiment import (  # noqa: E402
    TwinExperimentConfig,
    run_twin_experiment,
)


def _f3(v):
    """A float to 3 decimals, None to 'n/a', anything else as it is."""
    return "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else v


def render(out: dict) -> str:
    b = out["benchmark"]
    pre = ("Dataset: " + b["dataset"] + ". Split: " + b["split"] + ". Protocol: "
           + b["protocol"] + ". Machine: " + b["machine"] + ". NeuralActuator is trained "
           "pose-only (no torque labels); the twin's hidden true torque scores the torque "
           "estimates. Full report: runs/bench_neuralactuator_twin/report.html. Reproduce: "
           "`.venv/bin/python benchmarks/bench_neuralactuator_twin.py` (then `--condition`).")
    if b.get("contact_label"):
        pre += " Gate label: " + b["contact_label"] + "."
    if b.get("gate"):
        pre += " Contact gate: " + b["gate"] + "."
    md = summary_markdown(out, "NeuralActuator on the SO-101 twin", pre)
    est = (out.get("models") or {}).get("NeuralActuator[estimator]") or {}
    if est.get("gate_tau_scores"):
        md += ("\nGate decision (estimator mode), chosen on the calibration episodes: contact "
               f"probability smoothed with a {est['gate_tau_s']:g} s time constant, a contact "
               f"detected at {est['gate_threshold']:.2f} and held until it falls below "
               f"{est['gate_release']:.2f} (calibration F1 per time constant: "
               + ", ".join(f"{float(k):g} s {v:.3f}" for k, v in est["gate_tau_scores"].items())
               + ")." + _plain_text(out) + "\n")
    raw = out.get("gate_raw_label")
    if raw:
        raw = {k: _f3(v) for k, v in raw.items()}
        md += ("\n## Gate against the twin's raw contact label\n\nThe same NeuralActuator "
               "gate scored against the raw label (contact = any nonzero force, including the "
               "sub-0.5 N rise and fall of every smooth push): "
               f"precision {raw['precision']}, recall {raw['recall']}, "
               f"F1 {raw['f1']} ({raw['n_detected']}/{raw['n_events']} events detected)."
               "\n")
    cond = out.get("condition_experiment")
    if cond:
        rows = [[e["model"], (e.get("condition") or {}).get("accuracy"),
                 condition_balanced(e.get("condition") or {}),
                 (e.get("condition") or {}).get("auc"),
                 episode_end_count(e.get("condition") or {}) or "—"]
                for e in cond["estimation"] if e.get("condition")]
        pm = cond.get("condition_per_motor") or {}
        main_pm = out.get("condition_per_motor") or {}
        md += ("\n## Motor condition (estimator mode)\n\n(The condition column above comes "
               "from the main run's test split, where only "
               f"{100 * (main_pm.get('degraded_share') or 0):.1f} % of motor-samples are "
               "degraded; this separate run, half of whose episodes have degraded motors, "
               "tests it.) " + cond["benchmark"] + _reference_text(cond) + "\n\n"
               + markdown_table(["model (estimator mode)", "accuracy (episode has a degraded "
                                 "motor)", "balanced accuracy", "AUC",
                                 "right at the end of the episode"], rows)
               + f"\n\nNeuralActuator per-motor accuracy: {_f3(pm.get('accuracy'))} over "
               f"{pm.get('n_samples')} samples x {pm.get('n_motors')} motors (degraded share "
               f"{_f3(pm.get('degraded_share'))}).\n")
    return md


def _reference_text(run: dict) -> str:
    """The servo the estimator's reference channels compare with, if it reads them."""
    ref = ((run.get("models") or {}).get("NeuralActuator[estimator]") or {}).get("reference")
    return (f" The estimator reads the servo-reference channels, built on {ref} (the best "
            "parametric servo on the training episodes)." if ref else "")


def _plain_text(out: dict) -> str:
    """The same model's test gate with one plain threshold, if measured."""
    p = out.get("gate_plain")
    g = next((e.get("gate") for e in out.get("estimation", [])
              if e["model"] == "NeuralActuator"), None)
    if not p or p.get("f1") is None or not g:
        return ""
    return (f" Test gate with the filter: F1 {g['f1']:.3f} (precision {g['precision']:.3f}, "
            f"recall {g['recall']:.3f}, {g['n_detected']}/{g['n_events']} events); the same "
            f"model with one plain threshold ({p['threshold']:.2f}, calibrated on the "
            f"same episodes): test gate F1 {p['f1']:.3f} (precision {p['precision']:.3f}, "
            f"recall {p['recall']:.3f}, {p['n_detected']}/{p['n_events']} events).")


def _smoothing_text(cfg: TwinExperimentConfig, res: dict) -> str:
    grid = cfg.experiment.condition_tau_grid
    if not grid:
        return "5 s time constant"
    m = res["models"].get("NeuralActuator[estimator]", {})
    return (f"time constant chosen with the threshold on the calibration episodes from "
            f"{[float(g) for g in grid]} s: {m.get('condition_tau_s')} s")


def run_condition() -> int:
    import json

    cfg = twin_condition_config()
    res = run_twin_experiment(cfg, progress_printer(),
                              title="NeuralActuator motor condition (twin)")
    path = RESULTS / "neuralactuator_twin.json"
    out = json.loads(path.read_text())
    cond = {k: v for k, v in public(res).items() if k in ("estimation", "condition_per_motor",
                                                          "models", "data", "timings_s")}
    cond["benchmark"] = (f"Dataset: twin so101, {cfg.data.minutes:g} min of 'degraded'-task "
                         f"episodes (half with 1-2 degraded motors: friction x1.8-3, kt "
                         f"x0.65-0.85, backlash x2-4), {cfg.data.units} units, seed "
                         f"{cfg.data.seed}; split by episode (degraded / normal episodes held "
                         "out apart); NeuralActuator estimator mode, "
                         f"{cfg.experiment.est_steps} steps"
                         + (f" (each with {cfg.experiment.aux_batch} extra windows for the "
                            "labelled heads)" if cfg.experiment.aux_batch else "")
                         + (", identification channels (running least-squares identification "
                            "of each motor over the episode)" if cfg.experiment.ident else "")
                         + (f", condition head '{cfg.experiment.condition_head}'"
                            + {"motor": " (one small network shared by the motors, over each "
                                        "motor's own channels)",
                               "both": " (the logits of one small network shared by the "
                                       "motors, over each motor's own channels, plus the "
                                       "trunk's)"}.get(cfg.experiment.condition_head, "")
                            if cfg.experiment.condition_head != "trunk" else "") + ", "
                         + ("per-motor thresholds" if cfg.experiment.condition_per_motor_threshold
                            else "threshold") + " calibrated on "
                         f"{cfg.experiment.calibration_fraction:.0%} of the training episodes "
                         "held out of its training; condition smoothed causally ("
                         + _smoothing_text(cfg, res) + "). Full report: "
                         "runs/bench_neuralactuator_twin_condition/report.html.")
    out["condition_experiment"] = cond
    write_result(path, out, measured=["condition_experiment"])
    write_text(RESULTS / "neuralactuator_twin.md", render(out))
    print((RESULTS / "neuralactuator_twin.md").read_text())
    return 0


def main(argv: list[str]) -> int:
    torch.set_num_threads(1)
    if "--render" in argv:
        import json

        out = json.loads((RESULTS / "neuralactuator_twin.json").read_text())
        write_text(RESULTS / "neuralactuator_twin.md", render(out))
        return 0
    if "--condition" in argv:
        return run_condition()
    quick = "--quick" in argv
    cfg = twin_config(quick)
    progress = progress_printer()
    res = run_twin_experiment(cfg, progress)
    out = public(res)
    out["benchmark"] = {**describe_twin(cfg), "quick": quick}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "neuralactuator_twin.json"
    if path.is_file() and not quick:
        import json

        # the condition experiment is a separate run (--condition, before or after this one)
        prev = json.loads(path.read_text()).get("condition_experiment")
        if prev:
            out["condition_experiment"] = prev
    write_result(path, out, measured=[k for k in out if k != "condition_experiment"])
    write_text(RESULTS / "neuralactuator_twin.md", render(out))
    print((RESULTS / "neuralactuator_twin.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
