"""Physical parameters stored unconstrained, so gradient steps keep them physical.

``Param(0.1, lo=0.0)`` is positive (log-parametrised); ``Param(0.0, lo=-0.2, hi=0.2)`` is kept
inside the interval (scaled sigmoid); ``Param(1.0)`` is free. ``param()`` returns the value.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from neuract.errors import ConfigError

_CACHE: dict[int, Tensor] | None = None


@contextlib.contextmanager
def cached_params() -> Iterator[None]:
    """Within this block every :class:`Param` computes its value once (a rollout calls the
    same parameters thousands of times; the cached tensor stays in the autograd graph)."""
    global _CACHE
    outer = _CACHE
    _CACHE = {} if outer is None else outer
    try:
        yield
    finally:
        _CACHE = outer


class Param(nn.Module):
    """A scalar (or shaped) physical parameter with optional bounds.

    value: initial value in SI units; lo, hi: bounds (None = unbounded); fixed: exclude from
    fitting (stored as a buffer, not a Parameter).
    """

    def __init__(
        self,
        value: float | Tensor,
        lo: float | None = None,
        hi: float | None = None,
        fixed: bool = False,
        shape: tuple[int, ...] = (),
    ) -> None:
        super().__init__()
        self.lo, self.hi = lo, hi
        v = torch.as_tensor(value, dtype=torch.get_default_dtype())
        if shape:
            v = v.expand(shape).clone()
        if not torch.isfinite(v).all():
            raise ConfigError(f"parameter initial value must be finite, got {value}")
        if lo is not None and hi is not None and not lo < hi:
            raise ConfigError(f"parameter bounds must satisfy lo < hi, got lo={lo}, hi={hi}")
        raw = self._inverse(v)
        if fixed:
            self.register_buffer("raw", raw)
        else:
            self.raw = nn.Parameter(raw)

    def _inverse(self, v: Tensor) -> Tensor:
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None:
            frac = ((v - lo) / (hi - lo)).clamp(1e-6, 1 - 1e-6)
            return torch.log(frac) - torch.log1p(-frac)
        if lo is not None:
            return torch.log((v - lo).clamp_min(1e-12))
        if hi is not None:
            return torch.log((hi - v).clamp_min(1e-12))
        return v.clone()

    def forward(self) -> Tensor:
        if _CACHE is not None:
            v = _CACHE.get(id(self))
            if v is None:
                v = _CACHE[id(self)] = self._value()
            return v
        return self._value()

    def _value(self) -> Tensor:
        lo, hi, raw = self.lo, self.hi, self.raw
        if lo is not None and hi is not None:
            return lo + (hi - lo) * torch.sigmoid(raw)
        if lo is not None:
            return lo + torch.exp(raw)
        if hi is not None:
            return hi - torch.exp(raw)
        return raw

    @torch.no_grad()
    def set(self, value: float | Tensor) -> None:
        """Overwrite the value (SI units), e.g. to start a fit from a published estimate."""
        v = torch.as_tensor(value, dtype=self.raw.dtype).expand_as(self.raw)
        self.raw.copy_(self._inverse(v))

    def extra_repr(self) -> str:
        with torch.no_grad():
            v = self()
        s = f"{v.item():.6g}" if v.numel() == 1 else f"shape={tuple(v.shape)}"
        return f"{s}, lo={self.lo}, hi={self.hi}"


def scalar_params(module: nn.Module) -> dict[str, float]:
    """Every scalar :class:`Param` under ``module`` by dotted name, as floats."""
    out: dict[str, float] = {}
    for name, sub in module.named_modules():
        if isinstance(sub, Param):
            with torch.no_grad():
                v = sub()
            if v.numel() == 1:
                out[name] = float(v)
    return out


def softclip(x: Tensor, bound: Tensor) -> Tensor:
    """Smooth version of ``clamp(x, -bound, bound)``: ``bound * tanh(x / bound)``.

    |softclip(x, b)| <= min(|x|, b) for b > 0, so a smooth friction never exceeds the torque
    that would stop the joint, and the gradient w.r.t. both x and b is non-zero everywhere.
    """
    b = bound.clamp_min(1e-9) if isinstance(bound, Tensor) else max(bound, 1e-9)
    return b * torch.tanh(x / b)


def hardclip(x: Tensor, bound: Tensor) -> Tensor:
    """``clamp(x, -bound, bound)`` with a tensor bound >= 0."""
    return torch.minimum(torch.maximum(x, -bound), bound)


def smooth_abs(x: Tensor, eps: float) -> Tensor:
    """sqrt(x^2 + eps^2) - eps: |x| with a finite second derivative at 0."""
    return torch.sqrt(x * x + eps * eps) - eps


LOG2 = math.log(2.0)


def option(prefix: str, name: str) -> str:
    """How a config field reads in an error: ``train.`` + ``lr_net`` -> ``train.lr_net``; a
    command-line prefix (``--train.``) writes the field as the option (``--train.lr-net``)."""
    return prefix + (name.replace("_", "-") if prefix.startswith("--") else name)


def refuse(prefix: str, name: str, value: object, accepted: str) -> None:
    """Raise :class:`ConfigError` naming the option (see :func:`option`), the value given and
    what is accepted, on one line."""
    if isinstance(value, tuple):
        value = " ".join(repr(v) for v in value) if value else "(none)"
    else:
        value = repr(value)
    raise ConfigError(f"{option(prefix, name)} {value}; accepted: {accepted}")


def finite(x: object) -> bool:
    """Whether ``x`` is a real number that is neither NaN nor infinite."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
