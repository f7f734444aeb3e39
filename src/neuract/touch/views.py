"""What a camera sees of an object, and the occupancy labels the descriptor field learns from.

An object is anything with ``sample(count, seed=...)`` (surface points) and ``contains(points)``
(inside or not): a ``trimesh.Trimesh`` or a shape of :mod:`neuract.touch.training_shapes`.
:func:`sample_surface` and :func:`occupancy` are the only two places that call them.

A single view (:func:`visible`): a depth buffer seen along one direction (orthographic): the
plane across that direction is cut into square cells and, in each cell, only the points within
``depth_tol`` of the cell's nearest point stay; the others lie behind the visible surface. The
surface sample must be dense enough to put a visible point in every cell the object covers
(:func:`partial_cloud`'s default: 20,000 points, about 2 mm apart on a mug, for 4 mm cells);
where a cell holds only points of a face seen edge-on, a few of them stay (as a depth camera's
points at a silhouette).
:func:`partial_cloud` samples the surface densely, keeps the visible points and draws
``n_points`` of them (with replacement when fewer are visible), optionally with sensor noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuract.errors import ConfigError


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2 ** 31 - 1))


def sample_surface(obj: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    """n points on the surface of ``obj`` (n, 3) [m], area-uniform."""
    pts = np.asarray(obj.sample(n, seed=_seed(rng)), dtype=float)
    if pts.shape != (n, 3):
        raise ConfigError(f"the object's sample({n}) gave an array of shape {pts.shape}; "
                          f"accepted: ({n}, 3) surface points")
    return pts


def occupancy(obj: Any, points: np.ndarray) -> np.ndarray:
    """Whether each of ``points`` (M, 3) [m] lies inside ``obj``: (M,) bool."""
    inside = np.asarray(obj.contains(np.asarray(points, dtype=float)), dtype=bool)
    if inside.shape != points.shape[:-1]:
        raise ConfigError(f"the object's contains() gave shape {inside.shape}; accepted: "
                          f"{points.shape[:-1]} (one flag per point)")
    return inside


def random_direction(rng: np.random.Generator) -> np.ndarray:
    """A unit vector, uniform on the sphere."""
    d = rng.normal(size=3)
    return d / np.linalg.norm(d)


def visible(points: np.ndarray, direction: np.ndarray, cell: float = 0.004,
            depth_tol: float | None = None) -> np.ndarray:
    """Mask (N,) of the ``points`` (N, 3) seen from far away along ``direction`` (the unit
    vector from the object towards the camera): per ``cell`` x ``cell`` square of the image
    plane [m], the points within ``depth_tol`` (default: one cell) of the nearest."""
    if not cell > 0:
        raise ConfigError(f"view cell={cell!r}; accepted: a length > 0 [m]")
    d = np.asarray(direction, dtype=float)
    d = d / np.linalg.norm(d)
    a = np.cross(d, [1.0, 0.0, 0.0] if abs(d[0]) < 0.9 else [0.0, 1.0, 0.0])
    a /= np.linalg.norm(a)
    b = np.cross(d, a)
    i, j = (np.floor(points @ e / cell).astype(np.int64) for e in (a, b))
    i, j = i - i.min(), j - j.min()
    depth = points @ d  # larger: nearer the camera
    front = np.full((i.max() + 1, j.max() + 1), -np.inf)
    np.maximum.at(front, (i, j), depth)
    return depth >= front[i, j] - (cell if depth_tol is None else depth_tol)


def partial_cloud(obj: Any, n_points: int, rng: np.random.Generator,
                  direction: np.ndarray | None = None, dense: int = 20000,
                  cell: float = 0.004, noise: float = 0.0) -> np.ndarray:
    """A single-view point cloud of ``obj``: (n_points, 3) [m] (see the module); ``direction``
    towards the camera (default: random); ``noise``: Gaussian sensor noise [m] per axis."""
    surf = sample_surface(obj, dense, rng)
    d = random_direction(rng) if direction is None else direction
    seen = surf[visible(surf, d, cell)]
    idx = rng.choice(len(seen), n_points, replace=len(seen) < n_points)
    cloud = seen[idx]
    return cloud + rng.normal(0.0, noise, cloud.shape) if noise > 0 else cloud


def occupancy_queries(obj: Any, n: int, rng: np.random.Generator, near: float = 0.5,
                      sigma: float = 0.01, pad: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Training queries of ``obj`` and their labels: ``near`` of the ``n`` points are surface
    points moved by N(0, ``sigma``) [m], the rest uniform in the object's bounding box grown by
    ``pad`` of its size on each side: (n, 3) points [m], (n,) float occupancy (1 inside)."""
    k = int(round(near * n))
    surf = sample_surface(obj, max(k, 256), rng)
    lo, hi = surf.min(0), surf.max(0)
    span = hi - lo
    pts = np.concatenate([surf[:k] + rng.normal(0.0, sigma, (k, 3)),
                          rng.uniform(lo - pad * span, hi + pad * span, (n - k, 3))])
    return pts, occupancy(obj, pts).astype(np.float64)


__all__ = ["occupancy", "occupancy_queries", "partial_cloud", "random_direction",
           "sample_surface", "visible"]
