"""neuract.runtime: an exported estimator run from the ONNX file alone gives ``estimate``'s
outputs (the torch batch estimator on the model itself) for every sample of an episode
(within StreamingEstimator's tolerances: 1e-6, and 1e-5 for probabilities shifted by a
calibrated threshold), imports no torch, and refuses what it cannot run naming why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neuract.errors import CheckpointError, ConfigError
from neuract.estimate.neural import stream_samples
from neuract.neuralactuator.export import export_onnx
from neuract.pipeline.checkpoints import calibrated

pytest.importorskip("onnxruntime")

import test_neuralactuator_stream_equal as stream_equal  # noqa: E402
from neuract.runtime import Runtime  # noqa: E402
from test_neuralactuator_stream_equal import (  # noqa: E402
    KEYS,
    assert_equal_to_estimate,
    make_model,
)

episodes = stream_equal.episodes
"""the fixture: twin SO-101 push episodes"""

SRC = Path(__file__).resolve().parents[1] / "src"


def export(m, path: Path) -> Path:
    """``m`` exported as ``neuract export`` writes it: with its calibrated decisions."""
    return export_onnx(m, path, extra=calibrated(m))


@pytest.mark.parametrize("kw, n_eps", [
    ({}, 2), (dict(ident=True, ident_memory=50, condition_head="both"), 1),
    (dict(gate_rnn=8, gate_lag=3, gate_decide=1), 2)], ids=["physics-context", "ident", "lag-gate"])
def test_runtime_equals_the_batch_estimator(episodes, tmp_path, kw, n_eps):
    """(the episodes whose gate decisions go both ways for each model, as in
    test_neuralactuator_stream_equal)"""
    m = make_model(episodes, **kw)
    path = export(m, tmp_path / "m.onnx")
    rt = Runtime(path)
    assert (rt.backend, rt.physics_backend) == ("onnxruntime", "mujoco")
    assert rt.arm["robot"] == "so101" and rt.arm["mjb"]
    for tr in episodes[:n_eps]:  # every output, calibrated and neutral decisions (see there)
        assert_equal_to_estimate(m, tr, stream=lambda tr, **f: stream_samples(
            Runtime(path, **f), tr))


def test_runtime_imports_no_torch(episodes, tmp_path):
    """In a fresh interpreter where importing torch fails, the runtime loads the file, steps
    an episode and gives what it gives here."""
    m = make_model(episodes, ident=True)
    path = export(m, tmp_path / "m.onnx")
    tr = episodes[0]
    rt = Runtime(path)
    want = stream_samples(rt, tr)
    cols = {c: np.asarray(tr[c], dtype=np.float64) for c in rt.inputs}
    np.savez(tmp_path / "ep.npz", t=np.asarray(tr["t"], dtype=np.float64), **cols)
    script = f"""
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not installed here")
sys.meta_path.insert(0, NoTorch())
import numpy as np
from neuract.runtime import Runtime
rt = Runtime({str(path)!r})
ep = np.load({str(tmp_path / "ep.npz")!r})
tau = []
for k in range(len(ep["t"])):
    out = rt.step({{c: ep[c][k] for c in ep.files}})
    tau.append(out["tau"])
np.save({str(tmp_path / "tau.npy")!r}, np.array(tau))
assert "torch" not in sys.modules
print("no torch:", sorted(m for m in sys.modules if m.split(".")[0] == "torch"))
"""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "no torch: []" in res.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "tau.npy"), want["tau"])


def test_mjcf_in_place_of_the_stored_arm_model(episodes, tmp_path):
    """A file without the arm's MuJoCo model is refused, naming mjcf=; with the arm's MJCF
    it runs as with the stored model."""
    import onnx

    from neuract.robot import bundled_path

    m = make_model(episodes)
    path = export(m, tmp_path / "m.onnx")
    proto = onnx.load(str(path))
    for p in proto.metadata_props:
        if p.key == "neuract.arm":
            p.value = json.dumps({**json.loads(p.value), "mjb": None})
    bare = tmp_path / "bare.onnx"
    onnx.save(proto, str(bare))
    with pytest.raises(ConfigError, match="stores no MuJoCo model.*mjcf="):
        Runtime(bare)
    with pytest.raises(ConfigError, match="mjcf='nope.xml'"):
        Runtime(bare, mjcf="nope.xml")
    tr = episodes[0].slice(0, 120)
    a = stream_samples(Runtime(path), tr)
    b = stream_samples(Runtime(bare, mjcf=bundled_path("so101")), tr)
    for k in KEYS:
        np.testing.assert_allclose(b[k], a[k], rtol=0, atol=1e-9, err_msg=k)


def test_what_the_runtime_cannot_run_is_refused(episodes, tmp_path):
    from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig

    with pytest.raises(CheckpointError, match="not found"):
        Runtime(tmp_path / "none.onnx")
    sim = NeuralActuator(NeuralActuatorConfig(n_joints=6, mode="simulator", d_model=16,
                                              n_layers=1, n_heads=2, d_ff=16, d_trunk=16,
                                              history=4))
    with pytest.raises(ConfigError, match="mode='simulator'"):
        Runtime(export_onnx(sim, tmp_path / "sim.onnx"))
    path = export(make_model(episodes), tmp_path / "m.onnx")
    with pytest.raises(ConfigError, match="threads=0"):
        Runtime(path, threads=0)
    with pytest.raises(ConfigError, match="gate_release=0.9 > gate_threshold=0.5"):
        Runtime(path, gate_threshold=0.5, gate_release=0.9)
