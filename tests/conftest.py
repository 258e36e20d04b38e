"""Test-suite set-up: where kernels run, and skipping GPU tests without touching hardware.

Kernels run under Triton's interpreter on CPU (TRITON_INTERPRET=1 must be set before any
``@triton.jit`` runs, so it is set here, before test modules import the kernels) unless the suite is
pointed at a GPU with ``TILECOST_DEVICE=cuda``. Tests marked ``gpu`` are skipped unless it is; nothing
here queries a GPU, so the CPU suite collects on a machine without one.
"""

from __future__ import annotations

import os

import pytest

ON_GPU = os.environ.get("TILECOST_DEVICE", "cpu") == "cuda"
if not ON_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") and not ON_GPU:
        pytest.skip("GPU test: run with TILECOST_DEVICE=cuda on a machine with a CUDA GPU")
    if item.get_closest_marker("interpreter") and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("interpreter test: runs with TRITON_INTERPRET=1 (the CPU suite's default)")
