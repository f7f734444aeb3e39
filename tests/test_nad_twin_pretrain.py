"""Sim-to-real estimator of the NAD experiment: pretrained on the twin, fine-tuned on the
train files (``nad_experiment.twin_pretrained``). Twin episodes of another seed stand in for
the NAD files, so the test needs no shared data."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from neuract.errors import ConfigError
from neuract.pipeline.experiment_config import ExperimentConfig, ModelSize
from neuract.pipeline.nad_experiment import TwinPretrainConfig, twin_pretrained
from neuract.pipeline.setups import omx_setup
from neuract.pipeline.twin_data import TwinDataConfig, generate_twin

TINY = ExperimentConfig(size=ModelSize(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16),
                        sim_steps=0, est_steps=2, batch=4, est_horizon=3, baseline_iters=0,
                        neural_baselines=(), horizons=(10,), full=False, physics=True)


def _twin(seed: int, minutes: float) -> TwinDataConfig:
    # free (no contact) and push (contact) episodes: both gate classes, so thresholds calibrate
    return TwinDataConfig(robot="omx", minutes=minutes, units=2, tasks=("free", "push"),
                          episode_s=6.0, contact_min_force_n=1.5, seed=seed)


@pytest.fixture(scope="module")
def real():
    eps = generate_twin(_twin(seed=9, minutes=0.4))
    return eps[: len(eps) // 2], eps[len(eps) // 2:]


def test_twin_pretrained_scores_zero_shot_and_fine_tuned(real, tmp_path, monkeypatch):
    import numpy as np

    import neuract.neuralactuator as na
    import neuract.pipeline.experiment as ex
    from neuract.pipeline.checkpoints import load_model

    train, test = real
    calls, tunes = [], []
    run, tune = ex.run_experiment, na.fine_tune

    def spy_run(setup, tr, te, cfg, **kw):
        calls.append((tr, te, cfg, kw.get("pretrained")))
        return run(setup, tr, te, cfg, **kw)

    def spy_tune(model, trajs, robot, tc, **kw):
        tunes.append((trajs, tc))
        return tune(model, trajs, robot, tc, **kw)

    monkeypatch.setattr(ex, "run_experiment", spy_run)
    monkeypatch.setattr(na, "fine_tune", spy_tune)
    pre = TwinPretrainConfig(minutes=1.2, steps=3, fine_tune_steps=2, fine_tune_lr=1e-3)
    rec = twin_pretrained("omx", omx_setup(), train, test, TINY, pre, tmp_path,
                          data=_twin(seed=2, minutes=1.2))
    # 1. the twin run: its own episodes, contact = force >= 1.5 N, pre.steps steps
    tw_train, tw_test, tw_cfg, tw_pre = calls[0]
    assert tw_pre is None and tw_cfg.est_steps == 3 and tw_cfg.sim_steps == 0
    assert not any(tr in train or tr in test for tr in tw_train)
    f = np.concatenate([np.linalg.norm(np.asarray(tr["ee_force"]), axis=1) for tr in tw_train])
    c = np.concatenate([np.asarray(tr["contact"], bool) for tr in tw_train])
    assert c.any() and (~c).any() and np.array_equal(c, f >= 1.5)
    assert rec["twin"]["train_episodes"] == len(tw_train) > 0 and rec["twin"]["test_episodes"] > 0
    # 2. the NAD scorings use the NAD files, never train on them: zero-shot on the test and
    # on the train files (a validation figure), fine-tuned on the test files
    assert [(c[0] is train, c[1] is test, c[1] is train) for c in calls[1:]] == [
        (True, True, False), (True, False, True), (True, True, False)]
    assert all(c[3] is not None for c in calls[1:])
    assert rec["zero_shot_on_train_files"]["force"]["all"] is not None
    # 3. fine-tuning: on the train files, with the experiment's estimator schedule
    (trajs, tc), = tunes
    assert trajs is train
    assert (tc.steps, tc.lr, tc.horizon, tc.substeps, tc.batch) == (
        2, 1e-3, TINY.est_horizon, TINY.substeps, TINY.batch)
    for k in ("zero_shot", "fine_tuned"):
        assert rec[k]["mode"] == "estimator" and rec[k]["force"]["all"] is not None, k
    assert rec["fine_tuned"]["force"]["all"] != rec["zero_shot"]["force"]["all"]
    # 4. zero-shot = the saved twin checkpoint scored on the NAD files directly
    ck = tmp_path / "twin_pretrained"
    twin = load_model(ck / "twin" / "checkpoints" / "neuralactuator_estimator")
    direct = run(omx_setup(), train, test, TINY, pretrained={"estimator": twin})
    row = next(r for r in direct["estimation"] if r["model"] == "NeuralActuator")
    assert row["force"] == rec["zero_shot"]["force"] and row["gate"] == rec["zero_shot"]["gate"]
    # 5. the fine-tuned checkpoint keeps the twin's normalisation and calibrated thresholds
    tuned = load_model(ck / "fine_tuned" / "checkpoints" / "neuralactuator_estimator")
    assert rec["thresholds"].get("gate_threshold") is not None
    assert tuned.gate_threshold == twin.gate_threshold == rec["thresholds"]["gate_threshold"]
    assert torch.equal(tuned.x_mean, twin.x_mean) and torch.equal(tuned.x_std, twin.x_std)
    assert any(not torch.equal(a, b) for a, b in zip(tuned.state_dict().values(),
                                                     twin.state_dict().values(), strict=True))
    assert rec["twin"]["data"]["seed"] == 2  # the data actually used is recorded
    # no fine-tuning: the pretrained model only
    rec0 = twin_pretrained("omx", omx_setup(), train, test, TINY,
                           dataclasses.replace(pre, fine_tune_steps=0), tmp_path / "b",
                           data=_twin(seed=2, minutes=1.2))
    assert "fine_tuned" not in rec0 and len(tunes) == 1
    assert rec0["zero_shot"]["force"] == rec["zero_shot"]["force"]


@pytest.mark.parametrize("field, value", [("minutes", -1.0), ("minutes", float("nan")),
                                          ("minutes", True), ("steps", 1.5),
                                          ("fine_tune_steps", -2), ("seed", True),
                                          ("fine_tune_lr", 0.0), ("fine_tune_lr", "1e-3"),
                                          ("contact_min_force_n", -0.1),
                                          ("contact_min_force_n", None), ("units", 0)])
def test_twin_pretrain_config_refuses_bad_values(field, value):
    with pytest.raises(ConfigError, match=f"TwinPretrainConfig.{field}"):
        dataclasses.replace(TwinPretrainConfig(minutes=1.0), **{field: value}).validate()


def test_twin_pretrained_refuses_twin_data_of_another_robot(real, tmp_path):
    with pytest.raises(ConfigError, match="data.robot"):
        twin_pretrained("omx", omx_setup(), *real, TINY, TwinPretrainConfig(minutes=1.0),
                        tmp_path, data=dataclasses.replace(_twin(2, 0.6), robot="so101"))


def test_train_config_is_the_experiment_schedule_of_each_mode():
    from neuract.pipeline.experiment_config import train_config

    # every option off its TrainConfig default, so a dropped one shows
    exp = dataclasses.replace(TINY, sim_horizon=5, est_horizon=6, lr=2e-3, batch=3, substeps=3,
                              seed=4, force_huber_delta=0.2, aux_batch=8, gate_weight=2.0,
                              gate_focal_gamma=1.0, checkpoint_every=7)
    for mode, h in (("simulator", 5), ("estimator", 6)):
        tc = train_config(exp, mode, 9, checkpoint="ck.safetensors")
        assert (tc.steps, tc.horizon, tc.lr, tc.batch, tc.substeps, tc.seed) == (
            9, h, 2e-3, 3, 3, 4)
        assert (tc.force_huber_delta, tc.aux_batch, tc.gate_weight, tc.gate_focal_gamma,
                tc.checkpoint_every, tc.checkpoint) == (0.2, 8, 2.0, 1.0, 7, "ck.safetensors")
    assert train_config(exp, "estimator", 7, lr=1e-5).lr == 1e-5
