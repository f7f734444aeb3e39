"""Hands with tactile fingertips: a parallel-jaw gripper built in code, and the SO-101's jaws.

:func:`parallel_gripper` adds a floating parallel-jaw hand to an ``MjSpec``: a palm on three
slide and three hinge joints (x, y, z, roll, pitch, yaw; position servos, gravity compensated)
and two fingers that close along the palm's y axis on slide joints, one position servo each
(the closing distance of that finger, 0 = open). Each finger carries a box pad on its inner face
with a taxel grid (:mod:`neuract.touch.tactile`); the pads face each other, ``opening`` apart
when open. :func:`so101_tactile` lays taxel grids on the two jaw pads of the bundled SO-101
(``fixed_jaw_pad``, ``moving_jaw_pad``), each on the face toward the other jaw.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco

from neuract.errors import ConfigError
from neuract.touch.tactile import TactilePad, add_tactile_pad

__all__ = ["Gripper", "parallel_gripper", "so101_tactile", "so101_spec"]

HAND_JOINTS = ("x", "y", "z", "roll", "pitch", "yaw")


@dataclass(frozen=True)
class Gripper:
    """Names in the spec: the palm body, joints/actuators (in control order) and the pads."""

    body: str
    joints: tuple[str, ...]
    actuators: tuple[str, ...]
    pads: tuple[TactilePad, TactilePad]
    opening: float
    finger_travel: float

    @property
    def grip_actuators(self) -> tuple[str, str]:
        return self.actuators[6], self.actuators[7]


def parallel_gripper(spec: mujoco.MjSpec, *, name: str = "hand", pos=(0.0, 0.0, 0.3),
                     opening: float = 0.08, pad_size: tuple[float, float] = (0.024, 0.016),
                     resolution: tuple[int, int] = (12, 8), skin: float = 0.001,
                     grip_force: float = 20.0, pad_friction: float = 1.0) -> Gripper:
    """Add a floating parallel-jaw hand with tactile pads to ``spec``.

    ``opening``: distance between the pad faces when open (m); ``pad_size``: the pad face (m,
    along the finger, across it); ``resolution``: taxels along and across; ``grip_force``: the
    most a finger servo pushes (N). Fingers point down the palm's -z; the pad centres are 0.05 m
    below the palm.
    """
    if not 0.01 <= opening <= 0.3:
        raise ConfigError(f"gripper: opening {opening!r} m out of range; accepted: 0.01..0.3")
    if min(pad_size) <= 0 or max(pad_size) > 0.1:
        raise ConfigError(f"gripper: pad_size {pad_size!r} m out of range; accepted: (0, 0.1]")
    if not grip_force > 0:
        raise ConfigError(f"gripper: grip_force {grip_force!r} N must be > 0")
    palm = spec.worldbody.add_body(name=name, pos=list(pos), gravcomp=1.0)
    palm.add_geom(name=f"{name}_palm", type=mujoco.mjtGeom.mjGEOM_BOX,
                  size=[0.02, opening / 2 + 0.015, 0.01], mass=0.4, rgba=[0.3, 0.3, 0.35, 1])
    joints, actuators = [], []
    for k, jn in enumerate(HAND_JOINTS):
        axis = [0.0, 0.0, 0.0]
        axis[k % 3] = 1.0
        jtype = mujoco.mjtJoint.mjJNT_SLIDE if k < 3 else mujoco.mjtJoint.mjJNT_HINGE
        joint = palm.add_joint(name=f"{name}_{jn}", type=jtype, axis=axis, damping=5.0 if k < 3
                               else 0.5, armature=0.01)
        joints.append(joint.name)
        kp = 800.0 if k < 3 else 40.0
        act = spec.add_actuator(name=joint.name, target=joint.name,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=kp, kv=2 * (kp * 0.5) ** 0.5)
        actuators.append(act.name)
    hu, hv = pad_size[0] / 2, pad_size[1] / 2
    travel = opening / 2 - 0.002
    pads = []
    for side, sign in (("left", 1.0), ("right", -1.0)):
        fb = palm.add_body(name=f"{name}_{side}", pos=[0, sign * (opening / 2 + 0.004), 0],
                           gravcomp=1.0)
        joint = fb.add_joint(name=f"{name}_{side}", type=mujoco.mjtJoint.mjJNT_SLIDE,
                             axis=[0, -sign, 0], range=[0, travel], damping=2.0, armature=0.01)
        fb.add_geom(name=f"{name}_{side}_finger", type=mujoco.mjtGeom.mjGEOM_BOX,
                    size=[hv + 0.002, 0.003, 0.035], pos=[0, sign * 0.001, -0.04], mass=0.05,
                    rgba=[0.5, 0.5, 0.55, 1])
        # the pad: its -y (left) / +y (right) face is the sensing face, at y = +-opening/2
        fb.add_geom(name=f"{name}_{side}_pad", type=mujoco.mjtGeom.mjGEOM_BOX,
                    size=[hv, 0.002, hu], pos=[0, -sign * 0.002, -0.05], mass=0.01,
                    friction=[pad_friction, 0.005, 0.0001], rgba=[0.1, 0.1, 0.1, 1])
        joints.append(joint.name)
        act = spec.add_actuator(name=joint.name, target=joint.name,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT, forcelimited=True,
                                forcerange=[-grip_force, grip_force])
        act.set_to_position(kp=2000.0, kv=20.0)
        actuators.append(act.name)
        pads.append(add_tactile_pad(spec, f"{name}_{side}_pad", face="-y" if sign > 0 else "+y",
                                    resolution=resolution, skin=skin))
    return Gripper(body=name, joints=tuple(joints), actuators=tuple(actuators),
                   pads=(pads[0], pads[1]), opening=float(opening), finger_travel=float(travel))


SO101_PADS = ("fixed_jaw_pad", "moving_jaw_pad")


def so101_tactile(spec: mujoco.MjSpec, *, resolution: tuple[int, int] | None = None,
                  pitch: float = 0.002, skin: float = 0.001) -> tuple[TactilePad, TactilePad]:
    """Taxel grids on the SO-101's two jaw pads (of ``spec``, e.g. :func:`so101_spec`)."""
    names = {g.name for g in spec.geoms}
    missing = [p for p in SO101_PADS if p not in names]
    if missing:
        raise ConfigError(f"so101 tactile: the model lacks the jaw pad geoms {missing}; "
                          f"expected {', '.join(SO101_PADS)} (the bundled 'so101')")
    a = add_tactile_pad(spec, SO101_PADS[0], toward=SO101_PADS[1], resolution=resolution,
                        pitch=pitch, skin=skin)
    b = add_tactile_pad(spec, SO101_PADS[1], toward=SO101_PADS[0], resolution=resolution,
                        pitch=pitch, skin=skin)
    return a, b


def so101_spec() -> mujoco.MjSpec:
    """The bundled SO-101 description as an editable spec."""
    from neuract.robot.bundled import bundled_path

    return mujoco.MjSpec.from_file(str(bundled_path("so101")))
