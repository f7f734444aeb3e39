"""Sim-to-real estimator of the NAD experiment: pretrained on the twin, fine-tuned on the
train files (``nad_experiment.twin_pretrained``). Twin episodes of another seed stand in for
the NAD files, so the test needs no shared data."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from neuract.errors import ConfigError
from neuract.pipeline.experiment import ExperimentConfig, ModelSize
from neuract.pipeline.nad_experiment import TwinPretrainConfig, omx_setup, twin_pretrained
from neuract.pipeline.twin_experiment import TwinDataConfig, generate_twin

TINY = ExperimentConfig(size=ModelSize(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16),
                        sim_steps=0, est_steps=2, batch=4, est_horizon=3, baseline_iters=0,
                        neural_baselines=(), horizons=(10,), full=False, physics=True)


def _twin(seed: int, minutes: float) -> TwinDataConfig:
    return TwinDataConfig(robot="omx", minutes=minutes, units=2, tasks=("push", "lift"),
                          episode_s=6.0, contact_min_force_n=1.5, seed=seed)


@pytest.fixture(scope="module")
def real():
    eps = generate_twin(_twin(seed=9, minutes=0.4))
    return eps[: len(eps) // 2], eps[len(eps) // 2:]


def test_twin_pretrained_scores_zero_shot_and_fine_tuned(real, tmp_path):
    from neuract.pipeline.verbs import load_model

    train, test = real
    pre = TwinPretrainConfig(minutes=0.6, steps=3, fine_tune_steps=3)
    rec = twin_pretrained("omx", omx_setup(), train, test, TINY, pre, tmp_path,
                          data=_twin(seed=2, minutes=0.6))
    assert rec["twin"]["train_episodes"] > 0 and rec["twin"]["test_episodes"] > 0
    for k in ("zero_shot", "fine_tuned"):
        assert rec[k]["mode"] == "estimator" and rec[k]["force"]["all"] is not None, k
        assert rec[k]["gate"] is not None, k
    # fine-tuning changed the model: its force error on the same test files differs
    assert rec["fine_tuned"]["force"]["all"] != rec["zero_shot"]["force"]["all"]
    ck = tmp_path / "twin_pretrained" / "fine_tuned" / "checkpoints" / "neuralactuator_estimator"
    tuned = load_model(ck)
    twin = load_model(tmp_path / "twin_pretrained" / "twin" / "checkpoints"
                      / "neuralactuator_estimator")
    # the twin's normalisation and calibrated thresholds are kept, the weights are not
    assert torch.equal(tuned.x_mean, twin.x_mean) and torch.equal(tuned.x_std, twin.x_std)
    assert getattr(tuned, "gate_threshold", None) == rec["thresholds"]["gate_threshold"]
    assert any(not torch.equal(a, b) for a, b in zip(tuned.state_dict().values(),
                                                     twin.state_dict().values(), strict=True))
    # no fine-tuning: the pretrained model only
    rec0 = twin_pretrained("omx", omx_setup(), train, test, TINY,
                           dataclasses.replace(pre, fine_tune_steps=0), tmp_path / "b",
                           data=_twin(seed=2, minutes=0.6))
    assert "fine_tuned" not in rec0
    assert rec0["zero_shot"]["force"] == rec["zero_shot"]["force"]


@pytest.mark.parametrize("field, value", [("minutes", -1.0), ("minutes", float("nan")),
                                          ("steps", 1.5), ("fine_tune_steps", -2),
                                          ("seed", True), ("fine_tune_lr", 0.0),
                                          ("contact_min_force_n", -0.1)])
def test_twin_pretrain_config_refuses_bad_values(field, value):
    with pytest.raises(ConfigError, match=f"TwinPretrainConfig.{field}"):
        dataclasses.replace(TwinPretrainConfig(minutes=1.0), **{field: value}).validate()


def test_twin_pretrained_refuses_twin_data_of_another_robot(real, tmp_path):
    with pytest.raises(ConfigError, match="data.robot"):
        twin_pretrained("omx", omx_setup(), *real, TINY, TwinPretrainConfig(minutes=1.0),
                        tmp_path, data=dataclasses.replace(_twin(2, 0.6), robot="so101"))
