"""Which configurations of a candidate space a problem may use, for all of them at once.

:func:`tilecost.space.problem_candidates` answers this one configuration at a time in Python, about
28 ms for a new problem over the 6,012 configurations of the H200 bf16 space; the predictor needs it
in microseconds. :func:`feasible_mask` implements the same rules as
:func:`tilecost.space.problem_infeasibility` as whole-array integer arithmetic over
:class:`SpaceColumns`, the space's fields as int64 arrays built once per (device, dtype, layout).
tests/test_predict_feasibility.py checks that the mask selects exactly ``problem_candidates`` on
several hundred problems (ragged, aligned, tiny, huge, every dtype and layout).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tilecost.config import KernelVariant, TileConfig
from tilecost.device import DeviceSpec
from tilecost.problem import DType, Problem
from tilecost.space import (
    BLOCK_K,
    BLOCK_K_FP8,
    BLOCK_MN,
    SPLIT_K_MAX_WAVES,
    SPLIT_K_MIN_K,
    miscompiled_on_ragged_k,
    tma_aligned,
)

__all__ = ["SpaceColumns", "block_options", "feasible_mask", "problem_limits", "split_k_tile_limit"]

I64 = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class SpaceColumns:
    """The integer fields of a sequence of configurations, one int64 array each (read-only)."""

    block_m: I64
    block_n: I64
    block_k: I64
    group_m: I64
    split_k: I64
    is_tma: NDArray[np.bool_]
    # tilecost.space.miscompiled_on_ragged_k: refused for a problem whose K is not a multiple of 16
    ragged_k_unsafe: NDArray[np.bool_]

    @classmethod
    def from_configs(cls, configs: Sequence[TileConfig]) -> SpaceColumns:
        def column(name: str) -> I64:
            return np.array([getattr(c, name) for c in configs], dtype=np.int64)

        is_tma = np.array([c.variant is KernelVariant.TMA for c in configs], dtype=bool)
        unsafe = np.array([miscompiled_on_ragged_k(c) for c in configs], dtype=bool)
        return cls(
            column("block_m"), column("block_n"), column("block_k"), column("group_m"), column("split_k"), is_tma,
            unsafe,
        )  # fmt: skip

    def __post_init__(self) -> None:
        for array in (self.block_m, self.block_n, self.block_k, self.group_m, self.split_k, self.is_tma,
                      self.ragged_k_unsafe):  # fmt: skip
            array.flags.writeable = False

    def __len__(self) -> int:
        return len(self.block_m)

    def take(self, index: ArrayLike) -> SpaceColumns:
        index = np.asarray(index)
        return SpaceColumns(
            self.block_m[index], self.block_n[index], self.block_k[index],
            self.group_m[index], self.split_k[index], self.is_tma[index], self.ragged_k_unsafe[index],
        )  # fmt: skip


def _fit(extent: int, options: tuple[int, ...]) -> int:
    """The smallest option that covers ``extent`` (the largest if none does), as in tilecost.space."""
    return next((o for o in options if o >= extent), options[-1])


def block_options(dtype: DType) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The BLOCK_M/BLOCK_N options and the BLOCK_K options of ``dtype``'s space, ascending."""
    return BLOCK_MN, (BLOCK_K_FP8 if dtype is DType.FP8 else BLOCK_K)


def split_k_tile_limit(device: DeviceSpec) -> int:
    """The grid size (tiles) from which split-K is refused on ``device``."""
    return SPLIT_K_MAX_WAVES * device.sm_count


def problem_limits(problem: Problem, device: DeviceSpec) -> tuple[int, int, int, bool, int]:
    """The problem's side of :func:`feasible_mask`'s rules: the largest BLOCK_M, BLOCK_N and BLOCK_K
    allowed, whether tensor-descriptor configurations are, and the grid size (tiles) from which
    split-K is refused. The compiled path (:mod:`tilecost.predict.jit`) computes the same in its kernel,
    from :func:`block_options` and :func:`split_k_tile_limit`."""
    block_mn, block_ks = block_options(problem.dtype)
    return (
        _fit(problem.m, block_mn),
        _fit(problem.n, block_mn),
        _fit(problem.k, block_ks),
        tma_aligned(problem),
        split_k_tile_limit(device),
    )


def feasible_mask(problem: Problem, space: SpaceColumns, device: DeviceSpec) -> NDArray[np.bool_]:
    """True where :func:`tilecost.space.problem_infeasibility` returns ``None`` for that configuration.

    The rules, in that function's order: a tensor-descriptor config needs 16-byte aligned strides;
    BLOCK_M, BLOCK_N, BLOCK_K at most the smallest option covering M, N, K; SPLIT_K at most the
    ``ceil(K / BLOCK_K)`` K steps; no split-K at K <= ``SPLIT_K_MIN_K``; no split-K on grids of
    ``SPLIT_K_MAX_WAVES · SMs`` tiles or more;
    no GROUP_M > 1 on a one-row or one-column grid; none of :func:`~tilecost.space.miscompiled_on_ragged_k`'s
    configurations when K is not a multiple of 16. ``space`` must hold configurations of the space
    of the problem's dtype and layout on ``device`` (the space's own hardware rules are not repeated).
    Integer arithmetic: ``ceil(a / b)`` is ``-(-a // b)``, exact for every extent up to 2**31.
    """
    m, n, k = problem.m, problem.n, problem.k
    max_m, max_n, max_k, tma_ok, split_k_tiles = problem_limits(problem, device)
    bm, bn, bk = space.block_m, space.block_n, space.block_k
    grid_m = -(-m // bm)
    grid_n = -(-n // bn)
    ok = (bm <= max_m) & (bn <= max_n) & (bk <= max_k)
    ok &= space.split_k <= -(-k // bk)
    if k <= SPLIT_K_MIN_K:
        ok &= space.split_k == 1
    ok &= (space.split_k == 1) | (grid_m * grid_n < split_k_tiles)
    ok &= (space.group_m == 1) | ((grid_m > 1) & (grid_n > 1))
    if not tma_ok:
        ok &= ~space.is_tma
    if k % 16:
        ok &= ~space.ragged_k_unsafe
    return ok
