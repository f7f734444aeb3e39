"""Where a fitted STS3215 model still misses, in physical terms (same data, split and rollout
as ``bench_sts3215.py``; needs its ``--cache`` of fitted models).

For each named parametric model, on the held-out runs:
- brutal steps: time until the arm has covered 5 % / 50 % of the step, measured vs simulated,
  per kp (a lag that grows as kp falls points at something upstream of the P law);
- sin_time_square (a chirp): per 1 s window, the lag and gain of q with respect to the goal
  (least squares over whole-sample lags), measured vs simulated, per kp;
- lift_and_drop: error while the torque is on and after it is switched off (free swing), and
  the rest position at the end, compared with the spread between repetitions.
And, from the TRAINING runs only, the duty the measured motion implies (rigid-body inverse
dynamics with the model's inertia, gravity offset, kt and R; friction ignored) against the
firmware's nominal ``kp * 0.1649 * e`` (e: delayed goal minus q), per kp.

    .venv/bin/python benchmarks/studies/diagnose_sts3215.py --cache DIR MODEL [MODEL ...]

Writes benchmarks/results/sts3215_diagnostics.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    STS3215_DATA,
    STS3215_VARIANTS,
    sts3215_load,
    sts3215_model,
    sts3215_rollout,
    sts3215_scores,
    sts3215_split,
    write_result,
)
from neuract.fit.checkpoint import load_weights  # noqa: E402

KPS = ("4", "8", "12", "16", "24", "32")


def _sel(labels, trajectory, kp=None):
    return [i for i, lab in enumerate(labels) if lab["trajectory"] == trajectory
            and (kp is None or str(lab["kp"]) == kp)]


def step_onsets(q, qs, g, labels) -> dict:
    """Mean time [s] to cover 5 % and 50 % of each brutal step, measured / simulated, per kp."""
    out: dict = {}
    for kp in KPS:
        rows = []
        for i in _sel(labels, "brutal", kp):
            dg = np.diff(g[i])
            jumps = np.where(np.abs(dg) > 0.3)[0]
            for k, s in enumerate(jumps):
                if k and s - jumps[k - 1] <= 5:
                    continue
                s1 = s + 1
                amp = abs(g[i][min(s1 + 3, len(g[i]) - 1)] - q[i][s1])
                row = []
                for frac in (0.05, 0.5):
                    for x in (q[i], qs[i]):
                        hit = np.where(np.abs(x[s1:s1 + 100] - x[s1]) > frac * amp)[0]
                        row.append(hit[0] * 0.01 if len(hit) else np.nan)
                rows.append(row)
        if rows:
            m = np.nanmean(np.array(rows), 0)
            out[kp] = {"n_steps": len(rows), "onset5_meas_s": m[0], "onset5_sim_s": m[1],
                       "half_meas_s": m[2], "half_sim_s": m[3]}
    return out


def lag_gain(x, g, lo, hi, max_lag=40) -> tuple[float, float]:
    """(lag [s], gain) of x[lo:hi] ~ gain * g[lo-lag:hi-lag] + c, best whole-sample lag."""
    best = (np.inf, 0, 0.0)
    for lag in range(max_lag):
        gl = g[lo - lag:hi - lag]
        a = np.stack([gl, np.ones_like(gl)], 1)
        coef = np.linalg.lstsq(a, x[lo:hi], rcond=None)[0]
        r = float(np.sum((a @ coef - x[lo:hi]) ** 2))
        if r < best[0]:
            best = (r, lag, float(coef[0]))
    return best[1] * 0.01, best[2]


def chirp_response(q, qs, g, labels) -> dict:
    out: dict = {}
    for kp in KPS:
        idx = _sel(labels, "sin_time_square", kp)
        if not idx:
            continue
        wins = []
        for lo in range(100, 600, 100):
            m = np.mean([lag_gain(q[i], g[i], lo, lo + 100) for i in idx], 0)
            s = np.mean([lag_gain(qs[i], g[i], lo, lo + 100) for i in idx], 0)
            wins.append({"window_s": [lo * 0.01, (lo + 100) * 0.01], "lag_meas_s": m[0],
                         "lag_sim_s": s[0], "gain_meas": m[1], "gain_sim": s[1]})
        out[kp] = wins
    return out


def free_swing(q, qs, en, labels) -> dict:
    idx = _sel(labels, "lift_and_drop")
    on, off, rest_m, rest_s, groups = [], [], [], [], {}
    for i in idx:
        k = int(np.argmax(en[i] < 0.5)) or len(en[i])
        on.append(np.abs(qs[i, :k] - q[i, :k]).mean())
        off.append(np.abs(qs[i, k:] - q[i, k:]).mean() if k < len(en[i]) else np.nan)
        rest_m.append(q[i, -50:].mean())
        rest_s.append(qs[i, -50:].mean())
        lab = labels[i]
        groups.setdefault((lab["mass"], lab["length"], lab["kp"]), []).append(rest_m[-1])
    spread = np.mean([np.abs(np.array(v) - np.mean(v)).mean() for v in groups.values()])
    return {"mae_torque_on_rad": float(np.mean(on)), "mae_torque_off_rad": float(np.nanmean(off)),
            "rest_position_diff_rad": float(np.mean(np.abs(np.array(rest_m) - rest_s))),
            "rest_position_repeat_spread_rad": float(spread)}


def implied_duty(b, params: dict) -> dict:
    """Median duty implied by the measured motion, per kp and bin of nominal duty."""
    from scipy.signal import savgol_filter

    kt, R = params["actuator.kt"], params["actuator.R"]
    off, arm = params["joints.offset"], params["joints.armature"]
    delay = params.get("actuator.delay.delay", 0.0)
    q = b.q.numpy()[..., 0]
    g, en = b.command.numpy()[..., 0], b.enable.numpy()[..., 0]
    lab = b.labels
    col = lambda k: np.array([float(x[k]) for x in lab])[:, None]  # noqa: E731
    mass, ln, am, kp = col("mass"), col("length"), col("arm_mass"), col("kp")
    inertia = mass * ln ** 2 + am * ln ** 2 / 3 + arm
    qd = savgol_filter(q, 9, 3, deriv=1, delta=0.01, axis=1)
    qdd = savgol_filter(q, 9, 3, deriv=2, delta=0.01, axis=1)
    tau = inertia * qdd + (mass + am / 2) * 9.81 * ln * np.sin(q + off)
    duty = (tau * R / kt + kt * qd) / b.voltage.numpy()[..., 0]
    t = np.arange(q.shape[1]) * 0.01
    e = np.stack([np.interp(t - delay, t, gi) for gi in g]) - q
    u = kp * 0.1649 * e
    inner = (np.arange(q.shape[1]) > 10) & (np.arange(q.shape[1]) < q.shape[1] - 10)
    ok = b.mask.numpy()[..., 0] & (en > 0.5) & inner
    bins = [0.02, 0.1, 0.2, 0.4, 0.6, 1.0, 1.5, 3.0]
    out: dict = {}
    for k in sorted({str(int(x)) for x in kp[:, 0]}, key=float):
        row = {}
        for lo, hi in zip(bins[:-1], bins[1:]):
            s = ok & (kp == float(k)) & (np.abs(u) >= lo) & (np.abs(u) < hi)
            if s.sum() > 20:
                row[f"{lo}-{hi}"] = float(np.median(np.sign(u[s]) * duty[s]))
        out[k] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="names in common.STS3215_VARIANTS")
    ap.add_argument("--cache", type=Path, required=True, help="bench_sts3215.py --cache dir")
    ap.add_argument("--data", type=Path, default=STS3215_DATA)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    b = sts3215_load(args.data)
    tr, va, te = sts3215_split(b)
    test = b.select(te)
    q, g = test.q.numpy()[..., 0], test.command.numpy()[..., 0]
    en = test.enable.numpy()[..., 0]
    res: dict = {"split": "as bench_sts3215 (test: kp 16 or mass 0.969)", "models": {}}
    for name in args.models:
        model, substeps = sts3215_model(STS3215_VARIANTS[name])
        load_weights(model, args.cache / f"{name}.safetensors")
        qs = sts3215_rollout(model, test, substeps)
        params = model.physical_parameters()
        res["models"][name] = {
            "heldout_mae_rad": sts3215_scores(qs, test)["heldout_mae_rad"],
            "brutal_step_onsets": step_onsets(q, qs, g, test.labels),
            "chirp_lag_gain": chirp_response(q, qs, g, test.labels),
            "lift_and_drop": free_swing(q, qs, en, test.labels),
            "implied_duty_train_runs": implied_duty(b.select(tr), params),
        }
        print(name, res["models"][name]["heldout_mae_rad"], flush=True)
    out = RESULTS / "sts3215_diagnostics.json"
    write_result(out, res)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
