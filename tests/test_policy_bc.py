"""Behaviour cloning with the force estimate (issue 43 part A): the scripted expert, the BC
policy's training, save and load, the online f̂ plumbing and the paired evaluation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from neuract.envs import ArmEnv
from neuract.errors import ConfigError
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig
from neuract.policy import (
    BCConfig,
    Expert,
    ExpertConfig,
    ForceStream,
    PolicyRun,
    Trace,
    load_policy,
    newcombe_paired,
    paired_trials,
    run_episode,
    save_policy,
    summarize,
    train_bc,
    wilson,
)
from neuract.policy.bc import demo_arrays
from neuract.policy.expert import lift_success, nominal_stiffness, pick_success

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4)


def tiny_estimator(mode: str = "estimator") -> NeuralActuator:
    """An untrained estimator reading load, pose and the arm's physics channels."""
    torch.manual_seed(0)
    extra = dict(physics_robot="so101", physics_site="gripperframe") if mode == "estimator" \
        else {}
    cfg = NeuralActuatorConfig(n_joints=6, mode=mode, effort="load", **extra, **TINY)
    return NeuralActuator(cfg).eval()


def env(task: str = "lift", episode_s: float = 10.0) -> ArmEnv:
    return ArmEnv("so101", task, actuator="twin:0", privileged=True, episode_s=episode_s)


@pytest.fixture(scope="module")
def demos():
    """Two short expert lift episodes with f̂ streamed from the tiny estimator."""
    e, force = env(episode_s=3.0), ForceStream(tiny_estimator())
    ex = Expert(e.tm)
    return [run_episode(e, lambda s: ex.act(s.target, s.payload_kg), 0, 0, k, force,
                        keep_steps=True) for k in (0, 1)]


def test_expert_removes_the_droop_of_plain_reference_following():
    e = env()  # unit 0, episode 0 of seed 0: a 400 g payload
    plain, expert = Expert(e.tm, ExpertConfig(gain=0.0)), Expert(e.tm)
    runs = {name: run_episode(e, lambda s, x=x: x.act(s.target, s.payload_kg), 0, 0, 0)
            for name, x in (("plain", plain), ("expert", expert))}
    assert runs["plain"].payload_kg == pytest.approx(0.4)
    last = {k: r.err[r.t >= r.t[-1] - 3.0] for k, r in runs.items()}
    assert last["plain"].min() > 0.02  # plain following droops by more than 2 cm
    assert last["expert"].max() < 0.4 * last["plain"].min()
    assert runs["expert"].success and not runs["plain"].success
    assert 10.0 < nominal_stiffness("so101") < 25.0


def test_success_criteria():
    t = np.linspace(0, 10, 101)
    err = np.full(101, 0.005)
    assert lift_success(t, err)
    err[-5] = 0.011
    assert not lift_success(t, err)
    assert lift_success(t, np.full(101, 0.005)) and not lift_success(t, np.full(101, 0.005), 1)
    err = np.full(101, 0.05)
    err[t < 6.0] = 0.015
    assert pick_success(t, err, 6.0) and not pick_success(t, err, 6.05)
    assert not pick_success(t, err, np.inf) and not pick_success(t, err, 6.0, overloads=2)


def test_force_stream_feeds_the_estimate_online(demos):
    tr = demos[0]
    assert np.all(tr.fhat[:4] == 0.0)  # history 4: no estimate before, then one lagging
    assert np.isfinite(tr.fhat).all() and np.abs(tr.fhat[10:]).sum() > 0
    assert [s.fhat.tolist() for s in tr.feats] == tr.fhat.tolist()


def test_simulator_mode_checkpoint_is_refused_where_f_hat_is_needed():
    with pytest.raises(ConfigError, match="estimator"):
        ForceStream(tiny_estimator("simulator"))


def test_bc_policy_trains_and_its_loss_falls(demos):
    x, y = demo_arrays(demos, use_force=True)
    assert x.shape == (sum(len(d.goal) for d in demos), 27) and y.shape[1] == 6
    model, losses = train_bc(x, y, BCConfig(use_force=True, steps=300, batch=128,
                                            hidden=(64, 64)))
    assert np.mean(losses[-20:]) < 0.3 * np.mean(losses[:20])
    goal = model.act(demos[0].feats[100])
    assert goal.shape == (6,) and np.isfinite(goal).all()
    xq, _ = demo_arrays(demos, use_force=False)
    assert xq.shape[1] == 24 and np.array_equal(xq, x[:, :24])


def test_save_load_round_trip_and_refusals(demos, tmp_path):
    x, y = demo_arrays(demos, use_force=True)
    model, _ = train_bc(x, y, BCConfig(use_force=True, steps=20, batch=32, hidden=(16,)))
    save_policy(model, tmp_path / "pol")
    back = load_policy(tmp_path / "pol", robot="so101", task="lift")
    assert back.cfg.use_force and back.cfg.hidden == (16,)
    with torch.no_grad():
        assert torch.equal(back(torch.from_numpy(x[:50])), model(torch.from_numpy(x[:50])))
    with pytest.raises(ConfigError, match="robot 'so101', not 'omx'"):
        load_policy(tmp_path / "pol", robot="omx")
    with pytest.raises(ConfigError, match="task 'lift', not 'pick'"):
        load_policy(tmp_path / "pol", task="pick")
    with pytest.raises(ConfigError, match="BCConfig.task"):
        BCConfig(task="push").validate()


def test_training_resumes_from_its_checkpoint(demos, tmp_path):
    x, y = demo_arrays(demos, use_force=False)
    cfg = BCConfig(steps=40, batch=32, hidden=(16,), checkpoint=str(tmp_path / "s.safetensors"),
                   checkpoint_every=10)
    straight, l1 = train_bc(x, y, dataclasses.replace(cfg, checkpoint=""))
    train_bc(x, y, dataclasses.replace(cfg, steps=20))
    resumed, l2 = train_bc(x, y, cfg)
    assert l1 == l2
    for a, b in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(ConfigError, match="another run"):
        train_bc(x, y * 2, cfg)


def test_paired_trials_give_both_policies_the_same_conditions():
    e = env(episode_s=3.0)
    ex = Expert(e.tm)
    runs = [PolicyRun("plain", lambda s: s.target),
            PolicyRun("expert_f", lambda s: ex.act(s.target, s.payload_kg),
                      ForceStream(tiny_estimator()))]
    out = paired_trials(lambda: e, runs, seed=0, units=[1], episodes=[0, 3])
    for a, b in zip(out["plain"], out["expert_f"]):
        assert (a.unit, a.episode, a.payload_kg) == (b.unit, b.episode, b.payload_kg)
        assert np.array_equal(a.q0, b.q0) and np.array_equal(a.ref, b.ref)
        assert not np.array_equal(a.goal, b.goal)
    assert {t.payload_kg for t in out["plain"]} != {0.0}
    res = summarize(out, "plain", "expert_f")
    assert res["trials"] == 2 and not res["plain"]["overload_reported"]


def test_interval_arithmetic_on_known_examples():
    lo, hi = wilson(8, 10)
    assert (lo, hi) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    # p1 = 8/10, p2 = 0/10, no concordant success: phi = 0, so the interval is
    # 0.8 - sqrt((0.8 - 0.4902)^2 + 0.2775^2) .. 0.8 + (0.9433 - 0.8)
    d, (lo, hi) = newcombe_paired(0, 8, 0, 2)
    assert d == pytest.approx(0.8) and (lo, hi) == pytest.approx((0.3841, 0.9433), abs=2e-4)
    d2, (lo2, hi2) = newcombe_paired(0, 0, 8, 2)
    assert d2 == pytest.approx(-0.8) and (lo2, hi2) == pytest.approx((-hi, -lo))
    d, (lo, hi) = newcombe_paired(20, 3, 3, 14)
    assert d == 0.0 and lo < 0 < hi and lo == pytest.approx(-hi)


def test_summarize_pairs_trials_and_orders_the_difference():
    def tr(k: int, ok: bool) -> Trace:
        z = np.zeros((1, 6))
        return Trace("lift", 0, k, 0.1, np.inf, np.zeros(1), z, z, z, np.zeros((1, 3)),
                     err=np.zeros(1), success=ok)
    first = [tr(k, k < 2) for k in range(10)]
    second = [tr(k, k < 8) for k in range(10)]
    r = summarize({"qa": first, "qaf": second}, "qa", "qaf")
    assert r["difference"] == pytest.approx(0.6) and r["qaf"]["rate"] == 0.8
    assert r["discordant"] == {"only_qaf": 6, "only_qa": 0}
    with pytest.raises(ConfigError, match="paired"):
        summarize({"qa": first, "qaf": second[::-1]}, "qa", "qaf")


def test_over_current_stops_are_read_from_the_protected_twin():
    e = ArmEnv("so101", "lift", actuator="twin:0", privileged=True, episode_s=4.0,
               overload_protection=True)
    ex = Expert(e.tm)
    calm = run_episode(e, lambda s: ex.act(s.target, s.payload_kg), 0, 0, 0)
    assert calm.overload_reported and calm.overloads == 0 and calm.success is not None
    from neuract.policy.rollout import _overload

    # the status bits stay set once a servo trips: an episode's stops are the latest count
    assert _overload({}) == (0, False)
    assert _overload({"overload": np.array([False, True, True])}) == (2, True)
    assert not lift_success(calm.t, np.zeros_like(calm.t), overloads=1)
