"""Object families: watertight meshes of the stated dimensions, convex pieces that cover them,
seeded disjoint splits, loading into MuJoCo (an object dropped on a table comes to rest), and
the refusals."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import trimesh

from neuract.errors import ConfigError, SchemaError
from neuract.touch.objects import (
    FAMILIES,
    HELD_OUT_FAMILY,
    add_object,
    add_table,
    make_object,
    object_from_mesh,
    object_spec,
    object_split,
    sample_spec,
)


def _bounds(p: dict, family: str) -> np.ndarray:
    """The object's bounding box from its parameters, by hand."""
    if family == "mug":
        r, reach = p["radius"], p["radius"] + p["handle_radius"] + p["handle_thickness"]
        return np.array([[-r, -r, 0], [reach, r, p["height"]]])
    if family == "bottle":
        r = p["radius"]
        return np.array([[-r, -r, 0], [r, r, p["height"] + p["lid_height"]]])
    if family == "peg":
        r = p["radius"]
        return np.array([[-r, -r, 0], [r, r, p["length"]]])
    if family == "bolt":
        cx, cy = p["head_flats"] / np.sqrt(3), p["head_flats"] / 2
        return np.array([[-cx, -cy, 0], [cx, cy, p["head_height"] + p["shaft_length"]]])
    if family == "hole":
        h = p["size"] / 2
        return np.array([[-h, -h, 0], [h, h, p["height"]]])
    if family == "plug":
        w, t = p["width"] / 2, p["thickness"] / 2
        return np.array([[-w, -t, 0], [w, t, p["height"] + p["prong_length"]]])
    raise AssertionError(family)


def _inside_convex(piece: trimesh.Trimesh, pts: np.ndarray) -> np.ndarray:
    d = (pts[:, None, :] - piece.triangles[None, :, 0]) * piece.face_normals[None]
    return (d.sum(-1) < -1e-7).all(axis=1)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_is_watertight_with_its_dimensions(family):
    for spec in (object_spec(family), sample_spec(family, np.random.default_rng(7))):
        obj = make_object(spec)
        for part in obj.parts:
            assert part.mesh.is_watertight and part.mesh.is_volume
            assert part.pieces and all(p.is_convex and p.is_watertight for p in part.pieces)
            covered = sum(p.volume for p in part.pieces) / part.mesh.volume
            assert 0.97 < covered < 1.10, (family, part.name, covered)
        np.testing.assert_allclose(obj.mesh.bounds, _bounds(spec.values, family), atol=2e-4)
        assert (obj.grasp_width is None) == (family == "hole")


def test_hollow_shapes_are_hollow_and_the_hole_is_clear():
    p = object_spec("mug").values
    mug = make_object(object_spec("mug")).mesh
    r_in, bottom = p["radius"] - p["wall"], 1.5 * p["wall"]
    cup = np.pi * (p["radius"] ** 2 * p["height"] - r_in ** 2 * (p["height"] - bottom))
    handle = np.pi ** 2 * p["handle_radius"] * p["handle_thickness"] ** 2  # half a torus
    assert cup * 0.98 < mug.volume < cup + handle
    h = object_spec("hole").values
    block = make_object(object_spec("hole"))
    floor = h["height"] - h["depth"]
    assert block.mesh.volume == pytest.approx(
        h["size"] ** 2 * h["height"] - np.pi * h["hole_radius"] ** 2 * h["depth"], rel=0.01)
    # no collision piece reaches into the hole: a peg of the hole's radius fits
    t = np.linspace(0, 2 * np.pi, 64, endpoint=False) + np.pi / 64  # off the pieces' seams
    rim = [np.column_stack([0.999 * h["hole_radius"] * np.cos(t),
                            0.999 * h["hole_radius"] * np.sin(t), np.full(64, z)])
           for z in np.linspace(floor + 1e-4, h["height"] - 1e-4, 5)]
    rim = np.vstack(rim)
    assert not any(_inside_convex(piece, rim).any() for piece in block.parts[0].pieces)
    wall = rim * [1.2, 1.2, 1.0]  # just outside the hole: solid
    assert np.mean([any(_inside_convex(pc, wall[i:i + 1])[0] for pc in block.parts[0].pieces)
                    for i in range(len(wall))]) == 1.0


def test_splits_are_seeded_and_disjoint():
    a = object_split(seed=0, n_train=3, n_heldout=2)
    b = object_split(seed=0, n_train=3, n_heldout=2)
    c = object_split(seed=1, n_train=3, n_heldout=2)
    assert a == b and a != c
    trained = set(FAMILIES) - {HELD_OUT_FAMILY}
    assert {s.family for s in a.train} == trained == {s.family for s in a.heldout}
    assert {s.family for s in a.heldout_family} == {HELD_OUT_FAMILY}
    assert len(a.train) == 3 * len(trained) and len(a.heldout) == 2 * len(trained)
    assert len(a.heldout_family) == 2
    groups = [a.train, a.heldout, a.heldout_family]
    names = [{s.name for s in g} for g in groups]
    params = [{s.params for s in g} for g in groups]
    for i in range(3):
        for j in range(i + 1, 3):
            assert not names[i] & names[j] and not params[i] & params[j]
    assert sum(len(n) for n in names) == sum(len(g) for g in groups)  # names unique
    for s in a.train + a.heldout:  # every draw lies in its family's ranges
        for k, v in s.params:
            lo, hi = FAMILIES[s.family][k]
            assert lo <= v <= hi
    other = object_split(seed=0, n_train=3, n_heldout=2, heldout_family="plug")
    assert {s.family for s in other.heldout_family} == {"plug"}
    assert "plug" not in {s.family for s in other.train}


def test_objects_load_and_come_to_rest_on_a_table():
    spec = mujoco.MjSpec()
    spec.option.timestep = 0.002
    add_table(spec, size=(0.5, 0.2))
    families = sorted(FAMILIES)
    for k, family in enumerate(families):
        drop = 0.0 if family == "hole" else 0.01  # the fixture is placed, the rest dropped
        add_object(spec, make_object(object_spec(family)), pos=(-0.3 + 0.12 * k, 0, drop))
    model = spec.compile()
    data = mujoco.MjData(model)
    for _ in range(1000):
        mujoco.mj_step(model, data)
    for family in families:
        bid = model.body(family).id
        assert abs(data.xpos[bid][2]) < 2e-3, family  # the base rests on the table top
        assert data.xmat[bid].reshape(3, 3)[2, 2] > 0.99, family  # upright
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, bid, vel, 0)
        assert np.abs(vel[3:]).max() < 5e-3 and np.abs(vel[:3]).max() < 0.05, family
    # the fixture has no joint, the rest float; each convex piece is a mesh geom with an octree
    assert model.body("hole").jntnum == 0 and model.body("mug").jntnum == 1
    pieces = [g for g in range(model.ngeom) if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH
              and model.geom_contype[g]]
    assert len(pieces) == sum(len(p.pieces) for f in families
                              for p in make_object(object_spec(f)).parts)
    assert all(model.mesh_octadr[model.geom_dataid[g]] >= 0 for g in pieces)
    assert model.body("mug").mass > 0 and model.body("bottle_lid").mass > 0


def test_the_bottle_lid_turns_against_its_friction():
    spec = mujoco.MjSpec()
    spec.option.gravity = [0, 0, 0]
    add_object(spec, make_object(object_spec("bottle")), free=False, lid_friction=0.05,
               tactile=False)
    model = spec.compile()
    data = mujoco.MjData(model)
    dof = model.joint("bottle_lid").dofadr[0]
    turned = []
    for torque in (0.03, 0.2):  # below and above the friction
        mujoco.mj_resetData(model, data)
        data.qfrc_applied[dof] = torque
        for _ in range(200):
            mujoco.mj_step(model, data)
        turned.append(data.qpos[model.joint("bottle_lid").qposadr[0]])
        assert data.ncon == 0  # the lid sits on the neck without rubbing it
    assert abs(turned[0]) < 0.02 and turned[1] > 1.0


def test_object_from_a_mesh():
    a = trimesh.creation.box([0.04, 0.01, 0.01])
    b = trimesh.creation.box([0.01, 0.04, 0.01])
    b.apply_translation([0.015, 0.015, 0])
    ell = trimesh.boolean.union([a, b], engine="manifold")
    ell.apply_translation([0, 0, 0.005])
    obj = object_from_mesh(ell, name="ell", threshold=0.05, grasp_width=0.01)
    pieces = obj.parts[0].pieces
    assert len(pieces) >= 2 and all(p.is_convex for p in pieces)
    assert sum(p.volume for p in pieces) == pytest.approx(ell.volume, rel=0.1)
    hull = object_from_mesh(ell, name="ellhull", decompose="hull")
    assert len(hull.parts[0].pieces) == 1
    spec = mujoco.MjSpec()
    add_table(spec)
    add_object(spec, obj, pos=(0, 0, 0.005), opening=0.08)
    model = spec.compile()
    assert model.body("ell").mass > 0


def test_refusals(tmp_path):
    with pytest.raises(ConfigError, match="unknown; accepted: mug, bottle, peg, bolt, hole, plug"):
        object_spec("teapot")
    with pytest.raises(ConfigError, match="teapot"):
        object_split(heldout_family="teapot")
    with pytest.raises(ConfigError, match="unknown parameters \\['girth'\\]; accepted: radius"):
        object_spec("mug", {"girth": 0.1})
    with pytest.raises(ConfigError, match="wall < radius"):
        object_spec("mug", {"radius": 0.01, "wall": 0.008})
    with pytest.raises(ConfigError, match="finite and > 0"):
        object_spec("peg", {"length": -0.01})
    # too wide for the gripper
    wide = make_object(object_spec("mug", {"radius": 0.05, "height": 0.1}))
    spec = mujoco.MjSpec()
    with pytest.raises(ConfigError, match="graspable width 0.1000 m is beyond the gripper "
                                          "opening 0.0800 m"):
        add_object(spec, wide, opening=0.08)
    add_object(spec, make_object(object_spec("peg")), opening=0.08, tactile=False)
    with pytest.raises(ConfigError, match="already has a body"):
        add_object(spec, make_object(object_spec("peg")), tactile=False)
    # a fixture is never refused for its width
    add_object(spec, make_object(object_spec("hole", {"size": 0.2})), opening=0.08,
               tactile=False)
    # meshes that are not closed
    open_box = trimesh.creation.box([0.02, 0.02, 0.02])
    open_box.update_faces(np.arange(len(open_box.faces)) > 0)
    with pytest.raises(SchemaError, match="mesh 'cup': not watertight"):
        object_from_mesh(open_box, name="cup")
    path = tmp_path / "open.stl"
    open_box.export(path)
    with pytest.raises(SchemaError, match="open.stl.*not watertight"):
        object_from_mesh(path, name="cup")
    with pytest.raises(SchemaError, match="cannot be read"):
        object_from_mesh(tmp_path / "missing.stl", name="cup")
    with pytest.raises(ConfigError, match="decompose 'vhacd' unknown"):
        object_from_mesh(trimesh.creation.box([0.02] * 3), name="b", decompose="vhacd")
