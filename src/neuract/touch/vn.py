"""Vector Neuron layers: networks whose features are 3-vectors and that commute with rotations.

A feature map is a tensor ``x: (..., 3, C)``: ``C`` channels, each a 3-vector stored as a
column (channels last, so that a channel mix is one matrix product over every point). A rotation
``R`` acts on every vector: ``R @ x``. Each layer here satisfies ``layer(R @ x) == R @ layer(x)``
exactly (up to rounding):

* :class:`VNLinear` mixes channels only (a ``C_out x C_in`` matrix), never the 3 coordinates;
* :class:`VNLeakyReLU` is the vector nonlinearity: a learned feature ``q = W x`` and a learned
  direction ``k = U x`` per channel; where ``<q, k> < 0`` the component of ``q`` along ``k`` is
  removed (a half-space clipping whose boundary turns with the input), blended with ``q`` by a
  negative slope;
* :class:`VNMaxPool` picks, per channel, the point whose vector reaches furthest along a learned
  direction; :func:`vn_mean_pool` averages over points;
* :func:`vn_invariant` turns features into rotation-invariant numbers by projecting them on a
  learned equivariant frame (both turn together, so their products do not change).

:func:`knn_edge_features` builds the first layer's input from a point cloud: for each point and
each of its ``k`` nearest neighbours the vectors (neighbour - point, point, neighbour x point),
all of which turn with the cloud (distances, hence neighbours, do not change under a rotation).
A reflection (det -1) flips the cross product: the layers are SO(3)-, not O(3)-equivariant.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

EPS = 1e-8
"""added to squared norms before dividing (a rotation-invariant regulariser)"""


class VNLinear(nn.Module):
    """Channel mixing ``(..., 3, C_in) -> (..., 3, C_out)`` without bias (a bias vector would
    not turn with the input)."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        bound = math.sqrt(3.0 / c_in)  # unit variance out for unit variance in
        self.weight = nn.Parameter(torch.empty(c_out, c_in).uniform_(-bound, bound))

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight)


class VNLeakyReLU(nn.Module):
    """A linear map followed by the vector nonlinearity: ``(..., 3, C_in) -> (..., 3, C_out)``.

    ``q = W x`` and ``k = U x``; the output is ``q`` where ``<q, k> >= 0`` and
    ``q - <q, k> k / |k|^2`` elsewhere, mixed as ``s q + (1 - s) out`` with the negative slope
    ``s``."""

    def __init__(self, c_in: int, c_out: int, negative_slope: float = 0.2) -> None:
        super().__init__()
        self.feature = VNLinear(c_in, c_out)
        self.direction = VNLinear(c_in, c_out)
        self.negative_slope = negative_slope

    def forward(self, x: Tensor) -> Tensor:
        q, k = self.feature(x), self.direction(x)
        dot = (q * k).sum(-2, keepdim=True)
        kk = (k * k).sum(-2, keepdim=True)
        clipped = torch.where(dot >= 0, q, q - dot / (kk + EPS) * k)
        return self.negative_slope * q + (1.0 - self.negative_slope) * clipped


class VNMaxPool(nn.Module):
    """Pool over points ``(..., N, 3, C) -> (..., 3, C)``: per channel, the point whose vector
    has the largest projection on a learned direction ``U x`` (an invariant score)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.direction = VNLinear(channels, channels)

    def forward(self, x: Tensor) -> Tensor:
        score = (x * self.direction(x)).sum(-2)  # (..., N, C)
        idx = score.argmax(dim=-2, keepdim=True).unsqueeze(-2)  # (..., 1, 1, C)
        idx = idx.expand(*idx.shape[:-2], 3, idx.shape[-1])
        return torch.gather(x, -3, idx).squeeze(-3)


def vn_mean_pool(x: Tensor) -> Tensor:
    """Average over points: ``(..., N, 3, C) -> (..., 3, C)``."""
    return x.mean(dim=-3)


def vn_invariant(x: Tensor, frame: Tensor) -> Tensor:
    """Rotation-invariant coordinates of ``x: (..., 3, C)`` in an equivariant ``frame:
    (..., 3, F)`` (F vectors that turn with ``x``): ``(..., C, F)``."""
    return x.transpose(-1, -2) @ frame


def knn_edge_features(points: Tensor, k: int) -> Tensor:
    """Edge vectors of each point's ``k`` nearest neighbours (itself excluded when possible).

    points: (B, N, 3) -> (B, N, k, 3, 3 channels): (neighbour - point, point,
    neighbour x point)."""
    n = points.shape[-2]
    k = max(1, min(k, n - 1)) if n > 1 else 1
    dist = torch.cdist(points, points)  # (B, N, N)
    idx = dist.topk(k + 1 if n > 1 else 1, dim=-1, largest=False).indices
    idx = idx[..., 1:] if n > 1 else idx  # (B, N, k): the nearest is the point itself
    nbr = torch.gather(points.unsqueeze(1).expand(-1, n, -1, -1), 2,
                       idx.unsqueeze(-1).expand(-1, -1, -1, 3))  # (B, N, k, 3)
    centre = points.unsqueeze(2).expand_as(nbr)
    return torch.stack([nbr - centre, centre, torch.linalg.cross(nbr, centre)], dim=-1)


__all__ = ["VNLeakyReLU", "VNLinear", "VNMaxPool", "knn_edge_features", "vn_invariant",
           "vn_mean_pool"]
