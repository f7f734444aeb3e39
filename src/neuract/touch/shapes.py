"""The object families' geometry: a watertight mesh per part and its convex pieces.

Every builder takes a family's parameters (metres) and returns parts in the object frame (z up,
the base on z = 0, the axis of revolution on z). A part's ``mesh`` is the shape as seen (built
by revolution, convex hulls and boolean operations, so watertight); its ``pieces`` are convex
solids whose union is that shape up to a fraction of a millimetre (arcs sampled by polygons):
MuJoCo collides convex geoms only, and a known construction needs no decomposition search.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import trimesh

__all__ = ["BUILDERS", "Part"]

_SEG = 48  # points on a full circle of a visual mesh
_ARC = 4  # points per arc of a convex piece


@dataclass
class Part:
    """One rigid part. ``offset``: its frame in the object frame; ``hinge``: turns about its z
    (a bottle's lid) when loaded, else rigidly fixed."""

    name: str
    mesh: trimesh.Trimesh
    pieces: list[trimesh.Trimesh]
    offset: np.ndarray = field(default_factory=lambda: np.zeros(3))
    hinge: bool = False


def _hull(points) -> trimesh.Trimesh:
    return trimesh.Trimesh(vertices=np.asarray(points, dtype=float)).convex_hull


def _ring(r: float, z: float, a0: float = 0.0, a1: float = 2 * np.pi, n: int = 24,
          cx: float = 0.0) -> np.ndarray:
    t = np.linspace(a0, a1, n, endpoint=(a1 - a0) < 2 * np.pi - 1e-9)
    return np.column_stack([cx + r * np.cos(t), r * np.sin(t), np.full(n, z)])


def _cyl(r: float, z0: float, z1: float) -> trimesh.Trimesh:
    return _hull(np.vstack([_ring(r, z0, n=_SEG), _ring(r, z1, n=_SEG)]))


def _union(meshes) -> trimesh.Trimesh:
    return trimesh.boolean.union(list(meshes), engine="manifold")


def _minus(a, b) -> trimesh.Trimesh:
    return trimesh.boolean.difference([a, b], engine="manifold")


def _annulus(r_in: float, r_out: float, z0: float, z1: float, k: int = 16):
    """A thick tube as ``k`` convex sectors."""
    out = []
    for i in range(k):
        a0, a1 = 2 * np.pi * i / k, 2 * np.pi * (i + 1) / k
        arcs = [_ring(r, z, a0, a1, _ARC) for r in (r_in, r_out) for z in (z0, z1)]
        out.append(_hull(np.vstack(arcs)))
    return out


def mug(radius, height, wall, handle_radius, handle_thickness):
    bottom = 1.5 * wall
    r_in = radius - wall
    zc, t, R = height / 2, handle_thickness, handle_radius
    torus = trimesh.creation.torus(major_radius=R, minor_radius=t, major_sections=_SEG,
                                   minor_sections=16)
    torus.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0]))
    torus.apply_translation([radius, 0, zc])
    cavity = _cyl(r_in, bottom, height + 0.01)
    mesh = _minus(_union([_cyl(radius, 0, height), torus]), cavity)
    pieces = [_cyl(radius, 0, bottom)] + _annulus(r_in, radius, bottom, height)
    # the handle: tube segments along the outer half of the torus, clear of the cavity
    phi_max = np.arccos(min(1.0, max(0.0, (t - wall) / R)))
    phis = np.linspace(-phi_max, phi_max, 7)
    tube = np.linspace(0, 2 * np.pi, 12, endpoint=False)
    for p0, p1 in zip(phis[:-1], phis[1:]):
        pts = []
        for p in (p0, p1):
            c = np.array([radius + R * np.cos(p), 0, zc + R * np.sin(p)])
            radial = np.array([np.cos(p), 0, np.sin(p)])
            pts += [c + t * (np.cos(a) * radial + np.sin(a) * np.array([0, 1, 0])) for a in tube]
        pieces.append(_hull(pts))
    return [Part("body", mesh, pieces)]


def bottle(radius, height, neck_radius, neck_height, shoulder_height, lid_height, lid_wall):
    hb = height - neck_height - shoulder_height
    profile = [(0, 0), (radius, 0), (radius, hb), (neck_radius, hb + shoulder_height),
               (neck_radius, height), (0, height)]
    mesh = trimesh.creation.revolve(np.array(profile, dtype=float), sections=_SEG)
    pieces = [_cyl(radius, 0, hb),
              _hull(np.vstack([_ring(radius, hb, n=_SEG), _ring(neck_radius, hb + shoulder_height,
                                                                n=_SEG)])),
              _cyl(neck_radius, hb + shoulder_height, height)]
    lid = _cyl(neck_radius + lid_wall, 0, lid_height)
    return [Part("body", mesh, pieces),
            Part("lid", lid, [lid.copy()], offset=np.array([0, 0, height]), hinge=True)]


def peg(radius, length, chamfer):
    m = _hull(np.vstack([_ring(radius, 0, n=_SEG), _ring(radius, length - chamfer, n=_SEG),
                         _ring(radius - chamfer, length, n=_SEG)]))
    return [Part("body", m, [m.copy()])]


def bolt(head_flats, head_height, shaft_radius, shaft_length):
    hexr = head_flats / np.sqrt(3)  # circumradius of the hexagon
    head = _hull(np.vstack([_ring(hexr, 0, n=6), _ring(hexr, head_height, n=6)]))
    shaft = _cyl(shaft_radius, head_height - 1e-3, head_height + shaft_length)
    return [Part("body", _union([head, shaft]), [head, shaft])]


def _square_wedge(half: float, a0: float, a1: float) -> np.ndarray:
    """Points of the square ``|x|, |y| <= half`` boundary between the rays at angles a0, a1."""
    pts = []
    for a in (a0, a1):
        d = np.array([np.cos(a), np.sin(a)])
        pts.append(d * half / np.abs(d).max())
    for c in ((1, 1), (-1, 1), (-1, -1), (1, -1)):
        ca = np.arctan2(c[1], c[0]) % (2 * np.pi)
        if a0 < ca < a1:
            pts.append(np.array(c, dtype=float) * half)
    return np.array(pts)


def hole(size, height, hole_radius, depth):
    half, floor, k = size / 2, height - depth, 16
    block = trimesh.creation.box([size, size, height])
    block.apply_translation([0, 0, height / 2])
    mesh = _minus(block, _cyl(hole_radius, floor, height + 0.01))
    slab = trimesh.creation.box([size, size, floor])
    slab.apply_translation([0, 0, floor / 2])
    pieces = [slab]
    r_out = hole_radius / np.cos(np.pi / k)  # polygon around the hole: never narrower than it
    for i in range(k):
        a0, a1 = 2 * np.pi * i / k, 2 * np.pi * (i + 1) / k
        xy = np.vstack([_ring(r_out, 0, a0, a1, 2)[:, :2], _square_wedge(half, a0, a1)])
        pieces.append(_hull(np.vstack([np.column_stack([xy, np.full(len(xy), z)])
                                       for z in (floor, height)])))
    return [Part("body", mesh, pieces)]


def plug(width, thickness, height, prong_length, prong_spacing):
    body = trimesh.creation.box([width, thickness, height])
    body.apply_translation([0, 0, height / 2])
    prongs = []
    for s in (-1, 1):
        p = trimesh.creation.box([0.0015, 0.006, prong_length + 1e-3])
        p.apply_translation([s * prong_spacing / 2, 0, height + (prong_length - 1e-3) / 2])
        prongs.append(p)
    return [Part("body", _union([body, *prongs]), [body, *prongs])]


BUILDERS = {"mug": mug, "bottle": bottle, "peg": peg, "bolt": bolt, "hole": hole, "plug": plug}
