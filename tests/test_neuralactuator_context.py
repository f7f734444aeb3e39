"""Context channels of estimator-mode NeuralActuator: direction of each joint's last motion and
slow averages of effort and position error, computed causally from the episode's past."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.errors import ConfigError, SchemaError
from neuract.estimate import estimate
from neuract.neuralactuator import NeuralActuator, NeuralActuatorConfig, windows
from neuract.neuralactuator.features import CONTEXT_CHANNELS, channels_for, context_channels

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16, history=4)


def test_move_dir_latches_the_last_motion_direction():
    t = np.arange(8) * 0.1
    qd = np.array([0.0, 0.3, 0.01, 0.0, -0.2, -0.02, 0.0, 0.06])[:, None]
    z = np.zeros_like(qd)
    c = context_channels(t, qd, z, z, 1.0, move_speed=0.05)
    # 0 before the first motion, then the sign of the last speed above 0.05 rad/s, held at rest
    np.testing.assert_array_equal(c["move_dir"][:, 0], [0, 1, 1, 1, -1, -1, -1, 1])


def test_slow_averages_are_causal_exponential_filters():
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.01, 0.03, 200))  # irregular sampling
    x = rng.normal(size=(200, 3))
    tau = 0.5
    c = context_channels(t, x, x, 2 * x, tau)
    y = x[0].copy()
    for k in range(1, 200):  # reference: the exact discretisation written out
        y = y + (1 - np.exp(-(t[k] - t[k - 1]) / tau)) * (x[k] - y)
    np.testing.assert_allclose(c["effort_slow"][-1], y, rtol=1e-12)
    np.testing.assert_allclose(c["pos_error_slow"], 2 * c["effort_slow"], rtol=1e-12)
    # a constant input gives a constant average; changing the future leaves the past alone
    one = context_channels(t, x, np.ones_like(x), x, tau)["effort_slow"]
    np.testing.assert_allclose(one, 1.0)
    x2 = x.copy()
    x2[150:] += 5.0
    c2 = context_channels(t, x2, x2, x2, tau)
    for k in CONTEXT_CHANNELS:
        np.testing.assert_array_equal(c2[k][:150], context_channels(t, x, x, x, tau)[k][:150])
        assert not np.array_equal(c2[k][150:], context_channels(t, x, x, x, tau)[k][150:])
    with pytest.raises(ConfigError, match="context_s"):
        context_channels(t, x, x, x, 0.0)


def test_config_windows_and_estimates_with_context():
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    assert channels_for("estimator", "load", context=True)[-3:] == CONTEXT_CHANNELS
    with pytest.raises(ConfigError, match="estimator mode only"):
        NeuralActuatorConfig(mode="simulator", context_s=1.0).validate()
    with pytest.raises(ConfigError, match="context_s"):
        NeuralActuatorConfig(context_s=-1.0).validate()
    cfg = NeuralActuatorConfig(n_joints=6, effort="load", context_s=1.0, **TINY)
    tr = generate(GenerateConfig(robot="so101", tasks=("push",), minutes=0.1, units=1, seed=1,
                                 sim=SimConfig(episode_s=6.0)))[0]
    with pytest.raises(SchemaError, match="context_s"):
        windows(tr, cfg.channels, 6, 4)
    x = windows(tr, cfg.channels, 6, 4, context_s=1.0)
    C = len(cfg.channels)
    ref = context_channels(np.asarray(tr["t"]), np.asarray(tr["qd"]), np.asarray(tr["load"]),
                           np.asarray(tr["q_goal"]) - np.asarray(tr["q"]), 1.0)
    for name in CONTEXT_CHANNELS:  # last token of window 20 = sample 23, joint 1
        i = cfg.channels.index(name)
        assert x[20, -1, 1 * C + i].item() == pytest.approx(ref[name][23, 1], abs=1e-6)
    torch.manual_seed(0)
    model = NeuralActuator(cfg)
    out = estimate(model, tr)
    assert out["tau"].shape == (len(tr), 6) and np.isfinite(out["tau"][3:]).all()
