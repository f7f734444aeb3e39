"""Analytic training shapes: solids with an exact inside test and area-uniform surface samples.

The descriptor field trains on objects through two calls only (:mod:`neuract.touch.views`):
``shape.sample(n, seed=...)`` (points on the surface) and ``shape.contains(points)`` (inside or
not), the names a ``trimesh.Trimesh`` answers to, so a mesh and a shape of this module are
interchangeable. The shapes here need no mesh library and their occupancy is exact:

* primitives with a signed distance (negative inside): :class:`Cylinder` (a tube when
  ``r_inner > 0``), :class:`Box`, :class:`HalfTorus` (a torus about the y axis cut at a plane
  x = const, a mug's handle);
* :class:`Union` of primitives: its surface is the part of each primitive's surface that no
  other primitive covers, sampled in proportion to area;
* :func:`make_shape`: a random instance of a family (mug, bottle, peg, plug) with its
  canonical grasp pose, lengths in metres, the object standing on z = 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neuract.errors import ConfigError

FAMILIES = ("mug", "bottle", "peg", "plug")


def _disk(rng: np.random.Generator, n: int, r0: float, r1: float) -> np.ndarray:
    """n area-uniform points (x, y) of the annulus r0 <= r <= r1."""
    r = np.sqrt(rng.uniform(r0 ** 2, r1 ** 2, n))
    a = rng.uniform(0, 2 * np.pi, n)
    return np.stack([r * np.cos(a), r * np.sin(a)], -1)


@dataclass
class Cylinder:
    """Solid about the z axis, ``z0 <= z <= z1``, ``r_inner <= rho <= radius``."""

    radius: float
    z0: float
    z1: float
    r_inner: float = 0.0

    def sdf(self, p: np.ndarray) -> np.ndarray:
        rho = np.hypot(p[..., 0], p[..., 1])
        d = np.maximum(rho - self.radius, np.maximum(self.z0 - p[..., 2], p[..., 2] - self.z1))
        return np.maximum(d, self.r_inner - rho) if self.r_inner > 0 else d

    def parts(self) -> list[tuple[float, str]]:
        h, r, ri = self.z1 - self.z0, self.radius, self.r_inner
        cap = np.pi * (r ** 2 - ri ** 2)
        out = [(2 * np.pi * r * h, "side"), (cap, "bottom"), (cap, "top")]
        return out + ([(2 * np.pi * ri * h, "inner")] if ri > 0 else [])

    def sample_part(self, part: str, n: int, rng: np.random.Generator) -> np.ndarray:
        if part in ("side", "inner"):
            r = self.radius if part == "side" else self.r_inner
            a = rng.uniform(0, 2 * np.pi, n)
            return np.stack([r * np.cos(a), r * np.sin(a), rng.uniform(self.z0, self.z1, n)], -1)
        xy = _disk(rng, n, self.r_inner, self.radius)
        z = np.full(n, self.z0 if part == "bottom" else self.z1)
        return np.concatenate([xy, z[:, None]], -1)


@dataclass
class Box:
    """Axis-aligned box of half extents ``half`` centred at ``centre``."""

    half: tuple[float, float, float]
    centre: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def sdf(self, p: np.ndarray) -> np.ndarray:
        return (np.abs(p - np.asarray(self.centre)) - np.asarray(self.half)).max(-1)

    def parts(self) -> list[tuple[float, str]]:
        hx, hy, hz = self.half
        areas = (4 * hy * hz, 4 * hx * hz, 4 * hx * hy)
        return [(areas[a], f"{a}{s}") for a in range(3) for s in "+-"]

    def sample_part(self, part: str, n: int, rng: np.random.Generator) -> np.ndarray:
        half = np.asarray(self.half)
        p = rng.uniform(-half, half, (n, 3))
        axis = int(part[0])
        p[:, axis] = half[axis] if part[1] == "+" else -half[axis]
        return p + np.asarray(self.centre)


@dataclass
class HalfTorus:
    """Torus about the y axis through ``centre`` (major radius ``major``, tube radius
    ``minor``), only its part with x >= ``centre[0]`` (a handle; the cut face is meant to lie
    inside another primitive)."""

    centre: tuple[float, float, float]
    major: float
    minor: float

    def sdf(self, p: np.ndarray) -> np.ndarray:
        d = p - np.asarray(self.centre)
        ring = np.hypot(d[..., 0], d[..., 2]) - self.major
        return np.maximum(np.hypot(ring, d[..., 1]) - self.minor, -d[..., 0])

    def parts(self) -> list[tuple[float, str]]:
        return [(2 * np.pi ** 2 * self.major * self.minor, "surface")]

    def sample_part(self, part: str, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.uniform(-np.pi / 2, np.pi / 2, 4 * n)  # around the ring (x >= 0 half)
        v = rng.uniform(0, 2 * np.pi, 4 * n)  # around the tube; area ~ (R + r cos v)
        keep = rng.uniform(0, self.major + self.minor, 4 * n) < self.major + self.minor * np.cos(v)
        u, v = u[keep][:n], v[keep][:n]
        ring = self.major + self.minor * np.cos(v)
        p = np.stack([ring * np.cos(u), self.minor * np.sin(v), ring * np.sin(u)], -1)
        return p + np.asarray(self.centre)


@dataclass
class Union:
    """A solid made of primitives; ``grasp``: its canonical grasp pose (4, 4), gripper frame
    to object frame (z: approach direction, x: closing direction)."""

    primitives: list
    grasp: np.ndarray = field(default_factory=lambda: np.eye(4))
    family: str = ""
    margin: float = 1e-6
    """a surface point within this distance of another primitive's inside is hidden [m]"""

    def sdf(self, points: np.ndarray) -> np.ndarray:
        return np.min([s.sdf(points) for s in self.primitives], axis=0)

    def contains(self, points: np.ndarray) -> np.ndarray:
        """points: (..., 3) [m] -> (...) bool, strictly inside."""
        return self.sdf(np.asarray(points, dtype=float)) < 0

    def sample(self, count: int, seed: int | None = None) -> np.ndarray:
        """count surface points (count, 3), area-uniform."""
        rng = np.random.default_rng(seed)
        parts = [(a, i, name) for i, s in enumerate(self.primitives) for a, name in s.parts()]
        area = np.array([a for a, _, _ in parts])
        out: list[np.ndarray] = []
        have = 0
        while have < count:
            k = rng.multinomial(2 * (count - have) + 16, area / area.sum())
            for n, (_, i, name) in zip(k, parts, strict=True):
                if n == 0:
                    continue
                p = self.primitives[i].sample_part(name, int(n), rng)
                others = [s.sdf(p) for j, s in enumerate(self.primitives) if j != i]
                if others:
                    p = p[np.min(others, axis=0) >= self.margin]
                out.append(p)
                have += len(p)
        pts = np.concatenate(out)
        return pts[rng.permutation(len(pts))[:count]]


def _grasp(position, approach, closing) -> np.ndarray:
    z = np.asarray(approach, float) / np.linalg.norm(approach)
    x = np.asarray(closing, float)
    x = x - x @ z * z
    x /= np.linalg.norm(x)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([x, np.cross(z, x), z], -1)
    pose[:3, 3] = position
    return pose


def make_shape(family: str, rng: np.random.Generator) -> Union:
    """A random instance of ``family`` (one of :data:`FAMILIES`) with its grasp pose: the mug
    by its rim opposite the handle, the bottle by its neck, the peg by its top, the plug by
    its body, each approached from above."""
    u = rng.uniform
    if family == "mug":
        r, h, w = u(0.035, 0.05), u(0.08, 0.12), u(0.004, 0.007)
        handle = HalfTorus((r - w / 2, 0.0, h / 2), u(0.25, 0.32) * h, u(0.005, 0.008))
        prims = [Cylinder(r, w, h, r - w), Cylinder(r, 0.0, w), handle]
        grasp = _grasp((-(r - w / 2), 0.0, h), (0, 0, -1), (1, 0, 0))
    elif family == "bottle":
        r, h, rn, hn = u(0.03, 0.045), u(0.12, 0.18), u(0.012, 0.018), u(0.03, 0.05)
        prims = [Cylinder(r, 0.0, h), Cylinder(rn, h - 1e-3, h + hn)]
        grasp = _grasp((0.0, 0.0, h + hn - 0.01), (0, 0, -1), (1, 0, 0))
    elif family == "peg":
        r, h = u(0.008, 0.02), u(0.06, 0.12)
        prims = [Cylinder(r, 0.0, h)]
        grasp = _grasp((0.0, 0.0, h - 0.01), (0, 0, -1), (1, 0, 0))
    elif family == "plug":
        hx, hy, hz = u(0.015, 0.025), u(0.01, 0.015), u(0.02, 0.03)
        prong = (0.002, 0.001, u(0.007, 0.01))
        prims = [Box((hx, hy, hz), (0.0, 0.0, 2 * prong[2] + hz))]
        prims += [Box(prong, (s * 0.6 * hx, 0.0, prong[2] + 1e-4)) for s in (-1, 1)]
        grasp = _grasp((0.0, 0.0, 2 * prong[2] + 2 * hz - 0.005), (0, 0, -1), (0, 1, 0))
    else:
        raise ConfigError(f"shape family {family!r} unknown; accepted: {', '.join(FAMILIES)}")
    return Union(prims, grasp, family)


__all__ = ["FAMILIES", "Box", "Cylinder", "HalfTorus", "Union", "make_shape"]
