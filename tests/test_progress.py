"""Progress on stderr for a terminal and for a log alike (neuract.progress): the plain lines a
run writes with no terminal (stage, step, loss, elapsed, ETA; throttled; a closing line per
stage), resumes announced, and what the verbs print through it."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from neuract import progress as P
from neuract.cli import main
from neuract.errors import ConfigError

LINE = re.compile(r"^(?P<stage>[^|]+?) \| step (?P<done>\d+)/(?P<total>\d+)"
                  r"(?: \| loss (?P<loss>\S+))? \| elapsed (?P<elapsed>\S+)"
                  r" \| (?:ETA (?P<eta>\S+)|(?P<end>done))$")


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _plain(interval: float = 30.0):
    clock, out = Clock(), io.StringIO()
    return P.Reporter(stream=out, interval=interval, clock=clock), clock, out


def test_plain_lines_first_step_then_every_interval_then_the_stage_end():
    rep, clock, out = _plain(30)
    with rep:
        rep("train", 0, 100, loss=1.0)  # first step: printed
        clock.t = 10
        rep("train", 10, 100, loss=0.8)  # 10 s after: not yet
        clock.t = 31
        rep("train", 31, 100, loss=0.5)  # 31 s: printed, ETA from the stage's rate
        clock.t = 40
        rep("train", 40, 100)
        clock.t = 100
        rep("train", 100, 100, loss=0.25)  # the end: printed, whatever the interval
        rep("train", 100, 100)  # repeated end: not again
        rep("score", 0, 2)  # a new stage: its first step
        clock.t = 101
        rep("score", 1, 2)
        clock.t = 102
    # the run ended inside "score": its last state is shown
    assert out.getvalue().splitlines() == [
        "train | step 0/100 | loss 1 | elapsed 0s | ETA --",
        "train | step 31/100 | loss 0.5 | elapsed 31s | ETA 1m09s",
        "train | step 100/100 | loss 0.25 | elapsed 1m40s | done",
        "score | step 0/2 | elapsed 0s | ETA --",
        "score | step 1/2 | elapsed 2s | ETA 2s"]
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


def test_interval_zero_prints_every_step_and_eta_counts_from_a_resumed_step():
    rep, clock, out = _plain(0)
    with rep:
        for k in range(50, 54):  # a training resumed at step 50 of 60
            rep("fit", k, 60)
            clock.t += 2
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    m = LINE.match(lines[-1])
    assert m and m["done"] == "53" and m["elapsed"] == "6s"
    assert m["eta"] == "14s"  # 7 steps left at 3 steps / 6 s, not at 53 steps / 6 s


def test_stages_taking_turns_do_not_print_every_step():
    rep, clock, out = _plain(30)
    with rep:
        for k in range(10):
            rep("a", k, 10)
            rep("b", k, 10)
            clock.t += 1
    # first steps of a and b, then a's last state on exit (b's was shown at the switch back)
    assert len(out.getvalue().splitlines()) <= 4


def test_a_stage_run_again_starts_afresh():
    rep, clock, out = _plain(30)
    with rep:
        rep("rollouts", 1, 1)
        clock.t = 50
        rep("rollouts", 0, 4)
        clock.t = 60
        rep("rollouts", 4, 4)
    assert out.getvalue().splitlines()[1:] == ["rollouts | step 0/4 | elapsed 0s | ETA --",
                                               "rollouts | step 4/4 | elapsed 10s | done"]


def test_durations():
    assert [P.duration(s) for s in (0, 45.4, 62, 190, 3599, 3600, 7530)] == [
        "0s", "45s", "1m02s", "3m10s", "59m59s", "1h00m", "2h05m"]


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(P.INTERVAL_ENV, raising=False)
    assert P.Reporter(stream=io.StringIO()).interval == 30
    monkeypatch.setenv(P.INTERVAL_ENV, "0")
    assert P.Reporter(stream=io.StringIO()).interval == 0
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(P.INTERVAL_ENV, bad)
        with pytest.raises(ConfigError, match=P.INTERVAL_ENV):
            P.Reporter(stream=io.StringIO())


def test_quiet_writes_nothing_and_resumes_are_said_by_the_active_reporter():
    out = io.StringIO()
    P.resumed("x.safetensors", 3, 10)  # no reporter: nothing, nowhere
    with P.Reporter(True, stream=out, interval=0) as rep:
        rep("a", 0, 1)
        P.resumed("x.safetensors", 3, 10)
    assert out.getvalue() == ""
    with P.Reporter(stream=out, interval=0):
        P.resumed("ck/last.safetensors", 3, 10)
    assert P.current() is None  # the run's reporter is gone with it
    assert out.getvalue() == "resumed from ck/last.safetensors at step 3 of 10\n"


def test_a_terminal_gets_rich_bars_a_log_does_not():
    out = io.StringIO()
    with P.Reporter(stream=out, tty=True) as rep:
        rep("train", 3, 10, loss=0.5)
    assert "\x1b[" in out.getvalue() and "train" in out.getvalue()
    out = io.StringIO()  # a StringIO is no terminal: plain lines
    with P.Reporter(stream=out) as rep:
        rep("train", 3, 10, loss=0.5)
    assert out.getvalue() == "train | step 3/10 | loss 0.5 | elapsed 0s | ETA --\n"


def test_the_trainer_announces_a_resume(tmp_path):
    """Every resumable training (fit, evaluate's NeuralActuator and gate, adapt) runs on
    :class:`neuract.fit.loop.Trainer`: its resume is said through the run's reporter."""
    import torch

    from neuract.fit.loop import StateFile, Trainer

    def trainer():
        torch.manual_seed(0)
        net = torch.nn.Linear(2, 1)
        return Trainer(net, torch.optim.SGD(net.parameters(), lr=0.1), 4,
                       state=StateFile(tmp_path / "s.safetensors", {"k": 1}, "test", 2))

    loss = lambda i: (torch.tensor(1.0, requires_grad=True) * (i + 1), {})  # noqa: E731
    out = io.StringIO()
    with P.Reporter(stream=out, interval=0):
        trainer().run(loss, stop_after=2)
        assert out.getvalue() == ""  # a fresh start says nothing
        trainer().run(loss)
    assert f"resumed from {tmp_path / 's.safetensors'} at step 2 of 4" in out.getvalue()


# -- the verbs -----------------------------------------------------------------------------

def _lines(text: str) -> list[re.Match]:
    return [m for m in map(LINE.match, text.splitlines()) if m]


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory):
    from _tiny import tiny_episodes, tiny_model
    from neuract.data import write_dataset
    from neuract.neuralactuator import save_checkpoint
    from neuract.pipeline.setups import so101_setup

    root = tmp_path_factory.mktemp("progress")
    eps = tiny_episodes(0.2)
    ck = save_checkpoint(tiny_model(eps, so101_setup().robot, "simulator", steps=1, horizon=2),
                         root / "sim")
    return root, ck, write_dataset(eps, root / "ds"), eps


def test_simulate_reports_its_steps_on_stderr_during_the_run(sim_run, capsys, monkeypatch):
    root, ck, ds, eps = sim_run
    monkeypatch.setenv(P.INTERVAL_ENV, "0")
    capsys.readouterr()
    assert main(["simulate", "--checkpoint", str(ck), "--data", str(ds),
                 "--out", str(root / "out")]) == 0
    cap = capsys.readouterr()
    lines = _lines(cap.err)
    assert not _lines(cap.out) and "\x1b" not in cap.err  # results on stdout, no bar codes
    assert lines and all(m["stage"].startswith("simulate") for m in lines)
    done = [int(m["done"]) for m in lines]
    total = int(lines[0]["total"])
    # inside each episode, not once per episode: every simulated sample of the run
    assert done == list(range(total + 1)) and total > 2 * len(eps)
    assert lines[-1]["end"] and lines[1]["eta"] not in (None, "--")


def test_simulate_throttles_its_lines(sim_run, capsys, monkeypatch):
    root, ck, ds, _ = sim_run
    monkeypatch.setenv(P.INTERVAL_ENV, "3600")
    capsys.readouterr()
    assert main(["simulate", "--checkpoint", str(ck), "--data", str(ds),
                 "--out", str(root / "out2")]) == 0
    lines = _lines(capsys.readouterr().err)
    assert [m["done"] for m in lines] == ["0", lines[0]["total"]]  # first step, the end
    assert lines[-1]["end"] and lines[-1]["elapsed"]


def _pendulum(path):
    from neuract.data import Trajectory, TrajectoryMeta, write_dataset

    t = np.arange(40) / 100.0
    runs = []
    for e in range(2):
        goal = 0.3 * np.sin(2 * np.pi * (0.5 + 0.1 * e) * t)[:, None]
        q = np.concatenate([goal[:1], goal[:-1]])
        ch = {"t": t, "q": q, "qd": np.gradient(q, t, axis=0), "q_goal": goal}
        runs.append(Trajectory(ch, TrajectoryMeta(
            robot="pendulum", joint_names=("pendulum",), name=f"run{e}", rate_hz=100.0,
            labels={"mass": 0.5, "length": 0.1, "kp": 32})))
    return write_dataset(runs, path)


def test_fit_lines_have_loss_and_eta_and_a_rerun_says_it_resumed(tmp_path, capsys,
                                                                  monkeypatch):
    data = _pendulum(tmp_path / "ds")
    monkeypatch.setenv(P.INTERVAL_ENV, "0")
    argv = ["fit", "--data", str(data), "--out", str(tmp_path / "fit"), "--train.horizons",
            "0.2", "--train.stage-iters", "3", "--train.val-every", "3"]
    capsys.readouterr()
    assert main(argv) == 0
    cap = capsys.readouterr()
    lines = _lines(cap.err)
    assert [(m["stage"], m["done"], m["total"]) for m in lines] == [
        ("fit", "1", "3"), ("fit", "2", "3"), ("fit", "3", "3")]
    assert all(m["loss"] for m in lines)
    assert lines[0]["eta"] and lines[1]["eta"] != "--" and lines[-1]["end"]
    assert not _lines(cap.out) and "neuract fit: train MAE" in cap.out
    assert "resumed" not in cap.err
    assert main(argv) == 0
    err = capsys.readouterr().err
    ck = tmp_path / "fit" / "checkpoint" / "last.safetensors"
    assert f"resumed from {ck} at step 3 of 3" in err


def test_evaluate_killed_in_training_says_it_resumed(sim_run, tmp_path, capsys, monkeypatch):
    """``neuract evaluate`` killed during NeuralActuator training, then rerun: it resumes
    from the saved training state and says from which file and at which step."""
    import neuract.pipeline.na_training as nt

    _, _, ds, _ = sim_run
    out = tmp_path / "ev"
    argv = ["evaluate", "--source", "dataset", "--data", str(ds), "--out", str(out),
            "--experiment.size.d-model", "16", "--experiment.size.n-layers", "1",
            "--experiment.size.n-heads", "2", "--experiment.size.d-ff", "16",
            "--experiment.size.d-trunk", "16", "--experiment.sim-steps", "4",
            "--experiment.est-steps", "0", "--experiment.batch", "4",
            "--experiment.checkpoint-every", "2", "--experiment.baseline-iters", "0",
            "--experiment.sim-prior", "pd", "--experiment.horizons", "10",
            "--experiment.no-full", "--experiment.figure-samples", "40"]

    class Killed(KeyboardInterrupt):
        pass

    real = nt.train_neuralactuator

    def killed_at_3(*a, progress=None, **k):
        def kill(step, total, info):
            progress(step, total, info)
            if step == 3:
                raise Killed

        return real(*a, progress=kill, **k)

    monkeypatch.setenv(P.INTERVAL_ENV, "0")
    with monkeypatch.context() as mp:
        mp.setattr(nt, "train_neuralactuator", killed_at_3)
        assert main(argv) == 130
    err = capsys.readouterr().err
    assert "resumed" not in err
    assert any(m["stage"].startswith("NeuralActuator (simulator") and m["loss"]
               for m in _lines(err))
    assert main(argv) == 0
    state = out / "checkpoints" / "train_neuralactuator_simulator.safetensors"
    assert f"resumed from {state} at step 2 of 4" in capsys.readouterr().err
