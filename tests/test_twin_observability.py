"""Which contact samples change the telemetry: twin episodes against their counterfactuals
without the external forces (same plan, timing and noise)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from neuract.errors import ConfigError, SchemaError
from neuract.twin.config import ROBOT_SPECS, SimConfig
from neuract.twin.generate import GenerateConfig, episode_table, generate, run_chunk
from neuract.twin.observability import (
    TELEMETRY,
    contact_visibility,
    counterfactual_config,
    first_difference,
    force_starts,
    hidden_lag,
    register_lsb,
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


def _same_telemetry(a, b):
    for c in TELEMETRY:
        if c in a:
            np.testing.assert_array_equal(a[c], b[c])


def test_push_end_cuts_the_pushes_from_that_time_on():
    cfg = _pushes((5.0, 6.0))
    fact = generate(cfg)
    rows = episode_table(cfg)
    # no cut: the same episodes; a cut at 0 s: the episodes without their pushes
    for a, b in zip(fact, run_chunk(cfg, rows, push_end_s=[np.inf] * len(rows))):
        _same_telemetry(a, b)
    for a, b in zip(generate(counterfactual_config(cfg, 0.0)),
                    run_chunk(cfg, rows, push_end_s=[0.0] * len(rows))):
        _same_telemetry(a, b)
    # a cut in the middle of the first push: the force as before up to it, zero from it on;
    # the telemetry differs, but not before the cut
    tr = fact[0]
    p0 = tr.meta.labels["pushes"][0]
    cut = p0["t0_s"] + 0.5 * p0["duration_s"]
    (w,) = run_chunk(cfg, rows[:1], push_end_s=[cut])
    t = np.asarray(tr["t"])
    f, fw = np.asarray(tr["ee_force"]), np.asarray(w["ee_force"])
    np.testing.assert_array_equal(fw[t < cut - 0.02], f[t < cut - 0.02])
    assert np.abs(fw[t >= cut]).max() == 0.0 and np.abs(f[t >= cut]).max() > 1.0
    assert w.meta.labels["push_end_s"] == cut and "push_end_s" not in tr.meta.labels
    assert not np.asarray(w["contact"], bool)[t >= cut].any()
    k = first_difference(tr, w)
    assert t[k] >= cut and k < len(tr)
    # within a register count, the first difference comes no earlier
    lsb = register_lsb(ROBOT_SPECS["so101"]())
    assert lsb["q"] == pytest.approx(2 * np.pi / 4096) and lsb["load"] == pytest.approx(0.004)
    k1 = first_difference(tr, w, tolerance={c: v for c, v in lsb.items()})
    assert k <= k1 <= len(tr)
    assert first_difference(tr, w, tolerance={c: 1e9 for c in lsb}) == len(tr)
    for bad in ([1.0], [-1.0, 1.0], [float("nan"), 1.0], [True, 1.0], ["1", 1.0]):
        with pytest.raises(ConfigError, match="push_end_s"):
            run_chunk(cfg, rows, push_end_s=bad)


def test_hidden_lag_weak_pushes_end_unseen_for_longer():
    """Known physics: a push of under 1 N that the servo's gear friction holds the arm
    against often ends without changing any register for several samples; a 5-6 N push
    deflects the arm far enough that it springs back within a sample or two."""
    out = {}
    for name, rng in (("weak", (0.6, 1.0)), ("strong", (5.0, 6.0))):
        cfg = _pushes(rng)
        eps = generate(cfg)
        both = hidden_lag(cfg, eps, min_force_n=0.5, tolerances_lsb=(0, 1))
        lags = both[0]
        # within one register count the telemetry reads the same for at least as long
        assert all((b >= a).all() for a, b in zip(both[0], both[1]))
        for tr, lag in zip(eps, lags):
            c = np.asarray(tr["contact"], bool) & (np.linalg.norm(tr["ee_force"], axis=1)
                                                  >= 0.5)
            # every push contact sample is ambiguous at its own instant (lag >= 0), and only
            # contact samples get a lag
            assert (lag[c] >= 0).all() and (lag[~c] == -1).all()
        lag = np.concatenate(lags)
        lag = lag[lag >= 0]
        out[name] = {L: float((lag >= L).mean()) for L in (1, 3)}
        out[name + "_eps"] = (cfg, eps, lags)
    assert out["weak"][3] > 0.1 > 0.05 > out["strong"][3]
    assert out["weak"][1] > 2 * out["strong"][1]
    # the definition: at the weak episodes' most lagged sample k (lag L), the episode with its
    # pushes cut off L samples before reads the same through k, without force at k
    cfg, eps, lags = out["weak_eps"]
    e = int(np.argmax([lag.max() for lag in lags]))
    k = int(np.argmax(lags[e]))
    L = int(lags[e][k])
    assert L >= 3
    t = np.asarray(eps[e]["t"])
    row = episode_table(cfg)[e]
    (w,) = run_chunk(cfg, [row], push_end_s=[float(t[k - L])])
    assert first_difference(eps[e], w) > k
    assert np.abs(np.asarray(w["ee_force"])[k]).max() == 0.0
    # fewer cut points: lower bounds of the same lags
    for a, b in zip(hidden_lag(cfg, eps, min_force_n=0.5, stride=3)[0], lags):
        assert (a <= b).all()
    # payload episodes are not examined
    lift = dataclasses.replace(cfg, tasks=("lift",), minutes=6 / 60)
    lifted = generate(lift)
    assert lifted[0]["contact"].any()
    assert all((lag == -1).all() for lag in hidden_lag(lift, lifted)[0])
    with pytest.raises(SchemaError, match="stride"):
        hidden_lag(cfg, eps, stride=0)
    with pytest.raises(SchemaError, match="tolerances_lsb"):
        hidden_lag(cfg, eps, tolerances_lsb=(-1,))
    with pytest.raises(SchemaError, match="seed"):
        hidden_lag(dataclasses.replace(cfg, seed=9), eps)
