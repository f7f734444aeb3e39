"""Tactile pads: footprints of known indenters, forces against MuJoCo's own, the noise model,
the hands that carry pads, and the refusals."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from neuract.errors import ConfigError
from neuract.touch.gripper import parallel_gripper, so101_spec, so101_tactile
from neuract.touch.objects import add_table
from neuract.touch.tactile import TactileNoise, TactileReader, add_tactile_pad

G = 9.81
HALF, THICK, SKIN, RES = 0.012, 0.005, 0.001, (12, 12)


def _pad_scene(indenter, *, pad_quat=(1, 0, 0, 0), face="+z", mass=0.3, xy=(0.0, 0.0),
               quat=(1, 0, 0, 0), steps=300):
    """A pad whose sensing face is up, an indenter on a vertical slide pressing it under its
    weight, and MuJoCo's own touch sensor over the pad face."""
    spec = mujoco.MjSpec()
    spec.option.timestep = 0.002
    pb = spec.worldbody.add_body(name="padb", quat=list(pad_quat))
    pb.add_geom(name="pad", type=mujoco.mjtGeom.mjGEOM_BOX, size=[HALF, HALF, THICK])
    pad = add_tactile_pad(spec, "pad", face=face, resolution=RES, skin=SKIN)
    pb.add_site(name="touchzone", type=mujoco.mjtGeom.mjGEOM_BOX,
                            size=[HALF + 0.002, HALF + 0.002, 0.003], pos=[0, 0, THICK])
    spec.add_sensor(name="touch", type=mujoco.mjtSensor.mjSENS_TOUCH,
                    objtype=mujoco.mjtObj.mjOBJ_SITE, objname="touchzone")
    body = spec.worldbody.add_body(name="ind", pos=[xy[0], xy[1], 0.03])
    body.add_joint(name="drop", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[0, 0, 1], damping=2.0)
    indenter(spec, body, mass, list(quat))
    model = spec.compile()
    data = mujoco.MjData(model)
    for _ in range(steps):
        mujoco.mj_step(model, data)
    return model, data, pad


def _sphere(r):
    def add(spec, body, mass, quat):
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[r, 0, 0], mass=mass)
    return add


def _box(half):
    def add(spec, body, mass, quat):
        body.add_geom(name="indenter", type=mujoco.mjtGeom.mjGEOM_BOX, size=list(half),
                      mass=mass, quat=quat)
    return add


def _mesh_cube(half, octree):
    def add(spec, body, mass, quat):
        mesh = spec.add_mesh()
        mesh.name = "cube"
        corners = [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]
        mesh.uservert = (np.array(corners, dtype=float) * half).ravel().tolist()
        mesh.needsdf = octree
        mesh.octree_maxdepth = 4
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname="cube", mass=mass)
    return add


def _sensing_points(pad):
    """Taxel sensing points of the up-facing pad of _pad_scene (face +z), by hand."""
    xs = -HALF + (2 * HALF / RES[0]) * (np.arange(RES[0]) + 0.5)
    ys = -HALF + (2 * HALF / RES[1]) * (np.arange(RES[1]) + 0.5)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    return np.stack([X, Y, np.full(X.shape, THICK + SKIN)], axis=-1)


def _contact_normal_sum(model, data):
    f, total = np.zeros(6), 0.0
    for i in range(data.ncon):
        mujoco.mj_contactForce(model, data, i, f)
        total += f[0]
    return total


def test_sphere_footprint_is_where_the_sphere_is_and_force_matches_mujoco():
    r, mass = 0.006, 0.3
    model, data, pad = _pad_scene(_sphere(r), mass=mass, xy=(0.0023, -0.0031))
    reader = TactileReader(model, [pad])
    img = reader.read(data)["pad"]
    np.testing.assert_allclose(reader.taxel_points(data)["pad"],
                               _sensing_points(pad) - [0, 0, SKIN], atol=1e-12)
    centre = data.xpos[model.body("ind").id]
    dist = np.linalg.norm(_sensing_points(pad) - centre, axis=-1)
    clear = np.abs(dist - r) > 2e-4  # away from the footprint's rim
    expected = dist < r
    assert expected.sum() >= 5 and (~expected).sum() > 100
    np.testing.assert_array_equal((img.normal > 0)[clear], expected[clear])
    np.testing.assert_array_equal((img.depth > 0)[clear], expected[clear])
    # forces: the weight, MuJoCo's touch sensor, the sum of its contact forces
    touch = data.sensor("touch").data[0]
    assert img.total_normal == pytest.approx(mass * G, rel=0.05)
    assert img.total_normal == pytest.approx(touch, rel=0.05)
    assert img.total_normal == pytest.approx(_contact_normal_sum(model, data), rel=1e-6)
    assert np.abs(img.shear.sum(axis=(1, 2))).max() < 0.02 * mass * G
    # the pressure centre is under the sphere
    xy = _sensing_points(pad)[..., :2]
    cop = (img.normal[..., None] * xy).sum((0, 1)) / img.total_normal
    np.testing.assert_allclose(cop, centre[:2], atol=0.5e-3)
    assert img.stack().shape == (3, *RES)


def test_box_edge_footprint_is_a_strip_along_the_edge():
    half, mass = (0.004, 0.006, 0.004), 0.5
    c, s = np.cos(np.pi / 8), np.sin(np.pi / 8)  # 45 degrees about y: an edge along y, down
    model, data, pad = _pad_scene(_box(half), mass=mass, xy=(-0.003, 0.002), quat=(c, 0, s, 0))
    img = TactileReader(model, [pad]).read(data)["pad"]
    gid = model.geom("indenter").id
    local = (_sensing_points(pad) - data.geom_xpos[gid]) @ data.geom_xmat[gid].reshape(3, 3)
    margin = (np.asarray(half) - np.abs(local)).min(axis=-1)  # > 0 inside the box
    clear = np.abs(margin) > 2e-4
    expected = margin > 0
    assert expected.sum() >= 6
    np.testing.assert_array_equal((img.normal > 0)[clear], expected[clear])
    active = np.argwhere(img.normal > 0)
    ys = _sensing_points(pad)[active[:, 0], active[:, 1], 1]
    assert ys.min() > 0.002 - 0.006 - 1e-3 and ys.max() < 0.002 + 0.006 + 1e-3  # ends inside
    assert img.total_normal == pytest.approx(mass * G, rel=0.05)
    assert img.total_normal == pytest.approx(data.sensor("touch").data[0], rel=0.05)


def test_turned_pad_reads_in_its_own_frame():
    # the pad geom turned 90 degrees about y, its -x face (24 x 10 mm) up: pad x = world y,
    # pad y = -world x
    c = np.cos(np.pi / 4)
    model, data, pad = _pad_scene(_sphere(0.006), pad_quat=(c, 0, c, 0), face="-x", mass=0.2,
                                  xy=(0.001, -0.004))
    reader = TactileReader(model, [pad])
    img = reader.read(data)["pad"]
    assert img.total_normal == pytest.approx(0.2 * G, rel=0.05)
    pts = reader.taxel_points(data)["pad"]  # pad x runs along world y, pad y along -world x
    assert np.allclose(pts[..., 2], HALF) and np.all(np.diff(pts[:, 0, 1]) > 0)
    assert np.all(np.diff(pts[0, :, 0]) < 0)
    xy = pad.taxel_xy()
    cop = (img.normal[..., None] * xy).sum((0, 1)) / img.total_normal
    np.testing.assert_allclose(cop, [-0.004, -0.001], atol=0.5e-3)


def test_mesh_indenter_without_octree_falls_back_to_contact_points():
    half = 0.004
    model, data, pad = _pad_scene(_mesh_cube(half, octree=False), mass=0.3, xy=(0.001, 0.0))
    img = TactileReader(model, [pad]).read(data)["pad"]
    assert img.depth.sum() == 0  # the sensor cannot see a mesh without its octree
    assert img.total_normal == pytest.approx(0.3 * G, rel=0.05)
    pts = _sensing_points(pad)[img.normal > 0][:, :2]
    assert 1 <= len(pts) <= data.ncon
    assert np.abs(pts - [0.001, 0.0]).max() <= half + 1.5e-3  # the taxels nearest the face
    # with the octree the footprint is the whole face
    model, data, pad = _pad_scene(_mesh_cube(half, octree=True), mass=0.3, xy=(0.001, 0.0))
    img = TactileReader(model, [pad]).read(data)["pad"]
    assert (img.normal > 0).sum() >= 9
    assert img.total_normal == pytest.approx(0.3 * G, rel=0.05)


def test_noise_is_seeded_and_dead_taxels_read_nothing():
    model, data, pad = _pad_scene(_sphere(0.008), mass=0.3)
    noise = TactileNoise(gain_std=0.1, noise_std=0.02, dead_fraction=0.2)
    a = TactileReader(model, [pad], noise=noise, seed=3)
    b = TactileReader(model, [pad], noise=noise, seed=3)
    other = TactileReader(model, [pad], noise=noise, seed=4)
    ia, ib, io = (r.read(data)["pad"] for r in (a, b, other))
    np.testing.assert_array_equal(ia.normal, ib.normal)
    np.testing.assert_array_equal(ia.shear, ib.shear)
    assert not np.array_equal(ia.normal, io.normal)
    assert not np.array_equal(a.read(data)["pad"].normal, ia.normal)  # a fresh draw each read
    a.reset(3)
    np.testing.assert_array_equal(a.read(data)["pad"].normal, ia.normal)
    dead = ~a.alive[0]
    assert 0.1 < dead.mean() < 0.3
    assert (ia.normal[dead] == 0).all() and (ia.shear[:, dead] == 0).all()
    assert (ia.depth[dead] == 0).all()
    clean = TactileReader(model, [pad]).read(data)["pad"]
    quiet = TactileReader(model, [pad], noise=TactileNoise(0.0, 0.0, 0.0)).read(data)["pad"]
    np.testing.assert_array_equal(quiet.normal, clean.normal)
    assert not np.allclose(ia.normal[~dead], clean.normal[~dead])


@pytest.mark.parametrize("kw", [dict(gain_std=-0.1), dict(noise_std=float("nan")),
                                dict(dead_fraction=1.0)])
def test_noise_refuses_bad_settings(kw):
    with pytest.raises(ConfigError):
        TactileNoise(**kw)


def test_pad_refusals():
    spec = mujoco.MjSpec()
    b = spec.worldbody.add_body(name="b")
    b.add_geom(name="ball", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.01, 0, 0])
    b.add_geom(name="box", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.01, 0.01, 0.01])
    with pytest.raises(ConfigError, match="not a box"):
        add_tactile_pad(spec, "ball", face="+z")
    with pytest.raises(ConfigError, match="no geom named 'nope'"):
        add_tactile_pad(spec, "nope", face="+z")
    with pytest.raises(ConfigError, match="accepted: \\+x"):
        add_tactile_pad(spec, "box", face="up")
    with pytest.raises(ConfigError, match="exactly one"):
        add_tactile_pad(spec, "box", face="+z", toward="ball")
    with pytest.raises(ConfigError, match="at least 2x2"):
        add_tactile_pad(spec, "box", face="+z", resolution=(1, 5))
    with pytest.raises(ConfigError, match="skin"):
        add_tactile_pad(spec, "box", face="+z", skin=0.0)
    pad = add_tactile_pad(spec, "box", face="+z", resolution=(4, 3))
    assert pad.resolution == (4, 3)
    bare = mujoco.MjSpec()
    bare.worldbody.add_geom(name="box", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.01] * 3)
    with pytest.raises(ConfigError, match="lacks its taxel geom"):
        TactileReader(bare.compile(), [pad])


def test_parallel_gripper_holds_a_box_and_its_pads_carry_the_weight():
    spec = mujoco.MjSpec()
    spec.option.timestep = 0.002
    add_table(spec)
    g = parallel_gripper(spec, pos=(0, 0, 0.07), resolution=(12, 8))
    body = spec.worldbody.add_body(name="box", pos=[0, 0, 0.03])
    body.add_freejoint()
    mass = 0.1
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.015, 0.02, 0.03], mass=mass)
    model = spec.compile()
    data = mujoco.MjData(model)
    act = [model.actuator(a).id for a in g.actuators]
    reader = TactileReader(model, g.pads)
    for i in range(1200):
        data.ctrl[act[6]] = data.ctrl[act[7]] = g.finger_travel
        data.ctrl[act[2]] = 0.03 if i > 400 else 0.0  # close, then lift 3 cm
        mujoco.mj_step(model, data)
    assert data.xpos[model.body("box").id][2] > 0.045  # lifted off the table
    images = reader.read(data)
    assert set(images) == {p.name for p in g.pads}
    for pad, aid in zip(g.pads, act[6:]):
        img = images[pad.name]
        assert img.normal.shape == (12, 8)
        assert img.total_normal > 1.0
        # each finger's servo pushes exactly what its pad feels
        assert img.total_normal == pytest.approx(abs(data.actuator_force[aid]), rel=0.05)
        assert (img.normal > 0).mean() > 0.9  # the box face covers the pad
    # friction on the two pads carries the weight: shear along the pads' x (world up) is -m g
    down = sum(images[p.name].shear[0].sum() for p in g.pads)
    assert down == pytest.approx(-mass * G, rel=0.05)


def test_so101_jaw_pads_face_each_other_and_feel_a_grasp():
    spec = so101_spec()
    pads = so101_tactile(spec)
    spec.option.gravity = [0, 0, 0]
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qpos[5] = 0.25
    mujoco.mj_forward(model, data)
    faces, normals = [], []
    for p in pads:
        gid = model.geom(p.geom).id
        R = data.geom_xmat[gid].reshape(3, 3)
        faces.append(data.geom_xpos[gid] + R @ np.asarray(p.origin))
        normals.append(R @ np.asarray(p.rot).reshape(3, 3)[:, 2])
    assert normals[0] @ normals[1] < -0.9
    assert (faces[1] - faces[0]) @ normals[0] > 0.01  # each faces the other across the gap
    # a fixed ball where the jaws meet: closing the gripper presses both pads
    spec.worldbody.add_body(name="ball", pos=((faces[0] + faces[1]) / 2).tolist()).add_geom(
        type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.011, 0, 0], contype=3, conaffinity=3)
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qpos[5] = 0.6
    reader = TactileReader(model, pads)
    assert all(img.total_normal == 0 for img in reader.read(data).values())
    for _ in range(400):
        data.ctrl[5] = -0.17
        mujoco.mj_step(model, data)
    for img in reader.read(data).values():
        assert img.total_normal > 0.5 and (img.normal > 0).sum() >= 3
    with pytest.raises(ConfigError, match="fixed_jaw_pad"):
        so101_tactile(mujoco.MjSpec())
