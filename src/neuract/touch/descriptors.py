"""Grasp transfer by descriptor matching over SE(3) (Neural Descriptor Fields' pose search).

One demonstration per object family: a gripper pose on a demo cloud. :func:`record_demo` draws
``n_query`` query points around the gripper (N(0, ``query_sigma``) per axis, in the gripper
frame) and stores their descriptors on the demo cloud. On a new cloud, :func:`match_pose`
searches the gripper pose whose query points have the closest descriptors: ``starts`` starts
(given poses, else a uniformly random rotation with the translation at a random cloud point),
each start ``(R0, t0)`` moved to the rotation ``R0 exp(w)`` and the translation
``t0 + scale * R0 d``, with ``w`` and ``d`` optimised by Adam (``lr``, ``iters`` steps) on the
mean absolute descriptor difference; the best pose of every start over the steps is kept and
the best of all is returned with its loss. ``w`` and ``d`` live in the start's own frame, so
the search itself is equivariant: moving the cloud and the starts by ``A`` moves every result
by ``A``. The translation is optimised in the network's length unit
(:attr:`DescriptorFieldConfig.scale`), so ``lr`` means a like step for rotation [rad] and
translation [scale].

Poses are (4, 4) homogeneous transforms from the gripper frame to the cloud's frame [m]; if a
cloud is the demo cloud moved by ``A``, the matched pose is ``A @ demo.pose`` (exactly so
for a cloud that is the demo cloud's points moved, since the field is equivariant).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from neuract.errors import ConfigError
from neuract.touch.field import DescriptorField, Latent


@dataclass
class MatchConfig:
    """Descriptor matching (defaults: NDF's)."""

    n_query: int = 500
    query_sigma: float = 0.025
    """spread of the query points around the gripper [m]"""
    starts: int = 10
    iters: int = 500
    lr: float = 1e-2
    seed: int = 0

    def validate(self) -> MatchConfig:
        for name in ("n_query", "starts", "iters"):
            if getattr(self, name) < 1:
                raise ConfigError(f"MatchConfig.{name}={getattr(self, name)!r}; accepted: an "
                                  "integer >= 1")
        for name in ("query_sigma", "lr"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"MatchConfig.{name}={getattr(self, name)!r}; accepted: > 0")
        return self


@dataclass
class GraspDemo:
    """One demonstration: the gripper ``pose`` (4, 4) on the demo cloud, the ``query`` points
    (M, 3) in the gripper frame [m] and their descriptors ``target`` (M, D) on that cloud."""

    pose: np.ndarray
    query: np.ndarray
    target: np.ndarray
    family: str = ""


@dataclass
class PoseMatch:
    """The result of :func:`match_pose`: the best ``pose`` (4, 4) and its ``loss`` (mean
    absolute descriptor difference), every start's best pose ``poses`` (S, 4, 4) and loss
    ``losses`` (S,)."""

    pose: np.ndarray
    loss: float
    poses: np.ndarray
    losses: np.ndarray


def so3_exp(w: Tensor) -> Tensor:
    """Rotation matrices (..., 3, 3) of axis-angle vectors ``w: (..., 3)`` [rad]."""
    zero = torch.zeros_like(w[..., 0])
    skew = torch.stack([zero, -w[..., 2], w[..., 1], w[..., 2], zero, -w[..., 0],
                        -w[..., 1], w[..., 0], zero], -1).reshape(*w.shape[:-1], 3, 3)
    return torch.linalg.matrix_exp(skew)


def random_rotations(n: int, rng: np.random.Generator) -> np.ndarray:
    """n rotation matrices (n, 3, 3), uniform on SO(3) (from unit quaternions)."""
    q = rng.normal(size=(n, 4))
    w, x, y, z = (q / np.linalg.norm(q, axis=-1, keepdims=True)).T
    return np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                     2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                     2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
                    -1).reshape(n, 3, 3)


def pose_error(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Distance [m] between the origins of poses ``a`` and ``b`` (4, 4) and the angle [deg]
    of the rotation between them."""
    rel = a[:3, :3].T @ b[:3, :3]
    cos = np.clip((np.trace(rel) - 1) / 2, -1.0, 1.0)
    return float(np.linalg.norm(a[:3, 3] - b[:3, 3])), float(np.degrees(np.arccos(cos)))


def _tensor(x, field: DescriptorField) -> Tensor:
    p = next(field.parameters())
    return torch.as_tensor(np.asarray(x), dtype=p.dtype, device=p.device)


def _check_cloud(cloud: np.ndarray) -> np.ndarray:
    cloud = np.asarray(cloud, dtype=float)
    if cloud.ndim != 2 or cloud.shape[1] != 3 or len(cloud) < 2:
        raise ConfigError(f"point cloud of shape {cloud.shape}; accepted: (N, 3), N >= 2")
    if not np.isfinite(cloud).all():
        raise ConfigError("point cloud holds NaN or inf; accepted: finite coordinates [m]")
    return cloud


@torch.no_grad()
def record_demo(field: DescriptorField, cloud: np.ndarray, pose: np.ndarray,
                cfg: MatchConfig | None = None, family: str = "") -> GraspDemo:
    """The demonstration of gripper ``pose`` (4, 4) on ``cloud`` (N, 3) [m] (see the module)."""
    cfg = (cfg or MatchConfig()).validate()
    cloud, pose = _check_cloud(cloud), np.asarray(pose, dtype=float)
    if pose.shape != (4, 4):
        raise ConfigError(f"gripper pose of shape {pose.shape}; accepted: (4, 4)")
    query = np.random.default_rng(cfg.seed).normal(0.0, cfg.query_sigma, (cfg.n_query, 3))
    world = query @ pose[:3, :3].T + pose[:3, 3]
    target = field.descriptors(_tensor(cloud, field), _tensor(world, field))[0]
    return GraspDemo(pose, query, target.cpu().numpy(), family)


@torch.no_grad()
def pose_loss(field: DescriptorField, demo: GraspDemo, cloud: np.ndarray,
              poses: np.ndarray) -> np.ndarray:
    """The matching loss of gripper ``poses`` (S, 4, 4) on ``cloud`` (N, 3) [m]: the mean
    absolute difference between ``demo``'s descriptors and those of its query points placed
    by each pose, (S,)."""
    cloud, poses = _check_cloud(cloud), _tensor(np.asarray(poses, dtype=float), field)
    lat = field.encode(_tensor(cloud, field))
    s = poses.shape[0]
    world = _tensor(demo.query, field) @ poses[:, :3, :3].transpose(-1, -2)
    desc = field.decode(Latent(lat.z.expand(s, -1, -1), lat.centre.expand(s, -1)),
                        world + poses[:, None, :3, 3])[1]
    return (desc - _tensor(demo.target, field)).abs().mean(dim=(-1, -2)).cpu().numpy()


def match_pose(field: DescriptorField, demo: GraspDemo, cloud: np.ndarray,
               cfg: MatchConfig | None = None, init: np.ndarray | None = None) -> PoseMatch:
    """The gripper pose on ``cloud`` (N, 3) [m] whose query points' descriptors best match
    ``demo``'s (see the module); ``init``: start poses (K, 4, 4), K <= ``starts``, used as
    the first K starts."""
    cfg = (cfg or MatchConfig()).validate()
    cloud = _check_cloud(cloud)
    rng = np.random.default_rng(cfg.seed)
    s = cfg.starts
    starts = np.tile(np.eye(4), (s, 1, 1))
    starts[:, :3, :3] = random_rotations(s, rng)
    starts[:, :3, 3] = cloud[rng.choice(len(cloud), s)]
    if init is not None:
        init = np.asarray(init, dtype=float)
        if init.ndim != 3 or init.shape[1:] != (4, 4) or len(init) > s:
            raise ConfigError(f"start poses of shape {init.shape}; accepted: (K, 4, 4), "
                              f"K <= starts={s}")
        starts[:len(init)] = init
    rot0, t0 = _tensor(starts[:, :3, :3], field), _tensor(starts[:, :3, 3], field)
    query, target = _tensor(demo.query, field), _tensor(demo.target, field)
    with torch.no_grad():
        lat = field.encode(_tensor(cloud, field))
    lat = Latent(lat.z.expand(s, -1, -1), lat.centre.expand(s, -1))
    w = torch.zeros_like(t0, requires_grad=True)
    d = torch.zeros_like(t0, requires_grad=True)
    opt = torch.optim.Adam([w, d], lr=cfg.lr)
    scale = field.cfg.scale
    best = torch.full((s,), float("inf"), dtype=t0.dtype)
    best_rot, best_t = rot0.clone(), t0.clone()
    for i in range(cfg.iters + 1):  # iters updates, each evaluated
        rot = rot0 @ so3_exp(w)
        t = t0 + scale * (rot0 @ d.unsqueeze(-1)).squeeze(-1)
        desc = field.decode(lat, query @ rot.transpose(-1, -2) + t.unsqueeze(-2))[1]
        loss = (desc - target).abs().mean(dim=(-1, -2))  # (S,)
        with torch.no_grad():
            better = loss < best
            best = torch.where(better, loss, best)
            best_rot[better], best_t[better] = rot[better], t[better]
        if i == cfg.iters:
            break
        w.grad, d.grad = torch.autograd.grad(loss.sum(), [w, d])
        opt.step()
    poses = np.tile(np.eye(4), (s, 1, 1))
    poses[:, :3, :3] = best_rot.detach().cpu().numpy()
    poses[:, :3, 3] = best_t.detach().cpu().numpy()
    losses = best.cpu().numpy()
    i = int(np.argmin(losses))
    return PoseMatch(poses[i], float(losses[i]), poses, losses)


def transfer_grasp(field: DescriptorField, demos: Mapping[str, GraspDemo], family: str,
                   cloud: np.ndarray, cfg: MatchConfig | None = None) -> PoseMatch:
    """The grasp of ``family``'s demonstration transferred to ``cloud`` (:func:`match_pose`)."""
    if family not in demos:
        raise ConfigError(f"no grasp demonstration for family {family!r}; demonstrated: "
                          f"{', '.join(sorted(demos)) or 'none'}")
    return match_pose(field, demos[family], cloud, cfg)


__all__ = ["GraspDemo", "MatchConfig", "PoseMatch", "match_pose", "pose_error", "pose_loss",
           "random_rotations", "record_demo", "so3_exp", "transfer_grasp"]
