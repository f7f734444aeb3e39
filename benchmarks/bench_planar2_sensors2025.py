"""Reproduce the Sensors 2025 two-link experiment (Kallel and Iqbal 2025) on planar2.

Protocol (theirs, Tables 1-3 and Sections 3-4; deviations marked *):
- plant: planar2 (1 kg links, 1 m, COM 0.5 m, I 0.1 kg m^2, g 9.81), simulated with the
  closed form ``TwoLinkArm`` (checked equal to ``load_robot("planar2")`` at start) plus joint
  friction* fv = 0.1 N m s/rad, fc = 0.05 N m (the paper names friction but not its values);
- gravity: 20,000 PD steady states, targets U[-pi, pi]^2* (theirs U[-pi/2, pi/2]^2: we also
  report the error on test points inside their range; the wider range is needed because the
  constant-velocity runs and the tracking task leave +-pi/2, and a gravity model used there
  outside its data corrupts every later stage), Kp = 100 (Kd = 20 only sets the transient:
  rest points solved by Newton*, 50 of them checked by simulation); 80/20 split; our
  GravityNet (sin/cos features, 2x32 tanh, L-BFGS) vs their MLP (sklearn);
- Coriolis + friction: constant-velocity runs, |v| U[0.3, 0.7] rad/s (random sign*), PID
  Kp 20, Kd 5, Ki 5 with the learned gravity, samples with |qd - v| < 1e-3 and |qdd| < 0.05*
  rad/s^2; 80/20 split;
- inertia: multi-sine reference (w = 0.3, 0.8, 1.2, 1.8, 2.5 rad/s; a = 1.0, 0.7, 0.5, 0.3,
  0.2; joint 2 cosine with phase 0.2), 10 s at dt 0.004 s under learned c + g feedforward +
  PID (100, 20, 5), torque limit +-60 N m, measurement noise 0.02 rad, 0.05 rad/s,
  0.10 rad/s^2, samples with ||qdd|| > 0.02 kept; InertiaNet with lambda_phys = 1. "Paper
  protocol" rows use that one run; our best model uses 3 runs* (phases shifted by 1.3 rad)
  and takes the Coriolis torque from the Christoffel symbols of the learned M* (data loss
  |M qdd + c_M - (tau - g_hat - f_hat)|^2), plus the paper's skew-symmetry loss;
- tracking: computed torque (their form, gains outside M; Kp 100, Kd 20, Ki 5) on a held-out
  multi-sine (phases 0.5 / 0.9*), 10 s, with the learned model vs the true model, with the
  same sensor noise (same noise sequence for both) and without noise.

Run: ``.venv/bin/python benchmarks/bench_planar2_sensors2025.py`` (about 5 min of CPU on 1
thread, ~5 more for the sklearn peers; ``--skip-peers`` leaves those out).
Writes ``benchmarks/results/planar2_sensors2025.{json,md}``.
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from common import write_result  # noqa: E402
from neuract.atomic import write_text
from neuract.control import ComputedTorque, PIDController, simulate
from neuract.control.sensors2025_protocol import (
    constant_velocity_data,
    multisine,
    pd_steady_states,
    pd_steady_states_by_simulation,
)
from neuract.fit.least_squares import base_parameters, identify_ls
from neuract.models import TwoLinkArm, TwoLinkParams, two_link_regressor
from neuract.models.sensors2025 import (
    CoriolisFrictionNet,
    GravityNet,
    InertiaNet,
    Sensors2025Model,
)

RESULTS = Path(__file__).resolve().parent / "results"
THEIRS = {
    "gravity_mse": 0.0105, "gravity_r2": 0.9997,
    "coriolis_friction_mse": 6.9e-5, "coriolis_friction_r2": 0.992,
    "inertia_mse": {"home [0,0]": 0.021, "extended [pi/2,0]": 0.034, "singular [pi,0]": 0.052},
    "inertia_max_rel_error": {"home [0,0]": 0.042, "extended [pi/2,0]": 0.061,
                              "singular [pi,0]": 0.083},
    "tracking": "figure only (no number)",
}
DT = 0.004
INERTIA_PHASES = [(0.0, 0.2), (1.3, 1.5), (2.6, 2.8)]  # (joint 1, joint 2); run 0 is theirs
BEST = "3 runs: cholesky, Christoffel Coriolis, lambda_phys=1"
SKIP_PEERS = "--skip-peers" in sys.argv  # skip the slow sklearn estimators (iteration runs)
G_ITERS, C_ITERS, M_ITERS, SK_ITERS = 400, 400, 500, 60  # kept small: shared 2-core CPU
NOISE = (0.02, 0.05, 0.10)


def r2(pred: torch.Tensor, y: torch.Tensor) -> float:
    """sklearn's r2_score with uniform average over outputs."""
    ss_res = ((pred - y) ** 2).sum(0)
    ss_tot = ((y - y.mean(0)) ** 2).sum(0)
    return float((1 - ss_res / ss_tot).mean())


def mse(pred: torch.Tensor, y: torch.Tensor) -> float:
    return float(((pred - y) ** 2).mean())


def split(n: int, seed: int = 0, frac: float = 0.8):
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    k = int(frac * n)
    return perm[:k], perm[k:]


def check_core(plant: TwoLinkArm) -> float | None:
    try:
        from neuract.robot import load_robot

        robot = load_robot("planar2")
    except Exception:  # core not importable: report, do not fail
        return None
    gen = torch.Generator().manual_seed(1)
    q, qd, qdd = (torch.randn(200, 2, generator=gen, dtype=torch.float64) for _ in range(3))
    ideal = TwoLinkArm()
    return float((robot.inverse_dynamics(q, qd, qdd) - ideal.inverse(q, qd, qdd)).abs().max())


def main() -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    t_start = time.time()
    plant = TwoLinkArm(TwoLinkParams(fv=(0.1, 0.1), fc=(0.05, 0.05)))
    out: dict = {"theirs": THEIRS, "core_vs_closed_form_max_abs_N_m": check_core(plant)}

    # ---------------------------------------------------------------- 1. gravity
    t0 = time.time()
    # targets over the whole circle* (the tracking task spans +-2.7 rad; see docstring)
    q_target, q_rest, tau_rest = pd_steady_states(plant, 20000, kp=100.0, low=-np.pi,
                                                  high=np.pi, seed=0)
    q_sim, tau_sim = pd_steady_states_by_simulation(plant, q_target[:50], duration=4.0)
    sim_gap = float((q_sim - q_rest[:50]).abs().max())
    tr, te = split(len(q_rest))
    g_net = GravityNet(2, hidden=32)
    g_net.fit(q_rest[tr], tau_rest[tr], max_iter=G_ITERS)
    with torch.no_grad():
        g_pred = g_net(q_rest[te])
    inside = (q_target[te].abs() <= np.pi / 2).all(-1)  # the paper's target range
    grav = {"mse": mse(g_pred, tau_rest[te]), "r2": r2(g_pred, tau_rest[te]),
            "paper_range_mse": mse(g_pred[inside], tau_rest[te][inside]),
            "paper_range_r2": r2(g_pred[inside], tau_rest[te][inside]),
            "n_train": len(tr), "n_test": len(te), "newton_vs_simulated_rest_max_rad": sim_gap,
            "seconds": time.time() - t0}
    try:  # their estimator on our data: sklearn MLP (100, 100) relu, alpha 1e-3, Adam
        if SKIP_PEERS:
            raise ImportError
        from sklearn.neural_network import MLPRegressor
        from sklearn.preprocessing import StandardScaler

        t1 = time.time()
        xs, ys = StandardScaler().fit(q_rest[tr]), StandardScaler().fit(tau_rest[tr])
        sk = MLPRegressor(hidden_layer_sizes=(100, 100), alpha=1e-3, max_iter=SK_ITERS,
                          random_state=0, early_stopping=False, tol=1e-7)
        sk.fit(xs.transform(q_rest[tr]), ys.transform(tau_rest[tr]))
        p = torch.from_numpy(ys.inverse_transform(sk.predict(xs.transform(q_rest[te]))))
        grav["their_mlp_on_our_data"] = {"mse": mse(p, tau_rest[te]), "r2": r2(p, tau_rest[te]),
                                         "max_iter": SK_ITERS, "seconds": time.time() - t1}
    except ImportError:
        pass
    out["gravity"] = grav
    print("gravity", grav)

    # ---------------------------------------------------------------- 2. Coriolis + friction
    t0 = time.time()
    g_hat = lambda q: g_net(q).detach()  # noqa: E731
    cv = constant_velocity_data(plant, g_hat, n_runs=240, duration=6.0, dt=DT, seed=1,
                                qdd_tol=0.05)
    tr, te = split(len(cv["q"]), seed=1)
    cf_net = CoriolisFrictionNet(2, hidden=32)
    cf_net.fit(cv["q"][tr], cv["qd"][tr], cv["target"][tr], max_iter=C_ITERS)
    with torch.no_grad():
        pred = cf_net(cv["q"][te], cv["qd"][te])
        true_cf = plant.coriolis(cv["q"][te], cv["qd"][te]) + plant.friction(cv["qd"][te])
        # generalisation to the speeds of the tracking task (up to ~2.5 rad/s)
        gen = torch.Generator().manual_seed(5)
        qg = (torch.rand(4000, 2, generator=gen, dtype=torch.float64) - 0.5) * 2 * np.pi
        qdg = (torch.rand(4000, 2, generator=gen, dtype=torch.float64) - 0.5) * 5.0
        fast_true = plant.coriolis(qg, qdg) + plant.friction(qdg)
        fast_pred = cf_net(qg, qdg)
    cor = {"mse": mse(pred, cv["target"][te]), "r2": r2(pred, cv["target"][te]),
           "mse_vs_true_c_plus_f": mse(pred, true_cf), "r2_vs_true_c_plus_f": r2(pred, true_cf),
           "n_samples": len(cv["q"]), "n_runs": 240,
           "fv_hat": cf_net.fv.tolist(), "fc_hat": cf_net.fc.tolist(),
           "wide_range_mse_vs_true": mse(fast_pred, fast_true),
           "wide_range_r2_vs_true": r2(fast_pred, fast_true), "seconds": time.time() - t0}
    try:  # their estimator (random forest) on our data
        if SKIP_PEERS:
            raise ImportError
        from sklearn.ensemble import RandomForestRegressor

        t1 = time.time()
        x = torch.cat([cv["q"], cv["qd"]], -1).numpy()
        rf = RandomForestRegressor(n_estimators=100, random_state=0, n_jobs=1)
        rf.fit(x[tr], cv["target"][tr].numpy())
        p = torch.from_numpy(rf.predict(x[te]))
        pf = torch.from_numpy(rf.predict(torch.cat([qg, qdg], -1).numpy()))
        cor["their_rf_on_our_data"] = {
            "mse": mse(p, cv["target"][te]), "r2": r2(p, cv["target"][te]),
            "wide_range_r2_vs_true": r2(pf, fast_true), "seconds": time.time() - t1}
    except ImportError:
        pass
    out["coriolis_friction"] = cor
    print("coriolis", cor)

    # ---------------------------------------------------------------- 3. inertia
    t0 = time.time()
    t = np.arange(int(10.0 / DT)) * DT
    refs = [multisine(t, p1, p2) for p1, p2 in INERTIA_PHASES]  # run 0: the paper's
    q_d, qd_d, qdd_d = (torch.stack([r[i] for r in refs], 1) for i in range(3))
    ff = lambda q, qd: cf_net(q, qd).detach() + g_net(q).detach()  # noqa: E731
    run = simulate(plant, PIDController(100, 20, 5, ff), q_d, qd_d, qdd_d, dt=DT,
                   noise_q=NOISE[0], noise_qd=NOISE[1], tau_limit=60.0, seed=2)
    rng = np.random.default_rng(3)
    qddn = run["qdd"] + rng.normal(0, NOISE[2], run["qdd"].shape)
    runs = []
    for r in range(len(INERTIA_PHASES)):
        qm, qdm = torch.from_numpy(run["q_meas"][:, r]), torch.from_numpy(run["qd_meas"][:, r])
        qddm, tau = torch.from_numpy(qddn[:, r]), torch.from_numpy(run["tau"][:, r])
        keep = qddm.norm(dim=-1) > 0.02
        runs.append(tuple(x[keep] for x in (qm, qdm, qddm, tau)))
    one = runs[0]
    allr = tuple(torch.cat([r_[i] for r_ in runs]) for i in range(4))
    configs = {"home [0,0]": [0.0, 0.0], "extended [pi/2,0]": [np.pi / 2, 0.0],
               "singular [pi,0]": [np.pi, 0.0]}
    qc = torch.tensor(list(configs.values()), dtype=torch.float64)
    m_true = plant.mass_matrix(qc)
    q2grid = torch.linspace(float(one[0][:, 1].min()), float(one[0][:, 1].max()), 200,
                            dtype=torch.float64)  # the excited range of q2
    qgrid = torch.stack([torch.zeros_like(q2grid), q2grid], -1)

    def score(mass_fn) -> dict:
        with torch.no_grad():
            mc, mg = mass_fn(qc), mass_fn(qgrid)
            rel = ((mc - m_true).abs() / m_true.abs()).amax((-1, -2))
            mgt = plant.mass_matrix(qgrid)
            return {
                "mse": {k: float(((mc[i] - m_true[i]) ** 2).mean())
                        for i, k in enumerate(configs)},
                "max_rel_error": {k: float(rel[i]) for i, k in enumerate(configs)},
                "grid_q2_max_rel_frobenius_error": float(
                    (torch.linalg.matrix_norm(mg - mgt) / torch.linalg.matrix_norm(mgt)).max()),
                "min_eig_on_grid": float(torch.linalg.eigvalsh(mg).min()),
            }

    # name -> (data, param, lambda_phys, drop_first_joint, christoffel, iterations)
    variants = {
        "paper protocol (1 run): cholesky, lambda_phys=1": (one, "cholesky", 1.0, True, False),
        "paper protocol (1 run): cholesky, lambda_phys=0": (one, "cholesky", 0.0, True, False),
        "paper protocol (1 run): paper exp-diagonal, lambda_phys=1":
            (one, "exp_diag", 1.0, True, False),
        "paper protocol (1 run): cholesky, q1 input kept": (one, "cholesky", 1.0, False, False),
        f"{len(runs)} runs: cholesky, lambda_phys=1": (allr, "cholesky", 1.0, True, False),
        BEST: (allr, "cholesky", 1.0, True, True),
    }
    inertia_rows, nets = {}, {}
    for name, (data, param, lam, drop, chris) in variants.items():
        torch.manual_seed(0)
        m_net = InertiaNet(2, hidden=32, param=param, drop_first_joint=drop)
        qm, qdm, qddm, tau = data
        with torch.no_grad():
            target = tau - g_net(qm) - (cf_net.friction(qdm) if chris else cf_net(qm, qdm))
        iters = M_ITERS if name == BEST else M_ITERS // 2
        losses = m_net.fit(qm, qdm, qddm, target, cf_net.coriolis, lambda_phys=lam,
                           max_iter=iters, christoffel=chris)
        nets[name] = m_net
        inertia_rows[name] = {**score(m_net), "loss": losses, "lbfgs_iters": iters,
                              "n_samples": len(qm)}
        print("  inertia", name, inertia_rows[name]["max_rel_error"], flush=True)
    # classical baseline on the same noisy data: least squares on the 5 base parameters
    base = base_parameters(two_link_regressor, 2)
    ls_models = {}
    for label, data in (("paper protocol (1 run)", one), (f"{len(runs)} runs", allr)):
        qm, qdm, qddm, tau = data
        ls = identify_ls(two_link_regressor(qm, qdm, qddm), tau, qdm, base)
        ls_models[label] = ls.model(two_link_regressor)
        inertia_rows[f"{label}: rigid-body least squares (5 base params + friction)"] = {
            **score(ls_models[label].mass_matrix), "theta_hat": ls.beta.tolist(),
            "theta_true": plant.theta.tolist(), "n_samples": len(qm)}
    out["inertia"] = {"n_runs": len(runs), "phases": INERTIA_PHASES, "n_steps_per_run": len(t),
                      "variants": inertia_rows, "seconds": time.time() - t0}

    # ---------------------------------------------------------------- 4. tracking
    t0 = time.time()
    models = {
        "true": plant,
        "learned (ours: Christoffel Coriolis, 3 runs)":
            Sensors2025Model(g_net, cf_net, nets[BEST], coriolis="christoffel"),
        "learned (paper form: regressor Coriolis, 1 run)": Sensors2025Model(
            g_net, cf_net, nets["paper protocol (1 run): cholesky, lambda_phys=1"]),
        "rigid-body least squares (3 runs)": ls_models[f"{len(runs)} runs"],
    }
    q_d, qd_d, qdd_d = (x[:, None] for x in multisine(t, phase1=0.5, phase2=0.9))
    track = {}
    for noisy in (True, False):
        nq, nqd = (NOISE[0], NOISE[1]) if noisy else (0.0, 0.0)
        row = {}
        for label, model in models.items():
            res = simulate(plant, ComputedTorque(model, 100, 20, 5, gains_in_inertia=False),
                           q_d, qd_d, qdd_d, dt=DT, noise_q=nq, noise_qd=nqd,
                           tau_limit=60.0, seed=7)
            err = res["q"][:, 0] - q_d[:, 0].numpy()
            row[label] = {"rms_rad": float(np.sqrt((err**2).mean())),
                          "max_rad": float(np.abs(err).max())}
            row[label]["ratio_to_true"] = row[label]["rms_rad"] / row["true"]["rms_rad"]
        track["with_sensor_noise" if noisy else "noise_free"] = row
    out["tracking"] = {**track, "seconds": time.time() - t0}
    print("tracking", track)

    best = inertia_rows[BEST]
    out["best_model"] = f"Sensors2025Model (GravityNet + CoriolisFrictionNet friction + " \
                        f"InertiaNet [{BEST}], coriolis='christoffel')"
    out["gravity_r2"] = grav["r2"]
    out["inertia_max_rel_error"] = max(best["max_rel_error"].values())
    out["tracking_rms_ratio"] = \
        track["with_sensor_noise"]["learned (ours: Christoffel Coriolis, 3 runs)"]["ratio_to_true"]
    out["targets"] = {"gravity_r2": ">= 0.9999", "inertia_max_rel_error": "<= 0.02",
                      "tracking_rms_ratio": "<= 1.2 (with sensor noise)"}
    out["machine"] = {"platform": platform.platform(), "torch": torch.__version__,
                      "threads": 1}
    out["seconds_total"] = time.time() - t_start
    return out


def to_markdown(r: dict) -> str:
    th = r["theirs"]
    inv = r["inertia"]["variants"]
    best = inv[BEST]
    paper = inv["paper protocol (1 run): cholesky, lambda_phys=1"]
    g, c = r["gravity"], r["coriolis_friction"]
    lines = [
        "# Sensors 2025 two-link reproduction (planar2)",
        "",
        "Produced by `benchmarks/bench_planar2_sensors2025.py` (protocol and deviations in its "
        f"docstring); total {r['seconds_total']:.0f} s on 1 thread of a shared 2-core machine.",
        "",
        "| quantity | Kallel & Iqbal 2025 | neuract, paper protocol | neuract, best |",
        "|---|---|---|---|",
        f"| gravity test MSE [(N m)^2] | {th['gravity_mse']} | "
        f"{g['paper_range_mse']:.3g} (their target range) | {g['mse']:.3g} |",
        f"| gravity test R^2 | {th['gravity_r2']} | {g['paper_range_r2']:.7f} | "
        f"{g['r2']:.7f} |",
        f"| Coriolis+friction test MSE [(N m)^2] | {th['coriolis_friction_mse']} | "
        f"{c['mse']:.3g} | {c['mse_vs_true_c_plus_f']:.3g} (vs true C qd + f) |",
        f"| Coriolis+friction test R^2 | {th['coriolis_friction_r2']} | {c['r2']:.5f} | "
        f"{c['r2_vs_true_c_plus_f']:.5f} (vs true C qd + f) |",
    ]
    for k in th["inertia_mse"]:
        lines.append(f"| inertia MSE at {k} [(kg m^2)^2] | {th['inertia_mse'][k]} | "
                     f"{paper['mse'][k]:.2e} | {best['mse'][k]:.2e} |")
        lines.append(f"| inertia max rel. error at {k} | {th['inertia_max_rel_error'][k]:.1%} |"
                     f" {paper['max_rel_error'][k]:.2%} | {best['max_rel_error'][k]:.2%} |")
    tn, tf = r["tracking"]["with_sensor_noise"], r["tracking"]["noise_free"]
    ours = "learned (ours: Christoffel Coriolis, 3 runs)"
    pap = "learned (paper form: regressor Coriolis, 1 run)"
    lines += [
        f"| CT tracking RMS with sensor noise [rad], learned / true | figure only | "
        f"{tn[pap]['rms_rad']:.4g} / {tn['true']['rms_rad']:.4g} | "
        f"{tn[ours]['rms_rad']:.4g} / {tn['true']['rms_rad']:.4g} |",
        f"| ratio learned / true (sensor noise) | - | {tn[pap]['ratio_to_true']:.3f} | "
        f"{tn[ours]['ratio_to_true']:.3f} |",
        f"| CT tracking RMS noise-free [rad], learned / true | - | "
        f"{tf[pap]['rms_rad']:.3g} / {tf['true']['rms_rad']:.3g} | "
        f"{tf[ours]['rms_rad']:.3g} / {tf['true']['rms_rad']:.3g} |",
        "",
        f"Headline keys (best model): `gravity_r2` = {r['gravity_r2']:.7f} (target >= 0.9999), "
        f"`inertia_max_rel_error` = {r['inertia_max_rel_error']:.4f} (target <= 0.02), "
        f"`tracking_rms_ratio` = {r['tracking_rms_ratio']:.3f} (target <= 1.2, with sensor "
        "noise).",
        "",
        "## Inertia variants",
        "",
        "| variant | samples | max rel. error [0,0] / [pi/2,0] / [pi,0] | max rel. Frobenius "
        "error, excited q2 range |",
        "|---|---|---|---|",
    ]
    for name, row in inv.items():
        mre = " / ".join(f"{v:.2%}" for v in row["max_rel_error"].values())
        lines.append(f"| {name} | {row['n_samples']} | {mre} | "
                     f"{row['grid_q2_max_rel_frobenius_error']:.2%} |")
    lines += ["", "## Tracking (computed torque, held-out multi-sine, 10 s)", "",
              "| model | RMS, sensor noise [rad] | ratio to true | RMS, noise-free [rad] |",
              "|---|---|---|---|"]
    for name in tn:
        lines.append(f"| {name} | {tn[name]['rms_rad']:.4g} | {tn[name]['ratio_to_true']:.3f} "
                     f"| {tf[name]['rms_rad']:.3g} |")
    lines += ["", "## Their estimators on our data", ""]
    if "their_mlp_on_our_data" in g:
        sk = g["their_mlp_on_our_data"]
        lines.append(f"- gravity, sklearn MLP (100,100) relu, {sk['max_iter']} epochs: MSE "
                     f"{sk['mse']:.3g}, R^2 {sk['r2']:.6f}")
    if "their_rf_on_our_data" in c:
        rf = c["their_rf_on_our_data"]
        lines.append(f"- Coriolis+friction, random forest: MSE {rf['mse']:.3g}, R^2 "
                     f"{rf['r2']:.4f}; R^2 against the truth at |qd| <= 2.5 rad/s: "
                     f"{rf['wide_range_r2_vs_true']:.3f} (our structured regressor: "
                     f"{c['wide_range_r2_vs_true']:.4f})")
    if "their_mlp_on_our_data" not in g:
        lines.append("- not run (`--skip-peers`)")
    lines += [
        "",
        "Columns: 'paper protocol' = their estimation steps on our data (gravity scored on test "
        "points inside their target range; Coriolis+friction scored against tau - g_hat as they "
        "do; inertia from one 10 s run; Coriolis from the regressor); the data deviations marked "
        "* in the script's docstring (whole-circle gravity targets, |qdd| filter) apply to both "
        "columns. 'best' = 3 excitation runs and Coriolis from the Christoffel symbols of the "
        "learned M.",
        "",
        "Notes: MSE/R^2 are on a random 20 % held-out split of each data set. Gravity targets "
        "are exact rest torques (Newton solution of Kp (q_d - q) = g(q); max gap to 50 "
        f"simulated rest points {g['newton_vs_simulated_rest_max_rad']:.1e} rad). The "
        "Coriolis+friction target is tau - g_hat(q) (as in the paper), which also holds the "
        "gravity error and M qdd; we also score against the true C qd + f. Inertia MSE is over "
        "the 4 entries of M. M does not depend on q1, so the three configurations share one "
        "true M; networks that drop q1 (a physical prior) give the same error at all three. "
        "Tracking: computed torque in the paper's form (gains outside M), Kp 100, Kd 20, Ki 5, "
        "torque limit 60 N m, same noise sequence for every model.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    res = main()
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_result(RESULTS / "planar2_sensors2025.json", res)
    write_text(RESULTS / "planar2_sensors2025.md", to_markdown(res))
    print(to_markdown(res))
