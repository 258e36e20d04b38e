"""The candidate space: every tile configuration worth compiling, per device, dtype and layout.

Two levels, both pure functions of data (no GPU, no Triton):

* :func:`config_space` (device, dtype, layout): the axes below crossed, minus what the hardware
  checks of the seed rule out before anything is compiled — shared memory, whole warps and threads
  per block, register pressure of the fp32 accumulator. Deterministic order; each config's stable
  id is its :attr:`~tilecost.config.TileConfig.key`.
* :func:`problem_candidates` (problem, device): the configs of that space a given problem can use
  and that are not duplicates of another for it — a tensor-descriptor kernel needs 16-byte aligned
  row strides, a tile far larger than the problem only wastes work, a split of K into more parts
  than it has K steps leaves empty parts, and GROUP_M reorders nothing on a one-row or one-column
  grid.

Axes (the issue's minimum, all of it): BLOCK_M, BLOCK_N in 16..256, BLOCK_K in 32..128 (and 256 for
fp8, whose elements are one byte), num_warps 2/4/8, num_stages 2..5, GROUP_M 1/8, SPLIT_K 1..16,
both kernel variants. GROUP_M=8 is paired only with SPLIT_K=1: split-K is for grids too small to fill
the GPU, where the order in which tiles are scheduled cannot change L2 reuse.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator

from tilecost.config import KernelVariant, TileConfig
from tilecost.device import DeviceSpec, load_device
from tilecost.problem import DType, Layout, Problem

__all__ = [
    "BLOCK_K",
    "BLOCK_MN",
    "GROUP_M",
    "MAX_ACC_PER_THREAD",
    "MAX_OPERAND_ELEMENTS",
    "MIN_ACC_PER_THREAD",
    "NUM_STAGES",
    "NUM_WARPS",
    "SPLIT_K",
    "SPLIT_K_MAX_WAVES",
    "SPLIT_K_MIN_K",
    "accumulators_per_thread",
    "config_space",
    "hardware_infeasibility",
    "miscompiled_on_ragged_k",
    "problem_candidates",
    "problem_infeasibility",
    "smem_bytes",
    "supports",
]

BLOCK_MN = (16, 32, 64, 128, 256)
BLOCK_K = (32, 64, 128)
BLOCK_K_FP8 = (32, 64, 128, 256)
NUM_WARPS = (2, 4, 8)
NUM_STAGES = (2, 3, 4, 5)
GROUP_M = (1, 8)
SPLIT_K = (1, 2, 4, 8, 16)

# fp32 accumulators each thread holds: BM·BN / (32·num_warps). Above 128 the accumulator alone
# takes half of the 255 registers a thread may have and the kernel spills (the seed's T_M·T_N cap;
# 128×256 tiles need 8 warps for this reason). Below 8 most of the block's threads idle in the
# epilogue and the tile is better served by fewer warps, so the floor applies only where fewer warps
# are on offer: every tile shape keeps at least its smallest warp count (16×16 with 2 warps holds 4).
MAX_ACC_PER_THREAD = 128
MIN_ACC_PER_THREAD = 8
# Split-K exists to add blocks to grids too small to fill the GPU; a 256-wide tile makes the fewest
# blocks of all, so splitting it is dominated by splitting a smaller tile of the same problem.
MAX_SPLIT_TILE = 128
SPLIT_K_MAX_WAVES = 2
# No split-K at K <= SPLIT_K_MIN_K: the second launch (and the partials' traffic) costs more than a K loop this short
# takes. Measured before the rule (twenty-eighth session, BENCHMARKS §4): on all 454 H200 problems with K <= 256 and
# split-K configurations timed (every dtype and layout), the best split-K time was 1.02-5.1x the best without; split-K
# first won at K = 278 (19 of 249 problems with K in 257..512).
SPLIT_K_MIN_K = 256
# The kernels address operands with int32 offsets: A (M×K), B (K×N) and C (M×N) must each hold at most this
# many elements, or collect/launch.py refuses the problem whatever its configuration (the split-K workspace
# stays below it: split-K needs a grid under SPLIT_K_MAX_WAVES waves of 256×256 tiles at most, times 16).
MAX_OPERAND_ELEMENTS = 2**31 - 1
# Registers a thread needs besides the accumulator (addresses, loop state, operand fragments),
# used only to check that one block fits an SM's register file.
_OTHER_REGISTERS = 40

# (variant, dtype, layout) combinations the kernels do not support. Everything runs on Hopper
# as of the H200 correctness run recorded in docs/BENCHMARKS.md; kept as data so that a device or
# Triton version that lacks one removes it here, not with a crash at launch.
_UNSUPPORTED: frozenset[tuple[KernelVariant, DType, Layout]] = frozenset()


def supports(variant: KernelVariant, dtype: DType, layout: Layout) -> bool:
    """Whether the kernel family runs ``variant`` for this dtype and layout."""
    return (variant, dtype, layout) not in _UNSUPPORTED


def smem_bytes(config: TileConfig, dtype: DType) -> int:
    """Shared memory one block of ``config`` needs, in bytes.

    ``num_stages × (BM·BK + BK·BN) × in_bytes`` for the pipelined A and B panels (the seed's
    formula with Triton's stage count), plus, for the tensor-descriptor kernel, its BM·BN output
    tile staged for the TMA store (``BM·BN × out_bytes``). Checked by hand in tests/test_space.py,
    e.g. 128×128×64 bf16, 3 stages: 3 × (128·64 + 64·128) × 2 = 98,304.
    """
    panels = config.num_stages * (config.block_m * config.block_k + config.block_k * config.block_n)
    total = panels * dtype.in_bytes
    if config.variant is KernelVariant.TMA and config.split_k == 1:
        total += config.block_m * config.block_n * dtype.out_bytes
    return total


def accumulators_per_thread(config: TileConfig) -> float:
    """fp32 accumulator registers per thread: BM·BN / (32 · num_warps)."""
    return config.block_m * config.block_n / config.num_threads


def hardware_infeasibility(config: TileConfig, dtype: DType, device: DeviceSpec) -> str | None:
    """Why ``config`` cannot run well on ``device`` for ``dtype`` (a sentence), or ``None``."""
    smem = smem_bytes(config, dtype)
    if smem > device.smem_per_block_bytes:
        return f"needs {smem} bytes of shared memory, device allows {device.smem_per_block_bytes} per block"
    if config.num_threads > device.max_threads_per_block:
        return f"{config.num_threads} threads exceed {device.max_threads_per_block} per block"
    acc = accumulators_per_thread(config)
    if acc > MAX_ACC_PER_THREAD:
        return f"{acc:g} accumulators per thread exceed {MAX_ACC_PER_THREAD} (register spills)"
    if acc < MIN_ACC_PER_THREAD and config.num_warps > NUM_WARPS[0]:
        return f"{acc:g} accumulators per thread is under {MIN_ACC_PER_THREAD} (idle threads)"
    regs = (acc + _OTHER_REGISTERS) * config.num_threads
    if regs > device.registers_per_sm:
        return f"about {regs:g} registers per block exceed {device.registers_per_sm} per SM"
    if config.split_k > 1 and max(config.block_m, config.block_n) > MAX_SPLIT_TILE:
        wide = max(config.block_m, config.block_n)
        return f"SPLIT_K with a {wide}-wide tile (split-K is for tiles up to {MAX_SPLIT_TILE})"
    if config.block_k == 256 and dtype is not DType.FP8:
        return "BLOCK_K=256 is only in the fp8 space"
    return None


def _axes(dtype: DType) -> Iterator[TileConfig]:
    block_ks = BLOCK_K_FP8 if dtype is DType.FP8 else BLOCK_K
    for variant in KernelVariant:
        for bm in BLOCK_MN:
            for bn in BLOCK_MN:
                for bk in block_ks:
                    for split_k in SPLIT_K:
                        for group_m in GROUP_M if split_k == 1 else (1,):
                            for warps in NUM_WARPS:
                                for stages in NUM_STAGES:
                                    yield TileConfig(variant, bm, bn, bk, group_m, split_k, warps, stages)


@functools.lru_cache(maxsize=64)
def _config_space(device: DeviceSpec, dtype: DType, layout: Layout) -> tuple[TileConfig, ...]:
    return tuple(
        c
        for c in _axes(dtype)
        if supports(c.variant, dtype, layout) and hardware_infeasibility(c, dtype, device) is None
    )


def config_space(
    device: DeviceSpec | str = "h200", dtype: DType | str = DType.BF16, layout: Layout | str = Layout.NT
) -> tuple[TileConfig, ...]:
    """Every feasible configuration for (device, dtype, layout), in a fixed order."""
    return _config_space(load_device(device), DType.parse(dtype), Layout.parse(layout))


def _fit(extent: int, options: tuple[int, ...]) -> int:
    """The smallest option that covers ``extent`` (the largest option if none does)."""
    return next((o for o in options if o >= extent), options[-1])


def tma_aligned(problem: Problem) -> bool:
    """Whether every row stride the descriptor kernel uses is a multiple of 16 bytes.

    A is M×K (row stride K), B is K×N (nn, stride N) or N×K (nt, stride K), C is M×N (stride N);
    a TMA descriptor needs each of those strides × element bytes ≡ 0 (mod 16).
    """
    dt = problem.dtype
    b_row = problem.n if problem.layout is Layout.NN else problem.k
    return (
        (problem.k * dt.in_bytes) % 16 == 0 and (b_row * dt.in_bytes) % 16 == 0 and (problem.n * dt.out_bytes) % 16 == 0
    )


def problem_infeasibility(problem: Problem, config: TileConfig, device: DeviceSpec) -> str | None:
    """Why ``problem`` should not be run with ``config`` (a sentence), or ``None``.

    Rules that cannot lose the best configuration: a variant the problem cannot use, a tile
    dimension larger than the smallest tile that already covers the extent (same blocks, more
    masked work), a split-K with more parts than K steps, GROUP_M on a grid where it orders nothing.
    Two heuristic rules: no split-K on a grid that already has ``SPLIT_K_MAX_WAVES`` full waves of
    tiles without it; splitting then adds reduction traffic and a second launch for at most a
    wave-quantisation gain of a few percent. No split-K at K <= ``SPLIT_K_MIN_K``, where the second
    launch costs more than the K loop it shortens (measured: never the best on 454 such problems).
    """
    if config.variant is KernelVariant.TMA and not tma_aligned(problem):
        return "tensor descriptors need 16-byte aligned row strides"
    if config.block_m > _fit(problem.m, BLOCK_MN):
        return f"BLOCK_M={config.block_m} exceeds the smallest tile covering M={problem.m}"
    if config.block_n > _fit(problem.n, BLOCK_MN):
        return f"BLOCK_N={config.block_n} exceeds the smallest tile covering N={problem.n}"
    block_ks = BLOCK_K_FP8 if problem.dtype is DType.FP8 else BLOCK_K
    if config.block_k > _fit(problem.k, block_ks):
        return f"BLOCK_K={config.block_k} exceeds the smallest step covering K={problem.k}"
    k_steps = math.ceil(problem.k / config.block_k)
    if config.split_k > k_steps:
        return f"SPLIT_K={config.split_k} exceeds the {k_steps} K steps of BLOCK_K={config.block_k}"
    if config.split_k > 1 and problem.k <= SPLIT_K_MIN_K:
        return f"SPLIT_K at K={problem.k}: split-K only pays from K > {SPLIT_K_MIN_K}"
    if config.split_k > 1:
        tiles = math.ceil(problem.m / config.block_m) * math.ceil(problem.n / config.block_n)
        if tiles >= SPLIT_K_MAX_WAVES * device.sm_count:
            return f"SPLIT_K on a grid of {tiles} tiles, already {SPLIT_K_MAX_WAVES} or more waves"
    if config.group_m > 1 and (
        math.ceil(problem.m / config.block_m) == 1 or math.ceil(problem.n / config.block_n) == 1
    ):
        return "GROUP_M reorders nothing on a one-row or one-column grid"
    if problem.k % 16 and miscompiled_on_ragged_k(config):
        return (
            "Triton 3.6 miscompiles this configuration on the H200 when K is not a multiple of 16 "
            "(wrong results with split-K at BLOCK_N=128, illegal memory accesses at BLOCK_N=256)"
        )
    return None


def miscompiled_on_ragged_k(config: TileConfig) -> bool:
    """Whether ``config`` is one of the pointer configurations that computed wrong results or crashed on the H200
    (Triton 3.6.0) for problems whose K is not a multiple of 16, refused for such problems.

    Found by the twenty-fourth session's collections (runs r24srf and r24kc, BENCHMARKS §1): BLOCK_M=32, BLOCK_K=128
    and 4 warps, with BLOCK_N=128, GROUP_M=1 and SPLIT_K > 1 (relative error 2.1, the same at every stage count),
    or with BLOCK_N=256 (an illegal memory access); 2 or 8 warps, GROUP_M=8 at BLOCK_N=128, and K a multiple of 16
    were right on the same problems, and the kernels are right under Triton's interpreter. 144 failures on 9
    problems (K = 1000 + 32, 3000, 10999, 11000; N a multiple of 16; bf16 and fp16), all inside this rule; of the
    rows the dataset held for it before, 7 were correct and timed ok (never a problem's best), 2,134 hopeless."""
    return (
        config.variant is KernelVariant.PTR
        and config.block_m == 32
        and config.block_k == 128
        and config.num_warps == 4
        and (config.block_n == 256 or (config.block_n == 128 and config.group_m == 1 and config.split_k > 1))
    )


@functools.lru_cache(maxsize=4096)
def _problem_candidates(problem: Problem, device: DeviceSpec) -> tuple[TileConfig, ...]:
    space = _config_space(device, problem.dtype, problem.layout)
    return tuple(c for c in space if problem_infeasibility(problem, c, device) is None)


def problem_candidates(problem: Problem, device: DeviceSpec | str = "h200") -> tuple[TileConfig, ...]:
    """The configurations of the space that ``problem`` can use, in the space's order."""
    return _problem_candidates(problem, load_device(device))
