"""NeuralActuator inference speed on this CPU, 1 thread: torch eager, torch fused + TorchScript,
torch AOTInductor (compiled C++, one package per batch size), ONNX Runtime; a naive 8-token
encoder (the issue's calibration model) runs in the same rounds.

Writes ``benchmarks/results/inference.json`` and ``inference.md``. The machine is shared with
other engineers, so backends are interleaved round by round (every backend sees the same
load), each number is the median over all timed calls, and the spread (p10/p90 of calls,
min/max of per-round medians) and the load average are reported beside it.

    python benchmarks/bench_inference.py [--rounds 7] [--calls-b1 600] [--calls-b32 60]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import platform  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from common import (  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
    cpu_flags,
    cpu_name,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402
from neuract.neuralactuator import (  # noqa: E402
    FusedNeuralActuator,
    NeuralActuator,
    NeuralActuatorConfig,
    OnnxActuator,
    count_flops,
    count_params,
    export_onnx,
    int8op,  # noqa: E402
)
from neuract.neuralactuator.compiled import compile_aot  # noqa: E402
from neuract.neuralactuator.export import output_deviation  # noqa: E402
from neuract.neuralactuator.toolchain import cxx_compiler  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_B1_MS = 0.15
TARGET_B32_SPS = 11_000
# the calibration of the naive encoder on this machine (quiet): batch-1 ms per backend
# and batch-32 samples/s; the same model runs in every round here, so the ratio says how much
# of the machine this run actually got
CALIBRATION = {"naive-encoder torch-eager": {"batch1_p50_ms": 1.77, "batch32_samples_per_s": 3600},
               "naive-encoder onnxruntime": {"batch1_p50_ms": 0.67, "batch32_samples_per_s": 3600}}


class NaiveEncoder(nn.Module):
    """The issue's calibration model: tokens = time steps, d 192, 4 post-LN layers (ffn 768),
    mean-pooled, linear heads; ~1.8 M parameters, ~29 M FLOPs per sample."""

    def __init__(self, n_features: int, n_out: int, d: int = 192, layers: int = 4):
        super().__init__()
        self.inp = nn.Linear(n_features, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, n_out)

    def forward(self, x):
        return self.head(self.enc(self.inp(x)).mean(1))


def naive_flops(n_features: int, n_out: int, T: int = 8, d: int = 192, layers: int = 4) -> int:
    per_layer = T * d * 3 * d + 2 * T * T * d + T * d * d + 2 * T * d * 4 * d
    return 2 * (T * n_features * d + layers * per_layer + d * n_out)


def time_calls(fn, x, n: int, warmup: int) -> np.ndarray:
    """(n, 2) seconds per call: wall clock, and this thread's CPU time (which leaves out the
    time the OS gave the core to other processes; every backend runs on the calling thread)."""
    for _ in range(warmup):
        fn(x)
    out = np.empty((n, 2))
    for i in range(n):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn(x)
        out[i] = time.perf_counter() - t0, time.thread_time() - c0
    return out


def twin_estimator_config() -> NeuralActuatorConfig:
    """The twin benchmark's estimator (``bench_neuralactuator_twin.config()``): physics,
    context, servo-reference and identification channels, both condition heads. The servo
    JSON only feeds the reference channels (computed before the network), so an unfitted
    STS3215 servo stands in for the fitted one: the network is the same. Its recurrent
    contact gate (``gate_rnn``) is left out: the AOT packages carry no gate state, and one
    step of the 128-unit gate adds 0.23 M FLOPs (``count_flops``) to the network's."""
    from common import twin_config
    from neuract.actuators import ActuatorConfig
    from neuract.neuralactuator.config import servo_json
    from neuract.pipeline.experiment_config import na_config
    from neuract.pipeline.setups import so101_setup
    from neuract.sim.simulate import JointParamsConfig

    e = twin_config().experiment
    setup = so101_setup()
    servo = servo_json(ActuatorConfig(type=setup.servo, friction="stribeck"),
                       JointParamsConfig())
    return na_config(setup, "estimator", e.size, setup.robot.n_dof, e.physics, e.context_s,
                     servo, e.reference_steps, e.ident, e.condition_head, e.ident_memory)


def _random_model(cfg: NeuralActuatorConfig, g: torch.Generator) -> NeuralActuator:
    model = NeuralActuator(cfg)
    model.set_stats(torch.randn(cfg.n_features, generator=g),
                    torch.rand(cfg.n_features, generator=g) + 0.5)
    return model.eval()


def _max_diff(ref, out) -> float:
    """Largest |difference| over all outputs (:func:`output_deviation`)."""
    return max(v["max_abs_diff"] for v in output_deviation(ref, out).values())


def _max_rel_diff(ref, out) -> float:
    """Largest |difference| over the output's standard deviation, over all outputs."""
    return max(v["max_abs_over_std"] for v in output_deviation(ref, out).values())


def build_backends(tmp: Path) -> tuple[dict, dict]:
    cfg = NeuralActuatorConfig()
    g = torch.Generator().manual_seed(0)
    model = _random_model(cfg, g)
    x1 = torch.randn(1, cfg.history, cfg.n_features, generator=g)
    fused = FusedNeuralActuator(model).eval()
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scripted = torch.jit.freeze(torch.jit.trace(fused, x1))
    onnx_model = OnnxActuator(export_onnx(model, tmp / "neuralactuator.onnx"), threads=1)
    onnx_int8 = OnnxActuator(export_onnx(model, tmp / "neuralactuator_int8.onnx",
                                         quantize="int8"), threads=1)
    # torch AOTInductor: one static-shape package per benchmarked batch size
    aot, aot_note = None, "skipped: no C++ compiler found"
    if cxx_compiler() is not None:
        print("compiling the AOTInductor packages (about a minute) ...", flush=True)
        aot = compile_aot(fused, (1, 32), tmp / "aot")
        aot_note = {"compile_s": aot.compile_seconds(),
                    "inductor_options": {int(B): e["options"]
                                         for B, e in aot.meta["batch_sizes"].items()}}
    # the same with the head trunk in int8 (neuract's own operator; needs AVX2)
    aot8 = None
    if aot is not None and int8op.cpu_supported():
        aot8 = compile_aot(fused, (1, 32), tmp / "aot_int8", quantize="int8")
        aot_note["int8_compile_s"] = aot8.compile_seconds()

    # the twin benchmark's estimator: wider input (more channels per joint), both condition
    # heads; its own input shape, so its own ONNX file and AOT packages
    tcfg = twin_estimator_config()
    tmodel = _random_model(tcfg, g)
    tonnx = OnnxActuator(export_onnx(tmodel, tmp / "twin_estimator.onnx"), threads=1)
    tonnx8 = OnnxActuator(export_onnx(tmodel, tmp / "twin_estimator_int8.onnx",
                                      quantize="int8"), threads=1)
    taot = (compile_aot(FusedNeuralActuator(tmodel).eval(), (1, 32), tmp / "aot_twin")
            if aot is not None else None)
    taot8 = (compile_aot(FusedNeuralActuator(tmodel).eval(), (1, 32), tmp / "aot_twin_int8",
                         quantize="int8") if aot8 is not None else None)

    naive = NaiveEncoder(cfg.n_features, cfg.n_outputs).eval()
    with warnings.catch_warnings():  # grad enabled: no fused fast path, exportable ops
        warnings.simplefilter("ignore")
        torch.onnx.export(naive, (x1,), str(tmp / "naive.onnx"), dynamo=False,
                          input_names=["x"], output_names=["y"], opset_version=17,
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    from neuract.neuralactuator.export import ort_session

    naive_sess = ort_session(tmp / "naive.onnx", threads=1)

    backends = {
        "torch-eager": ("torch", model),
        "torch-fused-jit": ("torch", scripted),
        # a runner per batch size: no dispatch inside the timed call
        **({"torch-aot-inductor": ("torch", {B: aot.runner(B) for B in (1, 32)})}
           if aot is not None else {}),
        **({"torch-aot-inductor-int8": ("torch", {B: aot8.runner(B) for B in (1, 32)})}
           if aot8 is not None else {}),
        # ONNX Runtime through I/O-bound buffers, one runner per batch size (OnnxActuator.runner)
        "onnxruntime": ("numpy", {B: onnx_model.runner(B) for B in (1, 32)}),
        "onnxruntime-int8": ("numpy", {B: onnx_int8.runner(B) for B in (1, 32)}),
        "twin-estimator torch-eager": ("torch", tmodel),
        **({"twin-estimator torch-aot-inductor": ("torch", {B: taot.runner(B) for B in (1, 32)})}
           if taot is not None else {}),
        **({"twin-estimator torch-aot-inductor-int8": ("torch", {B: taot8.runner(B)
                                                                 for B in (1, 32)})}
           if taot8 is not None else {}),
        "twin-estimator onnxruntime": ("numpy", {B: tonnx.runner(B) for B in (1, 32)}),
        "twin-estimator onnxruntime-int8": ("numpy", {B: tonnx8.runner(B) for B in (1, 32)}),
        "naive-encoder torch-eager": ("torch", naive),
        "naive-encoder onnxruntime": ("numpy", lambda x: naive_sess.run(None, {"x": x})),
    }
    # every NeuralActuator backend must compute the same thing
    xb = torch.randn(32, cfg.history, cfg.n_features, generator=g)
    with torch.inference_mode():
        ref = model(xb)
        # the timed ONNX runners themselves, at both batch sizes
        ort_run = {name: backends[name][1] for name in backends if "onnxruntime" in name
                   and not name.startswith("naive")}

        def ort_out(name: str, xx: torch.Tensor) -> list:
            return [o.copy() for o in ort_run[name][len(xx)](xx.numpy())]

        diffs = {
            "torch-fused-jit": _max_diff(ref, scripted(xb)),
            "onnxruntime": max(_max_diff(model(xx), ort_out("onnxruntime", xx))
                               for xx in (xb, xb[:1])),
        }
        if aot is not None:  # both packages, against eager on the same inputs
            diffs["torch-aot-inductor"] = max(
                _max_diff(model(xx), aot.runner(len(xx))(xx)) for xx in (xb, xb[:1]))
        xt = torch.randn(32, tcfg.history, tcfg.n_features, generator=g)
        tref = tmodel(xt)
        diffs["twin-estimator onnxruntime"] = max(
            _max_diff(tmodel(xx), ort_out("twin-estimator onnxruntime", xx)) for xx in (xt, xt[:1]))
        # int8: an approximation, not the same function (its accuracy on a trained model:
        # bench_int8_accuracy.py); the largest difference relative to each output's spread
        int8_rel = {"onnxruntime-int8": _max_rel_diff(ref, ort_out("onnxruntime-int8", xb)),
                    "twin-estimator onnxruntime-int8": _max_rel_diff(
                        tref, ort_out("twin-estimator onnxruntime-int8", xt))}
        if taot is not None:
            diffs["twin-estimator torch-aot-inductor"] = max(
                _max_diff(tmodel(xx), taot.runner(len(xx))(xx)) for xx in (xt, xt[:1]))
        if aot8 is not None:  # both packages (batch 1 one window at a time), same windows
            for name, pk, r, xx in (("torch-aot-inductor-int8", aot8, ref, xb),
                                    ("twin-estimator torch-aot-inductor-int8", taot8, tref, xt)):
                int8_rel[name] = max(_max_rel_diff(r, pk.runner(32)(xx)),
                                     _max_rel_diff(r, pk.run_padded(xx, 1)))
    sim_cfg = cfg.replace(mode="simulator")
    info = {
        "config": cfg,
        "n_params": count_params(model),
        "flops_per_sample": count_flops(cfg),
        "n_channels": len(cfg.channels),
        "sim_n_params": count_params(NeuralActuator(sim_cfg)),
        "sim_flops_per_sample": count_flops(sim_cfg),
        "twin_estimator": {"config": dataclasses.asdict(tcfg), "n_params": count_params(tmodel),
                           "flops_per_sample": count_flops(tcfg),
                           "n_channels": len(tcfg.channels)},
        "naive_n_params": count_params(naive),
        "naive_flops_per_sample": naive_flops(cfg.n_features, cfg.n_outputs),
        "max_abs_diff_vs_torch_eager": diffs,
        "int8_max_abs_diff_over_std_vs_torch_eager_random_weights": int8_rel,
        "torch_aot_inductor": aot_note,
    }
    return backends, info


def run(rounds: int, calls_b1: int, calls_b32: int) -> dict:
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as td:
        backends, info = build_backends(Path(td))
        cfg = info["config"]
        g = torch.Generator().manual_seed(1)
        inputs = {B: torch.randn(B, cfg.history, cfg.n_features, generator=g) for B in (1, 32)}
        tf = info["twin_estimator"]["config"]
        tn = tf["n_joints"] * info["twin_estimator"]["n_channels"]
        t_inputs = {B: torch.randn(B, tf["history"], tn, generator=g) for B in (1, 32)}
        samples = {name: {1: [], 32: []} for name in backends}
        started = time.time()
        with torch.inference_mode():
            for r in range(rounds):
                for name, (kind, fn) in backends.items():
                    for B, n in ((1, calls_b1), (32, calls_b32)):
                        x = (t_inputs if name.startswith("twin") else inputs)[B]
                        x = x if kind == "torch" else x.numpy()
                        f = fn[B] if isinstance(fn, dict) else fn
                        samples[name][B].append(time_calls(f, x, n, warmup=max(10, n // 10)))
                print(f"round {r + 1}/{rounds} done ({time.time() - started:.0f} s)", flush=True)
    load_after = os.getloadavg()

    results = {}
    for name, per_b in samples.items():
        b1 = np.concatenate(per_b[1])[:, 0] * 1e3
        b32 = np.concatenate(per_b[32])[:, 0]
        r1 = [float(np.median(s[:, 0]) * 1e3) for s in per_b[1]]
        r32 = [float(32 / np.median(s[:, 0])) for s in per_b[32]]
        c1 = np.concatenate(per_b[1])[:, 1] * 1e3
        c32 = np.concatenate(per_b[32])[:, 1]
        row = {
            "batch1_p50_ms": float(np.median(b1)),
            "batch1_p10_ms": float(np.percentile(b1, 10)),
            "batch1_p90_ms": float(np.percentile(b1, 90)),
            "batch1_round_p50_ms_min": min(r1),
            "batch1_round_p50_ms_max": max(r1),
            "batch32_samples_per_s": float(32 / np.median(b32)),
            "batch32_round_samples_per_s_min": min(r32),
            "batch32_round_samples_per_s_max": max(r32),
            "batch32_p50_ms": float(np.median(b32) * 1e3),
            "cpu_time": {"batch1_p50_ms": float(np.median(c1)),
                         "batch32_samples_per_s": float(32 / np.median(c32))},
        }
        if name in CALIBRATION:
            row["calibration_quiet_machine"] = CALIBRATION[name]
        if not name.startswith("naive"):
            row["meets_batch1_target"] = row["batch1_p50_ms"] <= TARGET_B1_MS
            row["meets_batch32_target"] = row["batch32_samples_per_s"] >= TARGET_B32_SPS
        results[name] = row
    for be in ("torch-eager", "onnxruntime"):
        n = results[f"naive-encoder {be}"]
        m = results[be]
        m["speedup_vs_naive_batch1"] = n["batch1_p50_ms"] / m["batch1_p50_ms"]
        m["speedup_vs_naive_batch32"] = m["batch32_samples_per_s"] / n["batch32_samples_per_s"]
    cfgd = dataclasses.asdict(info.pop("config"))
    return {
        "benchmark": "neuralactuator inference",
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "machine": {"cpu": cpu_name(), "cpu_flags": cpu_flags(),
                    "logical_cpus": os.cpu_count(), "threads_used": 1,
                    "shared": True, "loadavg_1_5_15_before": load_before,
                    "loadavg_1_5_15_after": load_after},
        "versions": {"torch": torch.__version__, "onnxruntime": _ort_version(),
                     "python": platform.python_version()},
        "protocol": {"rounds": rounds, "calls_per_round_batch1": calls_b1,
                     "calls_per_round_batch32": calls_b32, "interleaved": True,
                     "statistic": "median over all timed calls (wall clock); samples/s = 32 / "
                                  "median; cpu_time: the same with the thread's CPU time"},
        "targets": {"batch1_p50_ms": TARGET_B1_MS, "batch32_samples_per_s": TARGET_B32_SPS},
        "model": {"config": cfgd, **info},
        "backends": results,
    }


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def markdown(res: dict) -> str:
    m = res["model"]
    mach = res["machine"]
    lines = [
        "# NeuralActuator inference speed",
        "",
        f"Default model: {m['n_params'] / 1e6:.3f} M parameters, "
        f"{m['flops_per_sample'] / 1e6:.2f} M FLOPs per sample (matrix products, 1 MAC = 2 "
        f"FLOPs), {m['config']['mode']} mode, {m['config']['n_joints']} joints x "
        f"{m['n_channels']} channels x {m['config']['history']} steps of input (simulator mode "
        f"reads 4 channels per joint; it has {m['sim_n_params'] / 1e6:.3f} M parameters and "
        f"{m['sim_flops_per_sample'] / 1e6:.2f} M FLOPs; the speed is the same). "
        f"Calibration model (naive encoder): {m['naive_n_params'] / 1e6:.2f} M "
        f"parameters, {m['naive_flops_per_sample'] / 1e6:.1f} M FLOPs per sample.",
        "",
        twin_markdown(m.get("twin_estimator")),
        "",
        f"CPU: {mach['cpu']} ({', '.join(mach.get('cpu_flags') or ['flags not recorded'])}), "
        f"{mach['logical_cpus']} logical CPUs, **1 thread**. "
        f"The machine is **shared** with other engineers: load average "
        f"{mach['loadavg_1_5_15_before'][0]:.1f} before / "
        f"{mach['loadavg_1_5_15_after'][0]:.1f} after the run on "
        f"{mach['logical_cpus']} CPUs. Backends are interleaved over "
        f"{res['protocol']['rounds']} rounds; numbers are medians over all timed calls, spread "
        "= p10-p90 of calls (batch 1) and min-max of per-round medians. Date: "
        f"{res['date_utc']} UTC; torch {res['versions']['torch']}, onnxruntime "
        f"{res['versions']['onnxruntime']}.",
        "",
        f"Targets: batch-1 p50 <= {res['targets']['batch1_p50_ms']} ms, batch 32 >= "
        f"{res['targets']['batch32_samples_per_s']:,} samples/s.",
        "",
        "| backend | batch-1 p50 [ms] | batch-1 p10-p90 [ms] | batch-32 [samples/s] | "
        "batch-32 round range | targets met |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in res["backends"].items():
        met = ("-" if "meets_batch1_target" not in r else
               f"b1 {'yes' if r['meets_batch1_target'] else 'no'}, "
               f"b32 {'yes' if r['meets_batch32_target'] else 'no'}")
        lines.append(
            f"| {name} | {r['batch1_p50_ms']:.3f} | {r['batch1_p10_ms']:.3f}-"
            f"{r['batch1_p90_ms']:.3f} | {r['batch32_samples_per_s']:,.0f} | "
            f"{r['batch32_round_samples_per_s_min']:,.0f}-"
            f"{r['batch32_round_samples_per_s_max']:,.0f} | {met} |")
    lines += ["", "Thread CPU time per call (same calls; leaves out the time the OS gave the "
              "core to other processes, which wall-clock numbers on this shared machine "
              "include):", "",
              "| backend | batch-1 p50 CPU [ms] | batch-32 [samples/s of CPU time] |",
              "|---|---|---|"]
    for name, r in res["backends"].items():
        c = r["cpu_time"]
        lines.append(f"| {name} | {c['batch1_p50_ms']:.3f} | {c['batch32_samples_per_s']:,.0f} |")
    lines += ["", "Quietest round (lowest per-round median; the machine is shared, so this is the "
              "closest to an unloaded measurement):", ""]
    for name, r in res["backends"].items():
        if name.startswith("naive"):
            continue
        lines.append(f"- {name}: batch 1 {r['batch1_round_p50_ms_min']:.3f} ms, batch 32 "
                     f"{r['batch32_round_samples_per_s_max']:,.0f} samples/s")
    lines += ["", "How loaded the machine was: the naive calibration encoder, measured by the "
              "issue on a quiet machine, ran here at:", ""]
    for name, cal in CALIBRATION.items():
        r = res["backends"][name]
        lines.append(f"- {name}: batch 1 {r['batch1_p50_ms']:.3f} ms (calibration "
                     f"{cal['batch1_p50_ms']} ms), batch 32 {r['batch32_samples_per_s']:,.0f} "
                     f"samples/s (calibration {cal['batch32_samples_per_s']:,})")
    lines += ["", "Speed-up over the naive encoder in the same run: "]
    for be in ("torch-eager", "onnxruntime"):
        r = res["backends"][be]
        lines.append(f"- {be}: batch 1 x{r['speedup_vs_naive_batch1']:.1f}, batch 32 "
                     f"x{r['speedup_vs_naive_batch32']:.1f}")
    d = m["max_abs_diff_vs_torch_eager"]
    lines += [
        "",
        "All NeuralActuator backends compute the same function: max |difference| to torch "
        "eager over every output at batch 32: "
        + ", ".join(f"{k} {v:.1e}" for k, v in d.items()) + ".",
        "",
        "`torch-fused-jit` is `FusedNeuralActuator` (normalisation, LayerNorm affines, "
        "positional embedding, torque limit and force scale folded into the matrices) traced "
        "and frozen with TorchScript; `onnxruntime` runs the same folded graph exported to "
        "ONNX (all graph optimisations, 1 intra-op thread, sequential), called through "
        "`OnnxActuator.runner(batch)` (input and outputs bound once with ONNX Runtime's I/O "
        "binding, one runner per batch size, like the AOT packages). `onnxruntime-int8` "
        "is `export_onnx(..., quantize=\"int8\")`: the head trunk's matrix (85 % of the "
        "parameters) in int8 per output channel with ONNX Runtime's dynamic quantization, "
        "the rest float32; it approximates the float32 model (largest difference over each "
        "output's spread, random weights: "
        + ", ".join(f"{k} {v:.3f}" for k, v in
                    m.get("int8_max_abs_diff_over_std_vs_torch_eager_random_weights",
                          {}).items())
        + "; on a trained twin estimator see `bench_int8_accuracy.py`).",
        "",
        aot_markdown(m["torch_aot_inductor"]),
        "",
        stream_markdown(res),
        "",
        "Reproduce: `python benchmarks/bench_inference.py` (the streamed step alone: "
        "`--only stream`).",
        "",
    ]
    return "\n".join(lines)


def stream_markdown(res: dict) -> str:
    """The streamed estimator step's line (``StreamingEstimator.step``, features and
    network)."""
    if "stream_step_p50_ms" not in res:
        return "(This run did not time the streamed estimator step.)"
    s = res["stream_step"]
    return (f"Streamed estimator step (`StreamingEstimator.step`: the sample's checks, its "
            f"feature row, the network and the output filters), batch 1, 1 thread: p50 "
            f"**{res['stream_step_p50_ms']:.3f} ms**, p10-p90 {s['p10_ms']:.3f}-"
            f"{res['stream_step_p90_ms']:.3f} ms over {s['steps_timed']} steps (thread CPU "
            f"time p50 {s['cpu_time_p50_ms']:.3f} ms); {s['model']}; network "
            f"`{s['network']}`, physics channels `{s['physics']}`."
            + (f" Its torch fallback (network and arm model in torch) in the same rounds: p50 "
               f"{s['torch_fallback']['p50_ms']:.3f} ms." if "torch_fallback" in s else "")
            + (f" With the int8 network (`network=\"onnxruntime-int8\"`, asked for: an "
               f"approximation of the model): p50 {s['int8_network']['p50_ms']:.3f} ms."
               if "int8_network" in s else "")
            + " The network-only figures above are the forward pass of the default model "
            "alone.")


def twin_markdown(t) -> str:
    if not t:
        return "(This run did not time the twin benchmark's estimator.)"
    c = t["config"]
    return (f"`twin-estimator` rows: the twin benchmark's estimator "
            f"(`bench_neuralactuator_twin.config()`, random weights), "
            f"{t['n_params'] / 1e6:.3f} M parameters, {t['flops_per_sample'] / 1e6:.2f} M FLOPs "
            f"per sample, {c['n_joints']} joints x {t['n_channels']} channels x "
            f"{c['history']} steps of input (physics, context, servo-reference and "
            f"identification channels), condition head `{c['condition_head']}`. The speed "
            "targets are the default model's; these rows show what the benchmark's larger "
            "configuration costs. The times are the network's forward pass only: the "
            "channels the stream computes before it (arm model, running identification, "
            "servo reference) are not included.")


def aot_markdown(note) -> str:
    if not isinstance(note, dict):
        return f"`torch-aot-inductor`: {note}."
    opts = "; ".join(f"batch {B}: " + (", ".join(f"{k}={v}" for k, v in o.items())
                                        or "Inductor's defaults (no freezing)")
                     for B, o in note["inductor_options"].items())
    comp = ", ".join(f"batch {B} {s:.0f} s" for B, s in note["compile_s"].items())
    return ("`torch-aot-inductor` is the same `FusedNeuralActuator` exported with "
            "`torch.export` at a fixed batch size and compiled ahead of time by AOTInductor "
            "(`neuract.neuralactuator.compiled.compile_aot`: generated C++ kernels, run by "
            "torch's C++ runtime through the package's bare runner, no Python in the forward "
            "pass; the attention products are handed to Inductor as multiply + sum); one "
            f"package per batch size, float32. Inductor options: {opts}. Compile time (in this "
            f"run, on the shared machine): {comp}. Its max |difference| above covers both "
            "packages (batch 1 and batch 32)." + aot_int8_markdown(note))


def aot_int8_markdown(note: dict) -> str:
    if "int8_compile_s" not in note:
        return " (No `torch-aot-inductor-int8` rows: this CPU lacks AVX2.)"
    return (" `torch-aot-inductor-int8` is the same packages compiled with "
            "`compile_aot(..., quantize=\"int8\")`: the head trunk's matrix in int8 per output "
            "channel (the full 8-bit range), computed by neuract's own operator "
            "`neuract::linear_w8` (`neuract.neuralactuator.int8op`, C++ with AVX2: each input "
            "row scaled to int16, int16 x int8 products summed exactly (int32 lanes, then "
            "float64)), built into "
            "the package directory and called from the compiled graph; the rest float32, "
            "the same Inductor options. Its difference from float32 is listed with "
            "`onnxruntime-int8`'s; on a trained twin estimator see `bench_int8_accuracy.py`.")


def demo_estimator_config() -> NeuralActuatorConfig:
    """The estimator ``neuract demo`` trains at its defaults (``DemoConfig().experiment``:
    the SO-101 setup, physics and context channels, the gate head)."""
    from neuract.demo import DemoConfig
    from neuract.pipeline.experiment_config import na_config
    from neuract.pipeline.setups import so101_setup

    e = DemoConfig().experiment
    if e.reference_steps:
        raise SystemExit("the demo's estimator reads servo-reference channels: this benchmark "
                         "times it without a fitted servo, so it cannot build that model")
    setup = so101_setup()
    return na_config(setup, "estimator", e.size, setup.robot.n_dof, e.physics, e.context_s,
                     "", 0, e.ident, e.condition_head, e.ident_memory, int(e.gate_rnn),
                     int(e.gate_conv), int(e.gate_lag), int(e.gate_decide))


def time_stream_steps(rounds: int = 5, episodes: int = 2) -> dict:
    """``StreamingEstimator.step`` at batch 1, one thread: p10/p50/p90 [ms] of every timed
    step (wall clock; and the thread's CPU time) over ``rounds`` passes through twin SO-101
    push episodes, each episode streamed from its start (``reset``), a first pass untimed
    (warm-up). The model is an untrained one of the demo's estimator configuration (random
    weights, feature statistics of the episodes): a step does the same work whatever the
    weights. The estimator's default backends are timed, and in the same rounds (each round
    runs each on the same episodes) its torch fallback (``network="torch"``,
    ``physics_backend="torch"``), for reference the int8 network
    (``network="onnxruntime-int8"``: an approximation, which the default never runs) and
    ``neuract.runtime.Runtime`` on the model's export (``runtime``: the same step without
    torch)."""
    from neuract.estimate.stream import StreamingEstimator
    from neuract.neuralactuator.features import feature_stats, windows
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    torch.set_num_threads(1)
    cfg = demo_estimator_config()
    eps = generate(GenerateConfig(robot="so101", tasks=("push",), minutes=0.1 * episodes,
                                  units=1, seed=5, sim=SimConfig(episode_s=6.0)))[:episodes]
    torch.manual_seed(0)
    model = NeuralActuator(cfg).eval()
    model.set_stats(*feature_stats([windows(tr, cfg.channels, cfg.n_joints, cfg.history,
                                            physics=cfg.physics, context_s=cfg.context_s)
                                    for tr in eps]))
    ests = {"default": StreamingEstimator(model)}
    try:  # the torch fallback and the int8 network (an older StreamingEstimator has neither)
        ests["torch_fallback"] = StreamingEstimator(model, network="torch",
                                                    physics_backend="torch")
        if ests["default"].backend == "onnxruntime":
            ests["int8_network"] = StreamingEstimator(model, network="onnxruntime-int8")
    except TypeError:
        pass
    if ests["default"].backend == "onnxruntime":  # the exported file, run without torch
        from neuract.runtime import Runtime

        with tempfile.TemporaryDirectory() as td:  # the session holds the graph in memory
            ests["runtime"] = Runtime(export_onnx(model, Path(td) / "estimator.onnx"))
    est = ests["default"]
    streams = []
    for tr in eps:
        cols = {c: np.asarray(tr[c], dtype=np.float64) for c in est.inputs}
        t = np.asarray(tr["t"], dtype=np.float64)
        streams.append([{"t": t[k], **{c: v[k] for c, v in cols.items()}}
                        for k in range(len(t))])
    load_before = os.getloadavg()
    times = {name: [] for name in ests}
    for r in range(rounds + 1):
        for name, e in ests.items():
            for samples in streams:
                e.reset()
                for s in samples:
                    t0, c0 = time.perf_counter(), time.thread_time()
                    e.step(s)
                    if r:
                        times[name].append((time.perf_counter() - t0, time.thread_time() - c0))
    ms = {name: np.asarray(v) * 1e3 for name, v in times.items()}
    wall, cpu = ms["default"][:, 0], ms["default"][:, 1]
    info = {"p10_ms": float(np.percentile(wall, 10)), "steps_timed": len(wall),
            "cpu_time_p50_ms": float(np.median(cpu)),
            "cpu_time_p90_ms": float(np.percentile(cpu, 90)),
            "rounds": rounds, "episode_samples": [len(s) for s in streams],
            "model": "untrained, the demo's estimator configuration (neuract demo "
                     "defaults); feature statistics of the timed episodes",
            "config": dataclasses.asdict(cfg),
            "network": getattr(est, "backend", "torch-eager"),
            "physics": getattr(est, "physics_backend", "torch"),
            "threads": torch.get_num_threads(),
            "loadavg_1_5_15_before": load_before,
            "loadavg_1_5_15_after": os.getloadavg(),
            "statistic": "every StreamingEstimator.step call, wall clock (cpu_time: the "
                         "thread's CPU time), the history's first samples (no output yet) "
                         "included"}
    for name in ("torch_fallback", "int8_network", "runtime"):  # the same rounds and episodes
        if name in ms:
            info[name] = {"p50_ms": float(np.median(ms[name][:, 0])),
                          "p90_ms": float(np.percentile(ms[name][:, 0], 90)),
                          "cpu_time_p50_ms": float(np.median(ms[name][:, 1])),
                          "network": ests[name].backend, "physics": ests[name].physics_backend}
    return {"stream_step_p50_ms": float(np.median(wall)),
            "stream_step_p90_ms": float(np.percentile(wall, 90)), "stream_step": info}


def merge_stream_keys(path: Path, stream: dict) -> dict:
    """``stream`` merged into the results file at ``path`` (its other keys as they are),
    written atomically; returns the merged results."""
    import json

    res = json.loads(path.read_text()) if path.is_file() else {}
    res.update(stream)
    write_result(path, res, measured=stream)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls-b1", type=int, default=600)
    ap.add_argument("--calls-b32", type=int, default=60)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--only", choices=("all", "stream"), default="all",
                    help="stream: time only StreamingEstimator.step and merge its keys into "
                         "the existing inference.json")
    ap.add_argument("--stream-rounds", type=int, default=5)
    a = ap.parse_args()
    if a.only == "stream":
        import json

        stream = time_stream_steps(a.stream_rounds)
        res = merge_stream_keys(a.out / "inference.json", stream)
        if "backends" in res:
            write_text(a.out / "inference.md", markdown(res))
        print(json.dumps(stream, indent=1))
        return
    res = run(a.rounds, a.calls_b1, a.calls_b32)
    res.update(time_stream_steps(a.stream_rounds))
    write_result(a.out / "inference.json", res)
    write_text(a.out / "inference.md", markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
