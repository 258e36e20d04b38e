"""The feature schema: the names and order of the feature matrix's columns, and their version.

Columns come in three groups, each built in one place:

* :data:`PROBLEM_FEATURES`: functions of the problem alone, the same in every row of one problem
  (built by :func:`~tilecost.features.matrix.feature_matrix`);
* :data:`CONFIG_FEATURES`: functions of the configuration, the device and the dtype, not of the
  extents, so a candidate space computes them once
  (:func:`~tilecost.features.candidates.config_columns`);
* :data:`PAIR_FEATURES`: functions of the problem's extents and the configuration together
  (:func:`~tilecost.features.matrix.feature_matrix`).

The comment after each name gives the function that computes it; each function's docstring has the
formula, units and hand check. Units: ``*_bytes`` bytes, ``*_us`` microseconds, ``*_flop_per_byte``
FLOP/byte, ``log2_*`` the base-2 logarithm of the named quantity (for quantities spanning orders of
magnitude, so that float32 consumers such as XGBoost keep their resolution), flags 0/1, the rest
counts or dimensionless ratios.

A model artifact records :data:`FEATURE_NAMES` and :data:`FEATURE_SCHEMA_VERSION`. Adding, removing,
reordering or redefining a column bumps the version, so that an old model refuses to load rather
than read columns it was not trained on.
"""

from __future__ import annotations

from tilecost.problem import DType

from .problems import DTYPES

__all__ = [
    "CONFIG_FEATURES",
    "DTYPE_FEATURES",
    "FEATURE_NAMES",
    "FEATURE_SCHEMA_VERSION",
    "PAIR_FEATURES",
    "PROBLEM_FEATURES",
]

FEATURE_SCHEMA_VERSION = 2  # 2: the three memory-instruction columns (forty-fourth session)

_DTYPE_COLUMN = {DType.FP16: "dtype_fp16", DType.BF16: "dtype_bf16", DType.FP32: "dtype_fp32", DType.FP8: "dtype_fp8"}
# The dtype's one-hot columns; column i is 1 where the row's dtype is DTYPES[i].
DTYPE_FEATURES: tuple[str, ...] = tuple(_DTYPE_COLUMN[d] for d in DTYPES)

PROBLEM_FEATURES: tuple[str, ...] = (
    "log2_m",
    "log2_n",
    "log2_k",
    "in_bytes",  # DType.in_bytes
    *DTYPE_FEATURES,
    "layout_nt",  # 1 where B is stored N×K
    "log2_problem_flop_per_byte",  # geometry.problem_flop_per_byte
    "m_multiple_of_16",  # geometry.multiple_of
    "n_multiple_of_16",
    "k_multiple_of_16",
    "m_multiple_of_8",
    "n_multiple_of_8",
    "k_multiple_of_8",
    "tma_aligned",  # geometry.tma_aligned
)

CONFIG_FEATURES: tuple[str, ...] = (
    "block_m",  # the TileConfig fields
    "block_n",
    "block_k",
    "group_m",
    "split_k",
    "num_warps",
    "num_stages",
    "is_tma",
    "tile_flop_per_byte",  # geometry.tile_flop_per_byte
    "accumulators_per_thread",  # occupancy.accumulators_per_thread
    "registers_per_thread",  # measured if given, else occupancy.registers_per_thread_estimate
    "smem_bytes",  # occupancy.smem_bytes
    "blocks_per_sm",  # occupancy.blocks_per_sm
    "warps_per_sm",  # blocks_per_sm · num_warps: warps resident to hide latency with
    "tile_efficiency",  # roofline.tile_efficiency
)

PAIR_FEATURES: tuple[str, ...] = (
    "log2_tiles",  # roofline.Roofline.tiles (geometry.tile_count)
    "waves",  # geometry.waves at blocks_per_sm
    "wave_efficiency",  # geometry.wave_efficiency at blocks_per_sm
    "sm_wave_efficiency",  # geometry.wave_efficiency at one block per SM (the seed's, in the roofline)
    "k_iterations",  # geometry.k_iterations
    "pipeline_fill_fraction",  # geometry.pipeline_fill_fraction
    "padding_waste",  # geometry.padding_waste
    "splitk_reduction_bytes",  # geometry.splitk_reduction_bytes
    "l2_panel_reuse",  # geometry.l2_panel_reuse with SMs · blocks_per_sm blocks resident
    "log2_roofline_traffic_bytes",  # roofline.roofline
    "log2_roofline_compute_us",
    "log2_roofline_memory_us",
    "log2_roofline_time_us",
    "roofline_compute_over_memory",  # compute_us / memory_us: above 1 compute-bound
    "log2_a_loads_per_thread",  # geometry.memory_instructions_per_thread: BLOCK_M × BLOCK_K of A, one K step
    "log2_b_loads_per_thread",  # BLOCK_K × BLOCK_N of B, one K step (rows aligned: geometry.operand_rows_aligned)
    "log2_c_stores_per_thread",  # BLOCK_M × BLOCK_N of C, once per program (output bytes)
)

FEATURE_NAMES: tuple[str, ...] = PROBLEM_FEATURES + CONFIG_FEATURES + PAIR_FEATURES
