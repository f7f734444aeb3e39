"""Interrupted training verbs: what a Ctrl-C or a kill leaves behind, and what a rerun does with
it (resumes the same run to the same result, refuses another run's state naming what differs,
or starts afresh without the replaced run's outputs). Interruptions are simulated in-process
by raising from a progress or log callback."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.cli import main
from neuract.data import Trajectory, TrajectoryMeta
from neuract.errors import CheckpointError
from neuract.neuralactuator import NeuralActuatorConfig
from neuract.neuralactuator.train import NeuralActuatorTrainConfig as TrainConfig
from neuract.neuralactuator.train import fine_tune, train_neuralactuator
from neuract.robot import load_robot

TINY = dict(d_model=8, n_layers=1, n_heads=2, d_ff=8, d_trunk=8, history=2, n_joints=2)


@pytest.fixture(scope="module")
def robot():
    return load_robot("planar2", dtype=torch.float32)


def episodes(n_eps: int = 2, T: int = 40, rate: float = 50.0, seed: int = 0) -> list:
    """planar2 episodes: positions lagging smooth commands, with every estimator channel."""
    rng = np.random.default_rng(seed)
    t = np.arange(T) / rate
    out = []
    for e in range(n_eps):
        f = rng.uniform(0.3, 1.0, 2)
        goal = np.stack([0.5 * np.sin(2 * np.pi * f[0] * t + e),
                         0.4 * np.sin(2 * np.pi * f[1] * t)], 1)
        q = np.concatenate([goal[:1], goal[:-1]])
        qd = np.gradient(q, t, axis=0)
        contact = t > t[T // 2]
        ch = {"t": t, "q": q, "qd": qd, "q_goal": goal, "current": goal - q,
              "voltage": np.full((T, 2), 12.0), "temperature": np.full((T, 2), 30.0),
              "ee_force": np.where(contact[:, None], [0.0, 0.0, -1.0], 0.0),
              "ee_force_mask": np.ones(T, bool), "contact": contact,
              "condition": np.full(T, e % 2, np.int8)}
        out.append(Trajectory(ch, TrajectoryMeta(robot="planar2", joint_names=("joint1", "joint2"),
                                                 name=f"ep{e}", rate_hz=rate,
                                                 labels={"condition_per_joint": [e % 2, 0]})))
    return out


class Killed(Exception):
    pass


def killer(at: int):
    def progress(step, total, info):
        if step == at:
            raise Killed

    return progress


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                 b.state_dict().values()))


def test_a_state_of_other_loss_options_is_refused_naming_them(robot, tmp_path):
    """The estimator's loss options are part of the run key: a rerun with another gate weight
    is refused (it used to resume the other run's state silently); simulator-mode training,
    which does not read them, still resumes to the uninterrupted result."""
    eps = episodes()
    site = robot.site_names[-1]
    base = dict(steps=4, batch=2, horizon=2, substeps=1)
    est = NeuralActuatorConfig(**TINY, mode="estimator")
    tc = TrainConfig(**base, checkpoint=str(tmp_path / "est.safetensors"), checkpoint_every=2)
    with pytest.raises(Killed):
        train_neuralactuator(eps, robot, est, tc, site=site, progress=killer(3))
    other = TrainConfig(**{**base, "gate_weight": 2.0}, checkpoint=tc.checkpoint,
                        checkpoint_every=2)
    with pytest.raises(CheckpointError, match=r"different run \(gate_weight: 0.5 then, 2.0 now\)"):
        train_neuralactuator(eps, robot, est, other, site=site)

    sim = NeuralActuatorConfig(**TINY, mode="simulator")
    ref, _ = train_neuralactuator(eps, robot, sim, TrainConfig(**base, gate_weight=2.0))
    tc = TrainConfig(**base, checkpoint=str(tmp_path / "sim.safetensors"), checkpoint_every=2)
    with pytest.raises(Killed):
        train_neuralactuator(eps, robot, sim, tc, progress=killer(3))
    steps = []
    model, rep = train_neuralactuator(
        eps, robot, sim, TrainConfig(**base, gate_weight=2.0, checkpoint=tc.checkpoint,
                                     checkpoint_every=2),
        progress=lambda s, t, i: steps.append(s))
    assert steps == [3, 4] and rep["steps"] == 4 and _same(ref, model)


def test_fine_tuning_refuses_a_state_of_other_start_weights_before_loading_it(robot, tmp_path):
    """A fine-tuning state records the weights it started from (``neuract adapt --checkpoint``)
    and its options (``--freeze-encoder``); another start or option is refused, named, and the
    caller's model is left as it was."""
    eps = episodes()
    site = robot.site_names[-1]
    cfg = NeuralActuatorConfig(**TINY, mode="estimator")
    first, _ = train_neuralactuator(eps, robot, cfg, TrainConfig(steps=2, batch=2, horizon=2))
    second, _ = train_neuralactuator(eps, robot, cfg, TrainConfig(steps=2, batch=2, horizon=2,
                                                                  seed=1))
    tc = TrainConfig(steps=4, batch=2, horizon=2, checkpoint=str(tmp_path / "ft.safetensors"),
                     checkpoint_every=2)
    import copy

    with pytest.raises(Killed):
        fine_tune(copy.deepcopy(first), eps, robot, tc, site=site, progress=killer(3))
    kept = copy.deepcopy(second)
    with pytest.raises(CheckpointError, match="initial_weights_sha256"):
        fine_tune(second, eps, robot, tc, site=site)
    assert _same(second, kept)  # nothing of the refused state was loaded into it
    frozen = TrainConfig(**{**tc.__dict__, "freeze_encoder": True})
    with pytest.raises(CheckpointError, match="freeze_encoder: false then, true now"):
        fine_tune(copy.deepcopy(first), eps, robot, frozen, site=site)
    ref, _ = fine_tune(copy.deepcopy(first), eps, robot,
                       TrainConfig(steps=4, batch=2, horizon=2), site=site)
    resumed, rep = fine_tune(copy.deepcopy(first), eps, robot, tc, site=site)
    assert rep["steps"] == 4 and _same(ref, resumed)


def test_a_resumed_run_reports_every_step_it_trained(robot, tmp_path):
    """The state keeps only the last 200 history records; the report of a run resumed past
    them still counts all its steps (it used to report 200 + the steps after the resume)."""
    cfg = NeuralActuatorConfig(**TINY, mode="simulator")
    tc = TrainConfig(steps=206, batch=1, horizon=2, substeps=1,
                     checkpoint=str(tmp_path / "s.safetensors"), checkpoint_every=203)
    eps = episodes(n_eps=1, T=12)
    with pytest.raises(Killed):
        train_neuralactuator(eps, robot, cfg, tc, progress=killer(204))
    _, rep = train_neuralactuator(eps, robot, cfg, tc)
    assert rep["steps"] == 206 and rep["final"]["step"] == 206


def _fake_clock(monkeypatch, step_s: float = 10.0) -> None:
    """Training's clock reads ``step_s`` more after every simulator-mode loss it computes (a
    step's work), so reported training times are exact whatever the machine's load."""
    from types import SimpleNamespace

    import neuract.neuralactuator.train as train_mod

    now = [0.0]
    real = train_mod._sim_loss

    def loss(*a, **k):
        now[0] += step_s
        return real(*a, **k)

    monkeypatch.setattr(train_mod, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(train_mod, "_sim_loss", loss)


def test_a_resumed_run_reports_the_training_time_before_the_interruption_too(robot, tmp_path,
                                                                             monkeypatch):
    """The training state records the training time up to its step: a run killed after it and
    resumed reports the whole training time, as the uninterrupted run does (it used to report
    the resumed part only); the work lost after the state (redone on resuming) counts once."""
    from neuract.fit.checkpoint import read_training_state

    _fake_clock(monkeypatch)
    cfg = NeuralActuatorConfig(**TINY, mode="simulator")
    base = dict(steps=4, batch=1, horizon=2, substeps=1)
    eps = episodes(n_eps=1, T=12)
    _, ref = train_neuralactuator(eps, robot, cfg, TrainConfig(**base))
    tc = TrainConfig(**base, checkpoint=str(tmp_path / "s.safetensors"), checkpoint_every=2)
    with pytest.raises(Killed):
        train_neuralactuator(eps, robot, cfg, tc, progress=killer(3))
    assert read_training_state(tc.checkpoint)["seconds"] == 20.0  # steps 1 and 2
    _, rep = train_neuralactuator(eps, robot, cfg, tc)
    assert ref["seconds"] == 40.0 and rep["seconds"] == 40.0 and rep["steps"] == 4
    assert read_training_state(tc.checkpoint)["seconds"] == 40.0
    _, again = train_neuralactuator(eps, robot, cfg, tc)  # the finished state: nothing to train
    assert again["steps"] == 4 and again["seconds"] == 40.0


def test_a_training_state_of_an_older_neuract_without_its_time_still_resumes(robot, tmp_path):
    """A state written before states recorded the training time (same run key) resumes to the
    uninterrupted result; its time before the interruption is unknown, so not counted."""
    import json

    from safetensors.torch import load_file, safe_open, save_file

    cfg = NeuralActuatorConfig(**TINY, mode="simulator")
    base = dict(steps=4, batch=1, horizon=2, substeps=1)
    eps = episodes(n_eps=1, T=12)
    ref, _ = train_neuralactuator(eps, robot, cfg, TrainConfig(**base))
    tc = TrainConfig(**base, checkpoint=str(tmp_path / "s.safetensors"), checkpoint_every=2)
    with pytest.raises(Killed):
        train_neuralactuator(eps, robot, cfg, tc, progress=killer(3))
    tensors = load_file(tc.checkpoint)
    with safe_open(tc.checkpoint, "pt") as f:
        meta = f.metadata()
    trainer = json.loads(meta["trainer"])
    del trainer["seconds"]
    save_file(tensors, tc.checkpoint, metadata={**meta, "trainer": json.dumps(trainer)})
    steps = []
    model, rep = train_neuralactuator(eps, robot, cfg, tc,
                                      progress=lambda s, t, i: steps.append(s))
    assert steps == [3, 4] and rep["steps"] == 4 and _same(ref, model)
    assert 0.0 <= rep["seconds"] < 60.0


def _omx_twin(seed: int, minutes: float):
    from neuract.pipeline.twin_data import TwinDataConfig

    # free (no contact) and push (contact) episodes: both gate classes, so thresholds calibrate
    return TwinDataConfig(robot="omx", minutes=minutes, units=2, tasks=("free", "push"),
                          episode_s=6.0, contact_min_force_n=1.5, seed=seed)


def test_twin_pretrain_fine_tune_interrupted_resumes_to_the_uninterrupted_result(tmp_path):
    """``neuract evaluate --twin-pretrain``: the fine-tune on the train files after the twin
    pretraining keeps a training state beside its checkpoint, as the run's other training
    stages do; killed during it, the same run started again resumes it (it used to redo it)
    and ends bit-identical to an uninterrupted run, its state removed."""
    from neuract.fit.checkpoint import read_training_state
    from neuract.pipeline.experiment_config import ExperimentConfig, ModelSize
    from neuract.pipeline.nad_experiment import TwinPretrainConfig, twin_pretrained
    from neuract.pipeline.setups import omx_setup
    from neuract.pipeline.twin_data import generate_twin

    eps = generate_twin(_omx_twin(seed=9, minutes=0.4))  # stand-ins for the NAD files
    train, test = eps[: len(eps) // 2], eps[len(eps) // 2:]
    exp = ExperimentConfig(size=ModelSize(d_model=16, n_layers=1, n_heads=2, d_ff=16,
                                          d_trunk=16),
                           sim_steps=0, est_steps=2, batch=4, est_horizon=3, baseline_iters=0,
                           neural_baselines=(), horizons=(10,), full=False, physics=True,
                           checkpoint_every=2)
    pre = TwinPretrainConfig(minutes=1.2, steps=3, fine_tune_steps=4, fine_tune_lr=1e-3)
    stage = "twin-pretrained estimator: fine-tune on the train files"

    def run(out, progress=None):
        return twin_pretrained("omx", omx_setup(), train, test, exp, pre, out, progress,
                               data=_omx_twin(seed=2, minutes=1.2))

    ref = run(tmp_path / "a")
    seen = []

    def kill_at_3(name, done, total):
        if name == stage:
            seen.append((done, total))
            if done == 3:
                raise Killed

    with pytest.raises(Killed):
        run(tmp_path / "b", kill_at_3)
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4)]
    tuned = tmp_path / "b" / "twin_pretrained" / "fine_tuned" / "checkpoints"
    state = tuned / "train_neuralactuator_estimator.safetensors"
    assert read_training_state(state)["step"] == 2
    assert not (tuned / "neuralactuator_estimator").exists()
    seen.clear()
    rec = run(tmp_path / "b", lambda name, done, total: seen.append((done, total))
              if name == stage else None)
    assert seen == [(0, 4), (3, 4), (4, 4)]  # resumed after step 2
    assert not state.exists()
    assert rec["fine_tuned"] == ref["fine_tuned"]
    assert rec["fine_tune_final_loss"] == ref["fine_tune_final_loss"]
    a, b = ((d / "twin_pretrained" / "fine_tuned" / "checkpoints" / "neuralactuator_estimator"
             / "model.safetensors").read_bytes() for d in (tmp_path / "a", tmp_path / "b"))
    assert a == b


def test_adapt_saves_its_state_early_and_refuses_another_checkpoints_state(robot, tmp_path,
                                                                          monkeypatch, capsys):
    """``neuract adapt`` interrupted at step 15 of 40 resumes from step 10 (the Ctrl-C hint
    promises a saved state; with a state every 50 steps there was none), ends as an
    uninterrupted run, and refuses a state adapted from another --checkpoint."""
    import neuract.neuralactuator as na
    from neuract.data import write_dataset
    from neuract.neuralactuator import save_checkpoint

    eps = episodes(n_eps=3, T=60)
    ds = write_dataset(eps, tmp_path / "unit")
    cfg = NeuralActuatorConfig(**TINY, mode="estimator")
    cks = []
    for seed in (0, 1):
        m, _ = train_neuralactuator(eps, robot, cfg, TrainConfig(steps=1, batch=2, horizon=2,
                                                                 seed=seed))
        cks.append(save_checkpoint(m, tmp_path / f"ck{seed}"))
    args = ["--data", str(ds), "--robot", "planar2", "--steps", "40", "--batch", "2",
            "--horizon", "2", "--holdout", "0", "--quiet"]
    assert main(["adapt", "--checkpoint", str(cks[0]), *args, "--out", str(tmp_path / "a")]) == 0
    out = tmp_path / "b"
    state = tmp_path / "b.train_state.safetensors"
    real = na.fine_tune
    with monkeypatch.context() as mp:
        mp.setattr(na, "fine_tune", lambda *a, **k: real(*a, **{**k, "progress": killer(15)}))
        with pytest.raises(Killed):
            main(["adapt", "--checkpoint", str(cks[0]), *args, "--out", str(out)])
    from neuract.fit.checkpoint import read_training_state

    assert not out.exists() and read_training_state(state)["step"] == 10
    capsys.readouterr()
    assert main(["adapt", "--checkpoint", str(cks[1]), *args, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "different run (initial_weights_sha256: " in err and not out.exists()
    assert main(["adapt", "--checkpoint", str(cks[0]), *args, "--out", str(out)]) == 0
    assert not state.exists()
    a, b = ((tmp_path / d / "model.safetensors").read_bytes() for d in ("a", "b"))
    assert a == b


def _fit_dataset(path) -> None:
    from neuract.data import write_dataset

    write_dataset([Trajectory({k: tr[k] for k in ("t", "q", "qd", "q_goal")}, tr.meta)
                   for tr in episodes(n_eps=4, T=30)], path)


FIT = ["--robot", "planar2", "--actuator.type", "mlp", "--train.horizons", "0.1",
       "--train.stage-iters", "2", "--val-fraction", "0.25"]


def test_fit_overwrite_interrupted_leaves_no_model_of_the_replaced_run(tmp_path, monkeypatch):
    """``neuract fit --overwrite`` replaces an earlier run: killed before it finishes, --out holds
    its new config and no model or report (they used to be the replaced run's, beside the new
    config.json, looking finished)."""
    import neuract.fit.identify as ident

    _fit_dataset(tmp_path / "ds")
    out = tmp_path / "run"
    assert main(["fit", "--data", str(tmp_path / "ds"), *FIT, "--out", str(out)]) == 0

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ident, "fit", killed)
    assert main(["fit", "--data", str(tmp_path / "ds"), *FIT, "--train.lr-net", "0.01",
                 "--overwrite", "--out", str(out)]) == 130
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint", "config.json"]
    assert not list((out / "checkpoint").iterdir())


def test_fit_of_a_network_is_the_same_whatever_the_random_state_before_it():
    """A neural actuator's initial weights come from the seed: a fit restarted in a new process
    (another global random state) ends as the first one would have."""
    from neuract.actuators import ActuatorConfig
    from neuract.fit.batch import batch_from_trajectories
    from neuract.fit.identify import identify
    from neuract.fit.trainer import TrainConfig as FitTrainConfig

    batch = batch_from_trajectories(episodes(n_eps=3, T=30))
    tc = FitTrainConfig(horizons=(0.1,), stage_iters=(2,), label_inputs=())
    models = []
    for seed in (1, 2):
        torch.manual_seed(seed)  # the state a fresh process starts in is arbitrary
        m, _ = identify(batch, ActuatorConfig(type="mlp"), train=tc, robot="planar2",
                        val_fraction=0.0)
        models.append(m)
    assert _same(*models)


def test_atomic_dir_removes_what_a_killed_writer_of_the_same_output_left(tmp_path):
    """A writer killed inside ``atomic_dir`` (SIGKILL: no cleanup runs) leaves its hidden
    temporary directory; the next write of the same output removes it, but not one that a live
    writer holds, a very recent one, or another output's."""
    import fcntl
    import os
    import subprocess
    import sys
    import time

    from neuract.atomic import atomic_dir

    out = tmp_path / "ds"
    code = ("import os, signal, sys\nfrom neuract.atomic import atomic_dir\n"
            "with atomic_dir(sys.argv[1]) as tmp:\n"
            "    (tmp / 'part.parquet').write_text('half')\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n")
    assert subprocess.run([sys.executable, "-c", code, str(out)]).returncode == -9
    (left,) = [p for p in tmp_path.iterdir()]
    assert left.name.startswith(".ds.") and left.name.endswith(".tmp") and not out.exists()
    live, young, other = (tmp_path / n for n in (".ds.0123abcd.tmp", ".ds.89abcdef.tmp",
                                                 ".dx.0123abcd.tmp"))
    for p in (live, young, other):
        p.mkdir()
    hour_ago = time.time() - 3600
    for p in (left, live, other):
        os.utime(p, (hour_ago, hour_ago))
    fd = os.open(live, os.O_RDONLY)  # a writer still at work in another process
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with atomic_dir(out) as tmp:
            (tmp / "a.txt").write_text("whole")
    finally:
        os.close(fd)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["ds", live.name, young.name, other.name])
    assert (out / "a.txt").read_text() == "whole"
