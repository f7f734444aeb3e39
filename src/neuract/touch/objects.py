"""Procedurally generated objects to grasp: families, instances, splits, and MuJoCo loading.

A *family* (``mug``, ``bottle`` with a lid, ``peg``, ``bolt``, ``hole`` block, ``plug``) is a
parameterised shape (:mod:`neuract.touch.shapes`); an *instance* is one set of its parameters
(:class:`ObjectSpec`), drawn from the family's ranges by a seeded generator.
:func:`object_split` gives, per seed, training instances and held-out instances of every family
but one, and instances of that held-out family (``bolt`` by default), all disjoint.
:func:`make_object` builds an instance's watertight meshes and convex pieces;
:func:`object_from_mesh` makes an object of any watertight mesh (decomposed by CoACD, or its
convex hull); :func:`add_object` puts an object into an ``MjSpec`` scene, one mesh geom per
convex piece, and refuses an object wider than the gripper's opening.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import trimesh

from neuract.errors import ConfigError, SchemaError
from neuract.touch.shapes import BUILDERS, Part

__all__ = ["FAMILIES", "HELD_OUT_FAMILY", "ObjectSpec", "ObjectSplit", "TouchObject",
           "add_object", "add_table", "make_object", "object_from_mesh", "object_spec",
           "object_split", "sample_spec"]

# family -> parameter -> (low, high) in metres; instances are drawn uniformly in these ranges
FAMILIES: dict[str, dict[str, tuple[float, float]]] = {
    "mug": {"radius": (0.028, 0.036), "height": (0.07, 0.10), "wall": (0.003, 0.005),
            "handle_radius": (0.018, 0.026), "handle_thickness": (0.004, 0.007)},
    "bottle": {"radius": (0.026, 0.034), "height": (0.12, 0.18), "neck_radius": (0.011, 0.015),
               "neck_height": (0.015, 0.025), "shoulder_height": (0.02, 0.035),
               "lid_height": (0.012, 0.022), "lid_wall": (0.002, 0.004)},
    "peg": {"radius": (0.006, 0.012), "length": (0.05, 0.09), "chamfer": (0.0005, 0.002)},
    "bolt": {"head_flats": (0.016, 0.026), "head_height": (0.006, 0.010),
             "shaft_radius": (0.004, 0.007), "shaft_length": (0.03, 0.06)},
    "hole": {"size": (0.06, 0.08), "height": (0.03, 0.045), "hole_radius": (0.0075, 0.0135),
             "depth": (0.02, 0.028)},
    "plug": {"width": (0.02, 0.034), "thickness": (0.012, 0.02), "height": (0.025, 0.04),
             "prong_length": (0.01, 0.018), "prong_spacing": (0.010, 0.014)},
}
HELD_OUT_FAMILY = "bolt"
FIXTURES = {"hole"}  # fixed to the world, never grasped

_CONSTRAINTS = {  # family -> [(holds(params), what it requires)]
    "mug": [(lambda p: p["wall"] < p["radius"] - 0.005, "wall < radius - 0.005"),
            (lambda p: 2 * (p["handle_radius"] + p["handle_thickness"]) < p["height"],
             "2 (handle_radius + handle_thickness) < height")],
    "bottle": [(lambda p: p["neck_radius"] < p["radius"], "neck_radius < radius"),
               (lambda p: p["neck_height"] + p["shoulder_height"] < p["height"] - 0.01,
                "neck_height + shoulder_height < height - 0.01")],
    "peg": [(lambda p: p["chamfer"] < p["radius"] / 2, "chamfer < radius / 2")],
    "bolt": [(lambda p: p["shaft_radius"] < p["head_flats"] / 2, "shaft_radius < head_flats / 2")],
    "hole": [(lambda p: p["hole_radius"] < p["size"] / 2 - 0.005, "hole_radius < size/2 - 0.005"),
             (lambda p: p["depth"] < p["height"] - 0.003, "depth < height - 0.003")],
    "plug": [(lambda p: p["prong_spacing"] + 0.002 < p["width"], "prong_spacing + 0.002 < width")],
}

_GRASP = {  # the width the gripper spans at the family's intended grasp
    "mug": lambda p: 2 * p["radius"], "bottle": lambda p: 2 * (p["neck_radius"] + p["lid_wall"]),
    "peg": lambda p: 2 * p["radius"], "bolt": lambda p: 2 * p["shaft_radius"],
    "hole": lambda p: None, "plug": lambda p: p["thickness"],
}


def _family(name: str) -> dict[str, tuple[float, float]]:
    if name not in FAMILIES:
        raise ConfigError(f"object family {name!r} unknown; accepted: {', '.join(FAMILIES)}")
    return FAMILIES[name]


@dataclass(frozen=True)
class ObjectSpec:
    """One instance: family, parameters (sorted name/value pairs, m) and a name."""

    family: str
    params: tuple[tuple[str, float], ...]
    name: str

    @property
    def values(self) -> dict[str, float]:
        return dict(self.params)


def object_spec(family: str, params: dict[str, float] | None = None,
                name: str | None = None) -> ObjectSpec:
    """An instance of ``family``; parameters not given take the middle of their range."""
    ranges = _family(family)
    params = dict(params or {})
    unknown = sorted(set(params) - set(ranges))
    if unknown:
        raise ConfigError(f"object family {family!r}: unknown parameters {unknown}; "
                          f"accepted: {', '.join(ranges)}")
    full = {k: float(params.get(k, (lo + hi) / 2)) for k, (lo, hi) in ranges.items()}
    bad = [k for k, v in full.items() if not (np.isfinite(v) and v > 0)]
    if bad:
        raise ConfigError(f"object family {family!r}: parameters {bad} must be finite and > 0 "
                          f"(m); got {[full[k] for k in bad]}")
    for holds, what in _CONSTRAINTS[family]:
        if not holds(full):
            raise ConfigError(f"object family {family!r}: parameters {full} break {what}")
    return ObjectSpec(family, tuple(sorted(full.items())), name or family)


def sample_spec(family: str, rng: np.random.Generator, name: str | None = None) -> ObjectSpec:
    """A random instance of ``family`` (redrawn until it meets the family's constraints)."""
    ranges = _family(family)
    for _ in range(100):
        p = {k: float(rng.uniform(lo, hi)) for k, (lo, hi) in ranges.items()}
        if all(holds(p) for holds, _ in _CONSTRAINTS[family]):
            return object_spec(family, p, name)
    raise ConfigError(f"object family {family!r}: no draw met its constraints")  # pragma: no cover


@dataclass(frozen=True)
class ObjectSplit:
    train: tuple[ObjectSpec, ...]
    heldout: tuple[ObjectSpec, ...]  # new instances of the training families
    heldout_family: tuple[ObjectSpec, ...]  # instances of a family never trained on


def object_split(seed: int = 0, n_train: int = 8, n_heldout: int = 4,
                 heldout_family: str = HELD_OUT_FAMILY,
                 families: tuple[str, ...] | None = None) -> ObjectSplit:
    """Per family ``n_train`` training and ``n_heldout`` held-out instances, seeded; the held-out
    family gets ``n_heldout`` instances and none for training."""
    families = tuple(families or FAMILIES)
    for f in (*families, heldout_family):
        _family(f)
    if heldout_family not in families:
        raise ConfigError(f"object split: held-out family {heldout_family!r} is not among "
                          f"the families {list(families)}")
    if n_train < 1 or n_heldout < 1:
        raise ConfigError(f"object split: n_train {n_train} and n_heldout {n_heldout} must "
                          "be >= 1")
    train, held, fam = [], [], []
    for f in families:
        rng = np.random.default_rng([seed, zlib.crc32(f.encode())])
        if f == heldout_family:
            fam += [sample_spec(f, rng, f"{f}_{k:03d}") for k in range(n_heldout)]
            continue
        specs = [sample_spec(f, rng, f"{f}_{k:03d}") for k in range(n_train + n_heldout)]
        train += specs[:n_train]
        held += specs[n_train:]
    return ObjectSplit(tuple(train), tuple(held), tuple(fam))


@dataclass
class TouchObject:
    """An object ready for a scene: its parts (meshes and convex pieces, object frame)."""

    name: str
    family: str
    parts: list[Part]
    grasp_width: float | None  # None: a fixture, not grasped
    spec: ObjectSpec | None = None

    @property
    def mesh(self) -> trimesh.Trimesh:
        """All parts as one mesh in the object frame."""
        return trimesh.util.concatenate([p.mesh.copy().apply_translation(p.offset)
                                         for p in self.parts])


def make_object(spec: ObjectSpec) -> TouchObject:
    """Build an instance's meshes and convex pieces."""
    p = spec.values
    parts = BUILDERS[spec.family](**p)
    return TouchObject(spec.name, spec.family, parts, _GRASP[spec.family](p), spec)


def object_from_mesh(mesh: trimesh.Trimesh | str | Path, *, name: str,
                     decompose: str = "coacd", threshold: float = 0.05,
                     grasp_width: float | None = None) -> TouchObject:
    """An object of a watertight mesh (m, z up), its pieces by ``decompose``: ``"coacd"``
    (approximate convex decomposition, ``threshold`` its concavity) or ``"hull"``."""
    where = f"mesh {name!r}"
    if not isinstance(mesh, trimesh.Trimesh):
        where = f"mesh file {str(mesh)!r}"
        try:
            mesh = trimesh.load_mesh(str(mesh), force="mesh")
        except (OSError, ValueError) as e:
            raise SchemaError(f"{where}: cannot be read as a mesh ({e})") from None
    if len(mesh.faces) == 0 or not mesh.is_watertight:
        raise SchemaError(f"{where}: not watertight ({len(mesh.faces)} faces); an object "
                          "needs a closed surface")
    if decompose == "hull":
        pieces = [mesh.convex_hull]
    elif decompose == "coacd":
        import coacd

        coacd.set_log_level("error")
        out = coacd.run_coacd(coacd.Mesh(mesh.vertices, mesh.faces), threshold=threshold,
                              preprocess_resolution=30, resolution=500, seed=0)
        pieces = [trimesh.Trimesh(v, f).convex_hull for v, f in out]
    else:
        raise ConfigError(f"object {name!r}: decompose {decompose!r} unknown; accepted: "
                          "coacd, hull")
    return TouchObject(name, "custom", [Part("body", mesh, pieces)], grasp_width)


def add_table(spec: mujoco.MjSpec, *, height: float = 0.0, size=(0.4, 0.4),
              name: str = "table") -> str:
    """A static table (a 2 cm box) whose top is at ``height``."""
    spec.worldbody.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_BOX,
                            size=[size[0], size[1], 0.01], pos=[0, 0, height - 0.01],
                            rgba=[0.6, 0.5, 0.4, 1], contype=3, conaffinity=3)
    return name


def add_object(spec: mujoco.MjSpec, obj: TouchObject, *, name: str | None = None,
               pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), free: bool | None = None,
               opening: float | None = None, density: float = 500.0,
               friction=(1.0, 0.005, 0.0001), lid_friction: float = 0.02,
               tactile: bool = True, octree_depth: int = 4, visual: bool = True) -> str:
    """Add ``obj`` as body ``name`` (default its own) at ``pos``/``quat`` (its base frame).

    ``free``: a free joint (default: all but fixtures); ``opening``: the gripper's opening (m),
    an object whose graspable width exceeds it is refused; ``tactile``: give the pieces the
    distance octree MuJoCo's tactile sensor needs (``octree_depth`` levels: each level costs
    about eight times the compile time of the last; 4 resolves a piece to 1/16 of its size);
    a hinged part (a lid) turns about its axis against ``lid_friction`` (N m).
    """
    name = name or obj.name
    if not 1 <= octree_depth <= 6:
        raise ConfigError(f"object {name!r}: octree_depth {octree_depth!r} out of range; "
                          "accepted: 1..6")
    if opening is not None and obj.grasp_width is not None and obj.grasp_width > opening:
        raise ConfigError(f"object {name!r}: graspable width {obj.grasp_width:.4f} m is beyond "
                          f"the gripper opening {opening:.4f} m")
    if name in {b.name for b in spec.bodies}:
        raise ConfigError(f"object {name!r}: the scene already has a body of that name")
    free = obj.family not in FIXTURES if free is None else free
    root = spec.worldbody.add_body(name=name, pos=list(pos), quat=list(quat))
    if free:
        root.add_freejoint(name=f"{name}_free")
    for part in obj.parts:
        body = root
        if part.name != "body":
            body = root.add_body(name=f"{name}_{part.name}", pos=list(part.offset))
            spec.add_exclude(bodyname1=root.name, bodyname2=body.name)
            if part.hinge:
                body.add_joint(name=f"{name}_{part.name}", type=mujoco.mjtJoint.mjJNT_HINGE,
                               axis=[0, 0, 1], frictionloss=lid_friction, damping=1e-3,
                               armature=5e-4, solref_friction=[0.004, 1.0])
        meshes = [(f"{name}_{part.name}_{i}", m, True) for i, m in enumerate(part.pieces)]
        if visual:
            meshes.append((f"{name}_{part.name}_visual", part.mesh, False))
        for mname, m, collide in meshes:
            asset = spec.add_mesh()
            asset.name = mname
            asset.uservert = np.asarray(m.vertices).ravel().tolist()
            asset.userface = np.asarray(m.faces).ravel().tolist()
            if tactile and collide:
                asset.needsdf = True
                asset.octree_maxdepth = int(octree_depth)
            if collide:
                body.add_geom(name=mname, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=mname,
                              density=density, friction=list(friction), contype=3,
                              conaffinity=3, group=3, rgba=[0.8, 0.4, 0.2, 0.3])
            else:
                body.add_geom(name=mname, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=mname,
                              contype=0, conaffinity=0, group=1, mass=0,
                              rgba=[0.85, 0.85, 0.9, 1])
    return name
