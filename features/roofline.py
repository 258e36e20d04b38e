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
from numpy.typing import NDArray

from tilecost.device import DeviceSpec
from tilecost.problem import Problem

from .configs import ConfigArrays
from .geometry import Values, _f64, grid_shape, splitk_reduction_bytes, wave_efficiency

__all__ = ["FULL_TILE_AREA", "Roofline", "roofline", "roofline_time_us", "tile_efficiency"]

# Tiles of at least this many outputs (128×128) keep the tensor cores at their peak rate in the
# seed's model.
FULL_TILE_AREA = 128 * 128


def tile_efficiency(block_m: Values, block_n: Values) -> Values:
    """Share of peak a block of this tile reaches: ``0.5 + 0.5 · min(1, BM·BN / 128²)``, in (0.5, 1].

    Checked by hand: 128×128 and 64×256 are 1; 32×256 is 0.5 + 0.5·8192/16384 = 0.75; 32×32 is
    0.5 + 0.5·1024/16384 = 0.53125. See the module docstring for why this form.
    """
    area = _f64(block_m) * block_n
    return 0.5 + 0.5 * np.minimum(1.0, area / FULL_TILE_AREA)


@dataclass(frozen=True, eq=False)
class Roofline:
    """The model's parts, one element per candidate: its tile count, wave and tile efficiencies
    (dimensionless), HBM bytes (of which split-K's reduction) and three times in microseconds."""

    tiles: Values
    wave_efficiency: Values
    tile_efficiency: Values
    splitk_reduction_bytes: Values
    traffic_bytes: Values
    compute_us: Values
    memory_us: Values
    time_us: Values


def roofline(
    m: Values,
    n: Values,
    k: Values,
    block_m: Values,
    block_n: Values,
    split_k: Values,
    in_bytes: Values,
    out_bytes: Values,
    peak_flops_per_s: Values,
    device: DeviceSpec,
    blocks_per_sm: Values = 1.0,
) -> Roofline:
    """The seed's roofline for broadcastable arrays of problems and tiles (module docstring).

    ``peak_flops_per_s`` is the dtype's dense rate (``DeviceSpec.peak_flops_per_s``). The seed
    counts one block per SM both for the wave efficiency and for the blocks sharing panels; pass
    ``blocks_per_sm`` to let co-resident blocks count as one wave. Checked by hand on the H100 spec:
    8192³ bf16, 128×128: 4096 tiles in 32 waves of 132 (efficiency 0.970), compute
    2·8192³ / 989.4e12 s = 1111.3 µs / 0.970 = 1146.0 µs; memory (256·8192·2·4096 / sqrt(132) +
    8192²·2) bytes = 1.63e9 / 3.35e12 B/s = 486 µs; time 1146.0 µs.
    """
    m, n, k = _f64(m), _f64(n), _f64(k)
    grid_m, grid_n = grid_shape(m, n, block_m, block_n)
    output_tiles = grid_m * grid_n
    tiles = output_tiles * split_k
    sharing = np.sqrt(np.minimum(tiles, device.sm_count * _f64(blocks_per_sm)))
    panel_bytes = (_f64(block_m) + block_n) * output_tiles * (k * in_bytes)
    output_bytes = m * n * out_bytes
    min_bytes = (m + n) * k * in_bytes + output_bytes
    reduction_bytes = splitk_reduction_bytes(m, n, split_k)
    traffic = np.maximum(panel_bytes / sharing + output_bytes, min_bytes) + reduction_bytes
    waves_eff = wave_efficiency(tiles, device, blocks_per_sm)
    tile_eff = tile_efficiency(block_m, block_n)
    compute_us = (2e6 * m * n * k / _f64(peak_flops_per_s)) / (waves_eff * tile_eff)
    memory_us = traffic * (1e6 / device.hbm_bytes_per_s)
    time_us = np.maximum(compute_us, memory_us)
    return Roofline(tiles, waves_eff, tile_eff, reduction_bytes, traffic, compute_us, memory_us, time_us)


def roofline_time_us(problem: Problem, configs: ConfigArrays, device: DeviceSpec) -> NDArray[np.float64]:
    """The baseline: the seed's modelled time of ``problem`` under each configuration, in µs.

    Rank candidates by it (``np.argsort``) where no trained model applies. BLOCK_K, GROUP_M, warps,
    stages and the kernel variant do not enter the model, so configurations differing only in those
    tie, and memory-bound problems tie many tile shapes at the bandwidth floor (every tile of a
    16-token decode reads the same weights); ``np.argmin`` returns the first in candidate order.
    """
    model = roofline(
        float(problem.m),
        float(problem.n),
        float(problem.k),
        configs.block_m,
        configs.block_n,
        configs.split_k,
        problem.dtype.in_bytes,
        problem.dtype.out_bytes,
        device.peak_flops_per_s(problem.dtype),
        device,
    )
    return np.asarray(model.time_us, dtype=np.float64)
