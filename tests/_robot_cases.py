"""Robot descriptions the robot/sim tests run on (reference files + bundled ones present)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from conftest import SHARED_ROBOTS
from neuract.robot import load_robot
from neuract.robot.bundled import ASSETS, BUNDLED_ROBOTS

REFERENCE_FILES = ["so101_new_calib.xml", "so101_new_calib.urdf", "open_manipulator_x.xml",
                   "kuka_lwr4.urdf"]
BUNDLED = [name for name, (f, _) in BUNDLED_ROBOTS.items() if (ASSETS / f).is_file()]

# a small robot exercising what the real ones do not: a body with two joints and joint anchors
# off the body origin, a slide joint, a non-zero reference position, a branching tree, welded
# bodies carrying mass (one on a moving link, one on the world), tilted axes and sites.
TOY_MJCF = """
<mujoco model="toy">
  <option gravity="0.3 -0.2 -9.81"/>
  <worldbody>
    <body name="pedestal" pos="0 0 0.1">
      <geom type="box" size="0.1 0.1 0.05" mass="3"/>
    </body>
    <body name="base" pos="0.05 -0.02 0.2" quat="0.9 0.1 0.2 0.3">
      <joint name="j0" type="hinge" axis="0.2 0.3 1" pos="0.01 0.02 0.03" armature="0.01"
             damping="0.2" frictionloss="0.05" range="-2 2"/>
      <joint name="j1" type="hinge" axis="1 0 0" pos="0 0.05 0" ref="0.3" damping="0.1"/>
      <inertial pos="0.01 0.02 0.1" mass="1.2" fullinertia="0.02 0.03 0.025 0.001 -0.002 0.003"/>
      <body name="arm" pos="0 0 0.3" quat="0.7 0.7 0 0">
        <joint name="j2" type="slide" axis="0.1 0.1 1" range="-0.1 0.2" armature="0.05"/>
        <inertial pos="0 0.05 0" mass="0.7" diaginertia="0.004 0.005 0.006"/>
        <site name="tip" pos="0.01 0.2 0.03" quat="0.5 0.5 0.5 0.5"/>
        <body name="tool" pos="0 0.25 0" quat="0.8 0 0.6 0">
          <geom type="sphere" size="0.03" pos="0.02 0 0" mass="0.2"/>
          <site name="tool_site" pos="0 0 0.05"/>
        </body>
      </body>
      <body name="side" pos="0.1 0 0.1">
        <joint name="j3" type="hinge" axis="0 1 0" range="-1 1"/>
        <inertial pos="0.05 0 0" mass="0.4" diaginertia="0.001 0.002 0.0025"/>
        <body name="side2" pos="0.1 0 0">
          <joint name="j4" type="hinge" axis="0 0 -1"/>
          <inertial pos="0.02 0.01 0" mass="0.3" diaginertia="0.001 0.001 0.001"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def kuka_fixed(tmp_dir: Path) -> Path:
    """kuka_lwr4.urdf repeats <origin> in its base joint, which MuJoCo rejects; keep the first."""
    text = (SHARED_ROBOTS / "kuka_lwr4.urdf").read_text()
    fixed = text.replace('<origin rpy="0 0 0" xyz="0 0 0"/>\n    <parent link="box"/>',
                         '<parent link="box"/>', 1)
    assert fixed != text
    path = tmp_dir / "kuka_lwr4_fixed.urdf"
    path.write_text(fixed)
    return path


def case_path(case: str, tmp_dir: Path) -> Path | str:
    """Path (or bundled name) of a test case; reference files skip when ../shared is absent."""
    if case not in ("toy",) and not case.startswith("bundled:") and not SHARED_ROBOTS.is_dir():
        pytest.skip(f"reference robots not found at {SHARED_ROBOTS}")
    if case.startswith("bundled:"):
        return case.split(":", 1)[1]
    if case == "toy":
        path = tmp_dir / "toy.xml"
        path.write_text(TOY_MJCF)
        return path
    if case == "kuka_lwr4.urdf":
        return kuka_fixed(tmp_dir)
    return SHARED_ROBOTS / case


def load_case(case: str, tmp_dir: Path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing meshes in the reference files
        return load_robot(case_path(case, tmp_dir), **kw)


ALL_CASES = ["toy", *REFERENCE_FILES, *[f"bundled:{b}" for b in BUNDLED]]
URDF_CASES = [c for c in REFERENCE_FILES if c.endswith(".urdf")]
