"""Small spatial-algebra helpers shared by kinematics, dynamics and the regressor.

Conventions used throughout ``neuract.robot``:

- A rigid-body pose maps frame B to frame A as ``x_A = R @ x_B + p`` (``R``: (..., 3, 3),
  ``p``: (..., 3)).
- Spatial motion vectors are ``[omega (3), v (3)]`` and spatial forces ``[n (3), f (3)]``
  (angular part first), referred to the origin of the frame they are expressed in.
- Inertial parameters of one body, ``pi`` (..., 10), in a given frame::

      pi = [m, m*cx, m*cy, m*cz, Ixx, Iyy, Izz, Ixy, Ixz, Iyz]

  with ``m`` [kg], ``c`` the centre of mass [m] in that frame and ``I`` the rotational inertia
  [kg m^2] about the frame's ORIGIN (not about the COM), in that frame's axes. This is the
  vector the regressor multiplies: ``tau = Y @ pi``.
- The 4x4 pseudo-inertia ``J = [[Sigma, h], [h^T, m]]`` with ``Sigma = tr(I)/2 * 1 - I`` is
  positive definite exactly when the parameters are physically consistent (Wensing et al.).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "cross",
    "skew",
    "inertia_from_vec",
    "inertia_to_vec",
    "pi_unpack",
    "pi_pack",
    "pi_from_com",
    "transform_pi",
    "pi_transform_matrix",
    "pseudo_inertia",
    "pi_from_pseudo_inertia",
]


def cross(a: Tensor, b: Tensor) -> Tensor:
    """Cross product over the last dimension (broadcasting): (..., 3) x (..., 3) -> (..., 3)."""
    return torch.linalg.cross(a, b, dim=-1)


def skew(v: Tensor) -> Tensor:
    """Skew-symmetric matrix ``[v]x`` with ``[v]x @ w = v x w``: (..., 3) -> (..., 3, 3)."""
    z = torch.zeros_like(v[..., 0])
    x, y, w = v[..., 0], v[..., 1], v[..., 2]
    return torch.stack(
        [torch.stack([z, -w, y], -1), torch.stack([w, z, -x], -1), torch.stack([-y, x, z], -1)],
        -2,
    )


def inertia_from_vec(iv: Tensor) -> Tensor:
    """[Ixx, Iyy, Izz, Ixy, Ixz, Iyz] (..., 6) -> symmetric (..., 3, 3)."""
    xx, yy, zz, xy, xz, yz = iv.unbind(-1)
    return torch.stack(
        [torch.stack([xx, xy, xz], -1), torch.stack([xy, yy, yz], -1),
         torch.stack([xz, yz, zz], -1)],
        -2,
    )


def inertia_to_vec(I: Tensor) -> Tensor:
    """Symmetric (..., 3, 3) -> [Ixx, Iyy, Izz, Ixy, Ixz, Iyz] (..., 6)."""
    return torch.stack(
        [I[..., 0, 0], I[..., 1, 1], I[..., 2, 2], I[..., 0, 1], I[..., 0, 2], I[..., 1, 2]], -1
    )


def pi_unpack(pi: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """pi (..., 10) -> mass (...,) [kg], first moment h = m c (..., 3) [kg m], I_O (..., 3, 3)."""
    return pi[..., 0], pi[..., 1:4], inertia_from_vec(pi[..., 4:10])


def pi_pack(m: Tensor, h: Tensor, I: Tensor) -> Tensor:
    """Inverse of :func:`pi_unpack` (broadcasts the leading dimensions)."""
    m, h, iv = torch.broadcast_tensors(m[..., None], h, inertia_to_vec(I)[..., :3])
    return torch.cat([m[..., :1], h, inertia_to_vec(I).expand(*h.shape[:-1], 6)], -1)


def _parallel_axis(x: Tensor) -> Tensor:
    """S(x) = |x|^2 1 - x x^T, (..., 3) -> (..., 3, 3)."""
    eye = torch.eye(3, dtype=x.dtype, device=x.device)
    return (x * x).sum(-1)[..., None, None] * eye - x[..., :, None] * x[..., None, :]


def pi_from_com(m: Tensor, c: Tensor, I_com: Tensor) -> Tensor:
    """pi from mass (...,), COM (..., 3) and inertia about the COM (..., 3, 3), same frame."""
    return pi_pack(m, m[..., None] * c, I_com + m[..., None, None] * _parallel_axis(c))


def transform_pi(pi: Tensor, R: Tensor, p: Tensor) -> Tensor:
    """Re-express pi given in frame B in frame A, where ``x_A = R x_B + p``.

    pi: (..., 10); R: (..., 3, 3); p: (..., 3). Linear in pi.
    """
    m, h, I = pi_unpack(pi)
    hr = (R @ h[..., None])[..., 0]
    I_rot = R @ I @ R.transpose(-1, -2)
    eye = torch.eye(3, dtype=pi.dtype, device=pi.device)
    ph = (p * hr).sum(-1)
    shift = (
        m[..., None, None] * _parallel_axis(p)
        + 2.0 * ph[..., None, None] * eye
        - p[..., :, None] * hr[..., None, :]
        - hr[..., :, None] * p[..., None, :]
    )
    return pi_pack(m, m[..., None] * p + hr, I_rot + shift)


def pi_transform_matrix(R: Tensor, p: Tensor) -> Tensor:
    """The (..., 10, 10) matrix T with ``transform_pi(pi, R, p) == T @ pi``."""
    eye = torch.eye(10, dtype=R.dtype, device=R.device)
    batch = R.shape[:-2]
    basis = eye.expand(*batch, 10, 10)
    cols = transform_pi(basis.transpose(-1, -2), R[..., None, :, :], p[..., None, :])
    return cols.transpose(-1, -2)


def pseudo_inertia(pi: Tensor) -> Tensor:
    """pi (..., 10) -> pseudo-inertia J (..., 4, 4)."""
    m, h, I = pi_unpack(pi)
    eye = torch.eye(3, dtype=pi.dtype, device=pi.device)
    sigma = 0.5 * torch.diagonal(I, dim1=-2, dim2=-1).sum(-1)[..., None, None] * eye - I
    top = torch.cat([sigma, h[..., :, None]], -1)
    bottom = torch.cat([h, m[..., None]], -1)[..., None, :]
    return torch.cat([top, bottom], -2)


def pi_from_pseudo_inertia(J: Tensor) -> Tensor:
    """Inverse of :func:`pseudo_inertia`: J (..., 4, 4) -> pi (..., 10)."""
    sigma = J[..., :3, :3]
    eye = torch.eye(3, dtype=J.dtype, device=J.device)
    I = torch.diagonal(sigma, dim1=-2, dim2=-1).sum(-1)[..., None, None] * eye - sigma
    return pi_pack(J[..., 3, 3], J[..., :3, 3], I)
