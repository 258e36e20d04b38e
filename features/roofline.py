"""The seed's analytical roofline model of a tiled matmul: a feature and a baseline ranker.

A kernel is bounded by whichever resource saturates first, HBM bytes or tensor-core FLOP, and its
time is the larger of the two (the seed, shared/seeds/001, "A model of a tiled BF16 multiply"):

* **memory**: every tile streams its A and B panels, ``(BM + BN)·K/S·in_bytes``; tiles resident in
  one wave share panels through L2, which divides the grid's panel bytes by
  ``g = sqrt(min(tiles, concurrent blocks))``. Add the output, ``M·N·out_bytes``; never less than
  the problem's fewest bytes (A and B read once, C written once); then add split-K's reduction
  traffic. Time = bytes / HBM bandwidth.
* **compute**: ``2·M·N·K / peak(dtype)``, divided by the wave efficiency (idle SMs in the last
  wave) and by a tile efficiency that falls for tiles smaller than 128×128.

The tile efficiency is ``0.5 + 0.5 · min(1, BM·BN / 128²)``: a 128×128 tile or larger runs at the
peak rate, a vanishing tile at half of it, linear in area between. The seed states only that it
"falls for tiles smaller than 128 × 128"; this form (not a square root of the area ratio) is the
one that reproduces every number the seed publishes for its H100 (132 SMs, 989 TFLOP/s, 3.35 TB/s,
BK = 64, tiles 32..256): 8192³ best 64×256 at 1,146 µs, worst 1.83× slower (32×32); 1000×1000×8192
best 32×256 at 97% wave efficiency, a fixed 128×128 1.50× slower; 16×7168×8192 every tile tied at
35.2 µs (tests/test_features.py recomputes them). The seed has no split-K; here it adds tiles (so
wave efficiency and g) and the reduction bytes, and reduces to the seed when SPLIT_K = 1.

The model is not measured: it captures the trade-offs, not a kernel. It ignores pipeline fill,
occupancy and alignment, which is why it is one feature among many and a fallback ranking only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tilecost.device import DeviceSpec
from tilecost.features.configs import ConfigArrays
from tilecost.features.geometry import grid_shape, splitk_reduction_bytes, wave_efficiency
from tilecost.problem import Problem

__all__ = ["FULL_TILE_AREA", "Roofline", "roofline", "roofline_time_us", "tile_efficiency"]

F64 = NDArray[np.float64]

# Tiles of at least this many outputs (128×128) keep the tensor cores at their peak rate in the
# seed's model.
FULL_TILE_AREA = 128 * 128


def tile_efficiency(block_m: ArrayLike, block_n: ArrayLike) -> F64:
    """Share of peak a block of this tile reaches: ``0.5 + 0.5 · min(1, BM·BN / 128²)``, in (0.5, 1].

    Checked by hand: 128×128 and 64×256 are 1; 32×256 is 0.5 + 0.5·8192/16384 = 0.75; 32×32 is
    0.5 + 0.5·1024/16384 = 0.53125. See the module docstring for why this form.
    """
    area = np.asarray(block_m, dtype=np.float64) * block_n
    return 0.5 + 0.5 * np.minimum(1.0, area / FULL_TILE_AREA)


@dataclass(frozen=True, eq=False)
class Roofline:
    """The model's parts, one element per candidate: HBM bytes and three times in microseconds."""

    traffic_bytes: F64
    compute_us: F64
    memory_us: F64
    time_us: F64


def roofline(
    m: ArrayLike,
    n: ArrayLike,
    k: ArrayLike,
    block_m: ArrayLike,
    block_n: ArrayLike,
    split_k: ArrayLike,
    in_bytes: ArrayLike,
    out_bytes: ArrayLike,
    peak_flops_per_s: ArrayLike,
    device: DeviceSpec,
    blocks_per_sm: ArrayLike = 1,
) -> Roofline:
    """The seed's roofline for broadcastable arrays of problems and tiles (module docstring).

    ``peak_flops_per_s`` is the dtype's dense rate (``DeviceSpec.peak_flops_per_s``). The seed
    counts one block per SM both for the wave efficiency and for the blocks sharing panels; pass
    ``blocks_per_sm`` to let co-resident blocks count as one wave. Checked by hand on the H100 spec:
    8192³ bf16, 128×128: 4096 tiles in 32 waves of 132 (efficiency 0.970), compute
    2·8192³ / 989.4e12 s = 1111.3 µs / 0.970 = 1146.0 µs; memory (256·8192·2·4096 / sqrt(132) +
    8192²·2) bytes = 1.63e9 / 3.35e12 B/s = 486 µs; time 1146.0 µs.
    """
    m, n, k = (np.asarray(x, dtype=np.float64) for x in (m, n, k))
    grid_m, grid_n = grid_shape(m, n, block_m, block_n)
    tiles = grid_m * grid_n * split_k
    sharing = np.sqrt(np.minimum(tiles, device.sm_count * np.asarray(blocks_per_sm, dtype=np.float64)))
    panel_bytes = (np.asarray(block_m, dtype=np.float64) + block_n) * k * in_bytes * grid_m * grid_n
    output_bytes = m * n * out_bytes
    min_bytes = (m + n) * k * in_bytes + output_bytes
    traffic = np.maximum(panel_bytes / sharing + output_bytes, min_bytes) + splitk_reduction_bytes(m, n, split_k)
    ideal_us = 2e6 * m * n * k / np.asarray(peak_flops_per_s, dtype=np.float64)
    compute_us = ideal_us / (wave_efficiency(tiles, device, blocks_per_sm) * tile_efficiency(block_m, block_n))
    memory_us = traffic * (1e6 / device.hbm_bytes_per_s)
    return Roofline(traffic, compute_us, memory_us, np.maximum(compute_us, memory_us))


def roofline_time_us(problem: Problem, configs: ConfigArrays, device: DeviceSpec) -> F64:
    """The baseline: the seed's modelled time of ``problem`` under each configuration, in µs.

    Rank candidates by it (``np.argsort``) where no trained model applies. Memory-bound problems
    tie many tiles at the bandwidth floor (every tile of a 16-token decode reads the same weights);
    ``np.argmin`` then returns the first of them in the candidate order.
    """
    model = roofline(
        problem.m,
        problem.n,
        problem.k,
        configs.block_m,
        configs.block_n,
        configs.split_k,
        problem.dtype.in_bytes,
        problem.dtype.out_bytes,
        device.peak_flops_per_s(problem.dtype),
        device,
    )
    return model.time_us
