"""Load third-party MJCF/URDF files whose mesh files are not available.

Reference descriptions (e.g. ``../shared/robots``) ship without their meshes. For rigid-body
dynamics only the kinematic tree and the inertials matter, so these helpers parse the file with
MuJoCo's own parser (``mujoco.MjSpec``), delete every mesh geom and mesh asset, and compile.
A body whose inertia MuJoCo would have inferred from a mesh geom (no explicit ``<inertial>``)
would silently change, so such bodies are reported instead of compiled wrongly.
"""

from __future__ import annotations

from pathlib import Path

import mujoco

from neuract.errors import RobotModelError

__all__ = ["reference_spec", "load_reference"]


def reference_spec(path: str | Path) -> mujoco.MjSpec:
    """Parse ``path`` (MJCF ``.xml`` or ``.urdf``) and drop mesh geoms and mesh assets.

    Raises RobotModelError if the file cannot be parsed, or if a body without an explicit
    inertial loses a mesh geom (its mass would then be wrong rather than missing).
    """
    path = Path(path)
    if not path.is_file():
        raise RobotModelError(f"robot description {path} does not exist")
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except Exception as exc:  # mujoco raises a plain ValueError with the parser message
        raise RobotModelError(f"cannot parse robot description {path}: {exc}") from exc
    inferred: list[str] = []
    for geom in list(spec.geoms):
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            body = geom.parent
            if body.name != "world" and not body.explicitinertial:
                inferred.append(body.name)
            spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    if inferred:
        raise RobotModelError(
            f"{path}: bodies {sorted(set(inferred))} take their inertia from mesh geoms that are "
            "not available; give them an explicit <inertial>"
        )
    return spec


def load_reference(path: str | Path) -> mujoco.MjModel:
    """Compiled ``mujoco.MjModel`` of ``path`` without its meshes (see ``reference_spec``)."""
    spec = reference_spec(path)
    try:
        return spec.compile()
    except Exception as exc:
        raise RobotModelError(f"cannot compile robot description {path}: {exc}") from exc
