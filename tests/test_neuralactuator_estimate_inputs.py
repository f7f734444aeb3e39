"""History windows computed once for several estimators (``estimate_inputs``): the same
estimates as computing them in ``estimate``, for any model that reads the same inputs (the
same estimator with another contact gate), and refused, naming why, for another
trajectory or a model that reads other inputs."""

from __future__ import annotations

import numpy as np
import pytest

from neuract.errors import ConfigError
from neuract.estimate import EstimateInputs, estimate, estimate_inputs
from neuract.estimate.neural import input_signature
from neuract.neuralactuator import NeuralActuator
from test_neuralactuator_gate_rnn import make_model

KEYS = ("tau", "ee_force", "contact_prob", "condition_prob_joint", "condition_prob", "valid",
        "contact_decided_t")


@pytest.fixture(scope="module")
def episodes():
    from neuract.pipeline.twin_data import contact_labelled
    from neuract.twin import GenerateConfig, generate
    from neuract.twin.config import SimConfig

    eps = generate(GenerateConfig(robot="so101", tasks=("push",), minutes=0.2, units=1,
                                  seed=5, sim=SimConfig(episode_s=6.0)))
    return contact_labelled(eps, 0.5)


def _same(a: dict, b: dict) -> None:
    for k in KEYS:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_shared_inputs_estimate_as_computed_for_each_gate(episodes):
    tr = episodes[0]
    causal = make_model()
    lagged = make_model(gate_lag=4, gate_decide=2)  # the same trunk, another gate
    assert input_signature(causal) == input_signature(lagged)
    inputs = estimate_inputs(causal, tr)
    assert isinstance(inputs, EstimateInputs) and inputs.n_samples == len(tr)
    assert inputs.x.shape[:2] == (len(tr) - causal.cfg.history + 1, causal.cfg.history)
    for m in (causal, lagged):
        _same(estimate(m, tr, inputs=inputs), estimate(m, tr))
    # the gates differ, so the shared windows did reach each gate
    a, b = estimate(causal, tr, inputs=inputs), estimate(lagged, tr, inputs=inputs)
    assert not np.array_equal(a["contact_prob"], b["contact_prob"])


def test_inputs_of_another_trajectory_or_model_are_refused(episodes):
    tr, other = episodes[0], episodes[0].slice(0, 200)
    m = make_model()
    inputs = estimate_inputs(m, tr)
    with pytest.raises(ConfigError, match=f"trajectory of {len(tr)} samples; this one has 200"):
        estimate(m, other, inputs=inputs)
    for kw in (dict(history=6), dict(context_s=1.0), dict(physics_site="wrist")):
        changed = NeuralActuator(m.cfg.replace(**kw)).eval()
        changed.gate_rnn.trained.fill_(True)
        assert input_signature(changed) != input_signature(m)
        with pytest.raises(ConfigError, match="a model that reads other inputs"):
            estimate(changed, tr, inputs=inputs)
    with pytest.raises(ConfigError, match="takes the EstimateInputs.*got Tensor"):
        estimate(m, tr, inputs=inputs.x)
