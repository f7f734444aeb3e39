"""NeuralActuator online adaptation to a new unit (SO-101 twin, simulator mode).

Base: ``BASE_MINUTES`` of twin telemetry from 4 units (seed 0, tasks free / lift / pick /
push) -> the pose-only parametric servo fits and a simulator-mode NeuralActuator on the best
of them (the demo's pipeline, ``run_experiment``). New unit: a fifth unit never seen (twin seed
``NEW_SEED``: its own hidden servo physics), ``NEW_MINUTES`` of telemetry, split by episode (25 %
of each task's episodes held out for testing). On the new unit's test episodes, open-loop
rollouts (same protocol and windows for every model):

* the base NeuralActuator as it is, and after ``neuract adapt`` (``ADAPT_STEPS`` steps on the
  new unit's adaptation episodes; the residual is fine-tuned, the old units' servo stays);
* trained on the new unit's adaptation episodes alone (``run_experiment``: parametric servo
  refits (Coulomb-viscous, Stribeck) and a NeuralActuator on the best of them, from scratch);
* the base run's parametric servo (old units) and MuJoCo's default servo.

Writes ``benchmarks/results/neuralactuator_adapt.{json,md}``; runs under
``runs/bench_neuralactuator_adapt``.
Run: ``.venv/bin/python benchmarks/bench_neuralactuator_adapt.py``.
"""

from __future__ import annotations

import copy
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    ROOT,
    machine,
    progress_printer,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.pipeline.experiment import run_experiment  # noqa: E402
from neuract.pipeline.experiment_config import ExperimentConfig  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402
from neuract.pipeline.setups import so101_setup  # noqa: E402
from neuract.pipeline.splits import split_by_task  # noqa: E402
from neuract.pipeline.twin_data import TwinDataConfig, generate_twin  # noqa: E402

RUN = ROOT / "runs" / "bench_neuralactuator_adapt"
BASE_MINUTES = 36.0
NEW_MINUTES = 8.0
NEW_SEED = 101
ADAPT_STEPS = 100
HORIZONS = (10, 50, 100, 300)
TASKS = ("free", "lift", "pick", "push")


def main() -> int:
    from neuract.data import write_dataset
    from neuract.eval import evaluate_rollouts
    from neuract.neuralactuator import simulator
    from neuract.pipeline import baselines as bl
    from neuract.pipeline.adapt_verb import AdaptConfig, run_adapt
    from neuract.pipeline.checkpoints import load_model

    torch.set_num_threads(1)
    progress = progress_printer()
    t_all = time.perf_counter()
    setup = so101_setup()
    exp = ExperimentConfig(sim_steps=300, est_steps=0, baseline_iters=40, neural_baselines=(),
                           horizons=HORIZONS, full=False, figure_samples=100)
    print("base: 4 units, seed 0", flush=True)
    base_eps = generate_twin(TwinDataConfig(minutes=BASE_MINUTES, tasks=TASKS), progress)
    base_train, base_test = split_by_task(base_eps, 0.1)
    base = run_experiment(setup, base_train, base_test, exp, out_dir=RUN / "base",
                          progress=progress)
    base_servo = base["best_parametric"]["name"]
    print(f"new unit: seed {NEW_SEED}", flush=True)
    new_eps = generate_twin(TwinDataConfig(minutes=NEW_MINUTES, units=1, tasks=TASKS,
                                           seed=NEW_SEED), progress)
    adapt_eps, test_eps = split_by_task(new_eps, 0.25)
    scratch = run_experiment(setup, adapt_eps, test_eps, exp, out_dir=RUN / "scratch",
                             progress=progress)
    ds = write_dataset(adapt_eps, RUN / "new_unit_adaptation", overwrite=True)
    base_ck = RUN / "base" / "checkpoints" / "neuralactuator_simulator"
    adapted_ck = RUN / "adapted_simulator"
    summary = run_adapt(AdaptConfig(checkpoint=base_ck, data=ds, out=adapted_ck,
                                    steps=ADAPT_STEPS, holdout=0.0, overwrite=True, quiet=True))
    inputs = ("q_goal", "voltage")
    rows: dict[str, dict] = {}

    def score(name, sim):
        recs = evaluate_rollouts(sim, test_eps, name, horizons=HORIZONS, history=8,
                                 inputs=inputs)
        rows[name] = {str(r["horizon"]): r["arm_mean_deg"] for r in recs}

    base_model, adapted = load_model(base_ck), load_model(adapted_ck)
    score("NeuralActuator (base, old units)", simulator(base_model, setup.robot, 2))
    score(f"NeuralActuator adapted ({ADAPT_STEPS} steps)", simulator(adapted, setup.robot, 2))
    score(f"base parametric servo ({base_servo}, old units)",
          bl.system_simulator(copy.deepcopy(base_model.servo_model).double(), setup.robot64,
                              2))
    for r in scratch["rollouts"]:
        name = {"NeuralActuator": "NeuralActuator from scratch (new unit only)"}.get(
            r["model"], r["model"] + (" (new unit refit)" if r["model"].startswith("parametric")
                                      else ""))
        rows.setdefault(name, {})[str(r["horizon"])] = r["arm_mean_deg"]
    out = {
        "benchmark": {
            "dataset": f"twin so101: base {BASE_MINUTES:g} min from 4 units (seed 0), new unit "
                       f"{NEW_MINUTES:g} min (1 unit, seed {NEW_SEED}), tasks {list(TASKS)}",
            "split": f"new unit by episode: {len(adapt_eps)} adaptation episodes "
                     f"({sum(len(t) for t in adapt_eps)} samples), {len(test_eps)} test episodes",
            "protocol": f"neuract.eval open-loop rollouts (simulator mode), horizons "
                        f"{list(HORIZONS)}, history 8; arm-mean joint MAE [deg]",
            "machine": machine(),
            "adapt": {k: summary[k] for k in ("steps", "seconds")},
            "base_parametric": base_servo,
            "seconds": round(time.perf_counter() - t_all, 1),
        },
        "rollouts": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_result(RESULTS / "neuralactuator_adapt.json", out)
    write_text(RESULTS / "neuralactuator_adapt.md", render(out))
    print((RESULTS / "neuralactuator_adapt.md").read_text())
    return 0


def render(out: dict) -> str:
    b = out["benchmark"]
    table = markdown_table(["model (simulator mode)"] + [f"h={h}" for h in HORIZONS],
                           [[name] + [v.get(str(h)) for h in HORIZONS]
                            for name, v in out["rollouts"].items()])
    return ("# NeuralActuator: adaptation to a new unit (SO-101 twin)\n\n"
            f"Dataset: {b['dataset']}. Split: {b['split']}. Protocol: {b['protocol']}. "
            f"Machine: {b['machine']}. Adaptation: `neuract adapt`, {b['adapt']['steps']} "
            f"steps ({b['adapt']['seconds']} s). Whole run {b['seconds']} s. Reproduce: "
            "`.venv/bin/python benchmarks/bench_neuralactuator_adapt.py`.\n\n" + table + "\n")


if __name__ == "__main__":
    sys.exit(main())
