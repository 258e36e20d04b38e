"""The feature matrix: one row per (problem, configuration) pair, columns named by FEATURE_NAMES.

Training and prediction both call :func:`feature_matrix`, so the two cannot drift. The predictor
passes one :class:`~tilecost.problem.Problem` and its candidates, as :class:`ConfigArrays` or, built
once per candidate space, as :class:`ConfigFeatures`; training passes :class:`ProblemArrays` and
:class:`ConfigArrays` of equal length, one measured row each. The columns and their order are
:mod:`~tilecost.features.schema`'s; every formula lives, documented and hand-checked, in
:mod:`~tilecost.features.geometry`, :mod:`~tilecost.features.occupancy` or
:mod:`~tilecost.features.roofline`.

Cost: every feature is a handful of whole-array numpy operations, none a Python loop over rows; for
one problem most values are Python floats, whose arithmetic is far cheaper than numpy's.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tilecost.device import DeviceSpec
from tilecost.problem import Layout, Problem

from .candidates import ConfigFeatures, config_columns
from .configs import ConfigArrays
from .geometry import (
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
    tma_aligned,
    wave_efficiency,
    waves,
)
from .problems import DTYPES, ProblemArrays
from .roofline import roofline
from .schema import CONFIG_FEATURES, DTYPE_FEATURES, FEATURE_NAMES, PAIR_FEATURES, PROBLEM_FEATURES

__all__ = ["feature_matrix"]

F64 = NDArray[np.float64]

_CONFIG_START = len(PROBLEM_FEATURES)
_PAIR_START = _CONFIG_START + len(CONFIG_FEATURES)
_BLOCKS_PER_SM = CONFIG_FEATURES.index("blocks_per_sm")


def feature_matrix(
    problem: Problem | ProblemArrays,
    configs: ConfigArrays | ConfigFeatures,
    device: DeviceSpec,
    *,
    registers_per_thread: ArrayLike | None = None,
) -> F64:
    """Features of each (problem, configuration) row: float64, ``rows × len(FEATURE_NAMES)``, C order.

    ``problem`` is one :class:`Problem` (scored against every configuration, the predictor's case)
    or :class:`ProblemArrays` whose length broadcasts against the configurations' (equal lengths:
    one row each, the training case). ``configs`` is :class:`ConfigArrays`, or
    :class:`ConfigFeatures` built for the same device and the problem's dtype. ``registers_per_thread``
    is as in :func:`~tilecost.features.candidates.config_columns` (with ``ConfigFeatures`` it was
    given to :meth:`ConfigFeatures.build` instead).

    Checked in tests/test_features.py: each row equals the matrix of that row alone; the training
    path, the prediction path and the prepared path agree; extreme shapes (M = 1, K = 262,144,
    65,536³) give finite values.
    """
    if isinstance(problem, Problem):
        m: Values = float(problem.m)
        n: Values = float(problem.n)
        k: Values = float(problem.k)
        code: Values = DTYPES.index(problem.dtype)
        layout_nt: Values = problem.layout is Layout.NT
        in_bytes: Values = float(problem.dtype.in_bytes)
        out_bytes: Values = float(problem.dtype.out_bytes)
        peak: Values = device.peak_flops_per_s(problem.dtype)
        problem_rows = 1
    elif isinstance(problem, ProblemArrays):
        m, n, k = problem.m, problem.n, problem.k
        code, layout_nt = problem.dtype_code, problem.layout_nt
        in_bytes, out_bytes = problem.in_bytes, problem.out_bytes
        peak = problem.peak_flops_per_s(device)
        problem_rows = len(problem)
    else:
        raise TypeError(f"problem must be a Problem or ProblemArrays, got {type(problem).__name__}")

    if not isinstance(configs, (ConfigArrays, ConfigFeatures)):
        raise TypeError(f"configs must be ConfigArrays or ConfigFeatures, got {type(configs).__name__}")
    if problem_rows != len(configs) and 1 not in (problem_rows, len(configs)):
        raise ValueError(
            f"{problem_rows} problems and {len(configs)} configurations do not broadcast; "
            "give equal lengths, or one problem"
        )
    rows = max(problem_rows, len(configs)) if min(problem_rows, len(configs)) else 0
    if isinstance(configs, ConfigFeatures):
        _check_prepared(configs, problem, device, registers_per_thread)
        c, config_block = configs.configs, configs.columns
    else:
        c, config_block = configs, config_columns(configs, device, in_bytes, out_bytes, registers_per_thread)

    out = np.empty((rows, len(FEATURE_NAMES)), dtype=np.float64)
    problem_values = {
        "log2_m": np.log2(m),
        "log2_n": np.log2(n),
        "log2_k": np.log2(k),
        "in_bytes": in_bytes,
        **{name: code == i for i, name in enumerate(DTYPE_FEATURES)},
        "layout_nt": layout_nt,
        "log2_problem_flop_per_byte": np.log2(problem_flop_per_byte(m, n, k, in_bytes, out_bytes)),
        "m_multiple_of_16": multiple_of(m, 16),
        "n_multiple_of_16": multiple_of(n, 16),
        "k_multiple_of_16": multiple_of(k, 16),
        "m_multiple_of_8": multiple_of(m, 8),
        "n_multiple_of_8": multiple_of(n, 8),
        "k_multiple_of_8": multiple_of(k, 8),
        "tma_aligned": tma_aligned(n, k, layout_nt, in_bytes, out_bytes),
    }
    ordered = [problem_values[name] for name in PROBLEM_FEATURES]
    if problem_rows == 1:  # one problem: its values fill every row in one step
        out[:, :_CONFIG_START] = np.array(ordered, dtype=np.float64).ravel()
    else:
        for index, values in enumerate(ordered):
            out[:, index] = values
    out[:, _CONFIG_START:_PAIR_START] = config_block

    occupancy = config_block[:, _BLOCKS_PER_SM]
    model = roofline(m, n, k, c.block_m, c.block_n, c.split_k, in_bytes, out_bytes, peak, device)
    grid_m, grid_n = grid_shape(m, n, c.block_m, c.block_n)
    k_iters = k_iterations(k, c.block_k, c.split_k)
    a_aligned, b_aligned, c_aligned = operand_rows_aligned(n, k, layout_nt)

    def log2_instructions(rows: Values, cols: Values, aligned: Values, element_bytes: Values) -> Values:
        per_thread = memory_instructions_per_thread(rows, cols, aligned, element_bytes, c.num_warps)
        return np.log2(np.maximum(per_thread, 1.0 / 64))  # floor: below one instruction in 64 threads is "none"

    pair_values = {
        "log2_tiles": np.log2(model.tiles),
        "waves": waves(model.tiles, device, occupancy),
        "wave_efficiency": wave_efficiency(model.tiles, device, occupancy),
        "sm_wave_efficiency": model.wave_efficiency,
        "k_iterations": k_iters,
        "pipeline_fill_fraction": pipeline_fill_fraction(k_iters, c.num_stages),
        "padding_waste": padding_waste(m, n, k, c.block_m, c.block_n, c.block_k),
        "splitk_reduction_bytes": model.splitk_reduction_bytes,
        "l2_panel_reuse": l2_panel_reuse(grid_m, grid_n, c.block_m, c.block_n, c.group_m, device.sm_count * occupancy),
        "log2_roofline_traffic_bytes": np.log2(model.traffic_bytes),
        "log2_roofline_compute_us": np.log2(model.compute_us),
        "log2_roofline_memory_us": np.log2(model.memory_us),
        "log2_roofline_time_us": np.log2(model.time_us),
        "roofline_compute_over_memory": model.compute_us / model.memory_us,
        "log2_a_loads_per_thread": log2_instructions(c.block_m, c.block_k, a_aligned, in_bytes),
        "log2_b_loads_per_thread": log2_instructions(c.block_k, c.block_n, b_aligned, in_bytes),
        "log2_c_stores_per_thread": log2_instructions(c.block_m, c.block_n, c_aligned, out_bytes),
    }
    for index, name in enumerate(PAIR_FEATURES, start=_PAIR_START):
        out[:, index] = pair_values[name]
    return out


def _check_prepared(
    prepared: ConfigFeatures, problem: Problem | ProblemArrays, device: DeviceSpec, registers: ArrayLike | None
) -> None:
    """Refuse prepared columns built for another device or dtype, or a second register count."""
    if prepared.device is not device and prepared.device != device:
        raise ValueError(
            f"ConfigFeatures were built for device {prepared.device.device_class!r}, not {device.device_class!r}"
        )
    if isinstance(problem, Problem):
        same_dtype = problem.dtype is prepared.dtype
    else:
        same_dtype = bool((problem.dtype_code == DTYPES.index(prepared.dtype)).all())
    if not same_dtype:
        raise ValueError(f"ConfigFeatures were built for dtype {prepared.dtype.value!r}; the problem has another")
    if registers is not None:
        raise ValueError("registers_per_thread goes to ConfigFeatures.build, not with prepared columns")
