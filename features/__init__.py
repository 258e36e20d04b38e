"""tilecost.features: pure, vectorised functions of (problem, configuration, device spec).

The very same functions build the training matrix and the prediction matrix, so the two cannot
drift. Inputs are numpy arrays that broadcast (one element per candidate or per measured row);
:class:`ConfigArrays` and :class:`ProblemArrays` hold configurations and problems in that form, and
:func:`feature_matrix` turns them into the columns named by :data:`FEATURE_NAMES`.

Modules: ``problems`` and ``configs`` (the struct-of-arrays inputs), ``geometry`` (tiles, waves,
padding, alignment, intensity, L2 reuse), ``occupancy`` (shared memory, registers, blocks per SM),
``roofline`` (the seed's analytical model and baseline), ``schema`` (the column names, order and
version), ``candidates`` (a candidate space's problem-independent columns, computed once) and
``matrix`` (:func:`feature_matrix`).
"""

from .candidates import ConfigFeatures, config_columns
from .configs import ConfigArrays
from .geometry import (
    ACCUMULATOR_BYTES,
    Values,
    grid_shape,
    k_iterations,
    l2_panel_reuse,
    memory_instructions_per_thread,
    multiple_of,
    operand_rows_aligned,
    padding_waste,
    pipeline_fill_fraction,
    problem_flop_per_byte,
    splitk_reduction_bytes,
    tile_count,
    tile_flop_per_byte,
    tma_aligned,
    wave_efficiency,
    waves,
)
from .matrix import feature_matrix
from .occupancy import (
    OTHER_REGISTERS_PER_THREAD,
    REGISTER_ALLOCATION_UNIT,
    RESERVED_SMEM_PER_BLOCK_BYTES,
    accumulators_per_thread,
    blocks_per_sm,
    registers_per_thread_estimate,
    smem_bytes,
)
from .problems import DTYPES, ProblemArrays
from .roofline import FULL_TILE_AREA, Roofline, roofline, roofline_time_us, tile_efficiency
from .schema import (
    CONFIG_FEATURES,
    DTYPE_FEATURES,
    FEATURE_NAMES,
    FEATURE_SCHEMA_VERSION,
    PAIR_FEATURES,
    PROBLEM_FEATURES,
)

__all__ = [
    "ACCUMULATOR_BYTES",
    "CONFIG_FEATURES",
    "ConfigArrays",
    "ConfigFeatures",
    "DTYPES",
    "DTYPE_FEATURES",
    "FEATURE_NAMES",
    "FEATURE_SCHEMA_VERSION",
    "FULL_TILE_AREA",
    "OTHER_REGISTERS_PER_THREAD",
    "PAIR_FEATURES",
    "PROBLEM_FEATURES",
    "ProblemArrays",
    "REGISTER_ALLOCATION_UNIT",
    "RESERVED_SMEM_PER_BLOCK_BYTES",
    "Roofline",
    "Values",
    "accumulators_per_thread",
    "blocks_per_sm",
    "config_columns",
    "feature_matrix",
    "grid_shape",
    "k_iterations",
    "l2_panel_reuse",
    "memory_instructions_per_thread",
    "multiple_of",
    "operand_rows_aligned",
    "padding_waste",
    "pipeline_fill_fraction",
    "problem_flop_per_byte",
    "registers_per_thread_estimate",
    "roofline",
    "roofline_time_us",
    "smem_bytes",
    "splitk_reduction_bytes",
    "tile_count",
    "tile_efficiency",
    "tile_flop_per_byte",
    "tma_aligned",
    "wave_efficiency",
    "waves",
]
