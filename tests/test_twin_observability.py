"""Which contact samples change the telemetry: twin episodes against their counterfactuals
without the external forces (same plan, timing and noise)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from neuract.errors import SchemaError
from neuract.twin.config import SimConfig
from neuract.twin.generate import GenerateConfig, generate
from neuract.twin.observability import (
    contact_visibility,
    counterfactual_config,
    first_difference,
    force_starts,
)


def _pushes(force_n, seed=4):
    return GenerateConfig(robot="so101", tasks=("push",), minutes=2 * 6 / 60, units=1,
                          seed=seed, sim=SimConfig(episode_s=6.0, n_envs=2,
                                                   push_force_n=force_n))


def test_counterfactual_is_the_same_episode_without_its_later_forces():
    cfg = _pushes((5.0, 6.0))
    fact = generate(cfg)
    none = generate(counterfactual_config(cfg, 0.0))
    for a, b in zip(fact, none):
        starts = force_starts(a.meta.labels)
        assert starts and a["contact"].any() and not b["contact"].any()
        assert np.abs(b["ee_force"]).max() == 0.0
        np.testing.assert_array_equal(a["t"], b["t"])
        np.testing.assert_array_equal(a["q_goal"], b["q_goal"])
        # identical register for register until the first push, different after it
        k = first_difference(a, b)
        assert np.asarray(a["t"])[k] >= starts[0] and k < len(a)
        assert first_difference(a, a) == len(a)
    # forces that start before the cut are kept: the first push stays, the second goes
    two = next(tr for tr in fact if len(force_starts(tr.meta.labels)) == 2)
    s0, s1 = force_starts(two.meta.labels)
    (cut,) = [tr for tr in generate(counterfactual_config(cfg, s1))
              if tr.meta.name == two.meta.name]
    assert np.asarray(two["t"])[first_difference(two, cut)] >= s1
    f_cut = np.linalg.norm(cut["ee_force"], axis=1)
    t = np.asarray(cut["t"])
    assert f_cut[t < s1].max() > 1.0 and f_cut[t >= s1 + 0.5].max() == 0.0
    with pytest.raises(SchemaError, match="not the same episode"):
        first_difference(fact[0], none[1])


def test_small_pushes_stay_hidden_longer_than_strong_ones():
    """Known physics: a push of a few milli-newtons moves the arm far less than one encoder
    step, so its events stay hidden in the telemetry for a large share of their samples; a
    5-6 N push shows within a fraction of a second."""
    weak = contact_visibility(_pushes((0.001, 0.002)), generate(_pushes((0.001, 0.002))))
    strong = contact_visibility(_pushes((5.0, 6.0)), generate(_pushes((5.0, 6.0))))
    assert weak["events"] == strong["events"] > 0
    assert weak["visible_share"] < 0.7 < 0.85 < strong["visible_share"]
    assert weak["onset_delay_s"]["median"] > 2 * strong["onset_delay_s"]["median"]
    assert strong["f1_ceiling"] == pytest.approx(2 * strong["visible_share"]
                                                 / (1 + strong["visible_share"]))
    assert set(strong["per_task"]) == {"push"}
    # weak pushes move the arm by less than an encoder step almost everywhere, strong ones by
    # eight steps or more on most contact samples
    for r in (weak, strong):
        assert list(r["deflection_steps"]) == ["0", "1", "2-3", "4-7", ">=8"]
        assert sum(r["deflection_steps"].values()) == pytest.approx(1.0)
    assert weak["deflection_steps"]["0"] > 0.9 and strong["deflection_steps"][">=8"] > 0.5
    # a label threshold drops the samples under it from the contact count
    thr = contact_visibility(_pushes((5.0, 6.0)), generate(_pushes((5.0, 6.0))),
                             min_force_n=2.0)
    assert thr["contact_samples"] < strong["contact_samples"]
    # the config must be the one that generated the episodes
    with pytest.raises(SchemaError, match="seed"):
        contact_visibility(dataclasses.replace(_pushes((5.0, 6.0)), seed=9),
                           generate(_pushes((5.0, 6.0))))
