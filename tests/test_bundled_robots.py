"""The bundled robot descriptions: they compile, and they agree with references and closed forms.

Tolerances: where a bundled file copies the reference's numbers exactly, kinematics and dynamics
are compared at 1e-9 relative to the largest entry of the reference quantity (``_close``), which
leaves only floating-point round-off (and rounding of ~1e-16 quaternion residues) as slack.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

from neuract.errors import RobotModelError
from neuract.robot.bundled import BUNDLED_ROBOTS, bundled_path
from neuract.robot.refload import load_reference

N_STATES = 100
RTOL = 1e-9
URDF_RTOL = 5e-5  # so101_new_calib.urdf has 6-digit rounded angles, see its test

EXPECTED_JOINTS = {
    "planar2": ["joint1", "joint2"],
    "so101": ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"],
    "omx": ["joint1", "joint2", "joint3", "joint4", "gripper_left_joint", "gripper_right_joint"],
}
EE_SITE = {"planar2": "ee", "so101": "gripperframe", "omx": "end_effector"}


def _load(name: str) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(bundled_path(name)))


def _joint_names(m: mujoco.MjModel) -> list[str]:
    return [m.joint(i).name for i in range(m.njnt)]


def _close(actual, desired, rtol: float = RTOL, what: str = "") -> None:
    """max |actual - desired| <= rtol * max(|desired|, 1e-12)."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    assert actual.shape == desired.shape, what
    scale = max(float(np.max(np.abs(desired), initial=0.0)), 1e-12)
    err = float(np.max(np.abs(actual - desired), initial=0.0))
    assert err <= rtol * scale, f"{what}: max abs error {err:.3e} > {rtol:g} * {scale:.3e}"


def _random_states(m: mujoco.MjModel, n: int, seed: int):
    """n (q, qd) pairs, q uniform inside the joint ranges (+-pi where unlimited)."""
    rng = np.random.default_rng(seed)
    lo = np.where(m.jnt_limited, m.jnt_range[:, 0], -np.pi)
    hi = np.where(m.jnt_limited, m.jnt_range[:, 1], np.pi)
    for _ in range(n):
        yield rng.uniform(lo, hi), rng.normal(0.0, 1.5, m.nv)


def _state(m: mujoco.MjModel, q, qd) -> mujoco.MjData:
    d = mujoco.MjData(m)
    d.qpos[:] = q
    d.qvel[:] = qd
    mujoco.mj_forward(m, d)
    return d


def _full_m(m: mujoco.MjModel, d: mujoco.MjData) -> np.ndarray:
    out = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, out)  # mujoco >= 3.4 signature
    return out


# ---------------------------------------------------------------------------------- all files


def test_unknown_name_lists_known_robots():
    with pytest.raises(RobotModelError) as info:
        bundled_path("so-100")
    message = str(info.value)
    assert "so-100" in message
    for name in BUNDLED_ROBOTS:
        assert name in message


@pytest.mark.parametrize("name", sorted(EXPECTED_JOINTS))
def test_bundled_file_compiles_with_expected_joints(name):
    path = bundled_path(name)
    assert "<mesh" not in path.read_text(), "bundled files use primitive geoms only"
    m = _load(name)
    assert _joint_names(m) == EXPECTED_JOINTS[name]
    assert m.nq == m.nv == len(EXPECTED_JOINTS[name])
    assert m.site(EE_SITE[name]).id >= 0
    assert np.allclose(m.opt.gravity, [0.0, 0.0, -9.81])
    # every moving body has a physically valid inertia (positive, triangle inequality)
    for b in range(1, m.nbody):
        if m.body_weldid[b] == 0:
            continue
        i1, i2, i3 = m.body_inertia[b]
        assert m.body_mass[b] > 0 and min(i1, i2, i3) > 0
        assert i1 + i2 >= i3 and i2 + i3 >= i1 and i1 + i3 >= i2
    # mass matrix symmetric positive definite at a random state
    q, qd = next(_random_states(m, 1, seed=0))
    mm = _full_m(m, _state(m, q, qd))
    assert np.allclose(mm, mm.T) and np.linalg.eigvalsh(mm).min() > 0


# ---------------------------------------------------------------------------------- planar2


def test_planar2_matches_closed_form_two_link_dynamics():
    """M(q), C(q, qd) qd and g(q) of the textbook two-link arm (q = 0 horizontal along +x)."""
    m = _load("planar2")
    m1 = m2 = 1.0
    l1 = 1.0
    lc1 = lc2 = 0.5
    i1 = i2 = 0.1
    g = 9.81
    assert np.allclose(m.body_mass[1:], [m1, m2])
    assert np.allclose(m.body_inertia[1:, 1], [i1, i2])  # about the hinge axis (body y)
    assert not m.dof_armature.any() and not m.dof_damping.any() and not m.dof_frictionloss.any()
    for q, qd in _random_states(m, N_STATES, seed=1):
        d = _state(m, q, qd)
        c2 = np.cos(q[1])
        h = m2 * l1 * lc2 * np.sin(q[1])
        m11 = i1 + i2 + m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2)
        m12 = i2 + m2 * (lc2**2 + l1 * lc2 * c2)
        m22 = i2 + m2 * lc2**2
        mass = np.array([[m11, m12], [m12, m22]])
        coriolis = np.array([-h * (2 * qd[0] * qd[1] + qd[1] ** 2), h * qd[0] ** 2])
        grav = np.array(
            [
                (m1 * lc1 + m2 * l1) * g * np.cos(q[0]) + m2 * lc2 * g * np.cos(q[0] + q[1]),
                m2 * lc2 * g * np.cos(q[0] + q[1]),
            ]
        )
        _close(_full_m(m, d), mass, what="M(q)")
        _close(d.qfrc_bias, coriolis + grav, what="qfrc_bias")
        d0 = _state(m, q, np.zeros(2))
        _close(d0.qfrc_bias, grav, what="g(q)")
        tip = [np.cos(q[0]) + np.cos(q[0] + q[1]), 0.0, np.sin(q[0]) + np.sin(q[0] + q[1])]
        _close(d.site_xpos[m.site("ee").id], tip, what="ee position")


# ---------------------------------------------------------------------------------- so101


def _compare_models(
    ours,
    ref,
    body_map: dict[str, str],
    site_map: dict[str, str],
    seed: int,
    armature_in_ref: bool = True,
    rtol: float = RTOL,
) -> None:
    """Same kinematics and rigid-body dynamics at N_STATES random states (joint order equal)."""
    assert _joint_names(ours) == _joint_names(ref)
    arm = np.zeros(ours.nv) if armature_in_ref else ours.dof_armature.copy()
    for q, qd in _random_states(ours, N_STATES, seed=seed):
        a, b = _state(ours, q, qd), _state(ref, q, qd)
        for our_body, ref_body in body_map.items():
            i, j = ours.body(our_body).id, ref.body(ref_body).id
            _close(a.xpos[i], b.xpos[j], rtol, what=f"xpos {our_body}")
            _close(a.xmat[i], b.xmat[j], rtol, what=f"xmat {our_body}")
            _close(a.xipos[i], b.xipos[j], rtol, what=f"xipos {our_body}")
        for our_site, ref_site in site_map.items():
            i, j = ours.site(our_site).id, ref.site(ref_site).id
            _close(a.site_xpos[i], b.site_xpos[j], rtol, what=f"site_xpos {our_site}")
            _close(a.site_xmat[i], b.site_xmat[j], rtol, what=f"site_xmat {our_site}")
        _close(_full_m(ours, a) - np.diag(arm), _full_m(ref, b), rtol, what="M(q)")
        _close(a.qfrc_bias, b.qfrc_bias, rtol, what="qfrc_bias")


def _inertials_equal(ours, ref, body_map: dict[str, str], rtol: float = RTOL) -> None:
    for our_body, ref_body in body_map.items():
        a, b = ours.body(our_body), ref.body(ref_body)
        _close(a.mass, b.mass, rtol, what=f"mass {our_body}")
        _close(a.ipos, b.ipos, rtol, what=f"COM {our_body}")
        _close(a.inertia, b.inertia, rtol, what=f"principal inertia {our_body}")
        # inertial frames may differ by a sign flip of two axes: compare rotation matrices
        ra, rb = np.zeros(9), np.zeros(9)
        mujoco.mju_quat2Mat(ra, a.iquat)
        mujoco.mju_quat2Mat(rb, b.iquat)
        ia = ra.reshape(3, 3) @ np.diag(a.inertia) @ ra.reshape(3, 3).T
        ib = rb.reshape(3, 3) @ np.diag(b.inertia) @ rb.reshape(3, 3).T
        _close(ia, ib, rtol, what=f"inertia tensor {our_body}")


SO101_BODIES = [
    "base",
    "shoulder",
    "upper_arm",
    "lower_arm",
    "wrist",
    "gripper",
    "moving_jaw_so101_v1",
]


def test_so101_matches_reference_mjcf(shared_robots):
    """Bodies, sites, inertials, joint/actuator parameters, M and bias equal so101_new_calib.xml."""
    ours, ref = _load("so101"), load_reference(shared_robots / "so101_new_calib.xml")
    bodies = {b: b for b in SO101_BODIES}
    _inertials_equal(ours, ref, bodies)
    for field in ("jnt_type", "jnt_axis", "jnt_range", "jnt_limited"):
        np.testing.assert_array_equal(getattr(ours, field), getattr(ref, field), err_msg=field)
    for field in ("dof_armature", "dof_damping", "dof_frictionloss"):
        np.testing.assert_array_equal(getattr(ours, field), getattr(ref, field), err_msg=field)
    np.testing.assert_allclose(ours.dof_armature, 0.028)
    np.testing.assert_allclose(ours.dof_damping, 0.60)
    np.testing.assert_allclose(ours.dof_frictionloss, 0.052)
    assert [ours.actuator(i).name for i in range(ours.nu)] == [
        ref.actuator(i).name for i in range(ref.nu)
    ]
    for field in (
        "actuator_trnid",
        "actuator_gainprm",
        "actuator_biasprm",
        "actuator_forcerange",
        "actuator_ctrlrange",
        "actuator_forcelimited",
        "actuator_ctrllimited",
    ):
        np.testing.assert_array_equal(getattr(ours, field), getattr(ref, field), err_msg=field)
    _compare_models(
        ours, ref, bodies, {"gripperframe": "gripperframe", "baseframe": "baseframe"}, seed=2
    )


def test_so101_matches_reference_urdf(shared_robots):
    """Same kinematics and dynamics as so101_new_calib.urdf (which has no armature).

    The URDF was exported with its numbers rounded to 6 significant digits: joint rpy angles
    read 3.14159 and 1.5708 instead of pi and pi/2 (errors up to 7.3e-6 rad), so its frames
    differ from the MJCF's by a few 1e-6 and the comparison uses URDF_RTOL (measured worst
    case 2.2e-5, in qfrc_bias). It also hangs a 1e-9 kg dummy link (gripper_frame_link)
    ~0.1 m from the gripper's COM, which MuJoCo fuses into the gripper: mass 0.087000001 kg
    (1.1e-8 relative), inertia +~1e-11 kg m^2 (2.3e-7 relative); inertials compared at 1e-6.
    """
    ours, ref = _load("so101"), load_reference(shared_robots / "so101_new_calib.urdf")
    bodies = {b: f"{b}_link" for b in SO101_BODIES[1:6]}
    bodies["moving_jaw_so101_v1"] = "moving_jaw_so101_v1_link"
    _inertials_equal(ours, ref, bodies, rtol=1e-6)
    _compare_models(ours, ref, bodies, {}, seed=3, armature_in_ref=False, rtol=URDF_RTOL)


def test_reference_loader_strips_meshes_from_xml_text(tmp_path, shared_robots):
    """The mesh-free reference keeps every body, joint and site of the original file."""
    path = shared_robots / "so101_new_calib.xml"
    root = ET.parse(path).getroot()
    ref = load_reference(path)
    assert ref.nbody - 1 == len(root.findall(".//body"))
    world = root.find("worldbody")
    assert ref.njnt == len(world.findall(".//joint"))
    assert ref.nsite == len(world.findall(".//site"))
    assert ref.nmesh == 0
    with pytest.raises(RobotModelError, match="does not exist"):
        load_reference(tmp_path / "missing.xml")
    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><body></mujoco>")
    with pytest.raises(RobotModelError, match="cannot parse"):
        load_reference(bad)


# ---------------------------------------------------------------------------------- omx

OMX_BODIES = [
    "link2",
    "link3",
    "link4",
    "link5",
    "gripper_left_link",
    "gripper_right_link",
    "end_effector_target",
]


def test_omx_matches_reference_mjcf(shared_robots):
    """Bodies, inertials, joint/actuator/equality parameters, M and bias equal the reference.

    The reference has no end-effector site; ours ("end_effector") sits at the origin of body
    end_effector_target, so its pose is compared with that body's pose.
    """
    ours, ref = _load("omx"), load_reference(shared_robots / "open_manipulator_x.xml")
    bodies = {b: b for b in OMX_BODIES}
    _inertials_equal(ours, ref, bodies)
    for field in (
        "jnt_type",
        "jnt_axis",
        "jnt_pos",
        "jnt_range",
        "jnt_limited",
        "dof_armature",
        "dof_damping",
        "dof_frictionloss",
        "actuator_trnid",
        "actuator_gainprm",
        "actuator_biasprm",
        "actuator_ctrlrange",
        "actuator_ctrllimited",
        "eq_type",
        "eq_obj1id",
        "eq_obj2id",
        "eq_data",
        "eq_active0",
    ):
        np.testing.assert_array_equal(getattr(ours, field), getattr(ref, field), err_msg=field)
    assert ours.opt.integrator == ref.opt.integrator
    names = [ours.actuator(i).name for i in range(ours.nu)]
    assert names == [ref.actuator(i).name for i in range(ref.nu)]
    _compare_models(ours, ref, bodies, {}, seed=4)
    ee, target = ours.site("end_effector").id, ref.body("end_effector_target").id
    for q, qd in _random_states(ours, N_STATES, seed=5):
        a, b = _state(ours, q, qd), _state(ref, q, qd)
        _close(a.site_xpos[ee], b.xpos[target], what="end_effector position")
        _close(a.site_xmat[ee], b.xmat[target], what="end_effector orientation")
