"""Loading: names, errors, welded bodies, dtype/device handling, public exports."""

from __future__ import annotations

import warnings

import pytest
import torch

import neuract
from _robot_cases import (
    TOY_MJCF,
    load_case,
)
from neuract.errors import RobotModelError
from neuract.robot import Robot, load_robot


def test_public_exports():
    assert neuract.load_robot is load_robot
    assert neuract.Robot is Robot


def test_unknown_name_lists_known_robots():
    with pytest.raises(RobotModelError, match="omx, omx_arm, panda, planar2, so101"):
        load_robot("no_such_robot")


def test_missing_file():
    with pytest.raises(RobotModelError, match="does not exist"):
        load_robot("/nonexistent/arm.urdf")


def test_malformed_xml_reports_mujoco_message(tmp_path):
    path = tmp_path / "bad.xml"
    path.write_text("<mujoco><worldbody><body></mujoco>")
    with pytest.raises(RobotModelError, match=r"bad\.xml.*XML"):
        load_robot(path)


def test_reference_urdfs_rejected_by_mujoco_give_its_message(shared_robots):
    with pytest.raises(RobotModelError, match="repeated element"):
        load_robot(shared_robots / "kuka_lwr4.urdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the mesh-stripping warning
        with pytest.raises(RobotModelError, match="positive eigenvalues"):
            load_robot(shared_robots / "kuka_lwr4_gaz.urdf")
        with pytest.raises(RobotModelError, match="A \\+ B >= C"):
            load_robot(shared_robots / "kuka_lwr4_identified.urdf")


@pytest.mark.parametrize("joint", ["ball", "free"])
def test_unsupported_joint_is_named(tmp_path, joint):
    extra = '<joint name="spherical" type="ball"/>' if joint == "ball" else "<freejoint name='fj'/>"
    xml = f"""<mujoco><worldbody><body name="a"><joint name="h" axis="0 0 1"/>
      <geom size="0.1"/><body name="b" pos="0 0 1">{extra}<geom size="0.1"/></body></body>
      </worldbody></mujoco>""" if joint == "ball" else f"""<mujoco><worldbody>
      <body name="a">{extra}<geom size="0.1"/></body></worldbody></mujoco>"""
    path = tmp_path / "j.xml"
    path.write_text(xml)
    name = "spherical" if joint == "ball" else "fj"
    with pytest.raises(RobotModelError, match=f"'{name}'.*{joint} joint"):
        load_robot(path)


def test_missing_meshes_warn_and_keep_inertials(shared_robots):
    with pytest.warns(UserWarning, match="mesh geoms dropped"):
        robot = load_robot(shared_robots / "so101_new_calib.xml")
    assert robot.n_dof == 6
    assert robot.joint_names[0] == "shoulder_pan"
    assert torch.allclose(robot.inertial_parameters()[0], torch.tensor(0.100006, dtype=robot.dtype))


def test_toy_structure(tmp_path):
    robot = load_case("toy", tmp_path)
    assert robot.joint_names == ("j0", "j1", "j2", "j3", "j4")
    assert robot.link_names == ("base", "base", "arm", "side", "side2")
    assert robot.parent == (-1, 0, 1, 1, 3)
    assert robot.body_names == ("pedestal", "base", "arm", "tool", "side", "side2")
    assert robot.site_names == ("tip", "tool_site")
    assert robot.inertial_parameters().shape == (50,)
    assert robot.inertial_parameters()[0] == 0.0  # first joint of a two-joint body: massless
    # the welded "tool" sphere is folded into link "arm"
    assert robot.inertial_parameters()[20] == pytest.approx(0.7 + 0.2)
    assert torch.isinf(robot.q_lower[1]) and robot.q_upper[2] == pytest.approx(0.2)


def test_load_from_mjmodel_and_float32(tmp_path):
    import mujoco

    mj = mujoco.MjModel.from_xml_string(TOY_MJCF)
    r64 = load_robot(mj)
    r32 = load_robot(mj, dtype=torch.float32)
    assert r32.dtype == torch.float32 and r32.mj_model is mj
    q = torch.randn(4, 3, r64.n_dof, dtype=torch.float64)
    M64 = r64.mass_matrix(q)
    M32 = r32.mass_matrix(q.float())
    assert M32.dtype == torch.float32 and M32.shape == (4, 3, 5, 5)
    torch.testing.assert_close(M32.double(), M64, rtol=1e-4, atol=1e-6)


def test_unknown_body_and_site_names(tmp_path):
    robot = load_case("toy", tmp_path)
    q = torch.zeros(robot.n_dof, dtype=robot.dtype)
    with pytest.raises(RobotModelError, match="unknown body 'nope'; known: pedestal"):
        robot.body_jacobian(q, "nope")
    with pytest.raises(RobotModelError, match="unknown site"):
        robot.site_jacobian(q, "nope")
    assert robot.site_jacobian(q, "tip").shape == (6, 5)
    # a body welded to the world does not move
    assert robot.body_jacobian(q, "pedestal").abs().max() == 0


def test_no_warnings_for_bundled():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_robot("so101").n_dof == 6


def test_joint_springs_are_reported(tmp_path):
    path = tmp_path / "spring.xml"
    path.write_text("""<mujoco><worldbody><body name="a"><joint name="springy" axis="0 1 0"
      stiffness="3"/><geom size="0.1" mass="1"/></body></worldbody></mujoco>""")
    with pytest.warns(UserWarning, match="'springy'.*stiffness"):
        load_robot(path)


def test_bundled_omx_arm_matches_its_generator():
    """robot/assets/omx_arm.xml is omx_arm_xml()'s output: the same compiled model."""
    import mujoco
    import numpy as np

    from neuract.pipeline.setups import omx_arm_xml
    from neuract.robot.bundled import bundled_path

    a = mujoco.MjModel.from_xml_path(str(bundled_path("omx_arm")))
    b = mujoco.MjModel.from_xml_string(omx_arm_xml())
    assert (a.nq, a.nu, a.nbody) == (b.nq, b.nu, b.nbody) == (4, 4, b.nbody)
    for f in ("body_mass", "body_inertia", "body_pos", "jnt_axis", "dof_armature",
              "dof_damping", "actuator_gainprm", "actuator_biasprm", "actuator_forcerange",
              "site_pos"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), rtol=1e-9, atol=1e-12,
                                   err_msg=f)
