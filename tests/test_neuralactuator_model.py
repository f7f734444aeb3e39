"""NeuralActuator model: sizes (analytic FLOPs == torch's FLOP counter), torque limits and the
servo prior, modes kept apart, batching identities, gradients, fused path == model."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from neuract.errors import ConfigError
from neuract.neuralactuator import (
    FusedNeuralActuator,
    NeuralActuator,
    NeuralActuatorConfig,
    count_flops,
    count_params,
)

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=32, d_trunk=32)


def rand_x(cfg, B, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, cfg.history, cfg.n_features, generator=g)


def with_random_stats(model, seed=1):
    g = torch.Generator().manual_seed(seed)
    F = model.cfg.n_features
    model.set_stats(torch.randn(F, generator=g), torch.rand(F, generator=g) + 0.5,
                    torch.tensor([2.0, 3.0, 4.0]))
    with torch.no_grad():  # a non-trivial head so every output depends on the input
        model.head.weight.normal_(0.0, 0.05, generator=g)
        for ln in [model.ln_f, *(m for lay in model.layers for m in (lay.ln1, lay.ln2))]:
            ln.weight.uniform_(0.5, 1.5, generator=g)
            ln.bias.normal_(0.0, 0.1, generator=g)
    return model


def test_default_size_is_in_the_papers_class():
    cfg = NeuralActuatorConfig()
    n, flops = count_params(NeuralActuator(cfg)), count_flops(cfg)
    # the paper: 1.42 M parameters, 5.46 M FLOPs per forward pass
    assert abs(n - 1.42e6) / 1.42e6 < 0.03, n
    assert abs(flops - 5.46e6) / 5.46e6 < 0.05, flops


@pytest.mark.parametrize("kw", [
    {},
    {"mode": "simulator"},
    {"mode": "simulator", "sim_temperature": True, "n_joints": 5, "history": 5},
    {"effort": "load", "d_model": 64, "n_layers": 3, "n_heads": 8, "d_ff": 100, "d_trunk": 77,
     "n_conditions": 3, "activation": "relu"},
])
@pytest.mark.parametrize("B", [1, 3])
def test_analytic_flops_equal_torch_flop_counter(kw, B):
    cfg = NeuralActuatorConfig(**kw)
    model = NeuralActuator(cfg).eval()
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model(rand_x(cfg, B))
    assert fc.get_total_flops() == B * count_flops(cfg)
    # the folded inference path does the same matrix work plus the tiny PD-prior product
    fused = FusedNeuralActuator(model)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        fused(rand_x(cfg, B))
    prior = 2 * cfg.history * cfg.n_features * cfg.n_joints
    assert fc.get_total_flops() == B * (count_flops(cfg) + prior)


def test_torque_always_inside_the_limits():
    cfg = NeuralActuatorConfig(**TINY, tau_max=(0.5, 1.0, 2.0, 3.0, 4.0, 5.0))
    model = with_random_stats(NeuralActuator(cfg))
    with torch.no_grad():
        model.head.weight.mul_(1e4)  # a wild residual
        tau = model(1e3 * rand_x(cfg, 64))[0]
    assert (tau.abs() <= model.tau_max + 1e-6).all()
    assert (tau.abs().amax(0) > 0.9 * model.tau_max).all()  # and the limits are reachable


def test_servo_prior_alone_is_a_saturated_pd_loop():
    cfg = NeuralActuatorConfig(**TINY, mode="simulator", n_joints=3, tau_max=(2.0,), kp_init=4.0,
                               kd_init=0.3)
    model = NeuralActuator(cfg)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
    q_goal, q, qd = torch.randn(3, 5, cfg.history, 3).unbind(0)
    from neuract.neuralactuator import assemble

    x = assemble({"q_goal": q_goal, "q": q, "qd": qd}, cfg.channels)
    tau = model(x)[0]
    err, v = (q_goal - q)[:, -1], qd[:, -1]
    expected = 2.0 * torch.tanh((4.0 * err - 0.3 * v) / 2.0)
    torch.testing.assert_close(tau, expected)


def test_simulator_mode_never_reads_measured_telemetry():
    from neuract.neuralactuator import assemble

    sim = NeuralActuatorConfig(**TINY, mode="simulator")
    assert not {"current", "load", "voltage", "temperature"} & set(sim.channels)
    est = NeuralActuatorConfig(**TINY, mode="estimator")
    assert {"current", "voltage", "temperature", "q", "qd"} <= set(est.channels)
    g = torch.Generator().manual_seed(0)
    parts = {k: torch.randn(4, 8, 6, generator=g)
             for k in ("q_goal", "q", "qd", "current", "voltage", "temperature")}
    changed = dict(parts, current=parts["current"] + 5.0, voltage=parts["voltage"] - 3.0,
                   temperature=parts["temperature"] + 20.0)
    m_sim = with_random_stats(NeuralActuator(sim))
    m_est = with_random_stats(NeuralActuator(est))
    with torch.no_grad():
        a = m_sim(assemble(parts, sim.channels))
        b = m_sim(assemble(changed, sim.channels))
        c = m_est(assemble(parts, est.channels))
        d = m_est(assemble(changed, est.channels))
    for u, v in zip(a, b):
        torch.testing.assert_close(u, v, rtol=0, atol=0)
    assert not torch.allclose(c[0], d[0])


@pytest.mark.parametrize("bad, match", [
    ({"mode": "sim"}, "mode='sim'"), ({"effort": "torque"}, "effort='torque'"),
    ({"sim_temperature": True}, "sim_temperature=True"),
    ({"d_model": 30, "n_heads": 4}, "d_model=30 .*n_heads=4"),
    ({"tau_max": (1.0, 2.0)}, "tau_max has 2 values"), ({"tau_max": (-1.0,)}, "tau_max=\\(-1"),
    ({"tau_max": (math.inf,)}, "tau_max=\\(inf"), ({"history": 0}, "history=0"),
    ({"prior": "spring"}, "prior='spring'"), ({"activation": "tanh"}, "activation='tanh'"),
])
def test_invalid_configs_name_the_field(bad, match):
    # the field and the value refused, not another field's message
    with pytest.raises(ConfigError, match=match):
        NeuralActuatorConfig(**bad).validate()


def test_vectorised_equals_loop_and_predict_shapes():
    cfg = NeuralActuatorConfig(**TINY, n_conditions=3)
    model = with_random_stats(NeuralActuator(cfg)).eval()
    x = rand_x(cfg, 5)
    with torch.no_grad():
        full = model(x)
        for i in range(5):
            one = model(x[i:i + 1])
            for u, v in zip(full, one):
                torch.testing.assert_close(u[i:i + 1], v, rtol=1e-5, atol=1e-6)
    p = model.predict(x.reshape(5, 1, cfg.history, cfg.n_features))
    assert p["tau"].shape == (5, 1, 6) and p["force"].shape == (5, 1, 3)
    assert p["gate"].shape == (5, 1) and ((p["gate"] >= 0) & (p["gate"] <= 1)).all()
    assert p["condition_prob"].shape == (5, 1, 6, 3) and p["condition"].shape == (5, 1, 6)
    torch.testing.assert_close(p["condition_prob"].sum(-1), torch.ones(5, 1, 6))


def test_gradients_wrt_inputs_match_finite_differences():
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, history=3)
    model = with_random_stats(NeuralActuator(cfg)).double()
    x = rand_x(cfg, 2).double().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: model(x)[0], (x,), eps=1e-6, atol=1e-5,
                                    fast_mode=True)


@pytest.mark.parametrize("kw", [{}, {"mode": "simulator", "prior": "none"},
                                {"activation": "relu", "n_layers": 3}])
def test_fused_path_equals_model(kw):
    cfg = NeuralActuatorConfig(**{**TINY, **kw, "d_trunk": 64})
    model = with_random_stats(NeuralActuator(cfg)).eval()
    fused = FusedNeuralActuator(model)
    x = 3.0 * rand_x(cfg, 7)
    with torch.no_grad():
        for u, v in zip(model(x), fused(x)):
            torch.testing.assert_close(u, v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("head", ["trunk", "both"])
def test_fused_path_keeps_float32_precision_on_a_near_constant_channel(head):
    """A channel that never varied in training (a temperature register at 36 degC: std at the
    statistics floor, 1e-3) must not cost the fused float32 path its precision (folding the
    mean into the bias cancelled two ~1e4 terms: 5e-3 deviations were seen on an export)."""
    cfg = NeuralActuatorConfig(**TINY, condition_head=head)
    model = with_random_stats(NeuralActuator(cfg)).eval()
    C = len(cfg.channels)
    t = cfg.channels.index("temperature")
    with torch.no_grad():
        model.x_mean.view(cfg.n_joints, C)[:, t] = 36.0
        model.x_std.view(cfg.n_joints, C)[:, t] = 1e-3
    x = rand_x(cfg, 16)
    x.view(16, cfg.history, cfg.n_joints, C)[..., t] = 36.0
    ref = [v.double() for v in model.double()(x.double())]
    with torch.no_grad():
        got = FusedNeuralActuator(model.float())(x)
    for u, v in zip(ref, got):
        tol = 2e-5 * max(1.0, u.abs().max().item())
        torch.testing.assert_close(v.double(), u, rtol=0, atol=tol)
