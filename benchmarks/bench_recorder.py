"""The recorder's rate on the emulated bus with the live estimator in the loop.

``neuract record``'s loop (:class:`neuract.record.Recorder`: a sync write of the goals, one
sync read of the six STS3215's telemetry block, each tick) against
:class:`neuract.bus.BusEmulator` on its pty, on the wall clock at 1 Mbps, with a
:class:`neuract.estimate.stream.StreamingEstimator` stepping on every sample (an untrained
NeuralActuator estimator of the default size, physics channels from MuJoCo: its weights do not
change its cost). The emulator's server thread runs in the same process (it shares the
interpreter: a real adapter would leave the host more time).

Keys: ``rate_hz`` (samples a second over the run), ``p99_jitter_ms`` (99th percentile of
``|period - 1/rate_set|`` between consecutive samples' timestamps), ``bus_utilisation`` (the
bus's wire time per tick times the rate: 1 would be the bus's own limit at 1 Mbps),
``bus_limit_hz`` and the estimator's per-step time.

    python benchmarks/bench_recorder.py [--seconds 20] [--rate-hz 100]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import cpu_name, write_result  # noqa: E402
from neuract.bus import BusClient, BusEmulator  # noqa: E402
from neuract.estimate.stream import StreamingEstimator  # noqa: E402
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig  # noqa: E402
from neuract.record import RecordConfig, WallClock  # noqa: E402
from neuract.record.session import Session, record_session  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_HZ = 60.0
TARGET_JITTER_MS = 2.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate-hz", type=float, default=100.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = NeuralActuator(NeuralActuatorConfig(n_joints=6, effort="load",
                                                physics_robot="so101",
                                                physics_site="gripperframe")).eval()
    est = StreamingEstimator(model)
    step_s: list[float] = []
    outs = {"valid": 0}

    def on_tick(tick, sample):
        if sample is None:
            return
        t0 = time.perf_counter()
        out = est.step({"t": tick.t, **{c: sample[c] for c in est.inputs}})
        step_s.append(time.perf_counter() - t0)
        outs["valid"] += bool(out["valid"])

    with tempfile.TemporaryDirectory() as tmp:
        cfg = RecordConfig(out=Path(tmp) / "rec", arm="so101", emulate=True,
                           rate_hz=args.rate_hz, duration_s=args.seconds, excite_rad=0.2,
                           quiet=True)
        with BusEmulator(robot="so101", clock="wall", duration_s=args.seconds + 30) as emu:
            bus = BusClient(emu.port, "scs", cfg.baud, cfg.timeout_s)
            try:
                summary = record_session(cfg, Session(bus, WallClock(), None, [emu], emu.port),
                                         on_tick=on_tick)
            finally:
                bus.close()
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
        "servos": 6, "baud": cfg.baud, "seconds": args.seconds,
        "samples": int(len(t)), "dropped_reads": int(ep["dropped_reads"]),
        "overruns": int(ep["counts"]["overruns"]),
        "estimator": {"backend": est.backend, "physics_backend": est.physics_backend,
                      "weights": "untrained (default size; timing only)",
                      "step_p50_ms": round(float(np.median(step_s)) * 1e3, 3),
                      "step_p99_ms": round(float(np.percentile(step_s, 99)) * 1e3, 3),
                      "valid_outputs": outs["valid"]},
        "passes": {"rate": bool(rate >= TARGET_HZ),
                   "jitter": bool(np.percentile(jitter_ms, 99) < TARGET_JITTER_MS)},
        "cpu": cpu_name(), "load_avg_1m": round(os.getloadavg()[0], 2),
        "note": "emulator and recorder in one process on the wall clock; the machine is "
                "shared (see load_avg_1m)",
    }
    write_result(RESULTS / "recorder.json", result)
    print(result)


if __name__ == "__main__":
    main()
