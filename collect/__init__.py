"""Collecting real timings: the kernel family, the launcher and (later) the sweep.

``matmul`` and ``bind`` import torch and triton when first used, not when this package is imported.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BoundMatmul", "KernelInfo", "bind", "matmul", "problem_of"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tilecost.collect import launch as _launch

        return getattr(_launch, name)
    raise AttributeError(f"module 'tilecost.collect' has no attribute {name!r}")
