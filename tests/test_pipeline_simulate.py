"""``neuract simulate``: recorded commands replayed open loop through a simulator-mode
checkpoint; the output matches the rollout protocol's full-trajectory simulation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from _tiny import tiny_episodes, tiny_model
from neuract.cli import main
from neuract.errors import ConfigError


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from neuract.data import write_dataset
    from neuract.neuralactuator import save_checkpoint
    from neuract.pipeline.setups import so101_setup

    root = tmp_path_factory.mktemp("simulate")
    setup = so101_setup()
    eps = tiny_episodes(0.2)
    out = {mode: save_checkpoint(tiny_model(eps, setup.robot, mode, steps=2, horizon=3),
                                 root / mode) for mode in ("simulator", "estimator")}
    return root, out, write_dataset(eps, root / "ds"), eps, setup


def test_simulate_writes_the_protocol_rollout(run):
    from neuract.eval.protocol import simulate_full
    from neuract.neuralactuator import load_checkpoint, simulator

    root, ck, ds, eps, setup = run
    out = root / "out"
    assert main(["simulate", "--checkpoint", str(ck["simulator"]), "--data", str(ds),
                 "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "simulator" and len(summary["episodes"]) == len(eps)
    e = summary["episodes"][0]
    table = pq.read_table(out / e["file"]).to_pydict()
    j = eps[0].meta.joint_names[1]
    q_sim = np.asarray(table[f"q_sim.{j}"])
    m = load_checkpoint(ck["simulator"])
    ref = simulate_full(simulator(m, setup.robot), eps[0], inputs=("q_goal", "voltage"),
                        history=m.cfg.history)
    np.testing.assert_allclose(q_sim, ref[:, 1], atol=1e-6)
    np.testing.assert_allclose(table[f"q.{j}"], eps[0]["q"][:, 1])
    h = e["first_simulated_sample"]
    assert np.isclose(e["joint_mae_deg"][j],
                      np.degrees(np.abs(ref[h:, 1] - eps[0]["q"][h:, 1])).mean(), atol=1e-3)


def test_simulate_refuses_an_estimator_checkpoint(run):
    from neuract.pipeline.simulate_verb import SimulateConfig, run_simulate

    root, ck, ds, _, _ = run
    with pytest.raises(ConfigError, match="simulator-mode checkpoint"):
        run_simulate(SimulateConfig(checkpoint=ck["estimator"], data=ds, out=root / "x",
                                    quiet=True))
    with pytest.raises(ConfigError, match="--substeps"):
        run_simulate(SimulateConfig(checkpoint=ck["simulator"], data=ds, out=root / "x",
                                    substeps=0, quiet=True))
    with pytest.raises(ConfigError, match="not the same arm"):  # 4-joint arm, 6-joint data
        run_simulate(SimulateConfig(checkpoint=ck["simulator"], data=ds, out=root / "x",
                                    robot="omx_arm", quiet=True))
    with pytest.raises(ConfigError, match="another arm than the robot of"):  # 6 joints too
        run_simulate(SimulateConfig(checkpoint=ck["simulator"], data=ds, out=root / "x",
                                    robot="omx", quiet=True))
    run_simulate(SimulateConfig(checkpoint=ck["simulator"], data=ds, out=root / "omx",
                                robot="omx", force_robot=True, quiet=True))  # asked for
    assert not (root / "x").exists()  # refused before anything was written


def test_simulate_and_estimate_outputs_are_all_or_nothing(run, capsys):
    """An existing --out is refused without --overwrite (and replaced whole with it); a bad
    option fails before any file is written; a run never leaves a partial directory."""
    root, ck, ds, eps, _ = run
    out = root / "once"
    argv = ["simulate", "--checkpoint", str(ck["simulator"]), "--data", str(ds), "--out",
            str(out), "--quiet"]
    assert main(argv) == 0
    (out / "stale.parquet").write_bytes(b"old run")
    assert main(argv) == 1
    assert "--overwrite" in capsys.readouterr().err and (out / "stale.parquet").exists()
    assert main([*argv, "--overwrite"]) == 0
    assert not (out / "stale.parquet").exists()
    assert len(list(out.glob("*.parquet"))) == len(eps)
    est = ["estimate", "--checkpoint", str(ck["estimator"]), "--data", str(ds), "--quiet"]
    for value in ("-1", "0", "nan"):
        bad = root / f"est_{value}"
        assert main([*est, "--out", str(bad), "--condition-tau-s", value]) == 1
        assert "--condition-tau-s" in capsys.readouterr().err
        assert not bad.exists()
    assert main([*est, "--out", str(root / "est_ok"), "--condition-tau-s", "2"]) == 0
    # --overwrite never replaces an input, nor a directory that is not an earlier output
    for out_dir in (ck["estimator"], ck["estimator"].parent, ds):
        before = sorted(p.name for p in Path(out_dir).iterdir())
        assert main([*est, "--out", str(out_dir), "--overwrite"]) == 1
        assert "holds the input" in capsys.readouterr().err
        assert sorted(p.name for p in Path(out_dir).iterdir()) == before
    mine = root / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert main([*est, "--out", str(mine), "--overwrite"]) == 1
    assert "no summary.json" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text() == "keep"
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".")) == []
