"""How a configuration cuts a problem into tiles, and how those tiles fill the GPU.

Every function here is pure and vectorised: arguments are numpy arrays (or scalars) that broadcast
against each other, one element per candidate or per training row, and the device enters only as a
:class:`~tilecost.device.DeviceSpec` value. Extents are used as float64, which is exact for the
integers involved (below 2**53) and cannot overflow where M·N·K would overflow int64.

The kernels these features describe (``tilecost.collect.kernels``) launch a grid of
``ceil(M/BM)·ceil(N/BN)`` tiles on axis 0, ordered in groups of GROUP_M tile rows, times SPLIT_K
parts on axis 1; each block steps through its share of K in BLOCK_K slices.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tilecost.device import DeviceSpec

__all__ = [
    "ACCUMULATOR_BYTES",
    "Values",
    "grid_shape",
    "k_iterations",
    "l2_panel_reuse",
    "memory_instructions_per_thread",
    "multiple_of",
    "operand_rows_aligned",
    "padding_waste",
    "pipeline_fill_fraction",
    "problem_flop_per_byte",
    "splitk_reduction_bytes",
    "tile_count",
    "tile_flop_per_byte",
    "tma_aligned",
    "wave_efficiency",
    "waves",
]

# What the functions take and give: one element per candidate or training row, as a numpy array,
# or one value for all rows, as a Python number; arguments broadcast against each other.
Values = NDArray[Any] | float

# Split-K partial tiles are fp32, whatever the input dtype (collect/kernels.py, _store_partial).
ACCUMULATOR_BYTES = 4


def _f64(values: Values) -> Values:
    """``values`` as float64, leaving a Python float alone: one problem's extents stay Python
    scalars, whose arithmetic costs tens of nanoseconds against a microsecond for 0-d arrays."""
    if isinstance(values, float):
        return values
    return np.asarray(values, dtype=np.float64)


def grid_shape(m: Values, n: Values, block_m: Values, block_n: Values) -> tuple[Values, Values]:
    """Tiles along M and along N: ``(ceil(M/BM), ceil(N/BN))``, dimensionless.

    Checked by hand: 1000×1000 with 128×128 tiles is (8, 8) (1000/128 = 7.8).
    """
    return np.ceil(_f64(m) / block_m), np.ceil(_f64(n) / block_n)


def tile_count(m: Values, n: Values, block_m: Values, block_n: Values, split_k: Values) -> Values:
    """Blocks the kernel launches: ``ceil(M/BM) · ceil(N/BN) · SPLIT_K``.

    Checked by hand: 1000×1000 with 32×256 tiles, no split, is 32 · 4 = 128 tiles.
    """
    grid_m, grid_n = grid_shape(m, n, block_m, block_n)
    return grid_m * grid_n * split_k


def k_iterations(k: Values, block_k: Values, split_k: Values) -> Values:
    """K steps of the longest split part: ``ceil(K / (BK · SPLIT_K))``.

    Equal to the kernel's ``cdiv(cdiv(K, BK), SPLIT_K)`` (nested ceilings of integer divisions
    compose). Checked by hand: K=8192, BK=64, SPLIT_K=4 gives 8192/256 = 32.
    """
    return np.ceil(_f64(k) / (_f64(block_k) * split_k))


def pipeline_fill_fraction(k_iters: Values, num_stages: Values) -> Values:
    """Share of a block's K steps whose loads are issued before its first multiply.

    Triton's software pipeline prefetches ``num_stages - 1`` K slices before the loop starts, so the
    fraction is ``min(num_stages - 1, k_iters) / k_iters`` (0 to 1): the pipeline fill latency the
    seed names as what the roofline misses when each block does only a few K steps. Checked by hand:
    4 stages over 6 K steps is 3/6 = 0.5; 4 stages over 2 K steps is 2/2 = 1.
    """
    k_iters = _f64(k_iters)
    return np.minimum(_f64(num_stages) - 1.0, k_iters) / k_iters


def padding_waste(m: Values, n: Values, k: Values, block_m: Values, block_n: Values, block_k: Values) -> Values:
    """Fraction of computed multiply-adds that lie outside the problem (masked or zero-filled).

    ``ceil(M/BM)·BM · ceil(N/BN)·BN · ceil(K/BK)·BK / (M·N·K) − 1``, dimensionless, 0 when the tiles
    divide the problem. Split-K does not change it: the parts cover the ``ceil(K/BK)`` K slices
    exactly once. Checked by hand: 1000³ with 128×128×64 is 1024·1024·1024 / 1e9 − 1 = 0.0737.
    (float64: exact while the padded product is below 2**53, about 2**17 per side; rounded beyond.)
    """
    m, n, k = _f64(m), _f64(n), _f64(k)
    padded = (np.ceil(m / block_m) * block_m) * (np.ceil(n / block_n) * block_n) * (np.ceil(k / block_k) * block_k)
    return padded / (m * n * k) - 1.0


def splitk_reduction_bytes(m: Values, n: Values, split_k: Values) -> Values:
    """Extra HBM bytes of the split-K reduction: ``2 · S · M · N · 4`` when S > 1, else 0.

    The S fp32 partial tiles are written to a workspace and read back by the reduction kernel
    (collect/kernels.py). Checked by hand: 1024×1024, S=4 is 2·4·1024·1024·4 = 33,554,432 bytes.
    """
    split_k = _f64(split_k)
    return (2.0 * ACCUMULATOR_BYTES) * _f64(m) * n * split_k * (split_k > 1)


def waves(tiles: Values, device: DeviceSpec, blocks_per_sm: Values = 1.0) -> Values:
    """Waves of blocks: ``tiles / (SMs · blocks per SM)``, fractional (2.0 is exactly two full waves).

    Checked by hand: 133 tiles on 132 SMs at one block per SM is 1.008, i.e. two waves, the second
    holding a single block (the seed's example).
    """
    return _f64(tiles) / (device.sm_count * _f64(blocks_per_sm))


def wave_efficiency(tiles: Values, device: DeviceSpec, blocks_per_sm: Values = 1.0) -> Values:
    """Share of block slots busy over the launch: ``tiles / (ceil(waves) · SMs · blocks per SM)``.

    Dimensionless, in (0, 1]. With ``blocks_per_sm=1`` this is the seed's wave quantisation: blocks
    that share an SM share its tensor cores, so a compute-bound kernel's length is set by the SM
    with the most tiles. Checked by hand on 132 SMs, one block per SM: 133 tiles give 133/264 =
    0.504; 1000×1000 with 128×128 tiles gives 64/132 = 0.485 (about half the SMs idle); 32×256
    tiles give 128/132 = 0.970.
    """
    tiles = _f64(tiles)
    slots = device.sm_count * _f64(blocks_per_sm)
    return tiles / (np.ceil(tiles / slots) * slots)


def multiple_of(values: Values, divisor: int) -> Values:
    """Whether each extent is a multiple of ``divisor``: True/False (Triton specialises integer
    arguments divisible by 16, which lets the pointer kernel issue 16-byte loads). Checked by hand:
    1000 is a multiple of 8 (125·8) and not of 16 (62.5·16)."""
    return _f64(values) % divisor == 0


def operand_rows_aligned(n: Values, k: Values, layout_nt: Values) -> tuple[Values, Values, Values]:
    """Whether the pointer kernel can prove 16-byte alignment of every row of A, B and C: True/False each.

    Triton specialises an integer argument divisible by 16 (:func:`multiple_of`), and only then proves that a row
    which starts at ``row · stride`` elements is aligned for 16-byte vectors (collect/kernels.py). A is M×K, its
    stride K; B is N×K (nt), stride K, or K×N (nn), stride N; C is M×N, stride N; the bounds mask on K is aligned
    when K is. Checked by hand: 1000×1000×1024 nn gives (True, False, False); the same nt gives (True, True,
    False).
    """
    n_aligned, k_aligned = _f64(n) % 16 == 0, _f64(k) % 16 == 0
    return k_aligned, np.where(layout_nt, k_aligned, n_aligned), n_aligned


def memory_instructions_per_thread(
    rows: Values, cols: Values, aligned: Values, element_bytes: Values, num_warps: Values
) -> Values:
    """Load (or store) instructions one thread issues to move a rows × cols tile of one operand, with 16-byte
    vectors where its rows are aligned (:func:`operand_rows_aligned`) and one element a load where not:
    ``rows·cols / (vector · 32 · warps)``, ``vector = 16 / element_bytes`` or 1. Checked by hand: a 128×64 bf16
    tile over 4 warps is 8192 / (8·128) = 8 aligned, 64 not; fp32 aligned 8192 / (4·128) = 16.
    """
    vector = np.where(aligned, 16.0 / _f64(element_bytes), 1.0)
    return _f64(rows) * cols / (vector * 32.0 * _f64(num_warps))


def tma_aligned(n: Values, k: Values, layout_nt: Values, in_bytes: Values, out_bytes: Values) -> Values:
    """Whether every row stride a tensor descriptor uses is a multiple of 16 bytes.

    Vectorised :func:`tilecost.space.tma_aligned`: A's stride K·in_bytes, B's N·in_bytes (nn) or
    K·in_bytes (nt), C's N·out_bytes, each ≡ 0 (mod 16). Checked against that function for every
    dtype and layout over ragged and aligned extents (tests/test_features.py).
    """
    n, k = _f64(n), _f64(k)
    b_row = n + (k - n) * layout_nt  # K where nt, N where nn; arithmetic, so a Python bool works too
    return (k * in_bytes % 16 == 0) & (b_row * in_bytes % 16 == 0) & (n * out_bytes % 16 == 0)


def problem_flop_per_byte(m: Values, n: Values, k: Values, in_bytes: Values, out_bytes: Values) -> Values:
    """Arithmetic intensity of the problem in FLOP/byte: ``2·M·N·K / ((M·K + K·N)·in + M·N·out)``.

    The bytes are the fewest any kernel moves (``Problem.min_bytes``). Checked by hand: 4096³ bf16
    is 2·4096³ / (3 · 4096² · 2) = 4096/3 = 1365.3.
    """
    m, n, k = _f64(m), _f64(n), _f64(k)
    return 2.0 * m * n * k / ((m * k + k * n) * in_bytes + m * n * out_bytes)


def tile_flop_per_byte(block_m: Values, block_n: Values, in_bytes: Values) -> Values:
    """Arithmetic intensity of one block in FLOP/byte: ``2·BM·BN / ((BM + BN) · in_bytes)``.

    Per K step a block loads (BM + BN)·BK·in_bytes and does 2·BM·BN·BK FLOP, so BK and K cancel
    (the seed's area-to-perimeter ratio). Checked by hand: 128×128 bf16 is 2·128·128 / (256·2) = 64.
    """
    block_m = _f64(block_m)
    return 2.0 * block_m * block_n / ((block_m + block_n) * _f64(in_bytes))


def l2_panel_reuse(
    grid_m: Values,
    grid_n: Values,
    block_m: Values,
    block_n: Values,
    group_m: Values,
    concurrent_blocks: Values,
) -> Values:
    """How many blocks of one wave read each A or B panel element it loads, on average (≥ 1).

    The ``W = min(grid_m·grid_n, concurrent_blocks)`` blocks resident at once are the first W of the
    launch order: groups of ``G = min(GROUP_M, grid_m)`` tile rows, each group walked column by
    column (Triton's grouped order; GROUP_M=1 is row-major). They cover
    ``rows = min(grid_m, G·⌊W/(G·grid_n)⌋ + min(G, r))`` tile rows and
    ``cols = grid_n`` if a whole group fits, else ``ceil(r/G)``, with ``r = W mod G·grid_n``. The
    reuse is the panel rows loaded over the distinct ones:
    ``W·(BM + BN) / (rows·BM + cols·BN)``. Only one split part is counted: parts read disjoint K
    ranges. The last group's smaller height is ignored.

    Checked by hand against the Triton tutorial's 9×9 grid of square tiles and W = 9 blocks:
    row-major reads 1 + 9 = 10 panels (its "90 blocks"), reuse 18/10 = 1.8; GROUP_M=3 reads
    3 + 3 = 6 panels (its "54 blocks"), reuse 18/6 = 3.
    """
    grid_m, grid_n = _f64(grid_m), _f64(grid_n)
    block_m, block_n = _f64(block_m), _f64(block_n)
    resident = np.minimum(grid_m * grid_n, concurrent_blocks)
    group = np.minimum(group_m, grid_m)
    per_group = group * grid_n
    full_groups = np.floor(resident / per_group)
    rest = resident - full_groups * per_group
    rows = np.minimum(grid_m, full_groups * group + np.minimum(group, rest))
    # grid_n once a whole group is resident, else the columns the partial group reached.
    cols = np.minimum(grid_n, full_groups * grid_n + np.ceil(rest / group))
    return resident * (block_m + block_n) / (rows * block_m + cols * block_n)
