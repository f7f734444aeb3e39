"""``neuract adapt``: fine-tune a checkpoint on a new unit's episodes, scored before / after on
held-out episodes; outputs a checkpoint the other verbs read; bad input is refused early."""

from __future__ import annotations

import json

import pytest
import torch

from _tiny import tiny_episodes, tiny_model
from neuract.cli import main
from neuract.errors import ConfigError


@pytest.fixture(scope="module")
def unit(tmp_path_factory):
    """A tiny estimator checkpoint trained on one twin unit and a dataset of another."""
    from neuract.data import write_dataset
    from neuract.neuralactuator import save_checkpoint
    from neuract.pipeline.setups import so101_setup

    root = tmp_path_factory.mktemp("adapt")
    old, new = tiny_episodes(0.3), tiny_episodes(0.4, seed=9)
    model = tiny_model(old, so101_setup().robot, "estimator", steps=3, horizon=4)
    model.gate_threshold = 0.4
    ck = save_checkpoint(model, root / "ck", extra={"gate_threshold": 0.4})
    ds = write_dataset(new, root / "new_unit")
    return root, ck, ds


def test_adapt_writes_a_scored_checkpoint(unit):
    from neuract.neuralactuator import load_checkpoint

    root, ck, ds = unit
    out = root / "adapted"
    assert main(["adapt", "--checkpoint", str(ck), "--data", str(ds), "--out", str(out),
                 "--steps", "4", "--batch", "4", "--holdout", "0.5", "--quiet"]) == 0
    info = json.loads((out / "config.json").read_text())
    adapt = info["extra"]["adapt"]
    assert adapt["steps"] == 4 and adapt["mode"] == "estimator"
    assert adapt["heldout_episodes"] and adapt["train_episodes"]
    assert not set(adapt["heldout_episodes"]) & set(adapt["train_episodes"])
    pe = adapt["heldout_pose_mae_deg"]
    assert pe["before"] > 0 and pe["after"] > 0 and pe["before"] != pe["after"]
    assert info["extra"]["gate_threshold"] == 0.4  # calibration carried over
    before, after = load_checkpoint(ck), load_checkpoint(out)
    assert before.cfg == after.cfg
    assert not torch.equal(before.head.weight, after.head.weight)
    torch.testing.assert_close(before.x_mean, after.x_mean)  # statistics kept
    assert not out.with_name(out.name + ".train_state.safetensors").exists()
    # the adapted checkpoint streams like any other
    est = root / "est"
    assert main(["estimate", "--checkpoint", str(out), "--data", str(ds), "--out", str(est),
                 "--quiet"]) == 0
    assert (est / "summary.json").is_file()
    # and evaluate --checkpoints takes it as one checkpoint directory, under its own mode
    from neuract.pipeline.checkpoints import load_pretrained

    pre = load_pretrained(out)
    assert list(pre) == ["estimator"] and pre["estimator"].gate_threshold == 0.4
    with pytest.raises(ConfigError, match="no neuralactuator_simulator"):
        load_pretrained(root)
    import shutil

    run = root / "a_run"  # a run directory (its own config.json): its checkpoints/ are read
    shutil.copytree(out, run / "checkpoints" / "neuralactuator_estimator")
    (run / "config.json").write_text('{"type": "EvaluateConfig"}')
    assert list(load_pretrained(run)) == ["estimator"]


def test_adapt_refuses_bad_input(unit):
    from neuract.pipeline.adapt_verb import AdaptConfig, run_adapt

    root, ck, ds = unit
    (root / "taken").mkdir()
    with pytest.raises(ConfigError, match="--overwrite"):
        run_adapt(AdaptConfig(checkpoint=ck, data=ds, out=root / "taken", quiet=True))
    with pytest.raises(ConfigError, match="--holdout"):
        run_adapt(AdaptConfig(checkpoint=ck, data=ds, out=root / "x", holdout=1.0, quiet=True))
    with pytest.raises(ConfigError, match="--steps"):
        run_adapt(AdaptConfig(checkpoint=ck, data=ds, out=root / "x", steps=0, quiet=True))
    for lr in (-1.0, float("nan"), 0.0):
        with pytest.raises(ConfigError, match="--lr"):
            run_adapt(AdaptConfig(checkpoint=ck, data=ds, out=root / "x", lr=lr, quiet=True))
    assert not (root / "x").exists()


def test_adapt_always_trains_on_at_least_one_episode(unit):
    from neuract.pipeline.adapt_verb import AdaptConfig, run_adapt

    root, ck, ds = unit
    out = run_adapt(AdaptConfig(checkpoint=ck, data=ds, out=root / "most_held_out", steps=2,
                                batch=4, holdout=0.99, quiet=True))
    assert len(out["train_episodes"]) == 1 and len(out["heldout_episodes"]) >= 1
