"""A SIMULATED measuring backend, for running the sweep and the nightly loop on machines without a GPU.

Nothing it produces is a measurement. Its times come from the seed's analytical roofline model
(:func:`tilecost.features.roofline_time_us`) times deterministic per-(problem, config) factors for
the effects the roofline ignores (pipeline depth, warps, kernel variant, unaligned pointer loads)
and a few percent of noise. Every row it writes says so: ``gpu_name`` is
:data:`SIMULATED_GPU_NAME` and the versions read ``simulated``. The dataset store refuses such rows in
the shipped dataset (:data:`tilecost.collect.store.SHIPPED_DATASET`, however its path is spelled), by
the prefix of that name (:data:`tilecost.collect.store.SIMULATED_GPU_PREFIX`).

For tests of crash handling and resume, two environment variables make it misbehave on purpose:
``TILECOST_SIMULATED_CRASH=<config key>`` ends the process when that config is announced (as a CUDA
illegal address would), and ``TILECOST_SIMULATED_DELAY_S=<seconds>`` sleeps per problem
(``<problem key>=<seconds>``: that problem only).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from tilecost.collect.protocol import MeasureProtocol
from tilecost.collect.store import SIMULATED_GPU_PREFIX
from tilecost.config import KernelVariant, TileConfig
from tilecost.device import load_device
from tilecost.measurement import Status
from tilecost.problem import Problem

__all__ = ["SIMULATED_GPU_NAME", "SimulatedBackend", "simulated_backend"]

SIMULATED_GPU_NAME = f"{SIMULATED_GPU_PREFIX} (roofline model, not a measurement)"


class _NeverRaised(Exception):
    config_key = ""


def _unit(*parts: object) -> float:
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class SimulatedBackend:
    context_lost = _NeverRaised

    def __init__(self, protocol: MeasureProtocol, device_class: str = "h200"):
        self.protocol = protocol
        self.device = load_device(device_class)
        self.fingerprint = {
            "device_class": device_class,
            "gpu_name": SIMULATED_GPU_NAME,
            "sm_count": self.device.sm_count,
            "compute_capability": "simulated",
            "driver_version": "simulated",
            "cuda_version": "simulated",
            "torch_version": "simulated",
            "triton_version": "simulated",
        }

    def times_us(self, problem: Problem, configs: Sequence[TileConfig]) -> list[float]:
        from tilecost.features import ConfigArrays, roofline_time_us

        base = roofline_time_us(problem, ConfigArrays.from_configs(configs), self.device)
        out = []
        aligned16 = problem.n % 16 == 0 and problem.k % 16 == 0
        for c, t in zip(configs, base, strict=True):
            factor = 1.0 + 0.6 / c.num_stages + 0.15 * abs(c.num_warps - 4) / 4
            if c.variant is KernelVariant.PTR and not aligned16:
                factor *= 3.0  # narrow loads on unaligned rows (FACTS.md: 4-7x on the real card)
            factor *= 0.8 + 0.4 * _unit(problem.key, c.key)
            out.append(float(t) * factor + 3.0)  # + launch latency
        return out

    def measure(
        self, problem: Problem, configs: Sequence[TileConfig], seed: int, on_config: Callable[[str], None]
    ) -> list[dict[str, Any]]:
        crash = os.environ.get("TILECOST_SIMULATED_CRASH")
        for c in configs:
            on_config(c.key)
            if c.key == crash:
                os._exit(13)
        delay_spec = os.environ.get("TILECOST_SIMULATED_DELAY_S", "0")
        key, _, seconds = delay_spec.rpartition("=")
        delay = float(seconds) if not key or key == problem.key else 0.0
        if delay:
            time.sleep(delay)
        times = self.times_us(problem, configs)
        best = min(times)
        rows = []
        for c, t in zip(configs, times, strict=True):
            t *= 1.0 + 0.01 * (_unit(seed, problem.key, c.key, "noise") - 0.5)
            hopeless = t > self.protocol.hopeless_factor * best
            rows.append(
                {
                    "config_id": c.key,
                    "status": (Status.HOPELESS if hopeless else Status.OK).value,
                    "time_us": t,
                    "spread": 0.01,
                    "reps": 1 if hopeless else self.protocol.rounds * self.protocol.reps_for(t),
                    "rel_error": 0.0,
                    "throttled_rounds": 0,
                }
            )
        return rows


def simulated_backend(protocol: MeasureProtocol) -> SimulatedBackend:
    return SimulatedBackend(protocol)
