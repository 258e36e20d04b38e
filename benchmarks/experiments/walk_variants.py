"""Tree-walk variants of the compiled scorer, timed on the rows that width-8 queries of new shapes score.

    .venv/bin/python benchmarks/experiments/walk_variants.py      (~2 min, 2 cores; numba needed)

An experiment of the sixteenth session (BENCHMARKS §5), not shipped code: every variant must give the shipped
kernel's bits, then each is timed on 400 random shapes' shortlist rows, back to back (the trees stay in the caches)
and with a 64 MB sweep before each call (cold caches). ``rows_inner`` walks each group of 16 trees for every row
before the next group (the rows share the trees' upper nodes); ``early_exit`` stops a group once no lane moved (a
loss-guided tree's leaves lie at many depths). Neither beat the shipped walk by more than the run-to-run spread.

Since the twenty-first session "shipped" is the walk that moves every row of a query a level at a time
(``walk_lockstep.py`` compares it with the per-row walk this experiment was written against, on distinct shapes'
rows: rows reused as here stay in the caches and hide the difference).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numba
import numpy as np

from tilecost import Predictor, Problem
from tilecost.predict import jit_kernels as kernels
from tilecost.problem import DType, Layout

LANES = kernels.LANES
DTYPES = ("bf16", "fp16", "fp8e4m3", "fp32")
SHIFT = np.uint64(6)
MASK = np.uint64(63)


@numba.njit(nogil=True)
def walk_rows_inner(x, word, threshold, value, default_right, roots, depth, base_score):  # type: ignore[no-untyped-def]
    """Tree groups outer, rows inner: every row walks a group of ``LANES`` trees before the next group."""
    rows = x.shape[0]
    has_nan = np.zeros(rows, np.bool_)
    for r in range(rows):
        for f in range(x.shape[1]):
            if x[r, f] != x[r, f]:
                has_nan[r] = True
    out = np.zeros(rows)
    node = np.empty(LANES, np.uint64)
    for start in range(0, roots.shape[0], LANES):
        for r in range(rows):
            xr = x[r]
            for j in range(LANES):
                node[j] = roots[start + j]
            for _ in range(depth):
                for j in range(LANES):
                    at = node[j]
                    packed = np.uint64(word[at])
                    feature_value = xr[packed & MASK]
                    if has_nan[r] and feature_value != feature_value:
                        right = np.uint64(default_right[at])
                    else:
                        right = np.uint64(feature_value >= threshold[at])
                    node[j] = (packed >> SHIFT) + right
            for j in range(LANES):
                out[r] += np.float64(value[node[j]])
    for r in range(rows):
        out[r] += base_score
    return out


@numba.njit(nogil=True)
def walk_early_exit(x, word, threshold, value, default_right, roots, depth, base_score):  # type: ignore[no-untyped-def]
    """The shipped walk, leaving a group of trees once no lane moved (all of them at leaves)."""
    out = np.empty(x.shape[0])
    node = np.empty(LANES, np.uint64)
    for r in range(x.shape[0]):
        xr = x[r]
        has_nan = False
        for f in range(xr.shape[0]):
            if xr[f] != xr[f]:
                has_nan = True
        total = 0.0
        for start in range(0, roots.shape[0], LANES):
            for j in range(LANES):
                node[j] = roots[start + j]
            for _ in range(depth):
                moved = False
                for j in range(LANES):
                    at = node[j]
                    packed = np.uint64(word[at])
                    feature_value = xr[packed & MASK]
                    if has_nan and feature_value != feature_value:
                        right = np.uint64(default_right[at])
                    else:
                        right = np.uint64(feature_value >= threshold[at])
                    following = (packed >> SHIFT) + right
                    moved |= following != at
                    node[j] = following
                if not moved:
                    break
            for j in range(LANES):
                total += np.float64(value[node[j]])
        out[r] = total + base_score
    return out


def shortlist_rows(predictor: Predictor, count: int, seed: int = 5) -> list[np.ndarray]:
    """The float32 feature rows of the width-8 shortlist heads of ``count`` random shapes."""
    rng = np.random.default_rng(seed)
    rows: list[np.ndarray] = []
    while len(rows) < count:
        m, n, k = (int(2 ** rng.uniform(0, 14)) for _ in range(3))
        dtype, layout = DType(DTYPES[rng.integers(4)]), Layout(("nt", "nn")[rng.integers(2)])
        problem = Problem(m, n, k, dtype, layout)
        group = predictor._group(problem.dtype, problem.layout)
        cut = group.cut(problem)
        assert cut is not None and group.scorer.compiled is not None
        _, x = group.scorer.compiled.features(problem, cut.head.indices)
        if len(x):
            rows.append(np.ascontiguousarray(x.astype(np.float32)))
    return rows


def timed(walk: Callable[..., np.ndarray], rows: list[np.ndarray], arrays: tuple, sweep: np.ndarray | None) -> str:
    spent = []
    for x in rows:
        if sweep is not None:
            sweep.sum()
        start = time.perf_counter_ns()
        walk(x, *arrays)
        spent.append(time.perf_counter_ns() - start)
    return f"p50 {np.percentile(spent, 50) / 1e3:.1f} µs, p99 {np.percentile(spent, 99) / 1e3:.1f} µs"


def main() -> None:
    predictor = Predictor.load("tilecost/models/h200")
    assert predictor.ensemble.compiled is not None, "numba is needed"
    arrays = predictor.ensemble.compiled.arrays
    rows = shortlist_rows(predictor, 400)
    variants = {"shipped": kernels.walk_trees, "rows_inner": walk_rows_inner, "early_exit": walk_early_exit}
    for name, walk in variants.items():
        assert all((walk(x, *arrays) == kernels.walk_trees(x, *arrays)).all() for x in rows), name
    print(f"same bits on {len(rows)} shapes' rows ({np.mean([len(x) for x in rows]):.2f} rows a shape)")
    sweep = np.ones(8_000_000)  # 64 MB: evicts the trees from the caches
    for caches, wipe, count in (("warm", None, 400), ("cold", sweep, 200)):
        for repeat in range(2):
            for name, walk in variants.items():
                print(f"{caches} {repeat} {name:10s} {timed(walk, rows[:count], arrays, wipe)}")


if __name__ == "__main__":
    main()
