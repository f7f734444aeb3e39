"""Physics channels for estimator-mode NeuralActuator, from the rigid-body arm model.

At each measured pose ``q`` (T, n): ``tau_gravity`` (T, n), the joint torque that holds the
arm against gravity [N m] (``Robot.gravity_torques(q)``), and ``jac_x``, ``jac_y``, ``jac_z``
(T, n), the rows of the end-effector site's linear Jacobian [m/rad] (joint j's column is
``(jac_x[:, j], jac_y[:, j], jac_z[:, j])``). An external end-effector force f adds
``J^T f`` to the joint torques, so with these inputs the force head works with the same
quantities as a model-based observer.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from neuract.errors import ConfigError


@functools.lru_cache(maxsize=4)
def arm_model(name: str):
    """The rigid-body arm ``name`` (bundled name or model path), float64, cached."""
    from neuract.robot import load_robot

    return load_robot(name, dtype=torch.float64)


def physics_channels(q: np.ndarray, robot: str, site: str, chunk: int = 4096
                     ) -> dict[str, np.ndarray]:
    """``tau_gravity``, ``jac_x``, ``jac_y``, ``jac_z``, each (T, n), for poses q: (T, n)
    [rad] of the arm ``robot`` (bundled name or model path) with end-effector ``site``."""
    model = arm_model(str(robot))
    q = np.asarray(q, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] != model.n_dof:
        raise ConfigError(f"physics robot {robot!r} has {model.n_dof} joints; q has shape "
                          f"{q.shape}")
    if site not in model.site_names:
        raise ConfigError(f"physics_site={site!r} is not a site of {robot!r}; sites: "
                          f"{list(model.site_names)}")
    g, jac = [], []
    with torch.no_grad():
        for s in range(0, len(q), chunk):
            qt = torch.tensor(q[s:s + chunk])
            g.append(model.gravity_torques(qt).numpy())
            jac.append(model.site_jacobian(qt, site)[..., :3, :].numpy())
    J = np.concatenate(jac) if jac else np.zeros((0, 3, model.n_dof))
    return {"tau_gravity": np.concatenate(g) if g else np.zeros((0, model.n_dof)),
            "jac_x": J[:, 0], "jac_y": J[:, 1], "jac_z": J[:, 2]}


__all__ = ["physics_channels"]
