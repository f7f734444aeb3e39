"""Training shapes and simulated single views of the descriptor field
(neuract.touch.training_shapes, neuract.touch.views)."""

from __future__ import annotations

import numpy as np
import pytest

from neuract.errors import ConfigError
from neuract.touch.training_shapes import FAMILIES, Box, Union, make_shape
from neuract.touch.views import (
    occupancy,
    occupancy_queries,
    partial_cloud,
    sample_surface,
    visible,
)


def test_box_surface_is_area_uniform():
    box = Union([Box((0.03, 0.02, 0.01))])
    pts = box.sample(30000, seed=0)
    assert np.abs(box.sdf(pts)).max() < 1e-12
    on = {a: np.isclose(np.abs(pts[:, a]), h).mean() for a, h in enumerate((0.03, 0.02, 0.01))}
    area = np.array([0.02 * 0.01, 0.03 * 0.01, 0.03 * 0.02])
    assert np.allclose(list(on.values()), area / area.sum(), atol=0.015)


@pytest.mark.parametrize("family", FAMILIES)
def test_union_surfaces_leave_out_inner_faces(family):
    shape = make_shape(family, np.random.default_rng(1))
    pts = shape.sample(5000, seed=2)
    assert pts.shape == (5000, 3)
    assert np.abs(shape.sdf(pts)).max() < 1e-9  # on the union's surface, none inside it
    # a point pushed a little along +-N(0, 1 mm) is inside about half the time
    jitter = pts + np.random.default_rng(3).normal(0, 5e-4, pts.shape)
    assert 0.3 < shape.contains(jitter).mean() < 0.7
    # the grasp pose is a rotation, its origin close to the object
    rot = shape.grasp[:3, :3]
    assert np.allclose(rot @ rot.T, np.eye(3)) and np.isclose(np.linalg.det(rot), 1.0)
    assert np.linalg.norm(pts - shape.grasp[:3, 3], axis=1).min() < 0.015


def test_mug_is_hollow_and_bottle_has_no_hidden_neck_cap():
    mug = make_shape("mug", np.random.default_rng(0))
    body = mug.primitives[0]
    wall = (body.radius + body.r_inner) / 2
    inside = occupancy(mug, np.array([[0.0, 0.0, body.z1 / 2], [-wall, 0.0, body.z1 / 2]]))
    assert inside.tolist() == [False, True]
    bottle = make_shape("bottle", np.random.default_rng(0))
    neck = bottle.primitives[1]
    pts = bottle.sample(20000, seed=0)
    assert not np.isclose(pts[:, 2], neck.z0).any()  # that cap lies inside the body


def test_a_view_from_above_keeps_the_top_face():
    box = Union([Box((0.03, 0.03, 0.02))])
    pts = box.sample(20000, seed=0)
    seen = visible(pts, np.array([0.0, 0.0, 1.0]), cell=0.004)
    assert (pts[seen, 2] > 0.02 - 0.004 - 1e-12).all()
    assert seen[np.isclose(pts[:, 2], 0.02)].mean() > 0.99
    side = visible(pts, np.array([1.0, 0.0, 0.0]), cell=0.004)
    assert (pts[side, 0] > 0.0).all()  # (faces seen edge-on keep a cell's depth of points)
    assert side[np.isclose(pts[:, 0], 0.03)].mean() > 0.99
    with pytest.raises(ConfigError, match="cell"):
        visible(pts, np.array([1.0, 0.0, 0.0]), cell=0.0)


def test_partial_cloud_draws_visible_points():
    box = Union([Box((0.03, 0.03, 0.02))])
    rng = np.random.default_rng(0)
    cloud = partial_cloud(box, 6000, rng, direction=np.array([0.0, 0.0, -1.0]))
    assert cloud.shape == (6000, 3)  # fewer visible than asked: drawn with replacement
    assert (cloud[:, 2] < -0.01).all() and np.isclose(cloud[:, 2], -0.02).mean() > 0.75
    noisy = partial_cloud(box, 500, rng, noise=0.001)
    assert np.abs(box.sdf(noisy)).max() > 1e-4


def test_occupancy_queries_are_labelled_by_the_object():
    shape = make_shape("plug", np.random.default_rng(0))
    pts, occ = occupancy_queries(shape, 1000, np.random.default_rng(1))
    assert pts.shape == (1000, 3) and occ.shape == (1000,)
    assert np.array_equal(occ > 0.5, shape.contains(pts))
    assert 0.05 < occ.mean() < 0.6


class _BadMesh:
    """A mesh-like object that answers with the wrong shapes."""

    def sample(self, count, seed=None):
        return np.zeros((count, 2))

    def contains(self, points):
        return np.zeros(3, dtype=bool)


def test_object_interface_checks_shapes_and_families():
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match=r"shape \(4, 2\)"):
        sample_surface(_BadMesh(), 4, rng)
    with pytest.raises(ConfigError, match="one flag per point"):
        occupancy(_BadMesh(), np.zeros((5, 3)))
    with pytest.raises(ConfigError, match="accepted: mug, bottle, peg, plug"):
        make_shape("teapot", rng)
