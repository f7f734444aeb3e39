"""Our rigid-body quantities equal MuJoCo's and Pinocchio's at >= 100 random states (float64).

Checked per robot: mass matrix (mj_fullM), bias forces (qfrc_bias), inverse dynamics
(mj_inverse, passive/constraint forces off), forward dynamics with external wrenches (mj_forward
with xfrc_applied), body and site poses (xpos/xmat, site_xpos/site_xmat), body and site
Jacobians (mj_jacBody/mj_jacSite), J^T wrench (mj_applyFT), the regressor Y pi (mj_inverse less
armature), kinetic energy and changes of potential energy (mj_energyVel/mj_energyPos), and the
passive torques (damping and friction loss at sliding speeds: qfrc_damper + qfrc_constraint).
Against Pinocchio: CRBA, RNEA, ABA, generalized gravity, Coriolis matrix times velocity, frame
placements and frame Jacobians (LOCAL_WORLD_ALIGNED).
"""

from __future__ import annotations

import importlib.util

import pytest

from _robot_cases import (
    ALL_CASES,
    BUNDLED,
    URDF_CASES,
    case_path,
    load_case,
)
from neuract.robot.bundled import bundled_path
from neuract.robot.validate import compare_with_mujoco, compare_with_pinocchio

TOL = 1e-9
N_STATES = 100


@pytest.mark.parametrize("case", ALL_CASES)
def test_matches_mujoco(case, tmp_path, shared_robots):
    robot = load_case(case, tmp_path)
    errors = compare_with_mujoco(robot, n_states=N_STATES, seed=1)
    assert {"mass_matrix", "bias_forces", "inverse_dynamics", "body_jacobian", "regressor",
            "kinetic_energy", "potential_energy_change", "passive_torques"} <= set(errors)
    # friction loss compared where MuJoCo's constraint acts as sliding friction
    assert errors.pop("passive_saturated_share") >= 0.9
    bad = {k: v for k, v in errors.items() if not v < TOL}
    assert not bad, f"{case}: relative errors above {TOL}: {bad}"


@pytest.mark.skipif(importlib.util.find_spec("pinocchio") is None, reason="pinocchio missing")
@pytest.mark.parametrize("case", URDF_CASES + [f"bundled:{b}" for b in BUNDLED])
def test_matches_pinocchio(case, tmp_path, shared_robots):
    """Reference URDFs through pinocchio.buildModelFromUrdf, bundled MJCFs through
    pinocchio.buildModelFromMJCF (an independent parser of the same file)."""
    robot = load_case(case, tmp_path)
    path = case_path(case, tmp_path)
    if case.startswith("bundled:"):
        path = bundled_path(path)
    errors = compare_with_pinocchio(robot, path, n_states=N_STATES, seed=2)
    assert errors.pop("n_frames_compared") >= robot.n_dof
    bad = {k: v for k, v in errors.items() if not v < TOL}
    assert not bad, f"{case}: relative errors above {TOL}: {bad}"


def test_comparison_can_fail(tmp_path, shared_robots):
    """A 1e-6 scaling of one link's inertials must show up in the comparison (the check is live)."""
    robot = load_case("so101_new_calib.xml", tmp_path)
    pi = robot.inertial_parameters().clone()
    pi[10:20] *= 1 + 1e-6
    errors = compare_with_mujoco(robot.with_inertial_parameters(pi), n_states=5)
    assert errors["mass_matrix"] > TOL and errors["bias_forces"] > TOL
    for key in ("regressor", "kinetic_energy", "potential_energy_change"):
        assert errors[key] > TOL, key
    assert errors["passive_torques"] < TOL
    # a friction-loss sign error or a 1e-6 change of the damping shows up too
    flipped = compare_with_mujoco(robot.replace(frictionloss=-robot.frictionloss), n_states=5)
    damped = compare_with_mujoco(robot.replace(damping=robot.damping * (1 + 1e-6)), n_states=5)
    assert flipped["passive_torques"] > TOL and damped["passive_torques"] > TOL


@pytest.mark.skipif(importlib.util.find_spec("pinocchio") is None, reason="pinocchio missing")
def test_pinocchio_comparison_can_fail(tmp_path, shared_robots):
    """A 1e-6 scaling of one link's inertials must show up in the dynamics rows against
    Pinocchio, a 1e-6 rad shift of the joint zeros in the kinematics rows (the check is
    live)."""
    case = "so101_new_calib.urdf"
    robot = load_case(case, tmp_path)
    path = case_path(case, tmp_path)
    pi = robot.inertial_parameters().clone()
    pi[10:20] *= 1 + 1e-6
    errors = compare_with_pinocchio(robot.with_inertial_parameters(pi), path, n_states=5)
    for key in ("mass_matrix", "rnea", "aba", "gravity", "coriolis"):
        assert errors[key] > TOL, key
    assert errors["body_pos"] < TOL and errors["body_jacobian"] < TOL
    # and a 1e-6 rad shift of the joints' zero shows up in the kinematics rows
    shifted = robot.replace(q_ref=robot.q_ref + 1e-6)
    errors = compare_with_pinocchio(shifted, path, n_states=5)
    for key in ("body_pos", "body_rot", "body_jacobian"):
        assert errors[key] > TOL, key

