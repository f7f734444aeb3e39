"""The price of ``neuract export --format mjcf``: open-loop error of plain MuJoCo running the
exported file against neuract's own fitted model, on held-out episodes.

For each data set a parametric STS3215 servo (Stribeck friction, command delay, joint
parameters) is fitted with ``neuract.fit.identify`` (a short fit: the point is the gap
between the two simulators of the same fitted model, not the fit's quality) on the bundled
SO-101 model, and exported with :func:`neuract.pipeline.export_mjcf.export_mjcf` (one file per
held-out supply voltage, the voltage the fit fed that run). Then, on the held-out episodes:

- MuJoCo: ``mujoco.MjModel.from_xml_path`` of the exported file, started from the recorded
  initial state (qpos reads encoder angles: the export writes the fitted offset as joint
  ``ref``), ctrl = the recorded goal at each control step, physics at the file's timestep
  (the control step held until MuJoCo's clock passes it); the actuators' delay history set
  to the first goal (``mj_initCtrlHistory``);
- neuract: ``neuract.sim.simulate`` of the fitted model, open loop (the fit's substeps);

and reports the MAE [deg] of each against the measured positions and their gap.

Data: (1) twin, SO-101, 8 train / 8 held-out episodes of 8 s (seed 3); (2) NAD SO-101
(``../shared/data/nad``: 2 train files, the 1 test file; skipped when absent).

Run: ``.venv/bin/python benchmarks/bench_mjcf_export.py`` (about 5 minutes on 2 shared cores).
Writes the key ``mjcf_export_gap_deg`` of ``benchmarks/results/envs.json`` (other keys of
that file are kept) and ``benchmarks/results/mjcf_export.md``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import (  # noqa: E402  (benchmarks/ is on sys.path as a script)
    RESULTS,
    ROOT,
    machine,
    write_result,
)
from neuract.actuators import ActuatorConfig  # noqa: E402
from neuract.atomic import write_text  # noqa: E402
from neuract.config import save_resolved  # noqa: E402
from neuract.fit.batch import batch_from_trajectories  # noqa: E402
from neuract.fit.checkpoint import save_weights  # noqa: E402
from neuract.fit.identify import identify  # noqa: E402
from neuract.fit.trainer import TrainConfig  # noqa: E402
from neuract.fit.verb import FitConfig  # noqa: E402
from neuract.pipeline.export_mjcf import export_mjcf  # noqa: E402
from neuract.pipeline.nad_data import load_nad  # noqa: E402
from neuract.robot import load_robot  # noqa: E402
from neuract.sim.simulate import JointParamsConfig, simulate  # noqa: E402
from neuract.twin.config import SimConfig  # noqa: E402
from neuract.twin.generate import GenerateConfig, generate  # noqa: E402

NAD = ROOT.parent / "shared" / "data" / "nad"
ROBOT = "so101"
ACTUATOR = ActuatorConfig(type="sts3215", friction="stribeck", delay=0.02)
JOINTS = JointParamsConfig()
TRAIN = TrainConfig(seed=0, horizons=(1.0, 3.0), stage_iters=(25, 25), val_every=10)
KEY = "mjcf_export_gap_deg"


def fit_and_export(train, where: Path, voltages: list[float]) -> tuple[dict, dict, dict]:
    """(fitted model, {voltage: exported file}, export report of the first)."""
    batch = batch_from_trajectories(train)
    t0 = time.perf_counter()
    model, report = identify(batch, ACTUATOR, JOINTS, TRAIN, ROBOT, val_fraction=0.0)
    fit_s = time.perf_counter() - t0
    ck = where / "fit"
    ck.mkdir(parents=True)
    save_resolved(FitConfig(data="bench", out=str(ck), actuator=ACTUATOR, joints=JOINTS,
                            train=TRAIN, robot=ROBOT), ck)
    save_weights(model, ck / "model.safetensors")
    files, rep = {}, None
    for v in sorted(set(voltages)):
        out = where / f"so101_{v:g}V.xml"
        r = export_mjcf(ck, out, voltage=v)
        rep = rep or r
        files[v] = out
    return model, files, {**rep, "fit_s": fit_s, "train_mae_rad": report["train_mae_rad"]}


def mujoco_rollout(path: Path, names: list[str], q0, qd0, cmd, dt: float) -> np.ndarray:
    """(T, n) qpos of the exported file's joints at each control instant (before ctrl t)."""
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    qadr = [m.joint(n).qposadr[0] for n in names]
    vadr = [m.joint(n).dofadr[0] for n in names]
    act = [m.actuator(n).id for n in names]
    d.qpos[qadr], d.qvel[vadr] = q0, qd0
    d.ctrl[act] = cmd[0]
    for a, c in zip(act, cmd[0]):
        if m.actuator_delay[a] > 0:
            k = int(m.actuator_history[a, 0])
            mujoco.mj_initCtrlHistory(m, d, a, None, np.full((k, 1), c))
    mujoco.mj_forward(m, d)
    out = np.empty_like(cmd)
    for t in range(len(cmd)):
        out[t] = d.qpos[qadr]
        d.ctrl[act] = cmd[t]
        end = (t + 1) * dt - 1e-9
        while d.time < end:
            mujoco.mj_step(m, d)
    return out


def neuract_rollout(model, batch, substeps: int) -> np.ndarray:
    """(B, T, n) neuract's open-loop rollout of the fitted model, as the fit ran it."""
    with torch.no_grad():
        return simulate(load_robot(ROBOT), model.actuator, model.joints, batch.q[:, 0],
                        batch.qd[:, 0], batch.command, batch.dt, substeps,
                        input_series={"voltage": batch.voltage,
                                      "torque_enable": batch.enable}).q.numpy()


def exported_form(model):
    """A copy of the fitted model with its Stribeck friction replaced by what the export
    writes (friction_base + friction_stribeck / 2, no Stribeck term): neuract running the
    exported form, which separates the price of that approximation from the simulators'."""
    approx = copy.deepcopy(model)
    f = approx.actuator.friction
    with torch.no_grad():
        f.friction_base.set(f.friction_base() + 0.5 * f.friction_stribeck())
        f.friction_stribeck.set(torch.full_like(f.friction_stribeck(), 1e-9))
    return approx


def evaluate_set(train, test) -> dict:
    """Fit on ``train``, export, run both simulators on ``test``; MAE [deg] and gap."""
    batch = batch_from_trajectories(test)
    volts = [float(batch.voltage[b, 0, 0]) for b in range(len(batch))]
    with tempfile.TemporaryDirectory() as tmp:
        model, files, rep = fit_and_export(train, Path(tmp), volts)
        names = list(load_robot(ROBOT).joint_names)
        step = mujoco.MjModel.from_xml_path(str(files[volts[0]])).opt.timestep
        fine = max(1, round(batch.dt / step))  # neuract at about MuJoCo's step
        q_nr, q_fine = (neuract_rollout(model, batch, s) for s in (TRAIN.substeps, fine))
        q_form = neuract_rollout(exported_form(model), batch, fine)
        q_mj = np.stack([mujoco_rollout(files[volts[b]], names, batch.q[b, 0].numpy(),
                                        batch.qd[b, 0].numpy(), batch.command[b].numpy(),
                                        batch.dt) for b in range(len(batch))])
    q, mask = batch.q.numpy(), batch.mask.numpy()
    deg = 180.0 / math.pi

    def mae(a, b):
        return float((np.abs(a - b) * mask).sum() / mask.sum() * deg)

    per_joint = {n: float((np.abs(q_mj - q_nr)[..., j] * mask[..., j]).sum()
                          / mask[..., j].sum() * deg) for j, n in enumerate(names)}
    res = {"mujoco_export_vs_measured": mae(q_mj, q), "neuract_vs_measured": mae(q_nr, q),
           "export_vs_neuract": mae(q_mj, q_nr), "gap_per_joint": per_joint,
           "neuract_fine_step_vs_measured": mae(q_fine, q),
           "export_vs_neuract_fine_step": mae(q_mj, q_fine),
           "neuract_exported_form_vs_measured": mae(q_form, q),
           "neuract_vs_its_exported_form": mae(q_fine, q_form),
           "export_vs_neuract_exported_form": mae(q_mj, q_form),
           "substeps": TRAIN.substeps, "fine_substeps": fine, "mujoco_timestep_s": step,
           "episodes_train": len(train), "episodes_held_out": len(test),
           "held_out_seconds": float(mask[..., 0].sum() * batch.dt),
           "control_dt_s": batch.dt, "fit_s": rep["fit_s"],
           "approximations": rep["approximations"]}
    res["difference"] = res["mujoco_export_vs_measured"] - res["neuract_vs_measured"]
    return res


def twin_sets():
    trajs = generate(GenerateConfig(robot=ROBOT, minutes=16 * 8.0 / 60.0, units=2, seed=3,
                                    sim=SimConfig(episode_s=8.0, n_envs=16)))
    return trajs[:8], trajs[8:]


def markdown(out: dict) -> str:
    lines = ["# MuJoCo export (neuract export --format mjcf): the price of the approximation",
             "", f"Machine: {out['machine']}. Fitted family: {out['family']}; "
             f"training: {out['train']}.", "",
             "Open-loop MAE [deg] on held-out episodes (all joints, from the recorded initial "
             "state, commands only):", "",
             "| data | held-out | plain MuJoCo (export) vs measured | neuract simulate vs "
             "measured | difference | export vs neuract | neuract at MuJoCo's step vs measured "
             "| export vs neuract at MuJoCo's step |", "|---|---|---|---|---|---|---|---|"]
    for name in ("twin", "nad"):
        r = out.get(name)
        if not isinstance(r, dict):
            lines.append(f"| {name} | {r} | | | | | | |")
            continue
        lines.append(f"| {name} | {r['episodes_held_out']} ep, {r['held_out_seconds']:.0f} s "
                     f"| {r['mujoco_export_vs_measured']:.3f} | {r['neuract_vs_measured']:.3f} "
                     f"| {r['difference']:+.3f} | {r['export_vs_neuract']:.3f} "
                     f"| {r['neuract_fine_step_vs_measured']:.3f} "
                     f"| {r['export_vs_neuract_fine_step']:.3f} |")
    lines += ["", "Where the gap comes from (MAE [deg] between rollouts, all at about MuJoCo's "
              "step): neuract with Stribeck friction vs neuract running the exported form "
              "(Stribeck replaced by the export's frictionloss) is the price of that "
              "approximation; plain MuJoCo vs neuract running the exported form is the rest "
              "(MuJoCo's soft dry-friction constraint and implicit damping, the delay's "
              "interpolation).", "",
              "| data | neuract vs its exported form | MuJoCo vs neuract's exported form |",
              "|---|---|---|"]
    for name in ("twin", "nad"):
        r = out.get(name)
        if isinstance(r, dict):
            lines.append(f"| {name} | {r['neuract_vs_its_exported_form']:.3f} "
                         f"| {r['export_vs_neuract_exported_form']:.3f} |")
    lines += ["", "neuract simulate runs the fitted model as the fit ran it (2 physics substeps "
              "per control step, about 8 ms); 'at MuJoCo's step' reruns it with about "
              "MuJoCo's 2 ms step, so the last column is the export's approximations plus "
              "MuJoCo's implicit damping and soft dry friction, without the step size. "
              "Short fits (the gap between two simulators of one fitted model is the point, "
              "not the fit); NAD's held-out episode carries a 500 g payload that neither "
              "model knows of (both run the same bare SO-101).",
              "", "What the export approximated (from its report):", ""]
    first = out.get("twin") if isinstance(out.get("twin"), dict) else out.get("nad")
    for a in (first or {}).get("approximations", []):
        lines.append(f"- {a}")
    lines += ["", "Reproduce: `.venv/bin/python benchmarks/bench_mjcf_export.py`"]
    return "\n".join(lines) + "\n"


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    out = {"machine": machine(), "family": "sts3215, stribeck friction, delay, joint params",
           "train": f"horizons {list(TRAIN.horizons)} s, iterations {list(TRAIN.stage_iters)}"}
    tr, te = twin_sets()
    out["twin"] = evaluate_set(tr, te)
    print("twin", {k: v for k, v in out["twin"].items() if k != "approximations"}, flush=True)
    if NAD.is_dir():
        tr, te = load_nad(NAD, "so101")
        out["nad"] = evaluate_set(tr, te)
        print("nad", {k: v for k, v in out["nad"].items() if k != "approximations"})
    else:
        out["nad"] = f"skipped: {NAD} absent"
    out["wall_s"] = time.perf_counter() - t0
    path = RESULTS / "envs.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[KEY] = out
    write_result(path, data, measured=[KEY])  # the envs benchmark's keys kept as they were
    write_text(RESULTS / "mjcf_export.md", markdown(out))
    print(f"wrote {path} [{KEY}] and mjcf_export.md in {out['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
