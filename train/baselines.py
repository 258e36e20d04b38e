"""The baselines the cost model is judged against, each a choice among one problem's measured candidates.

* **fixed**: one configuration for every shape, the 128×128×64 tile with GROUP_M 8, 4 warps and 3
  stages (``tma-128x128x64-g8-s1-w4-p3``; the pointer kernel's where the problem cannot use tensor
  descriptors).
* **tutorial**: the best of the eight configurations of the Triton matmul tutorial's
  ``get_cuda_autotune_config`` (pointer kernel, GROUP_M 8), i.e. what its ``@triton.autotune`` picks.
* **roofline**: the seed's analytical model alone (:func:`tilecost.features.roofline_time_us`), ties
  broken by the smaller shared memory, then by the candidate space's order.

A listed configuration the problem's candidates lack is replaced by its **stand-in**, the
configuration that runs the same blocks: tile dimensions clipped to the smallest tile covering the
extent and GROUP_M 1 on a one-row or one-column grid, which is exactly how the candidate space
(:func:`tilecost.space.problem_infeasibility`) prunes duplicates, so the stand-in is the listed
kernel minus its masked work. Where even that is absent (a pruned warp count, say), the nearest
candidate by :func:`config_distance` stands in, and :class:`Choice` says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tilecost.config import KernelVariant, TileConfig
from tilecost.device import DeviceSpec
from tilecost.features import ConfigArrays, roofline_time_us, smem_bytes
from tilecost.problem import DType, Problem
from tilecost.space import BLOCK_K, BLOCK_MN

__all__ = [
    "FIXED_CONFIGS",
    "TUTORIAL_CONFIGS",
    "Choice",
    "config_distance",
    "fixed_choice",
    "roofline_order",
    "stand_in",
    "tutorial_choice",
]

# Tensor descriptors first; the pointer kernel where the problem's strides rule them out.
FIXED_CONFIGS = (
    TileConfig.from_key("tma-128x128x64-g8-s1-w4-p3"),
    TileConfig.from_key("ptr-128x128x64-g8-s1-w4-p3"),
)
# triton-lang/triton python/tutorials/03-matrix-multiplication.py, get_cuda_autotune_config():
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps).
_TUTORIAL = (
    (128, 256, 64, 8, 3, 8),
    (64, 256, 32, 8, 4, 4),
    (128, 128, 32, 8, 4, 4),
    (128, 64, 32, 8, 4, 4),
    (64, 128, 32, 8, 4, 4),
    (128, 32, 32, 8, 4, 4),
    (64, 32, 32, 8, 5, 2),
    (32, 64, 32, 8, 5, 2),
)
TUTORIAL_CONFIGS = tuple(
    TileConfig(KernelVariant.PTR, bm, bn, bk, group, 1, warps, stages) for bm, bn, bk, group, stages, warps in _TUTORIAL
)
_BLOCK_K_FP8 = (*BLOCK_K, 256)


@dataclass(frozen=True)
class Choice:
    """A baseline's pick: the index into the problem's candidates and how it was found.

    ``how`` is ``"exact"`` (the listed configuration was measured), ``"stand-in"`` (its
    clipped equivalent was) or ``"nearest"`` (neither; the closest candidate by
    :func:`config_distance`).
    """

    index: int
    how: str


def _covering(extent: int, options: Sequence[int]) -> int:
    """The smallest option at least ``extent`` (the largest option if none is)."""
    return next((o for o in options if o >= extent), options[-1])


def stand_in(config: TileConfig, problem: Problem) -> TileConfig:
    """The configuration running the same blocks as ``config`` on ``problem`` without masked excess.

    Clips BLOCK_M, BLOCK_N and BLOCK_K to the smallest tile covering M, N and K and sets GROUP_M to
    1 where the grid is one row or one column (where it reorders nothing), the two ways
    :mod:`tilecost.space` prunes duplicates. E.g. the tutorial's 128×256×64 on 1×4096×1024 runs as
    16×256×64 with GROUP_M 1: one row of 16 blocks either way.
    """
    block_ks = _BLOCK_K_FP8 if problem.dtype is DType.FP8 else BLOCK_K
    bm = min(config.block_m, _covering(problem.m, BLOCK_MN))
    bn = min(config.block_n, _covering(problem.n, BLOCK_MN))
    bk = min(config.block_k, _covering(problem.k, block_ks))
    group = config.group_m
    if math.ceil(problem.m / bm) == 1 or math.ceil(problem.n / bn) == 1:
        group = 1
    return TileConfig(config.variant, bm, bn, bk, group, config.split_k, config.num_warps, config.num_stages)


def config_distance(a: TileConfig, b: TileConfig) -> float:
    """How far apart two configurations are: octaves of each tile dimension, warp count and
    SPLIT_K, plus half a point per pipeline stage, half for another kernel variant and a quarter
    for another GROUP_M. Used only to find a stand-in of last resort."""
    octaves = sum(
        abs(math.log2(getattr(a, f) / getattr(b, f))) for f in ("block_m", "block_n", "block_k", "num_warps", "split_k")
    )
    return (
        octaves
        + 0.5 * abs(a.num_stages - b.num_stages)
        + 0.5 * (a.variant != b.variant)
        + 0.25 * (a.group_m != b.group_m)
    )


def _find(config: TileConfig, problem: Problem, index: dict[str, int]) -> Choice | None:
    if config.key in index:
        return Choice(index[config.key], "exact")
    equivalent = stand_in(config, problem)
    if equivalent.key in index:
        return Choice(index[equivalent.key], "stand-in")
    return None


def _nearest(config: TileConfig, problem: Problem, candidates: Sequence[TileConfig]) -> Choice:
    target = stand_in(config, problem)
    distances = [config_distance(target, c) for c in candidates]
    return Choice(int(np.argmin(distances)), "nearest")  # argmin: first in candidate order on ties


def fixed_choice(problem: Problem, candidates: Sequence[TileConfig]) -> Choice:
    """The fixed baseline's pick among ``candidates`` (see the module docstring)."""
    if not candidates:
        raise ValueError(f"{problem}: no candidates to choose from")
    index = {c.key: i for i, c in enumerate(candidates)}
    for config in FIXED_CONFIGS:
        if config.key in index:
            return Choice(index[config.key], "exact")
    for config in FIXED_CONFIGS:
        found = _find(config, problem, index)
        if found is not None:
            return found
    return _nearest(FIXED_CONFIGS[0], problem, candidates)


def tutorial_choice(problem: Problem, candidates: Sequence[TileConfig], times_us: Sequence[float]) -> Choice:
    """The tutorial autotuner's pick: the fastest measured of its eight configurations (or their
    stand-ins); the nearest candidate to its first configuration if none of them was measured."""
    if not candidates:
        raise ValueError(f"{problem}: no candidates to choose from")
    index = {c.key: i for i, c in enumerate(candidates)}
    found = [f for f in (_find(c, problem, index) for c in TUTORIAL_CONFIGS) if f is not None]
    if not found:
        return _nearest(TUTORIAL_CONFIGS[0], problem, candidates)
    best = min(found, key=lambda f: (times_us[f.index], f.index))
    how = "exact" if all(f.how == "exact" for f in found) else "stand-in"
    return Choice(best.index, how)


def roofline_order(problem: Problem, configs: ConfigArrays, device: DeviceSpec, space_rank: np.ndarray) -> np.ndarray:
    """Candidate indices from the analytical model's fastest to slowest.

    Sorted by the seed's roofline time, then by shared memory per block (the smaller first: more
    blocks fit an SM), then by ``space_rank`` (each candidate's position in the candidate space).
    """
    time_us = roofline_time_us(problem, configs, device)
    smem = smem_bytes(
        configs.block_m,
        configs.block_n,
        configs.block_k,
        configs.num_stages,
        configs.is_tma,
        configs.split_k,
        float(problem.dtype.in_bytes),
        float(problem.dtype.out_bytes),
    )
    smem = np.broadcast_to(np.asarray(smem, dtype=np.float64), time_us.shape)
    return np.lexsort((np.asarray(space_rank), smem, time_us))
