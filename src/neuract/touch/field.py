"""The descriptor field: an SE(3)-equivariant occupancy network of a (partial) point cloud.

:class:`DescriptorField` (the network of Neural Descriptor Fields, Simeonov et al. 2022, on
Vector Neurons, Deng et al. 2021):

* translation: the cloud is centred on its mean, and query points are taken relative to that
  mean, so moving cloud and queries together changes nothing; both are divided by
  :attr:`DescriptorFieldConfig.scale` so the network sees numbers of order one;
* encoder (rotation-equivariant, pointnet-style): the edge vectors of each point's nearest
  neighbours through a VN layer, averaged over the neighbours, then residual blocks that join
  each point's features with their max-pool over the cloud; a final mean pool gives the latent
  ``z: (3, latent)`` (``latent`` vectors), which turns with the cloud;
* decoder (rotation-invariant): for a query point ``q`` its products with the latent
  (``z q``), its coordinates in a learned frame of the latent and ``|q|^2`` (layer-normalised,
  which speeds up early training), through an MLP of residual blocks conditioned on the
  latent's invariant coordinates in that frame; the output is the occupancy logit of ``q``;
* descriptor of ``q``: the concatenated activations of every decoder layer (input layer and
  each block), a vector that is the same for corresponding points of the cloud turned and
  moved together with the queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neuract.errors import ConfigError
from neuract.touch.vn import (
    VNLeakyReLU,
    VNLinear,
    VNMaxPool,
    knn_edge_features,
    vn_invariant,
    vn_mean_pool,
)


@dataclass
class DescriptorFieldConfig:
    """Architecture of :class:`DescriptorField` (defaults: latent 256 as in NDF, a decoder
    small enough to train on a CPU)."""

    latent: int = 256
    """latent vector channels: the cloud's code is ``latent`` 3-vectors"""
    edge: int = 16
    """vector channels of the first layer (one per neighbour edge: the costliest tensor)"""
    hidden: int = 64
    """encoder vector channels"""
    encoder_blocks: int = 3
    knn: int = 10
    """neighbours of each point in the first layer"""
    decoder_hidden: int = 128
    decoder_blocks: int = 4
    scale: float = 0.1
    """length unit of the network [m]: coordinates are divided by it"""
    negative_slope: float = 0.2

    def validate(self) -> DescriptorFieldConfig:
        for name in ("latent", "edge", "hidden", "knn", "decoder_hidden"):
            if getattr(self, name) < 1:
                raise ConfigError(f"DescriptorFieldConfig.{name}={getattr(self, name)!r}; "
                                  "accepted: an integer >= 1")
        for name in ("encoder_blocks", "decoder_blocks"):
            if getattr(self, name) < 0:
                raise ConfigError(f"DescriptorFieldConfig.{name}={getattr(self, name)!r}; "
                                  "accepted: an integer >= 0")
        if not self.scale > 0:
            raise ConfigError(f"DescriptorFieldConfig.scale={self.scale!r}; accepted: a length "
                              "> 0 [m]")
        if not 0 <= self.negative_slope < 1:
            raise ConfigError(f"DescriptorFieldConfig.negative_slope={self.negative_slope!r}; "
                              "accepted: 0 <= s < 1")
        return self

    @property
    def descriptor_dim(self) -> int:
        """length of one query point's descriptor"""
        return self.decoder_hidden * (self.decoder_blocks + 1)


class Latent(NamedTuple):
    """A cloud's code: ``z: (B, 3, latent)`` in network units (turns with the cloud) and the
    cloud's mean ``centre: (B, 3)`` [m]."""

    z: Tensor
    centre: Tensor


class _Block(nn.Module):
    """Residual MLP block with an additive condition."""

    def __init__(self, width: int, cond: int) -> None:
        super().__init__()
        self.cond = nn.Linear(cond, width)
        self.fc0 = nn.Linear(width, width)
        self.fc1 = nn.Linear(width, width)

    def forward(self, h: Tensor, c: Tensor) -> Tensor:
        h = h + self.cond(c)
        return h + self.fc1(F.relu(self.fc0(F.relu(h))))


class DescriptorField(nn.Module):
    """Equivariant occupancy network and descriptor field (see the module)."""

    def __init__(self, cfg: DescriptorFieldConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = (cfg or DescriptorFieldConfig()).validate()
        s = cfg.negative_slope
        width = [cfg.edge] + [cfg.hidden] * cfg.encoder_blocks
        self.edge = VNLeakyReLU(3, cfg.edge, s)
        self.blocks = nn.ModuleList(VNLeakyReLU(2 * width[i], width[i + 1], s)
                                    for i in range(cfg.encoder_blocks))
        self.pools = nn.ModuleList(VNMaxPool(width[i]) for i in range(cfg.encoder_blocks))
        self.skip = VNLinear(cfg.edge, cfg.hidden) if cfg.encoder_blocks else None
        self.to_latent = VNLinear(width[-1], cfg.latent)
        self.frame = VNLinear(cfg.latent, 3)
        self.fc_in = nn.Linear(cfg.latent + 4, cfg.decoder_hidden)
        self.dec = nn.ModuleList(_Block(cfg.decoder_hidden, 3 * cfg.latent)
                                 for _ in range(cfg.decoder_blocks))
        self.fc_out = nn.Linear(cfg.decoder_hidden, 1)

    def encode(self, cloud: Tensor) -> Latent:
        """cloud: (B, N, 3) or (N, 3) points [m] -> the cloud's :class:`Latent` (batched)."""
        if cloud.ndim == 2:
            cloud = cloud.unsqueeze(0)
        centre = cloud.mean(dim=-2)
        x = (cloud - centre.unsqueeze(-2)) / self.cfg.scale
        f = self.edge(knn_edge_features(x, self.cfg.knn)).mean(dim=-3)  # (B, N, 3, edge)
        for i, (block, pool) in enumerate(zip(self.blocks, self.pools, strict=True)):
            g = pool(f).unsqueeze(-3).expand_as(f)
            f = (self.skip(f) if i == 0 else f) + block(torch.cat([f, g], dim=-1))
        return Latent(vn_mean_pool(self.to_latent(f)), centre)

    def decode(self, latent: Latent, points: Tensor) -> tuple[Tensor, Tensor]:
        """points: (B, M, 3) [m] (or (M, 3), the same for every cloud) -> occupancy logits
        (B, M) and descriptors (B, M, descriptor_dim)."""
        z, centre = latent
        if points.ndim == 2:
            points = points.unsqueeze(0).expand(z.shape[0], -1, -1)
        q = (points - centre.unsqueeze(-2)) / self.cfg.scale
        frame = self.frame(z)  # (B, 3, 3): three vectors that turn with z
        c = vn_invariant(z, frame).flatten(-2)  # (B, 3 latent)
        feats = torch.cat([q @ z, q @ frame, (q * q).sum(-1, keepdim=True)], dim=-1)
        h = self.fc_in(F.layer_norm(feats, feats.shape[-1:]))
        acts = [h]
        c = F.layer_norm(c, c.shape[-1:]).unsqueeze(-2)
        for block in self.dec:
            h = block(h, c)
            acts.append(h)
        return self.fc_out(F.relu(h)).squeeze(-1), torch.cat(acts, dim=-1)

    def forward(self, cloud: Tensor, points: Tensor) -> Tensor:
        """Occupancy logits (B, M) of ``points`` given ``cloud`` (see :meth:`decode`)."""
        return self.decode(self.encode(cloud), points)[0]

    def descriptors(self, cloud: Tensor, points: Tensor) -> Tensor:
        """Descriptors (B, M, descriptor_dim) of ``points`` given ``cloud``."""
        return self.decode(self.encode(cloud), points)[1]


__all__ = ["DescriptorField", "DescriptorFieldConfig", "Latent"]
