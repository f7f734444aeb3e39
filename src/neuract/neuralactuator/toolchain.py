"""The C++ toolchain that AOTInductor packages and the int8 operator are built with."""

from __future__ import annotations

import os

from neuract.errors import NeuractError


class CompilerNotFound(NeuractError, RuntimeError):
    """No C++ compiler for AOTInductor (install g++ or clang++, or point ``CXX`` at one)."""


def cxx_compiler() -> str | None:
    """Path of the C++ compiler AOTInductor would use, or ``None`` when there is none."""
    from torch._inductor import cpp_builder

    try:
        return cpp_builder.get_cpp_compiler()
    except Exception:  # torch raises InvalidCxxCompiler (or a subprocess error) when absent
        return None


def require_cxx_compiler() -> str:
    """The compiler's path; raises :class:`CompilerNotFound` naming what was searched."""
    cxx = cxx_compiler()
    if cxx is None:
        import torch._inductor.config as ic

        raise CompilerNotFound(
            f"AOTInductor needs a C++ compiler; none found (searched {ic.cpp.cxx!r}, "
            f"CXX={os.environ.get('CXX')!r}). Install g++ or clang++ (e.g. `apt-get install "
            "g++`) or set CXX; ONNX Runtime (neuract.neuralactuator.export) needs none.")
    return cxx


__all__ = ["CompilerNotFound", "cxx_compiler", "require_cxx_compiler"]
