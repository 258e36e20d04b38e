"""The numba kernels of the predictor's compiled path: tree walking, and one shortlist's scoring.

Imported only by :mod:`tilecost.predict.jit`, and only when numba is installed and enabled:
``import numba`` costs ~0.2 s, which plain ``import tilecost`` must not pay. Every kernel has a numpy
reference it is tested against (tests/test_predict_jit.py):

* :func:`walk_trees` is :meth:`tilecost.predict.trees.TreeEnsemble.predict_numpy`; it returns the
  same bits (both sum the reached float32 leaf values in float64, where 300 such sums are exact);
* :func:`kth_distance` is :func:`tilecost.predict.ood._kth_distance` (the same squares summed in the
  same order, the same bits);
* :func:`dispatch_stump` is :func:`tilecost.predict.dispatch._stump` (the same prefix sums in the same
  order, the same ties: the same tree and the same bits of its cost);
* :func:`shortlist_features` is :func:`tilecost.predict.feasibility.feasible_mask` followed by
  :func:`tilecost.features.feature_matrix` on the feasible members. The numpy functions stay the
  single definition of the features (training uses only them); this is a transcription of their
  formulas in the same floating-point order, for the ~20 rows of one query, where numpy spends a
  microsecond per operation on dispatch. Any formula change there must be made here too, and the
  test of equality on random problems and the whole candidate space says so when it is not.

Tree layout (built by :func:`tilecost.predict.jit.compile_trees`): per node one ``uint32`` word
``left << 6 | feature`` (its right child is ``left + 1``), a float32 threshold (NaN at leaves, so
that ``x >= threshold`` is false for every x and a leaf keeps the row: a leaf is its own left
child), the leaf value, and ``default_right`` (where a NaN goes). The roots are padded to a multiple
of ``LANES`` with a zero-valued leaf, so that every row walks ``LANES`` trees in lockstep: 16
independent chains of loads keep the core busy where one chain would wait on each load (measured on
this 2-core EPYC: 300 trees of depth 8, 20 rows, 57 µs with 16 lanes, 178 µs walking one tree at a
time, 196 µs for the numpy level-wise walk). And every row of a block of :data:`ROW_BLOCK` takes its
step down those 16 trees before any row takes the next, so a query's 8 rows keep 128 chains in
flight: a new shape's deeper nodes are mostly not in the caches, and waiting on them is where the
walk's time goes. On the shipped H200 model (300 trees of depth 12) and the width-8 rows of 2,400
distinct random shapes, the lockstep walk took 0.56-0.68 of the per-row walk's p50
(``benchmarks/experiments/walk_lockstep.py``, BENCHMARKS §5, twenty-first session).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["LANES", "best_two", "dispatch_stump", "kth_distance", "score_shortlist", "shortlist_features", "walk_trees"]

LANES = 16
# Rows walked together (walk_trees): a query's shortlist (~8-30 rows) is one block; bulk scoring keeps
# its scratch and the nodes its rows share in the caches.
ROW_BLOCK = 32
_SHIFT = np.uint64(6)
_MASK = np.uint64(63)


@numba.njit(cache=True, nogil=True)
def walk_trees(x, word, threshold, value, default_right, roots, depth, base_score):  # type: ignore[no-untyped-def]
    """Predictions (float64) for the float32 rows of ``x``: ``base_score`` + the reached leaves.

    Rows go in blocks of :data:`ROW_BLOCK`; a block walks ``LANES`` trees at a time, one level at a time
    for every row and lane before the next level (module docstring)."""
    rows = x.shape[0]
    has_nan = np.zeros(rows, np.bool_)
    for r in range(rows):
        for f in range(x.shape[1]):
            if x[r, f] != x[r, f]:
                has_nan[r] = True
    total = np.zeros(rows)
    node = np.empty((min(rows, ROW_BLOCK), LANES), np.uint64)
    for first in range(0, rows, ROW_BLOCK):
        last = min(rows, first + ROW_BLOCK)
        for start in range(0, roots.shape[0], LANES):
            for r in range(first, last):
                for j in range(LANES):
                    node[r - first, j] = roots[start + j]
            for _ in range(depth):
                for r in range(first, last):
                    nan = has_nan[r]
                    for j in range(LANES):
                        at = node[r - first, j]
                        packed = np.uint64(word[at])
                        feature_value = x[r, packed & _MASK]
                        if nan and feature_value != feature_value:
                            right = np.uint64(default_right[at])
                        else:
                            right = np.uint64(feature_value >= threshold[at])
                        node[r - first, j] = (packed >> _SHIFT) + right
            for r in range(first, last):
                for j in range(LANES):
                    total[r] += np.float64(value[node[r - first, j]])
    for r in range(rows):
        total[r] += base_score
    return total


@numba.njit(cache=True, nogil=True)
def _fit(extent, options):  # type: ignore[no-untyped-def]
    """The smallest of ``options`` (ascending) that covers ``extent``, the largest if none does
    (:func:`tilecost.predict.feasibility._fit`)."""
    for i in range(options.shape[0]):
        if options[i] >= extent:
            return options[i]
    return options[options.shape[0] - 1]


@numba.njit(cache=True, nogil=True)
def shortlist_features(members, m, n, k, constants, fits, space_ints, config_columns, layout):  # type: ignore[no-untyped-def]
    """The feasible ``members`` (space indices) of the problem ``m`` × ``n`` × ``k`` and their feature rows (float64).

    ``constants``: float64, what every problem of the group shares: ``[in_bytes, out_bytes,
    peak_flops_per_s, dtype code, layout is nt, split-K tile limit, sm_count, hbm_bytes_per_s, SPLIT_K_MIN_K]``
    (an argument, not a global: numba's cache would keep a global's old value after the rule changed);
    ``fits``: int64 ``(2, L)``, the BLOCK_M/BLOCK_N options and the dtype's BLOCK_K options, ascending,
    each row padded by repeating its largest (with the split-K tile limit, the problem's side of the
    rules: :func:`tilecost.predict.feasibility.problem_limits`); ``space_ints``: int64
    ``[block_m, block_n, block_k, group_m, split_k, is_tma, miscompiled_on_ragged_k]`` per configuration of the
    space;
    ``config_columns``: the space's ``CONFIG_FEATURES`` columns (``ConfigFeatures.columns``);
    ``layout``: the feature schema's offsets ``[config start, pair start, blocks_per_sm column, width,
    dtype columns]``.
    """
    mi, ni, ki = np.int64(m), np.int64(n), np.int64(k)
    m, n, k = float(mi), float(ni), float(ki)
    in_bytes, out_bytes, peak = constants[0], constants[1], constants[2]
    nt = constants[4] != 0
    split_k_tiles = np.int64(constants[5])
    sm_count, hbm_bytes_per_s = constants[6], constants[7]
    split_k_min_k = np.int64(constants[8])
    b_row = n + (k - n) * (1.0 if nt else 0.0)
    # tilecost.space.tma_aligned: every row stride a multiple of 16 bytes (exact: integers below 2**53)
    tma_ok = (k * in_bytes % 16 == 0) and (b_row * in_bytes % 16 == 0) and (n * out_bytes % 16 == 0)
    max_m, max_n, max_k = _fit(mi, fits[0]), _fit(ni, fits[0]), _fit(ki, fits[1])
    keep = np.empty(members.shape[0], np.intp)
    count = 0
    for i in range(members.shape[0]):  # feasibility.feasible_mask, rule by rule
        c = members[i]
        bm, bn, bk, gm, sk, tma = (space_ints[c, 0], space_ints[c, 1], space_ints[c, 2], space_ints[c, 3],
                                   space_ints[c, 4], space_ints[c, 5])  # fmt: skip
        unsafe = space_ints[c, 6]
        grid_m = -(-mi // bm)
        grid_n = -(-ni // bn)
        ok = bm <= max_m and bn <= max_n and bk <= max_k
        ok = ok and sk <= -(-ki // bk)
        ok = ok and (sk == 1 or ki > split_k_min_k)
        ok = ok and (sk == 1 or grid_m * grid_n < split_k_tiles)
        ok = ok and (gm == 1 or (grid_m > 1 and grid_n > 1))
        ok = ok and (tma_ok or tma == 0)
        ok = ok and (ki % 16 == 0 or unsafe == 0)
        if ok:
            keep[count] = c
            count += 1
    config_start, pair_start, blocks_column, width, dtypes = layout[0], layout[1], layout[2], layout[3], layout[4]
    out = np.empty((count, width))
    # the problem's columns (matrix.feature_matrix's problem_values, in PROBLEM_FEATURES order)
    head = np.empty(config_start)
    head[0], head[1], head[2], head[3] = np.log2(m), np.log2(n), np.log2(k), in_bytes
    for d in range(dtypes):
        head[4 + d] = 1.0 if constants[3] == d else 0.0
    at = 4 + dtypes
    head[at] = 1.0 if nt else 0.0
    head[at + 1] = np.log2(2.0 * m * n * k / ((m * k + k * n) * in_bytes + m * n * out_bytes))
    head[at + 2], head[at + 3], head[at + 4] = m % 16 == 0, n % 16 == 0, k % 16 == 0
    head[at + 5], head[at + 6], head[at + 7] = m % 8 == 0, n % 8 == 0, k % 8 == 0
    head[at + 8] = tma_ok
    mnk = m * n * k
    # geometry.operand_rows_aligned: 16-byte vectors where a row's stride (K for A and nt's B, N for nn's B and C)
    # is a multiple of 16, else one element a load; the same for every row of the problem
    k_aligned, n_aligned = ki % 16 == 0, ni % 16 == 0
    a_vector = 16.0 / in_bytes if k_aligned else 1.0
    b_vector = 16.0 / in_bytes if (k_aligned if nt else n_aligned) else 1.0
    c_vector = 16.0 / out_bytes if n_aligned else 1.0
    for row in range(count):
        c = keep[row]
        for j in range(config_start):
            out[row, j] = head[j]
        for j in range(pair_start - config_start):
            out[row, config_start + j] = config_columns[c, j]
        block_m, block_n, block_k = config_columns[c, 0], config_columns[c, 1], config_columns[c, 2]
        group_m, split_k, num_stages = config_columns[c, 3], config_columns[c, 4], config_columns[c, 6]
        occupancy = config_columns[c, blocks_column]
        # roofline.roofline at one block per SM
        grid_m = np.ceil(m / block_m)
        grid_n = np.ceil(n / block_n)
        output_tiles = grid_m * grid_n
        tiles = output_tiles * split_k
        sharing = np.sqrt(min(tiles, sm_count * 1.0))
        panel_bytes = (block_m + block_n) * output_tiles * (k * in_bytes)
        output_bytes = m * n * out_bytes
        min_bytes = (m + n) * k * in_bytes + output_bytes
        reduction = 8.0 * m * n * split_k * (1.0 if split_k > 1 else 0.0)
        traffic = max(panel_bytes / sharing + output_bytes, min_bytes) + reduction
        slots = sm_count * 1.0
        sm_wave_efficiency = tiles / (np.ceil(tiles / slots) * slots)
        tile_efficiency = 0.5 + 0.5 * min(1.0, block_m * block_n / 16384)
        compute_us = (2e6 * m * n * k / peak) / (sm_wave_efficiency * tile_efficiency)
        memory_us = traffic * (1e6 / hbm_bytes_per_s)
        time_us = max(compute_us, memory_us)
        # the pair columns, in PAIR_FEATURES order
        concurrent = sm_count * occupancy
        k_iters = np.ceil(k / (block_k * split_k))
        padded = (np.ceil(m / block_m) * block_m) * (np.ceil(n / block_n) * block_n) * (np.ceil(k / block_k) * block_k)
        resident = min(grid_m * grid_n, concurrent)  # geometry.l2_panel_reuse
        group = min(group_m, grid_m)
        per_group = group * grid_n
        full_groups = np.floor(resident / per_group)
        rest = resident - full_groups * per_group
        reuse_rows = min(grid_m, full_groups * group + min(group, rest))
        reuse_cols = min(grid_n, full_groups * grid_n + np.ceil(rest / group))
        p = pair_start
        out[row, p] = np.log2(tiles)
        out[row, p + 1] = tiles / concurrent
        out[row, p + 2] = tiles / (np.ceil(tiles / concurrent) * concurrent)
        out[row, p + 3] = sm_wave_efficiency
        out[row, p + 4] = k_iters
        out[row, p + 5] = min(num_stages - 1.0, k_iters) / k_iters
        out[row, p + 6] = padded / mnk - 1.0
        out[row, p + 7] = reduction
        out[row, p + 8] = resident * (block_m + block_n) / (reuse_rows * block_m + reuse_cols * block_n)
        out[row, p + 9] = np.log2(traffic)
        out[row, p + 10] = np.log2(compute_us)
        out[row, p + 11] = np.log2(memory_us)
        out[row, p + 12] = np.log2(time_us)
        out[row, p + 13] = compute_us / memory_us
        # geometry.memory_instructions_per_thread, floored at 1/64 and in log2 (matrix.feature_matrix)
        threads = 32.0 * config_columns[c, 5]
        a_loads = block_m * block_k / (a_vector * threads)
        b_loads = block_k * block_n / (b_vector * threads)
        c_stores = block_m * block_n / (c_vector * threads)
        out[row, p + 14] = np.log2(max(a_loads, 1.0 / 64))
        out[row, p + 15] = np.log2(max(b_loads, 1.0 / 64))
        out[row, p + 16] = np.log2(max(c_stores, 1.0 / 64))
    return keep[:count], out


@numba.njit(cache=True, nogil=True)
def score_shortlist(  # type: ignore[no-untyped-def]
    members, m, n, k, constants, fits, space_ints, config_columns, layout,
    word, threshold, value, default_right, roots, depth, base_score,
):  # fmt: skip
    """:func:`shortlist_features` then :func:`walk_trees` on the rows as float32, in one call:
    the feasible members, their feature rows and the model's predictions."""
    keep, x = shortlist_features(members, m, n, k, constants, fits, space_ints, config_columns, layout)
    x32 = x.astype(np.float32)
    return keep, x, walk_trees(x32, word, threshold, value, default_right, roots, depth, base_score)


@numba.njit(cache=True, nogil=True)
def best_two(  # type: ignore[no-untyped-def]
    members, m, n, k, constants, fits, space_ints, config_columns, layout,
    word, threshold, value, default_right, roots, depth, base_score, roofline_column,
):  # fmt: skip
    """:func:`score_shortlist`, then the times in µs and the two fastest, in the same call:
    ``(space index of the fastest, its µs, the second-fastest µs, feasible members)``; -1 and inf
    where there are none (the second: fewer than two). ``roofline_column`` >= 0: the target is
    ``log_time_over_roofline`` and that feature column holds log2 of the roofline time
    (:func:`tilecost.predict.scoring.times_from_target`, the same formula); -1: ``log_time_us``.
    Ties go to the first member in ``members``' order, as ``np.argmin`` does; the second equals the
    fastest when two tie (``np.partition``)."""
    keep, x = shortlist_features(members, m, n, k, constants, fits, space_ints, config_columns, layout)
    x32 = x.astype(np.float32)
    predictions = walk_trees(x32, word, threshold, value, default_right, roots, depth, base_score)
    return _fastest_two(keep, x, predictions, roofline_column)


@numba.njit(cache=True, nogil=True)
def best_two_level(  # type: ignore[no-untyped-def]
    members, m, n, k, constants, fits, space_ints, config_columns, layout,
    word, threshold, value, default_right, roots, depth, base_score, roofline_column,
    level_word, level_threshold, level_value, level_default_right, level_roots, level_depth, level_base_score,
):  # fmt: skip
    """:func:`best_two` for a booster whose last trees are its per-problem level (the ``level_*`` trees,
    which read only the problem's columns): they are walked once, on the first feasible row, and their
    sum is added to every row's prediction before the times are taken, as
    :meth:`tilecost.predict.scoring.GroupScorer.times_us` does."""
    keep, x = shortlist_features(members, m, n, k, constants, fits, space_ints, config_columns, layout)
    x32 = x.astype(np.float32)
    predictions = walk_trees(x32, word, threshold, value, default_right, roots, depth, base_score)
    if keep.shape[0] > 0:
        level = walk_trees(x32[:1], level_word, level_threshold, level_value, level_default_right, level_roots,
                           level_depth, level_base_score)[0]  # fmt: skip
        predictions = predictions + level
    return _fastest_two(keep, x, predictions, roofline_column)


@numba.njit(cache=True, nogil=True)
def _fastest_two(keep, x, predictions, roofline_column):  # type: ignore[no-untyped-def]
    best_index, best_us, second_us = -1, np.inf, np.inf
    for row in range(keep.shape[0]):
        time_us = np.exp(predictions[row])
        if roofline_column >= 0:
            time_us *= np.exp2(x[row, roofline_column])
        if time_us < best_us:
            second_us = best_us
            best_index, best_us = keep[row], time_us
        elif time_us < second_us:
            second_us = time_us
    return best_index, best_us, second_us, keep.shape[0]


@numba.njit(cache=True, nogil=True)
def kth_distance(points, q0, q1, q2, neighbours):  # type: ignore[no-untyped-def]
    """Euclidean distance from (q0, q1, q2) to the ``neighbours``-th nearest row of ``points``."""
    count = points.shape[0]
    if count == 0:
        return np.inf
    squared = np.empty(count)
    for i in range(count):
        a = points[i, 0] - q0
        b = points[i, 1] - q1
        c = points[i, 2] - q2
        squared[i] = a * a + b * b + c * c
    if neighbours == 1:
        return np.sqrt(squared.min())
    kth = min(neighbours, count) - 1
    return np.sqrt(np.partition(squared, kth)[kth])


@numba.njit(cache=True, nogil=True, fastmath={"nnan", "ninf", "nsz", "reassoc"})
def _split_cost(below, total):  # type: ignore[no-untyped-def]
    """``min(below) + min(total - below)``. A minimum is exact in any order, so these flags (which let the loop
    run in vector lanes) change no bit; the sums stay in the kernels without them."""
    low, high = np.inf, np.inf
    for j in range(below.shape[0]):
        low = min(low, below[j])
        high = min(high, total[j] - below[j])
    return low + high


@numba.njit(cache=True, nogil=True)
def _add_rows(into, regret, rows, order, count):  # type: ignore[no-untyped-def]
    """``into += regret[rows[order[i]]]`` for i < count, in that order."""
    into[:] = 0.0
    for i in range(count):
        r = rows[order[i]]
        for j in range(into.shape[0]):
            into[j] += regret[r, j]


@numba.njit(cache=True, nogil=True)
def _first_min(values):  # type: ignore[no-untyped-def]
    best = 0
    for j in range(1, values.shape[0]):
        if values[j] < values[best]:
            best = j
    return best


@numba.njit(cache=True, nogil=True)
def dispatch_stump(regret, rows, points, min_leaf):  # type: ignore[no-untyped-def]
    """The best tree of depth at most one over the ``rows`` of ``regret`` (problems × configurations) and
    ``points`` (problems × log2 M, N, K), each side of a split holding at least ``min_leaf`` rows:
    :func:`tilecost.predict.dispatch._stump` of ``regret[rows]`` and ``points[rows]`` without the copies.

    Returns ``(cost, leaf config, axis, below config, above config, value below, value above)``: axis -1
    where one leaf is best (its config is the second value), else the split's axis, the configurations of
    its two sides and the two neighbouring values its threshold lies halfway between.
    """
    n, configs = rows.shape[0], regret.shape[1]
    identity = np.arange(n)
    total = np.empty(configs)
    _add_rows(total, regret, rows, identity, n)
    leaf = _first_min(total)
    best, best_axis, best_below, best_above, value_below, value_above = total[leaf], -1, -1, -1, 0.0, 0.0
    values = np.empty(n)
    below = np.empty(configs)
    for axis in range(3):
        for i in range(n):
            values[i] = points[rows[i], axis]
        order = np.argsort(values, kind="mergesort")  # stable, as the reference's argsort
        _add_rows(total, regret, rows, order, n)  # the reference's cumulative[-1]: summed in this order
        below[:] = 0.0
        axis_best, axis_cut = np.inf, -1
        for i in range(n - min_leaf):
            r = rows[order[i]]
            for j in range(configs):
                below[j] += regret[r, j]
            cut = i + 1
            if cut >= min_leaf and values[order[cut - 1]] < values[order[cut]]:
                cost = _split_cost(below, total)
                if cost < axis_best:
                    axis_best, axis_cut = cost, cut
        if axis_cut >= 0 and axis_best < best:
            _add_rows(below, regret, rows, order, axis_cut)
            best, best_axis, best_below = axis_best, axis, _first_min(below)
            best_above = _first_min(total - below)
            value_below, value_above = values[order[axis_cut - 1]], values[order[axis_cut]]
    return best, leaf, best_axis, best_below, best_above, value_below, value_above
