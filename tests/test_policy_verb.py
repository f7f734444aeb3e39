"""``neuract policy``: train and evaluate a behaviour-cloning and a PPO policy at tiny scale,
resume, and the refusals (task, robot, an estimator in simulator mode, --out)."""

from __future__ import annotations

import json

import pytest
import torch

from neuract.errors import CheckpointError, ConfigError
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
from neuract.neuralactuator.checkpoint import save_checkpoint
from neuract.pipeline.policy_verb import PolicyConfig, run

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4)


def _estimator(path, mode="estimator"):
    torch.manual_seed(0)
    extra = dict(physics_robot="so101", physics_site="gripperframe") if mode == "estimator" \
        else {}
    cfg = NeuralActuatorConfig(n_joints=6, mode=mode, effort="load", **extra, **TINY)
    return save_checkpoint(NeuralActuator(cfg).eval(), path)


def _bc(out, **kw):
    base = dict(action="train", kind="bc", task="lift", units=(0,), episodes=1, episode_s=3.0,
                steps=60, out=out, quiet=True)
    return PolicyConfig(**{**base, **kw})


def test_bc_train_with_the_force_estimate_then_evaluate(tmp_path):
    est = _estimator(tmp_path / "est")
    res = run(_bc(tmp_path / "train", estimator=est))
    assert res["uses_force"] and res["demonstrations"] == 1
    saved = json.loads((tmp_path / "train" / "policy" / "config.json").read_text())
    assert saved["uses_force"] and saved["extra"]["estimator"] == str(est.resolve())
    ev = run(PolicyConfig(action="evaluate", policy=tmp_path / "train" / "policy", units=(8,),
                          episodes=2, episode_s=3.0, out=tmp_path / "eval", quiet=True))
    s = ev["summary"]
    assert ev["task"] == "lift" and s["trials"] == 2
    assert s["policy"]["overload_reported"] and 0 <= s["policy"]["rate"] <= 1
    text = (tmp_path / "eval" / "report.md").read_text()
    assert "reference" in text and "policy" in text and (tmp_path / "eval" / "trial.png").is_file()


def test_bc_rerun_resumes_and_other_options_are_refused(tmp_path):
    out = tmp_path / "run"
    first = run(_bc(out))
    again = run(_bc(out))  # the same options: resumes (the checkpoint holds every step)
    assert again["final_loss"] == pytest.approx(first["final_loss"])
    with pytest.raises(ConfigError, match="--steps"):
        run(_bc(out, steps=80))
    assert run(_bc(out, steps=80, overwrite=True))["final_loss"] > 0


def test_ppo_train_then_evaluate(tmp_path):
    res = run(PolicyConfig(action="train", kind="ppo", actuator="mujoco", units=(0,),
                           steps=256, episode_s=2.0, out=tmp_path / "ppo", quiet=True))
    assert res["timesteps"] == 256 and (tmp_path / "ppo" / "policy" / "model.zip").is_file()
    ev = run(PolicyConfig(action="evaluate", policy=tmp_path / "ppo" / "policy",
                          actuator="twin", units=(8,), episodes=1, episode_s=2.0,
                          out=tmp_path / "ev", quiet=True))
    m = ev["metrics"]
    assert ev["task"] == "free" and m["policy"]["tracking_rms_mrad"] > 0
    assert m["reference"]["tracking_rms_mrad"] > 0


def test_refusals(tmp_path):
    with pytest.raises(ConfigError, match="--task 'dance'.*accepted: lift, pick"):
        run(_bc(tmp_path / "a", task="dance"))
    with pytest.raises(ConfigError, match="--action"):
        run(_bc(tmp_path / "a", action="deploy"))
    with pytest.raises(ConfigError, match="--robot 'omx' for --kind bc"):
        run(_bc(tmp_path / "a", robot="omx"))
    with pytest.raises(ConfigError, match="estimator-mode"):
        run(_bc(tmp_path / "b", estimator=_estimator(tmp_path / "sim", mode="simulator")))
    with pytest.raises(ConfigError, match="needs --policy"):
        run(PolicyConfig(action="evaluate", out=tmp_path / "c"))
    with pytest.raises(CheckpointError, match="no readable config.json"):
        run(PolicyConfig(action="evaluate", policy=tmp_path, out=tmp_path / "c"))
    run(_bc(tmp_path / "bc"))
    with pytest.raises(ConfigError, match="trained for robot 'so101', not 'omx'"):
        run(PolicyConfig(action="evaluate", policy=tmp_path / "bc" / "policy", robot="omx",
                         out=tmp_path / "d"))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="non-empty directory"):
        run(_bc(tmp_path / "busy"))
