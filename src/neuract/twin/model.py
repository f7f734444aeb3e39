"""MuJoCo model of a twin arm: the robot description prepared for servo-driven simulation.

The description is the bundled one (``neuract.robot.bundled.bundled_path``) when present,
else the reference MJCF in ``../shared/robots`` with its meshes removed. Preparation:

- every mesh asset and mesh geom is dropped (the twin needs inertials, not visuals), contacts
  are disabled (pushes and payloads enter as known wrenches, not collisions);
- the model's own actuators are deleted: the servos drive the joints through
  ``qfrc_applied``; slide joints (the OMX gripper rack) are removed, so the OMX twin has its
  4 arm joints and the SO-101 twin all 6 hinge joints (gripper included);
- the joints' damping, frictionloss and armature are set to zero at compile time; the hidden
  servo physics owns them (rotor inertia -> ``dof_armature``, viscous gear friction ->
  ``dof_damping``, Coulomb + Stribeck + load-dependent friction -> ``dof_frictionloss``,
  rewritten every physics step by :mod:`neuract.twin.sim`);
- gear backlash is not a MuJoCo joint (a second hinge limited to the gear play made the
  non-collocated servo loop unstable at 500 Hz with soft limits); it lives in the servo
  model as a gap state, see :mod:`neuract.twin.servo`;
- the integrator is explicit Euler at ``1 / physics_hz`` (joint damping is still implicit in
  MuJoCo's Euler), which is what makes the ideal-servo identity with MuJoCo's own position
  actuator exact.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from neuract.errors import RobotModelError
from neuract.robot.bundled import bundled_path

SHARED_ROBOTS = Path(__file__).resolve().parents[3].parent / "shared" / "robots"
_REFERENCE = {"so101": "so101_new_calib.xml", "omx": "open_manipulator_x.xml"}
# end effector: (body that carries it, site whose position it takes or None for the origin)
_EE = {"so101": ("gripper", "gripperframe"), "omx": ("end_effector_target", None)}
PAYLOAD_BODY = "twin_payload"


def _strip_meshes(xml: str) -> str:
    """Drop mesh assets, mesh geoms and materials/textures from an MJCF string."""
    root = ET.fromstring(xml)
    for parent in root.iter():
        for child in list(parent):
            tag = child.tag
            if tag in ("mesh", "material", "texture") and parent.tag == "asset":
                parent.remove(child)
            elif tag == "geom" and (child.get("type") == "mesh" or child.get("mesh")):
                parent.remove(child)
            elif tag == "geom" and child.get("material"):
                child.attrib.pop("material")
    for default in root.iter("default"):
        for child in list(default):
            if child.tag == "geom":
                child.attrib.pop("type", None) if child.get("type") == "mesh" else None
                child.attrib.pop("material", None)
    return ET.tostring(root, encoding="unicode")


def description_xml(robot: str) -> str:
    """MJCF text of ``robot`` (``so101`` or ``omx``) with meshes removed."""
    if robot not in _REFERENCE:
        raise RobotModelError(f"twin robot {robot!r} unknown; twin robots: so101, omx")
    path = None
    try:
        path = bundled_path(robot)
    except Exception:  # bundled file not there yet: fall back to the reference description
        path = SHARED_ROBOTS / _REFERENCE[robot]
    if not Path(path).is_file():
        raise RobotModelError(f"no description for twin robot {robot!r}: {path} is missing")
    xml = Path(path).read_text()
    xml = re.sub(r'meshdir="[^"]*"', "", xml)
    return _strip_meshes(xml)


@dataclass
class TwinModel:
    """A compiled twin model plus the index maps the simulator needs.

    joint_names: the servo joints, in telemetry order; ``motor_dof[i]`` / ``motor_qpos[i]``
    index the joint of servo ``i``.
    """

    robot: str
    model: mujoco.MjModel
    joint_names: list[str]
    motor_dof: np.ndarray
    motor_qpos: np.ndarray
    ee_body: int  # massless body at the end-effector point: payloads and pushes act here
    ranges: np.ndarray  # (n, 2) joint range [rad]

    @property
    def n(self) -> int:
        return len(self.joint_names)


def strip_to_hinges(spec: mujoco.MjSpec) -> None:
    """Delete every actuator, equality constraint and slide joint of ``spec`` (in place)."""
    for act in list(spec.actuators):
        spec.delete(act)
    for eq in list(spec.equalities):
        spec.delete(eq)
    for joint in list(spec.joints):
        if joint.type == mujoco.mjtJoint.mjJNT_SLIDE:
            spec.delete(joint)


def add_position_actuator(spec: mujoco.MjSpec, joint: str, kp: float, name: str | None = None,
                          force_limit: float | None = None) -> None:
    """Add MuJoCo's ideal position actuator on ``joint``: tau = kp (ctrl - q) [N m], clipped
    to +-force_limit [N m] when given (general actuator, gainprm = kp, biasprm = (0, -kp, 0))."""
    act = spec.add_actuator()
    act.name = name or joint
    act.target = joint
    act.trntype = mujoco.mjtTrn.mjTRN_JOINT
    act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
    act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
    act.gainprm[0] = kp
    act.biasprm[1] = -kp
    act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
    if force_limit is not None:
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-force_limit, force_limit]


SHIPPED_SERVO = {"so101": "so101", "omx": "omx_arm"}
"""the bundled description whose MuJoCo position actuators and joint armature, damping and
frictionloss are each twin robot's "shipped" servo (the OMX's own file drives its joints as
plain motors)"""


def shipped_servo(robot: str) -> dict[str, dict]:
    """Per joint: the shipped model's position actuator (``gainprm``, ``biasprm``,
    ``forcerange``, ``forcelimited``) and passive joint parameters."""
    spec = mujoco.MjSpec.from_file(str(bundled_path(SHIPPED_SERVO[robot])))
    joints = {j.name: j for j in spec.joints}
    out = {}
    for a in spec.actuators:
        j = joints.get(a.target)
        if j is None or a.biasprm[1] == 0:  # not a position servo on a joint
            continue
        out[a.target] = {"gainprm": np.array(a.gainprm), "biasprm": np.array(a.biasprm),
                         "forcerange": np.array(a.forcerange),
                         "forcelimited": a.forcelimited != mujoco.mjtLimited.mjLIMITED_FALSE,
                         "damping": np.array(j.damping), "frictionloss": float(j.frictionloss),
                         "armature": float(j.armature)}
    return out


def build_model(robot: str, physics_hz: float, position_kp: float | None = None,
                shipped: bool = False) -> TwinModel:
    """Compile the twin model of ``robot`` at ``physics_hz`` (see :func:`model_spec`)."""
    spec, names, ranges = model_spec(robot, physics_hz, position_kp, shipped)
    model = spec.compile()
    jid = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, nm) for nm in names]
    motor_dof = np.array([model.jnt_dofadr[i] for i in jid])
    motor_qpos = np.array([model.jnt_qposadr[i] for i in jid])
    ee = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, PAYLOAD_BODY)
    return TwinModel(robot, model, names, motor_dof, motor_qpos, ee, ranges)


def model_spec(robot: str, physics_hz: float, position_kp: float | None = None,
               shipped: bool = False) -> tuple[mujoco.MjSpec, list[str], np.ndarray]:
    """The twin model of ``robot`` at ``physics_hz`` before compiling (see the module
    docstring): the spec, its servo joints' names and their ranges (n, 2) [rad].

    position_kp: if given, add MuJoCo's own ideal position actuator (general actuator,
    gainprm = kp, biasprm = (0, -kp, 0)) on every servo joint: the reference the ideal twin
    must reproduce. shipped: instead, the position actuators and the joint armature, damping
    and frictionloss of the bundled model (:func:`shipped_servo`): MuJoCo's servo as people
    use it today.
    """
    servo = shipped_servo(robot) if shipped else {}
    spec = mujoco.MjSpec.from_string(description_xml(robot))
    strip_to_hinges(spec)
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    for key in list(spec.keys):
        spec.delete(key)
    parent_name, site_name = _EE[robot]
    parent = spec.body(parent_name)
    if parent is None:
        raise RobotModelError(f"twin robot {robot!r}: body {parent_name!r} not in description")
    pos = [0.0, 0.0, 0.0]
    if site_name is not None:
        pos = list(spec.site(site_name).pos)
    payload = parent.add_body()
    payload.name = PAYLOAD_BODY
    payload.pos = pos
    payload.mass = 0.0
    payload.inertia = [0.0, 0.0, 0.0]
    payload.explicitinertial = True
    hinges = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE]
    names = [j.name for j in hinges]
    ranges = []
    for j in hinges:
        rng = np.array(j.range, dtype=float)
        if not j.limited and not np.any(rng):
            rng = np.array([-np.pi, np.pi])
        ranges.append(rng)
        j.damping = np.zeros_like(np.atleast_1d(j.damping)) if np.ndim(j.damping) else 0.0
        j.frictionloss = 0.0
        j.armature = 0.0
        if j.name in servo:
            j.damping = servo[j.name]["damping"]
            j.frictionloss = servo[j.name]["frictionloss"]
            j.armature = servo[j.name]["armature"]
        j.limited = mujoco.mjtLimited.mjLIMITED_FALSE
        # stiff dry friction: MuJoCo's default soft friction (solref 0.02 s) lets a held
        # joint creep under gravity, which real geared servos do not do
        j.solref_friction = [2.0 / physics_hz, 1.0]
        j.solimp_friction = [0.99, 0.999, 0.001, 0.5, 2.0]
    if position_kp is not None:
        for j in hinges:
            add_position_actuator(spec, j.name, position_kp, name=f"{j.name}__position")
    for j in hinges if shipped else ():
        if j.name not in servo:
            raise RobotModelError(f"twin robot {robot!r}: the shipped model has no position "
                                  f"actuator on joint {j.name!r}")
        a, sv = spec.add_actuator(), servo[j.name]
        a.name, a.target, a.trntype = j.name, j.name, mujoco.mjtTrn.mjTRN_JOINT
        a.gaintype, a.biastype = mujoco.mjtGain.mjGAIN_FIXED, mujoco.mjtBias.mjBIAS_AFFINE
        a.gainprm[:3], a.biasprm[:3] = sv["gainprm"][:3], sv["biasprm"][:3]
        a.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
        if sv["forcelimited"]:
            a.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            a.forcerange = sv["forcerange"]
    spec.option.timestep = 1.0 / physics_hz
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    return spec, names, np.array(ranges)
