"""What the int8 ONNX export costs a trained NeuralActuator's estimates (estimator mode).

Reads the twin benchmark's estimator checkpoint (``runs/bench_neuralactuator_twin``, written
by ``bench_neuralactuator_twin.py``), generates its test episodes again (same data
configuration and split) and scores, with the estimator protocol (``neuract.eval``), the torch
model, its float32 ONNX export and its int8 export (``export_onnx(..., quantize="int8")``: the
head trunk's weights in int8), each with the checkpoint's calibrated gate and condition
decisions. Also reports how far each raw output moves (|difference| over the output's
standard deviation on the test windows). A recurrent contact gate (``gate_rnn``) reads the raw
features, not the trunk, so every variant's gate decisions are the torch gate's (equal gate
F1 by construction), and the ``gate_logit`` deviation is left out (NaN): the ONNX graph's
is the recurrent gate's, torch's forward the head's.

Writes ``benchmarks/results/int8_accuracy.json`` and ``.md``.

Run: ``.venv/bin/python benchmarks/bench_int8_accuracy.py`` (a few minutes).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import write_result  # noqa: E402
from neuract.atomic import write_text  # noqa: E402
from neuract.estimate import estimate
from neuract.eval import evaluate_estimator  # noqa: E402
from neuract.neuralactuator import FusedNeuralActuator, OnnxActuator, export_onnx, int8op
from neuract.neuralactuator.compiled import compile_aot  # noqa: E402
from neuract.neuralactuator.export import OUTPUTS, output_deviation  # noqa: E402
from neuract.neuralactuator.features import windows  # noqa: E402
from neuract.neuralactuator.toolchain import cxx_compiler  # noqa: E402
from neuract.pipeline.report import markdown_table  # noqa: E402
from neuract.pipeline.splits import split_by_task  # noqa: E402
from neuract.pipeline.twin_data import contact_labelled, generate_twin  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


class SwappedForward:
    """A NeuralActuator whose forward pass is ``forward`` (everything else, features,
    calibrated decisions, config, is the torch model's), so ``estimate`` can drive it."""

    def __init__(self, model, forward):
        self._model = model
        self._forward = forward

    def __getattr__(self, name):
        return getattr(self._model, name)

    def __call__(self, x: torch.Tensor):
        return self._forward(x)


def onnx_forward(path: Path):
    """The forward pass of an exported file in ONNX Runtime, torch tensors in and out: the
    four windowed outputs (a recurrent gate's state output left out: ``estimate`` runs the
    recurrent gate itself, on the raw features, which the int8 trunk does not touch)."""
    onnx = OnnxActuator(path, threads=1)
    return lambda x: tuple(torch.from_numpy(o) for o in onnx.run(
        np.ascontiguousarray(x.numpy(), dtype=np.float32))[:len(OUTPUTS)])


def without_recurrent_gate(model):
    """A copy of ``model`` without its recurrent gate (the AOT packages carry none; the
    trunk they quantize is the same)."""
    import copy

    m = copy.deepcopy(model)
    m.gate_rnn = None
    m.cfg = m.cfg.replace(gate_rnn=0)
    return m


def _compiled_note(models: dict) -> str:
    d = next((m["compiled_package_max_abs_diff"] for m in models.values()
              if "compiled_package_max_abs_diff" in m), None)
    if d is None:
        return ""
    return ("; here the batch-32 package itself, run on every test window, differs from it by "
            "at most " + ", ".join(f"{k} {v:.1e}" for k, v in d.items()))


def test_episodes(cfg) -> list:
    """The twin run's test episodes, labelled as it scores them (run_twin_experiment)."""
    test = split_by_task(generate_twin(cfg.data), cfg.data.test_fraction)[1]
    return contact_labelled(test, cfg.data.contact_min_force_n)


def figures(rec: dict) -> dict:
    return {"torque_rmse": rec["torque_rmse_mean"], "force_mae": rec["force"]["all"],
            "gate_f1": rec["gate"]["f1"],
            "condition_accuracy": (rec.get("condition") or {}).get("accuracy")}


def main() -> int:
    from common import (
        ESTIMATOR_CHECKPOINT,
        checkpoint_gate,
        cpu_flags,
        load_estimator,
        machine,
        twin_config,
    )

    torch.set_num_threads(1)
    model = load_estimator()
    if model is None:
        return 2
    cfg = twin_config()
    print("generating the twin benchmark's test episodes ...", flush=True)
    test = test_episodes(cfg)
    rows, out = [], {"checkpoint": str(ESTIMATOR_CHECKPOINT.relative_to(ROOT)),
                     "gate_kind": checkpoint_gate(model), "machine": machine(),
                     "cpu_flags": cpu_flags(),
                     "n_test_episodes": len(test), "models": {}}
    with tempfile.TemporaryDirectory() as td:
        variants = {"torch (float32)": model}
        for q in ("none", "int8"):
            name = "ONNX Runtime (float32)" if q == "none" else "ONNX Runtime (int8 trunk)"
            variants[name] = SwappedForward(model, onnx_forward(
                export_onnx(model, Path(td) / f"{q}.onnx", quantize=q)))
        if int8op.cpu_supported() and cxx_compiler() is not None:
            int8op.load_op(int8op.build_op(Path(td) / "op"))
            variants["torch int8 trunk (neuract::linear_w8, as compile_aot int8)"] = SwappedForward(
                # the int8-trunk arithmetic the quantize="int8" AOTInductor packages compile
                model, FusedNeuralActuator(model).eval().quantize_trunk())
        c = model.cfg
        x = torch.cat([windows(tr, c.channels, c.n_joints, c.history, physics=c.physics,
                               context_s=c.context_s, reference=model.reference,
                               ident_memory=c.ident_memory) for tr in test])
        with torch.no_grad():
            ref = [r.numpy() for r in model(x)]
        for name, m in variants.items():
            print(f"scoring {name} ...", flush=True)
            rec = evaluate_estimator(lambda tr, m=m: estimate(m, tr), test, name)
            with torch.no_grad():
                got = [g.numpy() for g in m(x)]
            dev = {k: {q: v[q] for q in ("mean_abs_over_std", "max_abs_over_std")}
                   for k, v in output_deviation(ref, got).items()}
            if model.gate_rnn is not None:  # ONNX's gate_logit is the recurrent gate's (from
                # a zero state), torch's forward the head's: not comparable, left out
                dev["gate_logit"] = {"mean_abs_over_std": float("nan"),
                                     "max_abs_over_std": float("nan")}
            out["models"][name] = {**figures(rec), "output_deviation": dev}
            f = out["models"][name]
            rows.append([name] + [f"{f[k]:.4f}" if f[k] is not None else None for k in
                                  ("torque_rmse", "force_mae", "gate_f1", "condition_accuracy")]
                        + [f"{dev[k]['mean_abs_over_std']:.4f} / {dev[k]['max_abs_over_std']:.3f}"
                           for k in OUTPUTS])
        q8 = "torch int8 trunk (neuract::linear_w8, as compile_aot int8)"
        if q8 in variants:  # the compiled packages themselves on every test window
            print("compiling the int8 AOTInductor package (batch 32) ...", flush=True)
            aot = compile_aot(without_recurrent_gate(model), (32,), Path(td) / "aot_int8",
                              quantize="int8")
            with torch.no_grad():
                eager = variants[q8](x)
            comp = aot.run_padded(x, 32)
            out["models"][q8]["compiled_package_max_abs_diff"] = {
                k: float((a - b).abs().max()) for k, a, b in zip(OUTPUTS, comp, eager)}
    out["n_windows"] = int(x.shape[0])
    write_result(RESULTS / "int8_accuracy.json", out)
    md = ("# int8 trunk (ONNX export; torch, compile_aot int8): accuracy of a trained "
          "NeuralActuator (estimator mode)\n\n"
          f"Checkpoint: the twin benchmark's estimator (`{out['checkpoint']}`, "
          f"{out['gate_kind']}), scored on its "
          f"{len(test)} test episodes ({x.shape[0]} windows) with the estimator protocol and "
          "the checkpoint's calibrated gate and condition decisions. The int8 export stores "
          "the head trunk's weights in int8 per output channel (ONNX Runtime dynamic "
          "quantization, weights in a 7-bit range); the rest stays float32. The torch int8 "
          "trunk row is `compile_aot(..., quantize=\"int8\")`'s arithmetic (the "
          "trunk's weights in int8 over the full 8-bit range, inputs scaled to int16, exact "
          "integer sums: `neuract::linear_w8`), run here as the eager "
          "`FusedNeuralActuator(model).quantize_trunk()`, which the compiled packages match "
          "to 1e-4 on the tests' small models (`tests/test_neuralactuator_int8op.py`)"
          + _compiled_note(out["models"]) + ". Output deviation: mean / max "
          "|difference| "
          "from the torch model over that output's standard deviation on the test windows. "
          f"Machine: {out['machine']}, CPU flags {', '.join(out['cpu_flags']) or 'unknown'} "
          "(int8 products differ between CPUs with and without VNNI). Reproduce: `.venv/bin/python "
          "benchmarks/bench_int8_accuracy.py` (after `bench_neuralactuator_twin.py`).\n\n"
          + markdown_table(["model", "torque RMSE [N m]", "force MAE [N]", "gate F1",
                            "condition acc.", "tau deviation", "force deviation",
                            "gate logit deviation", "condition logit deviation"], rows)
          + "\n")
    write_text(RESULTS / "int8_accuracy.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
