"""Measuring backends for the nightly tests, named by import path so that the sweep's spawned child can
build them. Both are the simulated backend (labelled SIMULATED in every row); the second runs every
kernel 25 % slower, as a new driver might, to exercise the sentinels' drift test."""

from __future__ import annotations

from collections.abc import Sequence

from tilecost.collect.protocol import MeasureProtocol
from tilecost.collect.simulated import SimulatedBackend
from tilecost.config import TileConfig
from tilecost.problem import Problem

SLOWDOWN = 1.25


class _Slower(SimulatedBackend):
    def times_us(self, problem: Problem, configs: Sequence[TileConfig]) -> list[float]:
        return [t * SLOWDOWN for t in super().times_us(problem, configs)]


def slower_simulated_backend(protocol: MeasureProtocol) -> SimulatedBackend:
    return _Slower(protocol)
