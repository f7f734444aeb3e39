"""The recorder's rate on the emulated bus with the live estimator in the loop.

``neuract record``'s loop (:class:`neuract.record.Recorder`: a sync write of the goals, one
sync read of the six STS3215's telemetry block, each tick) against
:class:`neuract.bus.BusEmulator` on its pty, on the wall clock at 1 Mbps, with a
:class:`neuract.estimate.stream.StreamingEstimator` stepping on every sample (an untrained
NeuralActuator estimator of the default size, physics channels from MuJoCo: its weights do not
change its cost). The emulator runs in a process of its own (as a real adapter is a device of
its own; in one process its server thread would share the interpreter with the recorder).

Keys: ``rate_hz`` (samples a second over the run), ``p99_jitter_ms`` (99th percentile of
``|period - 1/rate_set|`` between consecutive samples' timestamps), ``bus_utilisation`` (the
bus's wire time per tick times the rate: 1 would be the bus's own limit at 1 Mbps),
``bus_limit_hz`` and the estimator's per-step time.

    python benchmarks/bench_recorder.py [--seconds 20] [--rate-hz 100] [--physics-hz 500]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import cpu_name, write_result  # noqa: E402
from neuract.bus import BusClient  # noqa: E402
from neuract.estimate.stream import StreamingEstimator  # noqa: E402
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig  # noqa: E402
from neuract.record import RecordConfig, WallClock  # noqa: E402
from neuract.record.session import Session, record_session  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_HZ = 60.0
TARGET_JITTER_MS = 2.0
SERVER = """
import sys, time
from neuract.bus import BusEmulator
emu = BusEmulator(robot="so101", clock="wall", duration_s=float(sys.argv[1]),
                  physics_hz=float(sys.argv[2])).start()
print(emu.port, flush=True)
sys.stdin.read()  # until the recorder closes the pipe
emu.close()
"""


def emulator(seconds: float, physics_hz: float) -> tuple[subprocess.Popen, str]:
    """A wall-clock emulated SO-101 in a process of its own; (process, its pty)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(seconds), str(physics_hz)], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate-hz", type=float, default=100.0)
    ap.add_argument("--physics-hz", type=float, default=500.0,
                    help="the emulator's physics rate (its default 500; lower where a loaded "
                         "machine cannot run the twin in real time)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = NeuralActuator(NeuralActuatorConfig(n_joints=6, effort="load",
                                                physics_robot="so101",
                                                physics_site="gripperframe")).eval()
    est = StreamingEstimator(model)
    step_s: list[float] = []
    busy_s: list[float] = []
    outs = {"valid": 0}

    def on_tick(tick, sample):
        busy_s.append(tick.busy_s)
        if sample is None:
            return
        t0 = time.perf_counter()
        out = est.step({"t": sample["t"], **{c: sample[c] for c in est.inputs}})
        step_s.append(time.perf_counter() - t0)
        outs["valid"] += bool(out["valid"])

    with tempfile.TemporaryDirectory() as tmp:
        cfg = RecordConfig(out=Path(tmp) / "rec", arm="so101", emulate=True,
                           rate_hz=args.rate_hz, duration_s=args.seconds, excite_rad=0.2,
                           quiet=True)
        proc, port = emulator(args.seconds + 60, args.physics_hz)
        bus = BusClient(port, "scs", cfg.baud, cfg.timeout_s)
        try:
            summary = record_session(cfg, Session(bus, WallClock(), None, [], port),
                                     on_tick=on_tick)
        finally:
            bus.close()
            proc.stdin.close()
            proc.wait(timeout=30)
        from neuract.data.dataset import Dataset
        tr = Dataset(cfg.out)[0]
    t = np.asarray(tr["t"])
    periods = np.diff(t)
    jitter_ms = np.abs(periods - 1.0 / args.rate_hz) * 1e3
    rate = (len(t) - 1) / (t[-1] - t[0])
    ep = summary["episodes"][0]
    result = {
        "rate_hz": round(float(rate), 2),
        "rate_set_hz": args.rate_hz,
        "p99_jitter_ms": round(float(np.percentile(jitter_ms, 99)), 3),
        "p50_jitter_ms": round(float(np.percentile(jitter_ms, 50)), 3),
        "max_jitter_ms": round(float(jitter_ms.max()), 3),
        "bus_utilisation": round(float(summary["wire_s_per_tick"] * rate), 4),
        "bus_limit_hz": round(float(summary["bus_limit_hz"]), 1),
        "ratio_to_bus_limit": round(float(rate / summary["bus_limit_hz"]), 4),
        "servos": 6, "baud": cfg.baud, "emulator_physics_hz": args.physics_hz,
        "seconds": args.seconds,
        "samples": int(len(t)), "dropped_reads": int(ep["dropped_reads"]),
        "overruns": int(ep["counts"]["overruns"]),
        "exchange_p50_ms": round(float(np.median(busy_s)) * 1e3, 3),
        "exchange_p99_ms": round(float(np.percentile(busy_s, 99)) * 1e3, 3),
        "estimator": {"backend": est.backend, "physics_backend": est.physics_backend,
                      "weights": "untrained (default size; timing only)",
                      "step_p50_ms": round(float(np.median(step_s)) * 1e3, 3),
                      "step_p99_ms": round(float(np.percentile(step_s, 99)) * 1e3, 3),
                      "valid_outputs": outs["valid"]},
        "passes": {"rate": bool(rate >= TARGET_HZ),
                   "jitter": bool(np.percentile(jitter_ms, 99) < TARGET_JITTER_MS)},
        "cpu": cpu_name(), "load_avg_1m": round(os.getloadavg()[0], 2),
        "note": "emulator (its own process) and recorder on the wall clock; the machine is "
                "shared with other jobs (see load_avg_1m)",
    }
    write_result(RESULTS / "recorder.json", result)
    print(result)


if __name__ == "__main__":
    main()
