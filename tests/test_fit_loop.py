"""The one training loop (:mod:`neuract.fit.loop`): a run interrupted and resumed ends exactly
as an uninterrupted one; another run's, another kind's or an older format's state is refused
before anything of it is loaded. The loops' own resume tests: test_fit_identify (fit),
test_neuralactuator_train and test_interrupt_resume (NeuralActuator), test_neuralactuator_gate_rnn
(recurrent gate); the learned dynamics models' are here."""

from __future__ import annotations

import pytest
import torch

from neuract.errors import CheckpointError, ConfigError
from neuract.fit.checkpoint import load_training, read_training_state, save_training
from neuract.fit.inverse_dynamics import fit_inverse_model
from neuract.fit.least_squares import random_states
from neuract.fit.loop import Evaluation, StateFile, Trainer
from neuract.models import MLPModel, TwoLinkArm, TwoLinkParams

ARM = TwoLinkArm(TwoLinkParams(fv=(0.1, 0.2), fc=(0.05, 0.1)))


class Killed(Exception):
    pass


def _data(n: int = 200):
    q, qd, qdd = random_states(2, n, seed=4)
    return q, qd, qdd, ARM.inverse(q, qd, qdd)


def _mlp() -> MLPModel:
    torch.manual_seed(0)
    return MLPModel(2, hidden=8)


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                 b.state_dict().values()))


def test_inverse_model_training_interrupted_and_resumed_equals_the_uninterrupted_run(tmp_path):
    data = _data()
    opts = dict(epochs=4, batch_size=64, lr=5e-3, seed=2)  # 4 minibatches an epoch
    ref = _mlp()
    hist_ref = fit_inverse_model(ref, *data, **opts)
    state = tmp_path / "s.safetensors"

    def kill(step, total, info):
        assert total == 16
        if step == 7:  # inside the second epoch: the state holds the first
            raise Killed

    with pytest.raises(Killed):
        fit_inverse_model(_mlp(), *data, **opts, checkpoint=state, progress=kill)
    assert read_training_state(state)["step"] == 4
    steps: list[int] = []
    model = _mlp()
    hist = fit_inverse_model(model, *data, **opts, checkpoint=state,
                             progress=lambda s, t, i: steps.append(s))
    assert steps == list(range(5, 17)) and hist == hist_ref and len(hist) == 4
    assert _same(ref, model)
    # another learning rate, or other start weights: refused, naming what differs
    with pytest.raises(CheckpointError, match=r"different run \(lr: 0.005 then, 0.01 now\)"):
        fit_inverse_model(_mlp(), *data, **{**opts, "lr": 1e-2}, checkpoint=state)
    other = MLPModel(2, hidden=8)
    with pytest.raises(CheckpointError, match="initial_weights_sha256"):
        fit_inverse_model(other, *data, **opts, checkpoint=state)


def test_a_state_of_another_kind_or_an_older_format_is_refused_before_loading(tmp_path):
    data = _data(64)
    state = tmp_path / "s.safetensors"
    model = _mlp()
    fit_inverse_model(model, *data, epochs=1, batch_size=32, checkpoint=state)
    opt = torch.optim.Adam(model.parameters())
    st = load_training(state, model, opt, torch.Generator())
    save_training(state, model, opt, torch.Generator(), {**st, "kind": "gate_rnn_train"})
    fresh = _mlp()
    with pytest.raises(CheckpointError, match="another kind of training"):
        fit_inverse_model(fresh, *data, epochs=1, batch_size=32, checkpoint=state)
    old = {k: v for k, v in st.items() if k != "format"}  # as states were before format 2
    save_training(state, model, opt, torch.Generator(), old)
    with pytest.raises(CheckpointError, match="older neuract.*format 1"):
        fit_inverse_model(fresh, *data, epochs=1, batch_size=32, checkpoint=state)
    # nothing of the refused states was loaded (the normalisation is set from the data first)
    assert all(torch.equal(a, b) for a, b in zip(fresh.parameters(), _mlp().parameters()))


def _toy(tmp_path, patience: int, scores: list[float], steps: int = 6):
    """A one-weight model whose 'validation score' at step k is scores[k - 1]."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    ev = Evaluation(1, lambda step: (scores[step - 1], {"score": scores[step - 1]}),
                    patience=patience, keep=lin)
    sf = StateFile(tmp_path / "toy.safetensors", {"a": 1}, "toy", every=2)
    trainer = Trainer(lin, opt, steps, state=sf, evaluation=ev)
    x = torch.ones(4, 1)
    return lin, trainer, lambda i: (lin(x).pow(2).mean(), {})


def test_the_trainer_keeps_the_best_weights_stops_early_and_resumes_them(tmp_path):
    scores = [3.0, 1.0, 2.0, 2.5, 0.5, 0.1]
    lin, trainer, loss = _toy(tmp_path, patience=2, scores=scores)
    seen: list[dict] = []
    out = trainer.run(loss, record=lambda s, info: seen.append(dict(info)))
    assert out.early_stop and out.step == 4 and out.best["step"] == 2
    assert seen[-1].get("early_stop") and not out.interrupted
    assert trainer.restore_best() and read_training_state(tmp_path / "toy.safetensors")["step"] == 4
    best = {k: v.clone() for k, v in lin.state_dict().items()}
    # resumed: the early stop holds, the best weights come back from the state
    lin2, again, loss2 = _toy(tmp_path, patience=2, scores=scores)
    out2 = again.run(loss2)
    assert out2.step == 4 and out2.best["step"] == 2 and again.restore_best()
    assert all(torch.equal(best[k], v) for k, v in lin2.state_dict().items())


def test_the_trainer_refuses_a_non_finite_loss_naming_the_step(tmp_path):
    lin, trainer, _ = _toy(tmp_path, patience=0, scores=[1.0] * 6)
    trainer.nonfinite = lambda i: f"bad loss at step {i}"
    with pytest.raises(ConfigError, match="bad loss at step 0"):
        trainer.run(lambda i: (torch.tensor(float("nan"), requires_grad=True), {}))


def test_actuator_fit_interrupted_and_resumed_ends_bit_identical(tmp_path):
    """neuract fit's loop, killed between two states and started again, ends with exactly the
    weights (the best validation's, restored from the state) and learning curve of an
    uninterrupted fit, its early stop included."""
    from neuract.fit.trainer import TrainConfig, fit
    from test_fit_identify import PLANT, _stribeck_model, synthetic_batch

    truth = _stribeck_model(kt=3.0, fb=0.06, fs=0.08, backlash=0.02, armature=0.025)
    data = synthetic_batch(truth, B=4, T=51)
    cfg = TrainConfig(horizons=(0.2, 0.5), stage_iters=(4, 8), runs_per_iter=3, val_every=1,
                      patience=2, checkpoint_every=3, substeps=1, lr=0.3)

    def run(ckpt, stop_after=None):
        model = _stribeck_model(kt=3.6, fb=0.03, fs=0.04, backlash=0.01, armature=0.02)
        return model, fit(model, PLANT, data, data, cfg, ckpt_dir=ckpt, stop_after=stop_after)

    ref, rep_ref = run(tmp_path / "a")
    assert rep_ref["done"] and rep_ref["iteration"] < 12  # stopped early, best restored
    assert 0 <= rep_ref["best_iteration"] < rep_ref["iteration"]
    _, killed = run(tmp_path / "b", stop_after=5)  # last state at 3
    assert killed["interrupted"]
    model, rep = run(tmp_path / "b")
    assert _same(ref, model)
    assert rep["history"] == rep_ref["history"]
    assert (rep["best_iteration"], rep["best_val"]) == (rep_ref["best_iteration"],
                                                        rep_ref["best_val"])


def test_a_timed_stop_saves_the_step_reached_and_resumes_to_the_uninterrupted_result(tmp_path):
    """max_seconds stops after the step that runs past it, writes the state there (between
    two regular states) and a rerun continues to the weights of an uninterrupted run."""

    def make(state, max_seconds=0.0):
        torch.manual_seed(0)
        lin = torch.nn.Linear(2, 1)
        opt = torch.optim.Adam(lin.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(3)
        now = [0.0]

        def clock():
            now[0] += 1.0  # one second a reading
            return now[0]

        sf = StateFile(state, {"lr": 0.05}, "toy", every=4) if state else None
        trainer = Trainer(lin, opt, 7, grad_clip=1.0, torch_rng=gen, state=sf,
                          max_seconds=max_seconds, clock=clock,
                          schedule=lambda o, start: torch.optim.lr_scheduler.CosineAnnealingLR(
                              o, 7, last_epoch=start - 1))

        def loss(i):
            x = torch.randn(8, 2, generator=gen)
            return (lin(x) - x.sum(1, keepdim=True)).pow(2).mean(), {}

        return lin, trainer, loss

    ref, trainer, loss = make(None)
    assert trainer.run(loss).step == 7
    state = tmp_path / "t.safetensors"
    _, trainer, loss = make(state, max_seconds=2.5)  # clock: 1 s a reading, 2 a step
    out = trainer.run(loss)
    assert out.interrupted and out.step == 2 and read_training_state(state)["step"] == 2
    lin, trainer, loss = make(state)
    out = trainer.run(loss)
    assert out.step == 7 and not out.interrupted and _same(ref, lin)
