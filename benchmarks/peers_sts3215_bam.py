"""BAM (PyPI better-actuator-models) on the STS3215 benchmark split; runs in the peers venv.

Called by bench_sts3215.py as ``PEERS_PYTHON peers_sts3215_bam.py IN.npz OUT.npz PARAMS_DIR
SECONDS``. Fits BAM's M1 and M6 with BAM's own simulator and its CMA-ES sampler (optuna, as
``bam.fit`` does) on the training runs, each for a wall-time budget, then simulates the test
runs with ``simulate_control=True`` (the firmware loop sees the simulated position, never the
measured one). Also simulates K-Scale's published fits (PARAMS_DIR/m1.json, m6.json) with
BAM's simulator, at their 15 V convention and at the measured voltage (PARAMS_DIR "": none,
the data are another bench's).

The STS3215 at 12 V is modelled as BAM's VoltageControlledActuator with the measured error
gain 0.1649 and duty clip 1 (K-Scale's ``sts3215v12`` actuator is not in the PyPI release).
Not imported by neuract; not run by run_all (no ``bench_`` prefix).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def main() -> int:
    inp, outp, params_dir, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    import optuna
    from bam.actuator import VoltageControlledActuator
    from bam.model import models
    from bam.parameter import Parameter
    from bam.simulate import Simulator
    from bam.testbench import Pendulum

    class STS3215v12(VoltageControlledActuator):
        def __init__(self, testbench_class):
            super().__init__(testbench_class, vin=12.0, kp=32, error_gain=0.1649, max_pwm=1.0)

        def initialize(self):
            self.model.kt = Parameter(3.0, 0.05, 10.0)
            self.model.R = Parameter(5.0, 0.1, 20.0)
            self.model.armature = Parameter(0.02, 0.001, 0.05)

        def get_extra_inertia(self):
            return self.model.armature.value

    z = np.load(inp)

    def batch_log(prefix: str, vin=None) -> dict:
        g = lambda k: z[f"{prefix}_{k}"]  # noqa: E731
        q, qd, goal, en = g("q"), g("qd"), g("goal"), g("enable")
        n, T = q.shape
        entries = [{"position": q[:, t], "speed": qd[:, t], "goal_position": goal[:, t],
                    "torque_enable": en[:, t] > 0.5} for t in range(T)]
        return {"mass": g("mass"), "arm_mass": g("arm_mass"), "length": g("length"),
                "kp": g("kp"), "vin": g("voltage") if vin is None else np.full(n, vin),
                "dt": float(g("dt")), "entries": entries}

    def make(name: str, values: dict | None = None):
        model = models[name]()
        model.set_actuator(STS3215v12(Pendulum))
        if values:
            model.load_parameters_from_dict(values)
        return model

    def simulate(model, log) -> np.ndarray:
        pos, _, _ = Simulator(model).rollout_log(log, simulate_control=True)
        return np.stack([np.broadcast_to(p, log["mass"].shape) for p in pos], axis=1)

    def mae(q_sim, prefix) -> float:
        m = z[f"{prefix}_mask"]
        return float((np.abs(q_sim - z[f"{prefix}_q"]) * m).sum() / m.sum())

    train, test = batch_log("train"), batch_log("test")
    out: dict[str, np.ndarray] = {}
    info: dict[str, dict] = {"models": {}}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for name in ("m1", "m6"):
        t0 = time.perf_counter()

        def objective(trial, name=name):
            model = make(name)
            for pname, p in model.get_parameters().items():
                if p.optimize:
                    p.value = trial.suggest_float(pname, p.min, p.max)
            return mae(simulate(model, train), "train")

        sampler = optuna.samplers.CmaEsSampler(restart_strategy="bipop", seed=0)
        study = optuna.create_study(sampler=sampler)
        study.optimize(objective, timeout=seconds)
        secs = time.perf_counter() - t0
        best = make(name, study.best_params)
        key = f"bam_{name}_fit"
        out[key] = simulate(best, test)
        info["models"][key] = {
            "fit_seconds": secs, "trials": len(study.trials), "train_mae_rad": study.best_value,
            "parameters": {k: float(v) for k, v in study.best_params.items()},
            "notes": f"BAM {name.upper()} fitted with BAM's CMA-ES (optuna) on "
                     f"{len(train['mass'])} training runs for {seconds:.0f} s "
                     f"({len(study.trials)} trials), BAM simulator",
        }
        print(f"BAM {name}: {len(study.trials)} trials, train MAE {study.best_value:.4f}",
              flush=True)
    for name in ("m1", "m6") if params_dir else ():  # "": not the STS3215 bench
        values = json.load(open(f"{params_dir}/{name}.json"))
        for vin, tag in ((15.0, "15V"), (None, "measured_V")):
            key = f"kscale_{name}_published_bam_sim_{tag}"
            out[key] = simulate(make(name, values), batch_log("test", vin))
            info["models"][key] = {"fit_seconds": 0.0, "notes": (
                f"K-Scale's published {name.upper()} fit, BAM's own simulator, supply "
                + ("15 V (K-Scale's convention)" if vin else "measured per run"))}
    out["info"] = np.array(json.dumps(info))
    np.savez(outp, **out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
