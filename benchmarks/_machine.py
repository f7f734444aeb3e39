"""Machine description shared by the benchmark scripts."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (or platform.processor())."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
"""the CPU features that decide how fast small float32 / int8 matrix products run"""


def cpu_flags() -> list[str]:
    """Which of :data:`VECTOR_FLAGS` this CPU reports (/proc/cpuinfo; empty if unknown)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return [f for f in VECTOR_FLAGS if f in have]
    except OSError:
        pass
    return []
