"""``neuract export --format mjcf``: a fitted servo in MuJoCo's own attributes (values from the
derivation in neuract.sim.mujoco_form), an exact 1-joint case rolled out in plain MuJoCo
against neuract's simulate, asset paths, refusals."""

from __future__ import annotations

import json
import math
import os

import mujoco
import numpy as np
import pytest
import torch

from neuract.actuators import ActuatorConfig
from neuract.config import save_resolved
from neuract.errors import ConfigError
from neuract.fit.checkpoint import save_weights
from neuract.fit.identify import build_model
from neuract.fit.verb import FitConfig
from neuract.pipeline.export_mjcf import MARKER, export_mjcf
from neuract.pipeline.export_verb import ExportConfig, run
from neuract.robot import load_robot
from neuract.sim.simulate import JointParamsConfig, simulate

ONE_JOINT = """<mujoco model="one">
  <compiler angle="radian" meshdir="assets"/>
  <option timestep="0.002"/>
  <asset><mesh name="tet" file="tet.obj"/></asset>
  <worldbody>
    <body name="link">
      <joint name="hinge" type="hinge" axis="0 1 0" armature="0.01" range="-2 2"/>
      <inertial pos="0.1 0 0" mass="0.5" diaginertia="1e-4 1e-4 1e-4"/>
      <geom type="mesh" mesh="tet" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""
TET = "v 0 0 0\nv 0.02 0 0\nv 0 0.02 0\nv 0 0 0.02\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"


def one_joint_robot(tmp_path):
    d = tmp_path / "robot"
    (d / "assets").mkdir(parents=True)
    (d / "assets" / "tet.obj").write_text(TET)
    (d / "one.xml").write_text(ONE_JOINT)
    return d / "one.xml"


def make_fit(out, robot: str, actuator: ActuatorConfig, joints: JointParamsConfig,
             n: int, values: dict[str, float] | None = None):
    """A fit output directory as ``neuract fit`` writes it, with chosen parameter values."""
    cfg = FitConfig(data="unused", out=str(out), actuator=actuator, joints=joints, robot=robot)
    model = build_model(actuator, joints, n)
    params = dict(model.named_modules())
    for name, v in (values or {}).items():
        params[name].set(v)
    out.mkdir(parents=True)
    save_resolved(cfg, out)
    save_weights(model, out / "model.safetensors")
    return out, model


def test_so101_values_follow_the_derivation(tmp_path):
    act = ActuatorConfig(type="sts3215", friction="coulomb_viscous", kd=4.0, delay=0.02)
    joints = JointParamsConfig(armature=0.015, damping=0.05, frictionloss=0.01, offset=0.03)
    ck, _ = make_fit(tmp_path / "fit", "so101", act, joints, 6, {
        "actuator.kt": 3.0, "actuator.R": 8.0, "actuator.friction.friction_base": 0.04,
        "actuator.friction.friction_viscous": 0.2})
    out = tmp_path / "x" / "so101_servo.xml"
    rep = export_mjcf(ck, out, voltage=12.0, firmware_kp=20.0)
    m = mujoco.MjModel.from_xml_path(str(out))
    g = 0.1649
    k = 3.0 * 12.0 / 8.0  # kt V / R
    for name in ("shoulder_pan", "elbow_flex", "gripper"):
        a, j = m.actuator(name).id, m.joint(name)
        np.testing.assert_allclose(m.actuator_gainprm[a, 0], k * 20.0 * g, rtol=1e-9)
        np.testing.assert_allclose(m.actuator_biasprm[a, :3], [0, -k * 20.0 * g, -k * 4.0 * g],
                                   rtol=1e-9)
        np.testing.assert_allclose(m.actuator_forcerange[a], [-k, k], rtol=1e-9)
        assert m.actuator_forcelimited[a] and m.actuator_gear[a, 0] == 1.0
        np.testing.assert_allclose(m.actuator_delay[a], 0.02, rtol=1e-6)
        assert m.actuator_history[a, 0] >= 0.02 / m.opt.timestep + 1  # holds the whole delay
        dof = j.dofadr[0]
        np.testing.assert_allclose(m.dof_armature[dof], 0.028 + 0.015, rtol=1e-9)
        np.testing.assert_allclose(m.dof_damping[dof], 9.0 / 8.0 + 0.2 + 0.05, rtol=1e-9)
        np.testing.assert_allclose(m.dof_frictionloss[dof], 0.04 + 0.01, rtol=1e-9)
        np.testing.assert_allclose(j.qpos0, -0.03, atol=1e-12)  # ref = -offset
    # the ranges moved with ref: the same physical limits
    np.testing.assert_allclose(m.joint("elbow_flex").range, [-1.69 - 0.03, 1.69 - 0.03])
    np.testing.assert_allclose(m.actuator_ctrlrange[m.actuator("elbow_flex").id],
                               [-1.69 - 0.03, 1.69 - 0.03])
    assert m.nu == 6  # replaced, not added
    text = out.read_text()
    assert text.startswith("<!--\n" + MARKER)
    assert "command delay" in text and "command delay" in " ".join(rep["approximations"])


def test_approximations_are_named(tmp_path):
    act = ActuatorConfig(type="sts3215", friction="m4", backlash=0.01, goal_slew=5.0,
                         error_limit=0.5)
    ck, model = make_fit(tmp_path / "fit", "so101", act, JointParamsConfig(), 6,
                         {"actuator.friction.friction_base": 0.03,
                          "actuator.friction.friction_stribeck": 0.04})
    rep = export_mjcf(ck, tmp_path / "o.xml")
    notes = " ".join(rep["approximations"])
    for word in ("Stribeck", "load-dependent", "backlash", "goal slew", "firmware kp",
                 "supply"):
        assert word in notes, word
    v = rep["joints"]["shoulder_lift"]
    assert v["frictionloss"] == pytest.approx(0.03 + 0.02)  # midway: base + stribeck / 2
    kp = 3.6 * 12 / 9.8 * 32 * 0.1649
    assert v["kp"] == pytest.approx(kp)
    assert v["forcerange"] == pytest.approx(min(3.6 * 12 / 9.8, kp * 0.5))  # error limit
    text = (tmp_path / "o.xml").read_text()
    assert "backlash" in text and "goal slew" in text


def _servo_rollouts(tmp_path, eulerdamp: bool, delay: float = 0.0):
    robot = one_joint_robot(tmp_path)
    act = ActuatorConfig(type="servo", friction="none", kp=6.0, kd=1.5, kt=1.2, R=6.0,
                         voltage=12.0, delay=delay)
    joints = JointParamsConfig(armature=0.02, offset=0.1, fit_offset=False)
    ck, model = make_fit(tmp_path / "fit", str(robot), act, joints, 1)
    out = tmp_path / "elsewhere" / "exported.xml"
    export_mjcf(ck, out, voltage=12.0)
    here = os.getcwd()
    os.chdir(tmp_path)  # loads from another folder: the mesh path must still resolve
    try:
        m = mujoco.MjModel.from_xml_path(str(out))
    finally:
        os.chdir(here)
    if not eulerdamp:
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    d = mujoco.MjData(m)
    dt, sub, T = 0.01, 5, 300
    t = np.arange(T) * dt
    cmd = 0.4 * np.sin(2 * math.pi * 0.7 * t) + 0.3 * (t > 1.2)
    q0 = 0.2
    d.qpos[0] = q0
    if delay:  # the history holds the first command, as neuract's does
        k = int(m.actuator_history[0, 0])
        mujoco.mj_initCtrlHistory(m, d, 0, None, np.full((k, 1), cmd[0]))
    mujoco.mj_forward(m, d)
    q_mj = []
    for c in cmd:
        q_mj.append(d.qpos[0])
        d.ctrl[0] = c
        for _ in range(sub):
            mujoco.mj_step(m, d)
    plant = load_robot(str(robot))
    c_t = torch.tensor(cmd, dtype=torch.float64)[None, :, None]
    with torch.no_grad():
        roll = simulate(plant, model.actuator, model.joints, torch.full((1, 1), q0,
                        dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64), c_t,
                        dt, substeps=sub)
    duty = 6.0 * 0.1649 * np.abs(cmd - roll.q[0, :, 0].numpy())
    assert duty.max() < 1.0  # the linear region: no saturation anywhere
    return np.array(q_mj), roll.q[0, :, 0].numpy(), cmd


def test_exact_family_matches_simulate(tmp_path):
    """A P-D servo without friction, saturation or anything else is exactly a MuJoCo position
    actuator + joint damping: with MuJoCo's implicit damping off (both integrators then are
    the same semi-implicit Euler) the rollouts agree to about 1e-8 rad over 3 s (1500 steps;
    measured 7.7e-9: the two compute the same dynamics by different routes, MuJoCo from its
    compiled inertias, neuract from its own rigid-body algorithm; a wrong gain, damping,
    armature or ref moves it by 1e-3 rad or more)."""
    q_mj, q_nr, cmd = _servo_rollouts(tmp_path, eulerdamp=False)
    assert np.abs(q_mj - q_nr).max() < 1e-7
    assert np.abs(q_nr - cmd).max() > 0.05  # a real motion with a tracking error


def test_exact_family_default_integrator(tmp_path):
    """With MuJoCo's default (implicit joint damping: the back-EMF damping is integrated
    implicitly, neuract's explicitly) the difference is O(dt * damping / inertia): below
    1e-3 rad here, against a tracking error above 0.05 rad."""
    q_mj, q_nr, _ = _servo_rollouts(tmp_path, eulerdamp=True)
    gap = np.abs(q_mj - q_nr).max()
    assert 1e-9 < gap < 1e-3


def test_delay_is_mujocos_own(tmp_path):
    """A command delay becomes MuJoCo's actuator delay. A whole number of control frames
    (30 ms at 10 ms) is exact (8.6e-9 rad measured, the integrator's floor above); a fraction
    of one (25 ms) is not: MuJoCo delays the held control signal, neuract interpolates
    between control frames (measured 2.6e-4 rad against a delay effect of 3.1e-2 rad)."""
    q_mj, q_nr, _ = _servo_rollouts(tmp_path / "a", eulerdamp=False, delay=0.03)
    assert np.abs(q_mj - q_nr).max() < 1e-7
    q_mj, q_nr, _ = _servo_rollouts(tmp_path / "b", eulerdamp=False, delay=0.025)
    _, q_none, _ = _servo_rollouts(tmp_path / "c", eulerdamp=False)
    effect = np.abs(q_nr - q_none).max()
    assert effect > 0.01
    assert 1e-7 < np.abs(q_mj - q_nr).max() < 0.05 * effect


def test_refusals(tmp_path):
    act = ActuatorConfig(type="sts3215")
    ck, _ = make_fit(tmp_path / "fit", "so101", act, JointParamsConfig(), 6)
    out = tmp_path / "o.xml"
    out.write_text("<mujoco/>")
    with pytest.raises(ConfigError, match="already exists; pass --overwrite"):
        export_mjcf(ck, out)
    with pytest.raises(ConfigError, match="not an MJCF file neuract export wrote"):
        export_mjcf(ck, out, overwrite=True)
    out.unlink()
    export_mjcf(ck, out)
    export_mjcf(ck, out, overwrite=True)  # an earlier export is replaced
    # a robot lacking the checkpoint's joints: named
    robot = one_joint_robot(tmp_path)
    with pytest.raises(ConfigError, match=r"lacks the joint\(s\) \['shoulder_pan'"):
        export_mjcf(ck, tmp_path / "b.xml", robot=str(robot))
    with pytest.raises(ConfigError, match="--robot 'nosuch'"):
        export_mjcf(ck, tmp_path / "b.xml", robot="nosuch")
    with pytest.raises(ConfigError, match=r"--voltage -1.*> 0"):
        export_mjcf(ck, tmp_path / "b.xml", voltage=-1.0)
    with pytest.raises(ConfigError, match="ending in .xml"):
        export_mjcf(ck, tmp_path / "b.onnx")
    # neural fits and NeuralActuator checkpoints say what they export to
    nk, _ = make_fit(tmp_path / "mlp", "so101", ActuatorConfig(type="mlp"),
                     JointParamsConfig(), 6)
    with pytest.raises(ConfigError, match="ActuatorNet with no MuJoCo form"):
        export_mjcf(nk, tmp_path / "b.xml")
    na = tmp_path / "na"
    na.mkdir()
    (na / "config.json").write_text(json.dumps({"kind": "neuralactuator", "format": 1}))
    (na / "model.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match="NeuralActuator checkpoint.*--format onnx or aot"):
        export_mjcf(na, tmp_path / "b.xml")
    assert not (tmp_path / "b.xml").exists()


def test_verb_dispatch(tmp_path, capsys):
    ck, _ = make_fit(tmp_path / "fit", "so101", ActuatorConfig(type="sts3215"),
                     JointParamsConfig(), 6)
    out = tmp_path / "v.xml"
    rep = run(ExportConfig(checkpoint=ck, out=out, format="mjcf", firmware_kp=16.0))
    assert rep["format"] == "mjcf" and rep["firmware_kp"] == 16.0
    assert "position actuators" in capsys.readouterr().out
    mujoco.MjModel.from_xml_path(str(out))
    with pytest.raises(ConfigError, match="--quantize 'int8' applies to onnx"):
        run(ExportConfig(checkpoint=ck, out=tmp_path / "w.xml", format="mjcf",
                         quantize="int8"))
