"""Measuring backends: what the sweep's child process uses to time a problem's configurations.

A backend is built by a factory ``factory(protocol) -> backend`` named by import path in
:class:`~tilecost.collect.sweep.SweepSettings` (so that the spawned child can build it), and offers
``fingerprint`` (the columns that identify the device and software), ``measure(problem, configs,
seed, on_config) -> list[dict]`` (one outcome per config, in order) and ``context_lost`` (the
exception type that means the process must be restarted).

:func:`cuda_backend` measures for real on the current CUDA device. The simulated backend for
CPU runs lives in :mod:`tilecost.collect.simulated` and labels everything it produces as such.
:func:`load_backend_factory` resolves a backend path in the parent, so that a typo fails before any
planning or compiling rather than in the measuring process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from tilecost.collect.protocol import MeasureProtocol
from tilecost.config import TileConfig
from tilecost.errors import TilecostError
from tilecost.problem import Problem

__all__ = [
    "CUDA_BACKEND",
    "SIMULATED_BACKEND",
    "BackendError",
    "CudaBackend",
    "cuda_backend",
    "is_simulated_backend",
    "load_backend_factory",
    "outcome_dict",
]

CUDA_BACKEND = "tilecost.collect.backend:cuda_backend"
SIMULATED_BACKEND = "tilecost.collect.simulated:simulated_backend"


class BackendError(TilecostError):
    """A measuring backend cannot run on this machine (the CUDA backend where no CUDA device shows)."""


def is_simulated_backend(path: str) -> bool:
    """Whether a backend path names a simulated timer (the convention: the word in the path). The rows such a
    backend writes say so themselves (``gpu_name``), which is what the dataset store checks."""
    return "simulated" in path.lower()


def load_backend_factory(path: str) -> Callable[[MeasureProtocol], Any]:
    """The factory a backend path ``module:function`` names, imported (what the measuring process will call).

    Raises ``ValueError`` naming the path and the expected form when it is not of that form, its module
    does not import or it has no such function. Importing the simulated backend imports no torch."""
    module_name, sep, name = path.partition(":")
    usage = f"use MODULE:FUNCTION, e.g. {CUDA_BACKEND} (a CUDA GPU) or {SIMULATED_BACKEND} (a CPU stand-in)"
    if not sep or not module_name or not name.isidentifier():
        raise ValueError(f"{path!r} is not a backend path; {usage}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{path!r}: module {module_name!r} does not import ({exc}); {usage}") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ValueError(f"{path!r}: module {module_name!r} has no function {name!r}; {usage}")
    return factory  # type: ignore[no-any-return]


def outcome_dict(outcome: Any) -> dict[str, Any]:
    """One :class:`~tilecost.collect.runner.ConfigOutcome` as the row fields the store expects."""
    t = outcome.timing
    return {
        "config_id": outcome.config.key,
        "status": outcome.status.value,
        "time_us": t.median_us if t else None,
        "spread": t.spread if t else None,
        "reps": t.reps if t else None,
        "rel_error": outcome.rel_error,
        "registers": outcome.registers,
        "spills": outcome.spills,
        "smem_bytes": outcome.smem_bytes,
        "min_sm_clock_mhz": t.min_sm_clock_mhz if t else None,
        "max_power_w": t.max_power_w if t else None,
        "max_temperature_c": t.max_temperature_c if t else None,
        "throttled_rounds": t.throttled_rounds if t else None,
        "error": outcome.error,
    }


class CudaBackend:
    def __init__(self, protocol: MeasureProtocol):
        import torch
        import triton

        from tilecost.collect.runner import ContextLost
        from tilecost.collect.timing import CudaEventTimer, NvmlReader
        from tilecost.device import device_class_for_gpu_name

        nvml = NvmlReader(torch.cuda.current_device())
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.timer = CudaEventTimer(nvml=nvml)
        self.protocol = protocol
        self.context_lost = ContextLost
        self.fingerprint = {
            "device_class": device_class_for_gpu_name(props.name),
            "gpu_name": props.name,
            "sm_count": props.multi_processor_count,
            "compute_capability": f"{props.major}.{props.minor}",
            "driver_version": nvml.driver_version(),
            "cuda_version": str(torch.version.cuda),
            "torch_version": torch.__version__,
            "triton_version": triton.__version__,
        }

    def measure(
        self, problem: Problem, configs: Sequence[TileConfig], seed: int, on_config: Callable[[str], None]
    ) -> list[dict[str, Any]]:
        import sys

        import torch

        from tilecost.collect.runner import run_problem

        waited_before, launches_before = self.timer.host_bound, self.timer.launches
        result = run_problem(problem, configs, self.timer, self.protocol, seed=seed, on_config=on_config)
        torch.cuda.empty_cache()
        waited = self.timer.host_bound - waited_before
        if waited:  # the timer's diagnostic: launches the device had to wait for (see CudaEventTimer)
            launches = self.timer.launches - launches_before
            print(f"{problem.key}: {waited} of {launches} timed launches waited for the host", file=sys.stderr)
        return [outcome_dict(o) for o in result.outcomes]


def cuda_backend(protocol: MeasureProtocol) -> CudaBackend:
    return CudaBackend(protocol)
