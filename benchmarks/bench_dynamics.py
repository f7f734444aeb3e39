"""Speed of neuract's differentiable rigid-body core against MuJoCo C and Pinocchio, same run.

1. Forward dynamics (mass matrix + bias forces + linear solve) for SO-101 and the 7-DoF Panda
   (bundled descriptions) at batch 1, 64 and 1024: ours (float64 and float32, no autograd; the
   compiled kernel of ``neuract.robot.native`` where available, the torch path timed beside it
   in float64) against a loop of ``mujoco.mj_forward`` (constraints, passive forces and
   actuators disabled so it computes the same quantities; Python loop overhead included) and a
   loop of ``pinocchio.aba`` on the same MJCF (pinocchio's own MJCF parser).
2. Differentiable rollout throughput: SO-101, batch 256, 200 steps of semi-implicit Euler,
   float32, forward + backward (the default path: the compiled kernel where it is available;
   the torch path is timed beside it) (gradient of a loss on the whole joint trajectory with respect
   to the torque sequence), against ``mujoco.rollout`` forward-only with 2 threads on the same
   model and batch. ``rollout_ratio_vs_mujoco`` = MuJoCo env-steps/s / ours (fwd + bwd); the
   MuJoCo reference for it is the model with its constraint solver off (the physics we
   compute: rigid bodies, armature, damping); the shipped model with joint limits, friction
   loss constraints and position servos is reported beside it.

torch runs with ``torch.set_num_threads(1)``; times are medians of repeated runs (min kept too);
the rollout ratio is the median of per-round ratios, ours and MuJoCo timed back to back.
Run: ``.venv/bin/python benchmarks/bench_dynamics.py`` (about 1-2 minutes on 2 busy cores).
Writes ``benchmarks/results/dynamics.json`` and ``dynamics.md`` atomically.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import time
from pathlib import Path

import mujoco
import numpy as np
import torch

from common import cpu_name, head_commit, write_result  # noqa: E402  (benchmarks/ is on sys.path)
from neuract.atomic import write_text
from neuract.robot import bundled_path, load_robot, native
from neuract.robot.validate import random_states, reference_model
from neuract.sim import rollout

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    try:
        import pinocchio

        pin_version = pinocchio.__version__
    except ImportError:
        pin_version = None
    return {
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "logical_cores": os.cpu_count(),
        "load_average_at_start": list(os.getloadavg()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "mujoco": mujoco.__version__,
        "pinocchio": pin_version,
        "native_kernel": _native_kernel(),
    }


def _native_kernel() -> dict:
    """Whether the compiled kernel (neuract.robot.native) runs here, and how long loading it
    took (building it, ~2-5 s, when the cache has no library for this source yet)."""
    t0 = time.perf_counter()
    ok = native.available()
    return {"available": ok, "load_or_build_s": time.perf_counter() - t0,
            "error": native.build_error(), "source": str(native.SOURCE.name)}


def timeit(fn, reps: int, min_time: float = 0.05) -> dict:
    """Median and min wall time [s] of one call of fn (repeats fast calls within a sample)."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(min_time / once))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return {"median_s": statistics.median(samples), "min_s": min(samples)}


# --------------------------------------------------------------------------- section 1
def _mj_loop(m, d, q, qd, tau):
    for k in range(q.shape[0]):
        d.qpos[:] = q[k]
        d.qvel[:] = qd[k]
        d.qfrc_applied[:] = tau[k]
        mujoco.mj_forward(m, d)


def _pin_loop(pin, pm, pdata, q, qd, tau):
    for k in range(q.shape[0]):
        pin.aba(pm, pdata, q[k], qd[k], tau[k])


def _ours(robot, q, qd, tau):
    with torch.no_grad():
        robot.forward_dynamics(q, qd, tau)


def bench_forward_dynamics(name: str, batches: list[int], reps: int) -> list[dict]:
    robot64 = load_robot(name)
    robot32 = robot64.to(dtype=torch.float32)
    m = reference_model(robot64)
    d = mujoco.MjData(m)
    try:
        import pinocchio as pin

        pm = pin.buildModelFromMJCF(str(bundled_path(name)))
        pdata = pm.createData()
    except Exception:  # pinocchio missing or cannot parse: report without it
        pin = pm = None
    rows = []
    for B in batches:
        q, qd, _ = random_states(robot64, B, seed=B)
        tau = np.random.default_rng(B).normal(size=q.shape)
        t64s = [torch.as_tensor(x) for x in (q, qd, tau)]
        t32s = [x.float() for x in t64s]
        t64 = timeit(functools.partial(_ours, robot64, *t64s), reps)
        t32 = timeit(functools.partial(_ours, robot32, *t32s), reps)
        with native.disabled():
            ttorch = timeit(functools.partial(_ours, robot64, *t64s), reps)
        tmj = timeit(functools.partial(_mj_loop, m, d, q, qd, tau), reps)
        row = {"robot": name, "n_dof": robot64.n_dof, "batch": B,
               "ours_float64_s": t64["median_s"], "ours_float32_s": t32["median_s"],
               "ours_float64_torch_path_s": ttorch["median_s"],
               "mujoco_s": tmj["median_s"],
               "ratio_ours64_vs_mujoco": t64["median_s"] / tmj["median_s"],
               "ratio_ours32_vs_mujoco": t32["median_s"] / tmj["median_s"]}
        if pm is not None:
            idx = [pm.joints[pm.getJointId(j)].idx_q for j in robot64.joint_names]
            qp, vp, up = (np.zeros((B, pm.nq)) for _ in range(3))
            qp[:, idx], vp[:, idx], up[:, idx] = q, qd, tau
            tpin = timeit(functools.partial(_pin_loop, pin, pm, pdata, qp, vp, up), reps)
            row.update(pinocchio_s=tpin["median_s"],
                       ratio_ours64_vs_pinocchio=t64["median_s"] / tpin["median_s"],
                       ratio_ours32_vs_pinocchio=t32["median_s"] / tpin["median_s"])
        rows.append(row)
        print(f"  {name} B={B}: ours64 {t64['median_s'] * 1e3:.2f} ms, ours32 "
              f"{t32['median_s'] * 1e3:.2f} ms, mujoco {tmj['median_s'] * 1e3:.2f} ms"
              + (f", pinocchio {row['pinocchio_s'] * 1e3:.2f} ms" if "pinocchio_s" in row else ""),
              flush=True)
    return rows


# --------------------------------------------------------------------------- section 2
def bench_rollout(B: int, T: int, dt: float, reps: int, adjoint_too: bool) -> dict:
    robot = load_robot("so101", dtype=torch.float32)
    rng = torch.Generator().manual_seed(0)
    q0 = torch.zeros(B, robot.n_dof)
    qd0 = torch.zeros(B, robot.n_dof)
    tau0 = torch.randn(B, T, robot.n_dof, generator=rng) * 0.1

    def fwd_bwd(adjoint=False):
        tau = tau0.clone().requires_grad_(True)
        out = rollout(robot, q0, qd0, tau, dt, adjoint=adjoint)
        out.q.square().mean().backward()
        assert tau.grad is not None and torch.isfinite(tau.grad).all()

    def fwd_only():
        with torch.no_grad():
            rollout(robot, q0, qd0, tau0, dt)

    def fwd_bwd_torch():
        with native.disabled():
            fwd_bwd()

    from mujoco import rollout as mj_rollout

    def mj_runner(m):
        m.opt.timestep = dt
        m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
        datas = [mujoco.MjData(m) for _ in range(2)]
        nstate = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        state0 = np.zeros((B, nstate))
        ctrl = np.random.default_rng(0).normal(size=(B, T, m.nu)) * 0.1
        ro = mj_rollout.Rollout(nthread=2)
        return ro, functools.partial(ro.rollout, m, datas, state0, ctrl)

    ref = reference_model(load_robot("so101"))
    ref.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_DAMPER)
    ro_ref, mj_ref = mj_runner(ref)
    ro_ship, mj_ship = mj_runner(load_robot("so101").mj_model)
    # the machine is shared: measure ours and MuJoCo back to back in each round and take the
    # ratio per round, so that load changes between rounds cancel out as far as possible
    fwd_bwd()
    mj_ref()
    rounds = []
    for _ in range(reps):
        row = {}
        for key, fn in (("ours_fwd_bwd", fwd_bwd), ("mujoco_no_constraints", mj_ref),
                        ("mujoco_as_shipped", mj_ship)):
            t0 = time.perf_counter()
            fn()
            row[key] = time.perf_counter() - t0
        rounds.append(row)
    ro_ref.close()
    ro_ship.close()

    def rate(key):
        return B * T / statistics.median(r[key] for r in rounds)

    ratios = [r["ours_fwd_bwd"] / r["mujoco_no_constraints"] for r in rounds]
    ratios_ship = [r["ours_fwd_bwd"] / r["mujoco_as_shipped"] for r in rounds]
    res = {"robot": "so101", "batch": B, "steps": T, "dt": dt, "dtype": "float32",
           "rounds": len(rounds),
           "ours_fwd_bwd_steps_per_s": rate("ours_fwd_bwd"),
           "ours_fwd_bwd_steps_per_s_best": B * T / min(r["ours_fwd_bwd"] for r in rounds),
           "mujoco_no_constraints_steps_per_s": rate("mujoco_no_constraints"),
           "mujoco_as_shipped_steps_per_s": rate("mujoco_as_shipped"),
           "mujoco_threads": 2,
           "rollout_ratio_vs_mujoco": statistics.median(ratios),
           "rollout_ratio_vs_mujoco_min": min(ratios),
           "rollout_ratio_vs_mujoco_max": max(ratios),
           "rollout_ratio_vs_mujoco_as_shipped": statistics.median(ratios_ship)}
    t = timeit(fwd_only, max(2, reps // 2), min_time=0.0)
    res["ours_fwd_only_steps_per_s"] = B * T / t["median_s"]
    if adjoint_too:
        t = timeit(lambda: fwd_bwd(adjoint=True), max(2, reps // 2), min_time=0.0)
        res["ours_fwd_bwd_adjoint_steps_per_s"] = B * T / t["median_s"]
    res["native_kernel"] = native.available()
    if res["native_kernel"]:  # the torch path (the reference) for comparison
        t = timeit(fwd_bwd_torch, 2, min_time=0.0)
        res["ours_fwd_bwd_torch_path_steps_per_s"] = B * T / t["median_s"]
    return res


def to_markdown(out: dict) -> str:
    mc = out["machine"]
    lines = [
        "# Rigid-body core speed (`benchmarks/bench_dynamics.py`)",
        "",
        f"Machine: {mc['cpu']}, {mc['logical_cores']} logical cores (shared; load average at "
        f"start {mc['load_average_at_start'][0]:.1f}), torch {mc['torch']} with "
        f"{mc['torch_threads']} thread, MuJoCo {mc['mujoco']}, Pinocchio {mc['pinocchio']}. "
        "Same run for every column; ratio > 1 means neuract is slower.",
        "",
        "## Forward dynamics: mass matrix + bias + solve, time per batch",
        "",
        "| robot | batch | ours f64 [ms] | ours f32 [ms] | ours f64, torch path [ms] "
        "| MuJoCo loop [ms] | Pinocchio loop [ms] "
        "| ours f64 / MuJoCo | ours f32 / MuJoCo | ours f64 / Pinocchio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in out["forward_dynamics"]:
        pin_ms = f"{r['pinocchio_s'] * 1e3:.3f}" if "pinocchio_s" in r else "-"
        pin_ratio = f"{r['ratio_ours64_vs_pinocchio']:.2f}" if "pinocchio_s" in r else "-"
        lines.append(
            f"| {r['robot']} ({r['n_dof']} DoF) | {r['batch']} | {r['ours_float64_s'] * 1e3:.3f} "
            f"| {r['ours_float32_s'] * 1e3:.3f} "
            f"| {r.get('ours_float64_torch_path_s', float('nan')) * 1e3:.3f} "
            f"| {r['mujoco_s'] * 1e3:.3f} | {pin_ms} "
            f"| {r['ratio_ours64_vs_mujoco']:.2f} | {r['ratio_ours32_vs_mujoco']:.2f} "
            f"| {pin_ratio} |")
    ro = out["rollout"]
    lines += [
        "",
        f"## Differentiable rollout: SO-101, batch {ro['batch']}, {ro['steps']} steps, "
        f"{ro['dtype']}",
        "",
        "| what | env-steps/s |",
        "|---|---:|",
        f"| ours, forward + backward (1 thread) | {ro['ours_fwd_bwd_steps_per_s']:,.0f} |",
        f"| ours, forward only, no autograd (1 thread) | {ro['ours_fwd_only_steps_per_s']:,.0f} |",
    ]
    if "ours_fwd_bwd_adjoint_steps_per_s" in ro:
        lines.append(f"| ours, forward + adjoint backward (1 thread) | "
                     f"{ro['ours_fwd_bwd_adjoint_steps_per_s']:,.0f} |")
    if "ours_fwd_bwd_torch_path_steps_per_s" in ro:
        lines.append(f"| ours, forward + backward, torch path (kernel off; 1 thread) | "
                     f"{ro['ours_fwd_bwd_torch_path_steps_per_s']:,.0f} |")
    lines += [
        f"| MuJoCo `mujoco.rollout`, forward only, constraint solver off (2 threads) | "
        f"{ro['mujoco_no_constraints_steps_per_s']:,.0f} |",
        f"| MuJoCo `mujoco.rollout`, forward only, model as shipped (2 threads) | "
        f"{ro['mujoco_as_shipped_steps_per_s']:,.0f} |",
        "",
        f"**rollout_ratio_vs_mujoco = {ro['rollout_ratio_vs_mujoco']:.1f}** (median over "
        f"{ro['rounds']} back-to-back rounds, range {ro['rollout_ratio_vs_mujoco_min']:.1f}-"
        f"{ro['rollout_ratio_vs_mujoco_max']:.1f}; MuJoCo forward-only without constraint solver "
        "/ ours forward + backward; target <= 10); against the shipped model with its "
        f"constraint solver: {ro['rollout_ratio_vs_mujoco_as_shipped']:.1f}.",
        "",
        "Ours forward + backward runs the default path of `neuract.sim.rollout`: "
        + ("the compiled kernel of `neuract.robot.native` (forward dynamics and its "
           "vector-Jacobian product in one C++ call per step; available here, loaded in "
           f"{mc['native_kernel']['load_or_build_s']:.1f} s)"
           if ro.get("native_kernel") else
           "the torch path (the compiled kernel of `neuract.robot.native` is unavailable here: "
           f"{mc['native_kernel']['error']})")
        + ". The torch path is the closed-form backward passes for the kinematics/world "
        "inertias (screw identity) and the mass matrix inside the solve, plain autograd "
        "through the RNEA. The ratio moves with the load on the shared 2-core machine (MuJoCo "
        "uses both cores, ours one): see the load averages in the JSON.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rollout-reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = {"machine": machine()}
    batches = [1, 8] if args.quick else [1, 64, 1024]
    print("forward dynamics (M + bias + solve)", flush=True)
    out["forward_dynamics"] = [row for name in ("so101", "panda")
                               for row in bench_forward_dynamics(name, batches, args.reps)]
    print("differentiable rollout", flush=True)
    B, T = (16, 20) if args.quick else (256, 200)
    out["rollout"] = bench_rollout(B, T, 0.002, args.rollout_reps, adjoint_too=True)
    out["rollout_ratio_vs_mujoco"] = out["rollout"]["rollout_ratio_vs_mujoco"]
    out["machine"]["load_average_at_end"] = list(os.getloadavg())
    for k, v in out["rollout"].items():
        print(f"  {k}: {v:,.4g}" if isinstance(v, float) else f"  {k}: {v}")
    out["commit"] = head_commit()  # the code measured (its provenance says more)
    args.out.mkdir(parents=True, exist_ok=True)
    write_result(args.out / "dynamics.json", out)
    write_text(args.out / "dynamics.md", to_markdown(out))
    print(f"wrote {args.out / 'dynamics.json'} and dynamics.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
