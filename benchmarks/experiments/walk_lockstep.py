"""The compiled walk with every row of a query in lockstep, against the per-row walk it replaced.

    .venv/bin/python benchmarks/experiments/walk_lockstep.py [--shapes 2400] [--rounds 4] [--width 8]

An experiment of the twenty-first session (BENCHMARKS §5). Until then :func:`~tilecost.predict.jit_kernels.walk_trees`
walked one row at a time, 16 trees in lockstep (:func:`walk_per_row`, kept here as it was). Now every row of the
query moves one level down its 16 trees before the next level: 8 rows give 128 independent chains of loads instead
of 16. Both must give the same bits; then both are timed on the shortlist rows of distinct random shapes, the
two walks taking turns shape by shape (round r gives shape i to walk (i + r) mod 2), so that neither finds the
other's nodes in the caches, as a compiler's stream of new shapes would not. The sixteenth session's
``walk_variants.py`` timed ``rows_inner`` (each row through a group before the next row) on 400 shapes' rows
walked again and again, where all of them stay in the caches: it found no gain, and neither would this.

Then the same end to end: ``Predictor.predict_best`` on new shapes (every dtype and layout, never from
measurements), the shipped predictor and one whose shortlist kernel walks row by row (:class:`PerRowShortlist`)
taking turns shape by shape, after checking on 200 shapes that both give the same answers. The walk is part of a
query: the kernel's features, the level trees' walk, its ~20 arguments, the OOD verdict and the Python around them
are the rest.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time
from collections.abc import Iterator
from typing import Any

import numba
import numpy as np

from tilecost import Predictor, Problem
from tilecost.predict import jit_kernels as kernels
from tilecost.predict.jit import _LAYOUT, CompiledShortlist
from tilecost.problem import DType, Layout

LANES = kernels.LANES
SHIFT = np.uint64(6)
MASK = np.uint64(63)
DTYPES = ("bf16", "fp16", "fp8e4m3", "fp32")


@numba.njit(nogil=True)
def walk_per_row(x, word, threshold, value, default_right, roots, depth, base_score):  # type: ignore[no-untyped-def]
    """The walk shipped until the twenty-first session: one row at a time, ``LANES`` trees in lockstep."""
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
                for j in range(LANES):
                    at = node[j]
                    packed = np.uint64(word[at])
                    feature_value = xr[packed & MASK]
                    if has_nan and feature_value != feature_value:
                        right = np.uint64(default_right[at])
                    else:
                        right = np.uint64(feature_value >= threshold[at])
                    node[j] = (packed >> SHIFT) + right
            for j in range(LANES):
                total += np.float64(value[node[j]])
        out[r] = total + base_score
    return out


@numba.njit(nogil=True)
def best_two_level_per_row(  # type: ignore[no-untyped-def]
    members, m, n, k, constants, fits, space_ints, config_columns, layout,
    word, threshold, value, default_right, roots, depth, base_score, roofline_column,
    level_word, level_threshold, level_value, level_default_right, level_roots, level_depth, level_base_score,
):  # fmt: skip
    """:func:`~tilecost.predict.jit_kernels.best_two_level` with :func:`walk_per_row` for both walks."""
    keep, x = kernels.shortlist_features(members, m, n, k, constants, fits, space_ints, config_columns, layout)
    x32 = x.astype(np.float32)
    predictions = walk_per_row(x32, word, threshold, value, default_right, roots, depth, base_score)
    if keep.shape[0] > 0:
        level = walk_per_row(x32[:1], level_word, level_threshold, level_value, level_default_right, level_roots,
                             level_depth, level_base_score)[0]  # fmt: skip
        predictions = predictions + level
    return kernels._fastest_two(keep, x, predictions, roofline_column)


@dataclasses.dataclass(frozen=True, eq=False)
class PerRowShortlist(CompiledShortlist):
    """The shipped shortlist kernel's inputs, scored with the per-row walk."""

    def best_two_level(self, problem: Problem, members: Any, roofline_column: int, level: Any) -> Any:
        constants, fits = self._constants(problem)
        return best_two_level_per_row(  # type: ignore[call-arg]
            np.asarray(members, dtype=np.intp), problem.m, problem.n, problem.k, constants, fits, self.space_ints,
            self.config_columns, _LAYOUT, *self.trees.arrays, roofline_column, *level.arrays,
        )  # fmt: skip


def with_shortlists(predictor: Predictor, kind: type[CompiledShortlist], **extra: Any) -> Predictor:
    """``predictor`` with every group's compiled shortlist rebuilt as ``kind`` (its fields, and ``extra``)."""
    for dtype in DTYPES:
        for layout in ("nt", "nn"):
            group = predictor._group(DType(dtype), Layout(layout))
            compiled = group.scorer.compiled
            assert compiled is not None and group.scorer.compiled_level is not None
            fields = {f.name: getattr(compiled, f.name) for f in dataclasses.fields(compiled)}
            group.scorer = dataclasses.replace(group.scorer, compiled=kind(**fields, **extra))
    return predictor


def per_row_predictor(path: str) -> Predictor:
    """The artifact at ``path`` loaded, every group's shortlist kernel walking one row at a time."""
    return with_shortlists(Predictor.load(path), PerRowShortlist)


def distinct_problems(seed: int) -> Iterator[Problem]:
    """Distinct random problems of every dtype and layout, log-uniform over 1..16384 per extent, without end."""
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
    while True:
        m, n, k = (max(1, int(round(2 ** rng.uniform(0, 14)))) for _ in range(3))
        problem = Problem(m, n, k, DType(DTYPES[rng.integers(4)]), Layout(("nt", "nn")[rng.integers(2)]))
        if problem.key not in seen:
            seen.add(problem.key)
            yield problem


def take_turns(predictors: dict[str, Predictor], shapes: list[Problem], rounds: int, label: str = "") -> list[float]:
    """``predict_best`` on ``shapes`` by two predictors taking turns shape by shape (round r gives shape i to the
    ((i + r) mod 2)-th; each shape answered by one of them only, never from measurements, caches cleared each
    round), after checking that both give the same answers on 200 other shapes. Prints each round; returns the
    second predictor's p50 over the first's, per round."""
    names = list(predictors)
    warm_up, shapes = shapes[:200], shapes[200:]
    for shape in warm_up:
        answers = [p.predict_best(shape, measured=False) for p in predictors.values()]
        assert answers[0].config == answers[1].config and answers[0].time_us == answers[1].time_us, shape
    ratios = []
    for round_ in range(rounds):
        for p in predictors.values():
            p.cache_clear()
        spent: dict[str, list[float]] = {name: [] for name in names}
        for i, shape in enumerate(shapes):
            name = names[(i + round_) % len(names)]
            start = time.perf_counter_ns()
            predictors[name].predict_best(shape, measured=False)
            spent[name].append((time.perf_counter_ns() - start) / 1e3)
        p50 = {name: float(np.percentile(v, 50)) for name, v in spent.items()}
        first, second = names
        ratios.append(p50[second] / p50[first])
        print(f"{label}round {round_}: " + " | ".join(
            f"{name} p50 {p50[name]:.1f} µs, p99 {np.percentile(spent[name], 99):.1f} µs" for name in names
        ) + f" | {second} / {first} p50 {ratios[-1]:.3f} ({p50[second] - p50[first]:+.1f} µs)")  # fmt: skip
    return ratios


def end_to_end(path: str, count: int, rounds: int, seed: int) -> None:
    """``predict_best`` on new shapes, the per-row predictor and the shipped one taking turns (:func:`take_turns`)."""
    predictors = {"per_row": per_row_predictor(path), "lockstep": Predictor.load(path)}
    take_turns(predictors, list(itertools.islice(distinct_problems(seed), 200 + count)), rounds, "end to end, ")


def shortlist_rows(predictor: Predictor, count: int, width: int, seed: int) -> list[np.ndarray]:
    """The float32 feature rows that ``width``-member shortlist heads of ``count`` distinct random shapes score
    (every dtype and layout of the artifact)."""
    rows: list[np.ndarray] = []
    for problem in distinct_problems(seed):
        if len(rows) == count:
            break
        group = predictor._group(problem.dtype, problem.layout)
        assert group.shortlist is not None and group.scorer.compiled is not None
        members = group.shortlist.members(group.shortlist.list_id(problem), width)
        _, x = group.scorer.compiled.features(problem, members)
        if len(x):
            rows.append(np.ascontiguousarray(x.astype(np.float32)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", type=int, default=2400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    predictor = Predictor.load("tilecost/models/h200")
    group = predictor._group(DType.BF16, Layout.NT)
    compiled = group.scorer.compiled
    assert compiled is not None, "numba is needed"
    arrays = compiled.trees.arrays  # the main trees, as a query walks them
    rows = shortlist_rows(predictor, args.shapes, args.width, args.seed)
    walks = {"per_row": walk_per_row, "lockstep": kernels.walk_trees}
    assert all((kernels.walk_trees(x, *arrays) == walk_per_row(x, *arrays)).all() for x in rows)
    print(f"same bits on {len(rows)} shapes' rows ({np.mean([len(x) for x in rows]):.2f} rows a shape, "
          f"width {args.width}, {len(compiled.trees.roots)} tree lanes of depth {compiled.trees.depth})")  # fmt: skip
    names = list(walks)
    ratios = []
    for round_ in range(args.rounds):
        spent: dict[str, list[float]] = {name: [] for name in names}
        for i, x in enumerate(rows):
            name = names[(i + round_) % len(names)]
            start = time.perf_counter_ns()
            walks[name](x, *arrays)
            spent[name].append((time.perf_counter_ns() - start) / 1e3)
        p50 = {name: float(np.percentile(v, 50)) for name, v in spent.items()}
        ratios.append(p50["lockstep"] / p50["per_row"])
        print(f"round {round_}: " + " | ".join(
            f"{name} p50 {p50[name]:.1f} µs, p99 {np.percentile(spent[name], 99):.1f} µs" for name in names
        ) + f" | lockstep / per_row p50 {ratios[-1]:.3f}")  # fmt: skip
    print(f"lockstep / per_row p50 over {args.rounds} rounds: {min(ratios):.3f}-{max(ratios):.3f}")
    end_to_end("tilecost/models/h200", args.shapes, args.rounds, args.seed + 1)


if __name__ == "__main__":
    main()
