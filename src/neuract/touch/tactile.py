"""Tactile sensing on fingertip pads: a taxel grid on a box pad, read from MuJoCo.

A pad is one face of a box collision geom. :func:`add_tactile_pad` lays a grid of taxels over
that face and adds MuJoCo's native tactile sensor (``mjSENS_TACTILE``) on it. The sensor reads,
at each taxel, how far a touching geom reaches into a thin skin layer of thickness ``skin`` over
the face (a depth, m) and how fast it slides there (m/s). MuJoCo evaluates the sensor at the
vertices of a mesh given in the frame of the geom it names and takes the mesh's own vertex
coordinates, which the compiler recentres; the taxels therefore live on a mesh geom of their own
(no collisions, no mass, hidden group 4) so that geom frame and mesh frame agree.

:class:`TactileReader` turns the readings into a contact image per pad, in the pad frame (z the
face's outward normal, x and y along the face): the contact forces on the pad geom
(``mj_contactForce``, normal and tangential, summed) are spread over the taxels in proportion to
the depth image, so the image's total normal force is MuJoCo's own; when the sensor sees no
depth (a touching mesh without an octree, a touch between taxels) each contact goes to its
nearest taxel instead. :class:`TactileNoise` is the sensor's imperfection: a per-taxel gain,
additive Gaussian noise and dead taxels, all drawn from a seed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import mujoco
import numpy as np

from neuract.errors import ConfigError

__all__ = ["PAD_FACES", "TactileImage", "TactileNoise", "TactilePad", "TactileReader",
           "add_tactile_pad"]

PAD_FACES = ("+x", "-x", "+y", "-y", "+z", "-z")


def _quat_mat(quat) -> np.ndarray:
    out = np.zeros(9)
    mujoco.mju_quat2Mat(out, np.asarray(quat, dtype=np.float64))
    return out.reshape(3, 3)


def _face_frame(face: str) -> tuple[np.ndarray, int, int, int]:
    """Rotation (columns x, y, z of the pad frame in the geom frame) and the axes of a face."""
    k = "xyz".index(face[1])
    n = np.zeros(3)
    n[k] = 1.0 if face[0] == "+" else -1.0
    ku = (k + 1) % 3
    u = np.zeros(3)
    u[ku] = 1.0
    v = np.cross(n, u)
    return np.column_stack([u, v, n]), k, ku, (k + 2) % 3


@dataclass(frozen=True)
class TactilePad:
    """One taxel grid: ``resolution`` taxels along the pad's x and y over ``half_size``."""

    name: str
    geom: str
    face: str
    resolution: tuple[int, int]
    half_size: tuple[float, float]
    skin: float
    rot: tuple[float, ...]  # pad frame in the pad geom's frame: 3x3, columns x, y, z
    origin: tuple[float, ...]  # face centre in the pad geom's frame

    @property
    def sensor(self) -> str:
        return f"{self.name}_tactile"

    @property
    def grid_geom(self) -> str:
        return f"{self.name}_taxels"

    def taxel_xy(self) -> np.ndarray:
        """Taxel centres in the pad frame, ``(nx, ny, 2)`` (m)."""
        (nx, ny), (hx, hy) = self.resolution, self.half_size
        xs = -hx + (2 * hx / nx) * (np.arange(nx) + 0.5)
        ys = -hy + (2 * hy / ny) * (np.arange(ny) + 0.5)
        return np.stack(np.meshgrid(xs, ys, indexing="ij"), axis=-1)


def _box_geom(model: mujoco.MjModel, name: str) -> int:
    gid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name)
    if gid < 0:
        raise ConfigError(f"tactile pad: no geom named {name!r} in the model")
    if model.geom_type[gid] != mujoco.mjtGeom.mjGEOM_BOX:
        raise ConfigError(f"tactile pad: geom {name!r} is not a box; a pad is one face of a box")
    return gid


def _facing(model: mujoco.MjModel, gid: int, other: str) -> str:
    """The face of box ``gid`` whose outward normal points most toward geom ``other``."""
    oid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, other)
    if oid < 0:
        raise ConfigError(f"tactile pad: no geom named {other!r} to face toward")
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    to = data.geom_xpos[oid] - data.geom_xpos[gid]
    local = data.geom_xmat[gid].reshape(3, 3).T @ to
    return max(PAD_FACES, key=lambda f: float(_face_frame(f)[0][:, 2] @ local))


def add_tactile_pad(spec: mujoco.MjSpec, geom: str, *, face: str | None = None,
                    toward: str | None = None, resolution: tuple[int, int] | None = None,
                    pitch: float = 0.002, skin: float = 0.001,
                    name: str | None = None) -> TactilePad:
    """Lay a taxel grid on ``face`` of box geom ``geom`` (or the face toward geom ``toward``).

    ``resolution`` (taxels along the pad's x and y, at least 2 each) defaults to the face's size
    over ``pitch``. The taxels sit ``skin`` above the face. Returns the pad; read it through a
    :class:`TactileReader` on the compiled model. The spec is compiled once here to resolve the
    geom: add pads before assets that are slow to compile (objects' distance octrees).
    """
    if (face is None) == (toward is None):
        raise ConfigError("tactile pad: give exactly one of face= (one of "
                          f"{', '.join(PAD_FACES)}) or toward= (a geom name)")
    if face is not None and face not in PAD_FACES:
        raise ConfigError(f"tactile pad: face {face!r} unknown; accepted: {', '.join(PAD_FACES)}")
    if not (0 < skin < 0.05):
        raise ConfigError(f"tactile pad: skin {skin!r} m out of range; accepted: 0 < skin < 0.05")
    model = spec.compile()
    gid = _box_geom(model, geom)
    face = face or _facing(model, gid, toward)
    R, k, ku, kv = _face_frame(face)
    size = model.geom_size[gid]
    half = (float(size[ku]), float(size[kv]))
    if resolution is None:
        if not pitch > 0:
            raise ConfigError(f"tactile pad: pitch {pitch!r} m must be > 0")
        resolution = tuple(max(2, round(2 * h / pitch)) for h in half)
    if len(resolution) != 2 or min(resolution) < 2:
        raise ConfigError(f"tactile pad: resolution {resolution!r} needs at least 2x2 taxels")
    name = name or geom
    pad = TactilePad(name=name, geom=geom, face=face, resolution=tuple(int(r) for r in resolution),
                     half_size=half, skin=float(skin), rot=tuple(map(float, R.ravel())),
                     origin=tuple(map(float, R[:, 2] * float(size[k]))))
    # taxel vertices in the pad body's frame
    xy = pad.taxel_xy().reshape(-1, 2)
    local = np.asarray(pad.origin) + xy @ R[:, :2].T + R[:, 2] * skin
    body_pts = model.geom_pos[gid] + local @ _quat_mat(model.geom_quat[gid]).T
    nx, ny = pad.resolution
    idx = np.arange(nx * ny).reshape(nx, ny)
    a, b, c, d = idx[:-1, :-1], idx[:-1, 1:], idx[1:, :-1], idx[1:, 1:]
    faces = np.stack([a, c, b, b, c, d], axis=-1).reshape(-1, 3)
    mesh = spec.add_mesh()
    mesh.name = f"{name}_taxel_grid"
    mesh.uservert = body_pts.ravel().tolist()
    mesh.userface = faces.ravel().tolist()
    mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
    spec.geom(geom).parent.add_geom(name=pad.grid_geom, type=mujoco.mjtGeom.mjGEOM_MESH,
                                    meshname=mesh.name, contype=0, conaffinity=0, group=4,
                                    mass=0, rgba=[0.2, 0.8, 0.2, 0.4])
    spec.add_sensor(name=pad.sensor, type=mujoco.mjtSensor.mjSENS_TACTILE,
                    objtype=mujoco.mjtObj.mjOBJ_MESH, objname=mesh.name,
                    reftype=mujoco.mjtObj.mjOBJ_GEOM, refname=pad.grid_geom)
    return pad


@dataclass(frozen=True)
class TactileImage:
    """One pad's reading, arrays over the taxel grid ``(nx, ny)`` in the pad frame.

    ``normal``: pressing force per taxel (N, into the pad); ``shear``: ``(2, nx, ny)`` force
    along the pad's x and y (N); ``depth``: how far a touching geom reaches into the skin (m);
    ``slip``: sliding speed (m/s).
    """

    normal: np.ndarray
    shear: np.ndarray
    depth: np.ndarray
    slip: np.ndarray

    @property
    def total_normal(self) -> float:
        return float(self.normal.sum())

    def stack(self) -> np.ndarray:
        """The contact image ``(3, nx, ny)``: normal, shear x, shear y."""
        return np.concatenate([self.normal[None], self.shear])


@dataclass(frozen=True)
class TactileNoise:
    """Imperfections: taxel gains ``1 + gain_std * N(0, 1)`` and a ``dead_fraction`` of dead
    taxels (fixed by the seed: the device), plus ``noise_std`` N of Gaussian noise per reading."""

    gain_std: float = 0.05
    noise_std: float = 0.01
    dead_fraction: float = 0.0

    def __post_init__(self):
        for field in ("gain_std", "noise_std"):
            if not getattr(self, field) >= 0:
                raise ConfigError(f"tactile noise: {field} {getattr(self, field)!r} must be >= 0")
        if not 0 <= self.dead_fraction < 1:
            raise ConfigError(f"tactile noise: dead_fraction {self.dead_fraction!r} out of "
                              "range; accepted: 0 <= dead_fraction < 1")


class _Bound:
    """A pad bound to a compiled model: ids, sensor address and the vertex -> taxel order."""

    def __init__(self, model: mujoco.MjModel, pad: TactilePad):
        self.pad = pad
        self.gid = _box_geom(model, pad.geom)
        grid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, pad.grid_geom)
        sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, pad.sensor)
        if grid < 0 or sid < 0:
            raise ConfigError(f"tactile pad {pad.name!r}: the model lacks its taxel geom or "
                              "sensor; build it with add_tactile_pad on this model's spec")
        mid = model.sensor_objid[sid]
        n = pad.resolution[0] * pad.resolution[1]
        if model.mesh_vertnum[mid] != n:
            raise ConfigError(f"tactile pad {pad.name!r}: sensor mesh has "
                              f"{model.mesh_vertnum[mid]} vertices, expected {n}")
        self.adr, self.n = int(model.sensor_adr[sid]), n
        self.R = np.asarray(pad.rot).reshape(3, 3)
        # compiled vertices -> pad-frame xy -> the taxel each one is
        verts = model.mesh_vert[model.mesh_vertadr[mid]:model.mesh_vertadr[mid] + n]
        body = model.geom_pos[grid] + verts @ _quat_mat(model.geom_quat[grid]).T
        geom = (body - model.geom_pos[self.gid]) @ _quat_mat(model.geom_quat[self.gid])
        xy = ((geom - np.asarray(pad.origin)) @ self.R)[:, :2]
        taxels = pad.taxel_xy().reshape(-1, 2)
        self.order = np.argmin(((xy[:, None] - taxels[None]) ** 2).sum(-1), axis=1)
        if len(set(self.order.tolist())) != n:
            raise ConfigError(f"tactile pad {pad.name!r}: taxel vertices do not match the grid")

    def points(self, data: mujoco.MjData) -> np.ndarray:
        """Taxel centres on the face, world frame, ``(nx, ny, 3)``."""
        R = data.geom_xmat[self.gid].reshape(3, 3)
        xy = self.pad.taxel_xy()
        local = np.asarray(self.pad.origin) + xy @ self.R[:, :2].T
        return data.geom_xpos[self.gid] + local @ R.T

    def read(self, model: mujoco.MjModel, data: mujoco.MjData) -> TactileImage:
        pad, n = self.pad, self.n
        raw = data.sensordata[self.adr:self.adr + 3 * n].reshape(3, n)
        shape = pad.resolution
        depth, slip = np.zeros(n), np.zeros(n)
        depth[self.order] = np.abs(raw[0])
        slip[self.order] = np.hypot(raw[1], raw[2])
        Rw = data.geom_xmat[self.gid].reshape(3, 3) @ self.R  # pad axes in the world
        centre = data.geom_xpos[self.gid] + data.geom_xmat[self.gid].reshape(3, 3) @ np.asarray(
            pad.origin)
        force, points = [], []
        f6 = np.zeros(6)
        touching = np.flatnonzero((data.contact.geom[:data.ncon] == self.gid).any(axis=1))
        for i in touching:
            con = data.contact[i]
            mujoco.mj_contactForce(model, data, i, f6)
            on_g2 = con.frame.reshape(3, 3).T @ f6[:3]  # geom1 pushes geom2 along the normal
            on_pad = on_g2 if con.geom2 == self.gid else -on_g2
            fx, fy, fz = Rw.T @ on_pad
            force.append((-fz, fx, fy))
            points.append(((con.pos - centre) @ Rw)[:2])
        img = np.zeros((3, n))
        if force:
            force = np.asarray(force)
            if depth.sum() > 0:
                img += force.sum(0)[:, None] * (depth / depth.sum())[None]
            else:
                taxels = pad.taxel_xy().reshape(-1, 2)
                near = np.argmin(((np.asarray(points)[:, None] - taxels[None]) ** 2).sum(-1), 1)
                for k, f in zip(near, force):
                    img[:, k] += f
        return TactileImage(normal=img[0].reshape(shape), shear=img[1:].reshape(2, *shape),
                            depth=depth.reshape(shape), slip=slip.reshape(shape))


class TactileReader:
    """Reads pads from a compiled model; with ``noise``, each pad is a seeded imperfect device."""

    def __init__(self, model: mujoco.MjModel, pads, *, noise: TactileNoise | None = None,
                 seed: int = 0):
        self.model = model
        self.pads = tuple(pads)
        self._bound = [_Bound(model, p) for p in self.pads]
        self.noise = noise
        self.gain, self.alive = [], []
        for k, p in enumerate(self.pads):
            rng = np.random.default_rng([seed, k, 0])
            gain = 1.0 + (noise.gain_std if noise else 0.0) * rng.standard_normal(p.resolution)
            alive = rng.random(p.resolution) >= (noise.dead_fraction if noise else 0.0)
            self.gain.append(gain)
            self.alive.append(alive)
        self.reset(seed)

    def reset(self, seed: int) -> None:
        """Restart the additive noise stream (the gains and dead taxels stay)."""
        self._rng = np.random.default_rng([seed, 1])

    def taxel_points(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        """Every pad's taxel centres on its face in the world frame, ``(nx, ny, 3)`` (m)."""
        return {b.pad.name: b.points(data) for b in self._bound}

    def read(self, data: mujoco.MjData) -> dict[str, TactileImage]:
        """Every pad's image at ``data``'s current state (after a step or ``mj_forward``)."""
        out = {}
        for b, gain, alive in zip(self._bound, self.gain, self.alive):
            img = b.read(self.model, data)
            if self.noise is not None:
                s = self.noise.noise_std
                normal = (gain * img.normal + s * self._rng.standard_normal(gain.shape)) * alive
                shear = (gain * img.shear + s * self._rng.standard_normal(img.shear.shape)) * alive
                img = replace(img, normal=normal, shear=shear, depth=img.depth * alive,
                              slip=img.slip * alive)
            out[b.pad.name] = img
        return out
