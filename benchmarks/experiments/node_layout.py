"""Tree node layouts for the compiled walk: one cache line per step instead of two, the likely path contiguous.

    .venv/bin/python benchmarks/experiments/node_layout.py [--shapes 2400] [--rounds 4] [--width 8]

An experiment of the twenty-third session (BENCHMARKS §5). The shipped walk (:func:`~tilecost.predict.jit_kernels.
walk_trees`) reads, per step, a node's packed ``left << 6 | feature`` word and its threshold from two arrays, so a
node not in the caches costs two cache-line misses; nodes are numbered breadth-first per tree (siblings adjacent),
so below the first levels every step lands on a new line. A new shape's query spends most of its time waiting on
those lines (twenty-first session). Variants, all with siblings adjacent (right child = left + 1) and the same walk
otherwise:

* ``shipped``: the shipped arrays and kernel;
* ``packed_bfs``: word and threshold interleaved (8 bytes a node, one line a step), breadth-first;
* ``packed_dfs``: interleaved, each tree laid out depth first by sibling pairs: a node's children pair, then the
  subtree of the child more training rows reached (XGBoost's ``sum_hessian``: the row count under squared error),
  then the other's; so a row following the likely path reads consecutive pairs (4 to a 64-byte line);
* ``split_dfs``: the shipped two arrays in ``packed_dfs``'s order (the order's share of the gain);
* ``no_nan``: the shipped arrays, a walk without the missing-value test (rows without NaN only: a query's rows);
* ``uint32``: the shipped arrays, 32-bit node ids and the row's slice taken once per row and level.

Before the layouts, what a walk does (:func:`anatomy`): at which depth rows reach their leaves (a walk takes
``depth`` steps whatever the leaf), how many steps test a problem feature, which every row of a query shares, and
how many of those a walk could take once for all rows (the trees' first steps, while every row is at the same node
and it tests a problem feature). And how much the caches matter at all: the shipped walk on each shape's rows when
they are new (``cold``, shapes in turn) against the same rows walked again at once (``hot``, their nodes just read).

All must give the same bits on every row. Then the walks alone take turns on the width-``--width`` shortlist rows of
distinct random shapes, each variant against the shipped walk alone (round r gives shape i to the shipped walk when
i + r is even), so that a third layout's nodes do not crowd the caches, as ``walk_lockstep.py`` does.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np

# walk_lockstep.py's shortlist rows of distinct random shapes (every dtype and layout)
from walk_lockstep import shortlist_rows  # type: ignore[import-not-found]

from tilecost import Predictor
from tilecost.features import PROBLEM_FEATURES
from tilecost.predict import jit_kernels as kernels
from tilecost.predict import ubjson
from tilecost.problem import DType, Layout

LANES = kernels.LANES
ROW_BLOCK = kernels.ROW_BLOCK
SHIFT = np.uint64(6)
MASK = np.uint64(63)


@numba.njit(nogil=True)
def walk_packed(x, nodes, thresholds, value, default_right, roots, depth, base_score):  # type: ignore[no-untyped-def]
    """:func:`~tilecost.predict.jit_kernels.walk_trees` reading node i's word at ``nodes[2i]`` and its threshold at
    ``thresholds[2i + 1]`` (two views of one buffer)."""
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
                        packed = np.uint64(nodes[2 * at])
                        feature_value = x[r, packed & MASK]
                        if nan and feature_value != feature_value:
                            right = np.uint64(default_right[at])
                        else:
                            right = np.uint64(feature_value >= thresholds[2 * at + 1])
                        node[r - first, j] = (packed >> SHIFT) + right
            for r in range(first, last):
                for j in range(LANES):
                    total[r] += np.float64(value[node[r - first, j]])
    for r in range(rows):
        total[r] += base_score
    return total


@numba.njit(nogil=True)
def walk_no_nan(x, word, threshold, value, default_right, roots, depth, base_score):  # type: ignore[no-untyped-def]
    """:func:`~tilecost.predict.jit_kernels.walk_trees` without the missing-value test (rows without NaN)."""
    rows = x.shape[0]
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
                    for j in range(LANES):
                        at = node[r - first, j]
                        packed = np.uint64(word[at])
                        node[r - first, j] = (packed >> SHIFT) + np.uint64(x[r, packed & MASK] >= threshold[at])
            for r in range(first, last):
                for j in range(LANES):
                    total[r] += np.float64(value[node[r - first, j]])
    for r in range(rows):
        total[r] += base_score
    return total


@numba.njit(nogil=True)
def walk_uint32(x, word, threshold, value, default_right, roots, depth, base_score):  # type: ignore[no-untyped-def]
    """:func:`walk_no_nan` with 32-bit node ids, the row and its node ids sliced once per row and level."""
    rows = x.shape[0]
    total = np.zeros(rows)
    node = np.empty((min(rows, ROW_BLOCK), LANES), np.uint32)
    for first in range(0, rows, ROW_BLOCK):
        last = min(rows, first + ROW_BLOCK)
        for start in range(0, roots.shape[0], LANES):
            for r in range(first, last):
                for j in range(LANES):
                    node[r - first, j] = roots[start + j]
            for _ in range(depth):
                for r in range(first, last):
                    xr, at_row = x[r], node[r - first]
                    for j in range(LANES):
                        at = at_row[j]
                        packed = word[at]
                        at_row[j] = (packed >> np.uint32(6)) + np.uint32(xr[packed & np.uint32(63)] >= threshold[at])
            for r in range(first, last):
                for j in range(LANES):
                    total[r] += np.float64(value[node[r - first, j]])
    for r in range(rows):
        total[r] += base_score
    return total


def anatomy(rows: list[np.ndarray], arrays: tuple[Any, ...], problem_columns: int) -> None:
    """Where the walk's steps go, on ``rows`` (a query's rows each; the first ``problem_columns`` features are the
    problem's, the same in every row of a query): printed, not returned."""
    word, threshold, _, _, roots, depth, _ = arrays
    left, feature, leaf = (word >> 6).astype(np.int64), (word & 63).astype(np.int64), np.isnan(threshold)
    main = roots[roots < len(word) - 1].astype(np.int64)  # not the padding lanes
    reached_at = np.zeros(depth + 1, dtype=np.int64)
    steps = problem_steps = shared_steps = 0
    for x in rows:
        node = np.tile(main, (len(x), 1))
        at_leaf = np.full(node.shape, depth)
        together = np.ones(len(main), dtype=bool)  # every row still at the same node, by problem steps only
        for level in range(depth):
            inner = ~leaf[node]
            at_leaf[~inner & (at_leaf == depth)] = level
            tests_problem = feature[node] < problem_columns
            steps += int(inner.sum())
            problem_steps += int((inner & tests_problem).sum())
            together &= (node == node[0]).all(axis=0) & inner[0] & tests_problem[0]
            shared_steps += int(together.sum()) * (len(x) - 1)
            value = x[np.arange(len(x))[:, None], feature[node]]
            node = np.where(inner, left[node] + (value >= threshold[node]), node)
        reached_at += np.bincount(np.where(leaf[node], at_leaf, depth).ravel(), minlength=depth + 1)
    share = reached_at / reached_at.sum()
    print(f"anatomy: leaves reached at mean depth {np.dot(np.arange(depth + 1), share):.2f} of {depth} "
          f"({share[depth]:.0%} at {depth}); of the inner steps {problem_steps / steps:.1%} test a problem feature, "
          f"{shared_steps / steps:.1%} could be taken once for all of a query's rows")  # fmt: skip


def cold_and_hot(rows: list[np.ndarray], arrays: tuple[Any, ...], rounds: int) -> None:
    """The shipped walk on each shape's rows as they come (cold), then on the same rows again at once (hot)."""
    for round_ in range(rounds):
        cold, hot = [], []
        for x in rows:
            for into in (cold, hot):
                start = time.perf_counter_ns()
                kernels.walk_trees(x, *arrays)
                into.append((time.perf_counter_ns() - start) / 1e3)
        print(f"caches, round {round_}: cold p50 {np.percentile(cold, 50):.1f} µs, hot p50 {np.percentile(hot, 50):.1f}"
              f" µs, hot / cold {np.percentile(hot, 50) / np.percentile(cold, 50):.3f}")  # fmt: skip


def hessians(model: bytes, count: int) -> np.ndarray:
    """Each node's ``sum_hessian`` in the shipped global (breadth-first, siblings adjacent) numbering of the first
    ``count`` trees, as :func:`tilecost.predict.trees._renumber` orders them."""
    trees = ubjson.loads(model)["learner"]["gradient_booster"]["model"]["trees"][:count]
    parts = []
    for tree in trees:
        lefts = np.asarray(tree["left_children"], dtype=np.int64)
        rights = np.asarray(tree["right_children"], dtype=np.int64)
        levels = [np.zeros(1, dtype=np.int64)]
        while True:
            parents = levels[-1][lefts[levels[-1]] != -1]
            if not len(parents):
                break
            levels.append(np.stack([lefts[parents], rights[parents]], axis=1).ravel())
        parts.append(np.asarray(tree["sum_hessian"], dtype=np.float64)[np.concatenate(levels)])
    return np.concatenate(parts)


def dfs_order(word: np.ndarray, threshold: np.ndarray, roots: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, int]:
    """A permutation ``new_of_old`` laying each tree out depth first by sibling pairs, heavier child's subtree first,
    each tree from an even position (root, a pad slot, then pairs: a pair never straddles a 16-byte boundary); nodes
    no root reaches go last. Returns it and the layout's size."""
    size = len(word)
    left = (word >> 6).astype(np.int64)
    leaf = np.isnan(threshold)
    new_of_old = np.full(size, -1, dtype=np.int64)
    position = 0
    for root in roots:
        root = int(root)
        if new_of_old[root] >= 0:  # the shared padding leaf
            continue
        new_of_old[root] = position
        position += 2
        stack = [root]
        while stack:
            at = stack.pop()
            if leaf[at]:
                continue
            a = int(left[at])
            new_of_old[a], new_of_old[a + 1] = position, position + 1
            position += 2
            first, second = (a, a + 1) if weight[a] >= weight[a + 1] else (a + 1, a)
            stack.append(second)
            stack.append(first)
    unreached = new_of_old < 0  # other trees' nodes sharing the arrays (the level trees): kept, after
    new_of_old[unreached] = position + np.arange(int(unreached.sum()))
    position += int(unreached.sum())
    assert (new_of_old >= 0).all() and len(set(new_of_old.tolist())) == size
    return new_of_old, position


def permuted(arrays: tuple[Any, ...], new_of_old: np.ndarray, size: int) -> tuple[Any, ...]:
    """The shipped kernel arrays renumbered by ``new_of_old`` (unused slots: zero-valued NaN-threshold self-loops)."""
    word, threshold, value, default_right, roots, depth, base_score = arrays
    left = (word >> 6).astype(np.int64)
    feature = word & 63
    leaf = np.isnan(threshold)
    new_left = np.where(leaf, new_of_old, new_of_old[left])
    out_word = np.arange(size, dtype=np.uint32) << 6
    out_word[new_of_old] = ((new_left << 6) | feature).astype(np.uint32)
    out_threshold = np.full(size, np.nan, dtype=np.float32)
    out_threshold[new_of_old] = threshold
    out_value = np.zeros(size, dtype=np.float32)
    out_value[new_of_old] = value
    out_default = np.zeros(size, dtype=np.uint8)
    out_default[new_of_old] = default_right
    return (out_word, out_threshold, out_value, out_default, new_of_old[roots.astype(np.int64)].astype(np.uint64),
            depth, base_score)  # fmt: skip


def packed(arrays: tuple[Any, ...]) -> tuple[Any, ...]:
    """The shipped-layout arrays, word and threshold interleaved: ``(nodes uint32, thresholds float32 view, ...)``."""
    word, threshold, value, default_right, roots, depth, base_score = arrays
    buffer = np.empty(2 * len(word), dtype=np.uint32)
    buffer[0::2] = word
    buffer[1::2] = threshold.view(np.uint32)
    return buffer, buffer.view(np.float32), value, default_right, roots, depth, base_score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", type=int, default=2400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args()
    path = "tilecost/models/h200"
    predictor = Predictor.load(path)
    compiled = predictor._group(DType.BF16, Layout.NT).scorer.compiled
    assert compiled is not None, "numba is needed"
    shipped = compiled.trees.arrays  # the main trees, as a query walks them
    word, threshold, roots = shipped[0], shipped[1], shipped[4]
    count = int((roots < len(word) - 1).sum())  # the main trees (the rest of the lanes: the padding leaf)
    weight = np.zeros(len(word))
    hess = hessians(Path(path, "model.ubj").read_bytes(), count)
    weight[: len(hess)] = hess
    new_of_old, size = dfs_order(word, threshold, roots, weight)
    dfs = permuted(shipped, new_of_old, size)
    variants = {
        "shipped": (kernels.walk_trees, shipped),
        "packed_bfs": (walk_packed, packed(shipped)),
        "packed_dfs": (walk_packed, packed(dfs)),
        "split_dfs": (kernels.walk_trees, dfs),
        "no_nan": (walk_no_nan, shipped),
        "uint32": (walk_uint32, shipped),
    }
    rows = shortlist_rows(predictor, args.shapes, args.width, args.seed)
    assert not any(np.isnan(x).any() for x in rows)
    anatomy(rows[:400], shipped, len(PROBLEM_FEATURES))
    cold_and_hot(rows, shipped, args.rounds)
    for name, (walk, arrays) in variants.items():
        assert all((walk(x, *arrays) == kernels.walk_trees(x, *shipped)).all() for x in rows), name
    print(f"same bits on {len(rows)} shapes' rows ({np.mean([len(x) for x in rows]):.2f} rows a shape, width "
          f"{args.width}; {count} main trees, {len(word)} nodes, {size} in the depth-first layout)")  # fmt: skip
    for name in list(variants)[
        1:
    ]:  # each against the shipped walk alone: the other layouts' nodes stay out of the caches
        ratios = []
        for round_ in range(args.rounds):
            pair = ("shipped", name)
            spent: dict[str, list[float]] = {one: [] for one in pair}
            for i, x in enumerate(rows):
                one = pair[(i + round_) % 2]
                walk, arrays = variants[one]
                start = time.perf_counter_ns()
                walk(x, *arrays)
                spent[one].append((time.perf_counter_ns() - start) / 1e3)
            p50 = {one: float(np.percentile(v, 50)) for one, v in spent.items()}
            ratios.append(p50[name] / p50["shipped"])
            print(f"{name}, round {round_}: shipped p50 {p50['shipped']:.1f} µs, {name} p50 {p50[name]:.1f} µs")
        print(f"{name} / shipped p50 over {args.rounds} rounds: {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
