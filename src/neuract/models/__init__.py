"""Whole-arm dynamics models behind one interface (``DynamicsModel``: ``inverse`` and
``forward``): rigid body with identified parameters, Lagrangian network, the Sensors 2025
pipeline, black-box MLP, hybrid (rigid body + learned residual), closed-form two-link arm.
The learned ones are trained by :func:`neuract.fit.inverse_dynamics.fit_inverse_model` (above
this package) and scored by :func:`nmse`."""

from neuract.models.base import MODELS, DynamicsModel
from neuract.models.hybrid import HybridModel
from neuract.models.lagrangian import LagrangianModel
from neuract.models.mlp import MLPModel
from neuract.models.rigid_body import RigidBodyModel, RobotModel
from neuract.models.training import nmse
from neuract.models.two_link import TwoLinkArm, TwoLinkParams, two_link_regressor

__all__ = [
    "MODELS",
    "DynamicsModel",
    "HybridModel",
    "LagrangianModel",
    "MLPModel",
    "RigidBodyModel",
    "RobotModel",
    "TwoLinkArm",
    "TwoLinkParams",
    "nmse",
    "two_link_regressor",
]
