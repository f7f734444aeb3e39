"""``neuract export --format bam | torchscript`` on real ``neuract fit`` output directories."""

from __future__ import annotations

import json

import pytest
import torch

from neuract.cli import main
from neuract.data import write_dataset
from neuract.io.bam_params import load_bam_params
from neuract.pipeline.export_params import load_fit
from test_cli_audit_fit import QUICK, _runs


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    """Three quick fits on a small pendulum dataset: an m6 servo, an MLP and a GRU net, plus
    an m1 servo with a delay (which BAM's model lacks)."""
    root = tmp_path_factory.mktemp("fits")
    write_dataset(_runs(), root / "ds")
    out = {}
    for name, extra in (("m6", ["--actuator.friction", "m6"]),
                        ("delay", ["--actuator.friction", "m1", "--actuator.delay", "0.02"]),
                        ("mlp", ["--actuator.type", "mlp", "--train.substeps", "1"]),
                        ("gru", ["--actuator.type", "gru"])):
        assert main(["fit", "--data", str(root / "ds"), "--out", str(root / name), *QUICK,
                     *extra]) == 0
        out[name] = root / name
    return out


def test_bam_export_of_a_fit(fits, tmp_path, capsys):
    dest = tmp_path / "exp" / "fit.json"
    assert main(["export", "--format", "bam", "--checkpoint", str(fits["m6"]), "--out",
                 str(dest)]) == 0
    data = json.loads(dest.read_text())
    assert data["model"] == "m6" and data["actuator"] == "sts3215v12"
    model, _ = load_fit(fits["m6"])
    assert data["kt"] == float(model.actuator.kt().detach()[0])
    act, joints = load_bam_params(dest).build()
    # the re-imported servo holds the fitted values bit for bit (not necessarily the same
    # stored logs: neighbouring logs can give the same value)
    fitted = dict(model.actuator.named_modules()) | {
        f"joints.{k}": m for k, m in model.joints.named_modules()}
    back = dict(act.named_modules()) | {f"joints.{k}": m for k, m in joints.named_modules()}
    for k in ("kt", "R", "friction.load_friction_motor_quad", "friction.alpha",
              "joints.offset", "joints.armature"):
        assert torch.equal(fitted[k]().detach(), back[k]().detach()), k
    # an existing --out needs --overwrite
    capsys.readouterr()
    assert main(["export", "--format", "bam", "--checkpoint", str(fits["m6"]), "--out",
                 str(dest)]) == 1
    assert "pass --overwrite" in capsys.readouterr().err
    assert main(["export", "--format", "bam", "--checkpoint", str(fits["m6"]), "--out",
                 str(dest), "--overwrite", "--quiet"]) == 0


@pytest.mark.parametrize("fmt, fit, words", [
    ("bam", "delay", ["actuator.delay 0.02", "no counterpart"]),
    ("bam", "mlp", ["'mlp' has no BAM parameters", "--format torchscript"]),
    ("torchscript", "m6", ["physical ServoActuator", "--format bam"]),
])
def test_refusals_name_the_reason_and_write_nothing(fits, tmp_path, capsys, fmt, fit, words):
    dest = tmp_path / "sub" / ("x.json" if fmt == "bam" else "x.pt")
    capsys.readouterr()
    assert main(["export", "--format", fmt, "--checkpoint", str(fits[fit]), "--out",
                 str(dest)]) == 1
    err = capsys.readouterr().err
    for w in words:
        assert w in err
    assert not (tmp_path / "sub").exists()


def test_bad_checkpoint_and_out(fits, tmp_path, capsys):
    capsys.readouterr()
    assert main(["export", "--format", "bam", "--checkpoint", str(tmp_path), "--out",
                 str(tmp_path / "a.json")]) == 1
    assert "no config.json" in capsys.readouterr().err
    assert main(["export", "--format", "torchscript", "--checkpoint", str(fits["mlp"]),
                 "--out", str(tmp_path / "a.onnx")]) == 1
    assert "ending in .pt" in capsys.readouterr().err


@pytest.mark.parametrize("arch", ["mlp", "gru"])
def test_torchscript_export_of_a_fit(fits, tmp_path, arch):
    dest = tmp_path / "net.pt"
    assert main(["export", "--format", "torchscript", "--checkpoint", str(fits[arch]),
                 "--out", str(dest), "--quiet"]) == 0
    notes = json.loads((tmp_path / "net.json").read_text())
    assert notes["arch"] == arch and notes["control_dt"] == 0.01
    assert notes["fit_substeps"] == (1 if arch == "mlp" else 2)
    assert any("substeps" in d for d in notes["differs"]) == (arch == "gru")
    net = torch.jit.load(str(dest))
    model, _ = load_fit(fits[arch])
    H = model.actuator.cfg.history
    if arch == "mlp":
        out = net(torch.zeros(4, 2 * H))
    else:
        hc = (torch.zeros(1, 4, notes["consumer"]["hidden_dim"]),) * 2
        out, _ = net(torch.zeros(4, 1, 2), hc)
    assert out.shape[0] == 4 and torch.isfinite(out).all()
