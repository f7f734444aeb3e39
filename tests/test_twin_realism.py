"""Realism of the twin against real NAD files (OMX and SO-101): replay each file's own goal
trajectory and payload on 4 random units; every statistic must fall in a tolerance band
around the real value. Prints both distributions (pytest -s)."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from neuract.twin import realism
from neuract.twin.config import SimConfig, so101_spec
from neuract.twin.generate import GenerateConfig, generate

pytestmark = pytest.mark.realdata

FILES = [
    "force_sensor/force_z_minus/test/001.csv",
    "force_sensor/force_z_minus/train/001.csv",
    "force_sensor/force_z_minus_ref/test/001.csv",
    "so101/go_up_and_stay_still/500g/test/001.csv",
    "so101/go_up_and_stay_still/500g/train/001.csv",
    "so101/go_up_and_stay_still/empty/train/001.csv",
]


@pytest.mark.parametrize("rel", FILES)
def test_twin_replay_within_real_bands(shared_data, rel):
    from neuract.io.nad import read_nad_csv

    path = shared_data / "nad" / rel
    if not path.is_file():
        pytest.skip(f"{path} missing")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = read_nad_csv(path)
    r = realism.stats(real)
    twins = [realism.stats(tr) for tr in realism.replay(real, n_units=4, seed=0)]
    failures = []
    print(f"\n{rel}  ({real.meta.robot}, payload {real.meta.labels.get('payload_mass_kg')})")
    for key, (lo, hi) in realism.tolerance_bands(r).items():
        vals = [t[key] for t in twins if key in t]
        med = float(np.median(vals))
        ok = lo <= med <= hi
        print(f"  {key:15s} real {r[key]:8.3f}   twin units "
              + " ".join(f"{v:8.3f}" for v in vals)
              + f"   band [{lo:.3f}, {hi:.3f}] {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"{key}: twin median {med:.3f} outside [{lo:.3f}, {hi:.3f}] "
                            f"(real {r[key]:.3f})")
    assert not failures, "; ".join(failures)


def test_realism_bands_reject_a_wrong_twin(shared_data):
    """Negative control: the same bands reject a twin whose firmware gain is 4x too low
    (P = 4 instead of LeRobot's 16) and whose supply sags 4x too much."""
    from neuract.io.nad import read_nad_csv

    path = shared_data / "nad" / "so101/go_up_and_stay_still/500g/train/001.csv"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = read_nad_csv(path)
    good = so101_spec()
    wrong = dataclasses.replace(
        good, servo=dataclasses.replace(good.servo, kp=4.0),
        bus=dataclasses.replace(good.bus, supply_resistance=(2.0, 4.0)))
    r = realism.stats(real)
    twins = [realism.stats(tr) for tr in realism.replay(real, n_units=2, spec=wrong)]
    out = [key for key, (lo, hi) in realism.tolerance_bands(r).items()
           if not lo <= np.median([t[key] for t in twins if key in t]) <= hi]
    print("\nwrong twin (P=4, 4x sag) out of band:", out)
    assert {"v_min", "v_mean"} & set(out) and {"err_move_med", "load_rest"} & set(out)


def _held_arm(current: np.ndarray):
    """5 s of a still 6-joint arm at 60 Hz with the given (T, 6) current register [A]."""
    from neuract.data.trajectory import Trajectory, TrajectoryMeta

    T = len(current)
    ch = {"t": np.arange(T) / 60.0, "q": np.zeros((T, 6)), "qd": np.zeros((T, 6)),
          "q_goal": np.zeros((T, 6)), "current": current, "voltage": np.full((T, 6), 12.0),
          "temperature": np.full((T, 6), 30.0)}
    return Trajectory(ch, TrajectoryMeta(robot="so101", joint_names=tuple("abcdef"),
                                         rate_hz=60.0))


def test_current_change_rest_counts_register_changes():
    """The share of rest sample pairs whose current register changes, median over joints
    1-4 (joints 5-6 do not count), and reported without a band."""
    T = 300
    cur = np.full((T, 6), 0.0195)  # 3 counts of 6.5 mA, constant
    assert realism.stats(_held_arm(cur))["current_change_rest"] == 0.0
    flicker = cur.copy()
    flicker[::2, :3] += 0.0065  # joints 1-3 alternate every sample, joint 4 constant
    flicker[:, 4:] += np.arange(T)[:, None] * 0.0065  # the gripper and 6th joint ramp
    assert realism.stats(_held_arm(flicker))["current_change_rest"] == pytest.approx(1.0)
    flicker[:, 1:3] = cur[:, 1:3]  # only joint 1 still changes: median of 1, 0, 0, 0
    assert realism.stats(_held_arm(flicker))["current_change_rest"] == 0.0
    assert "current_change_rest" in realism.UNCHECKED
    r = realism.stats(_held_arm(cur)) | {"err_move_med": 1.0, "err_move_p90": 2.0}
    assert "current_change_rest" not in realism.tolerance_bands(r)


@pytest.mark.parametrize("minutes", [1.0, pytest.param(3.0, marks=pytest.mark.slow)])
def test_twin_temperature_over_minutes(shared_data, minutes):
    """Minutes of holding 500 g: winding temperature stays in the real range and drifts no
    faster over 10 s than the real files allow (<= 2 degC)."""
    cfg = GenerateConfig(robot="so101", tasks=("lift",), minutes=minutes, units=1, seed=4,
                         sim=SimConfig(episode_s=60.0 * minutes, n_envs=1,
                                       payload_range_kg=(0.5, 0.5)))
    drifts, temps = [], []
    for tr in generate(cfg):
        temp = tr["temperature"]
        k = int(round(tr.meta.rate_hz * 10))
        drifts.append(np.abs(temp[k:] - temp[:-k]).max())
        temps.append((temp.min(), temp.max(), np.median(temp[-60:] - temp[:60], axis=0)))
    print(f"\n{minutes:.0f} min hold, 500 g: temp min/max and drift per joint [degC]:")
    for t in temps:
        print(f"  {t[0]:.0f} .. {t[1]:.0f}  drift {np.round(t[2], 1)}")
    print(f"  max 10 s drift {max(drifts):.1f} degC (real NAD files: <= 1 degC over ~10 s)")
    assert max(drifts) <= 2.0
    assert all(25.0 <= t[0] and t[1] <= 60.0 for t in temps)
    # the loaded shoulder motor warms up (>= 1 degC after 3 min; not cooling after 1 min)
    assert all(t[2][1] >= (1.0 if minutes >= 3 else 0.0) for t in temps)
