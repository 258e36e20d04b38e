"""A query's extents passed to the shortlist kernel as scalars, against the per-query arrays built in Python before.

    .venv/bin/python benchmarks/experiments/problem_scalars.py [--shapes 3000] [--rounds 4]

An experiment of the twenty-second session (BENCHMARKS §5). Until then every query built, in Python, two arrays
for the shortlist kernel (``CompiledShortlist._problem``): float64 ``[m, n, k, in_bytes, out_bytes, peak, dtype
code]`` and int64 ``[m, n, k, largest BLOCK_M, BLOCK_N, BLOCK_K, TMA allowed, split-K tile limit, nt]``, the
second through :func:`~tilecost.predict.feasibility.problem_limits` in Python; a slow-day profile put that at
8-14 µs of a ~170 µs query. Now the kernel takes ``m, n, k`` as integers and the group's constants (built once per
dtype and layout) and works out the limits itself.

The old path is rebuilt here as it ran: :class:`ArraysShortlist` builds the same two arrays with the same Python
code and calls :func:`best_two_level_arrays`, a kernel taking the old 22 arguments of the same types, which
unpacks them into the shipped kernel's inputs (two arrays of 8 and ~10 values allocated in the kernel: tens of
nanoseconds, against the microseconds measured). Both predictors must give the same answers on 200 shapes; then
``Predictor.predict_best`` on distinct new shapes (every dtype and layout, never from measurements), the two
taking turns shape by shape (round r gives shape i to predictor (i + r) mod 2), so that neither finds the
other's tree nodes in the caches.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
from typing import Any

import numba
import numpy as np

# walk_lockstep.py's stream of distinct random problems (every dtype and layout)
from walk_lockstep import distinct_problems, take_turns, with_shortlists  # type: ignore[import-not-found]

from tilecost import Predictor, Problem, load_device
from tilecost.features import DTYPES as FEATURE_DTYPES
from tilecost.predict import jit_kernels as kernels
from tilecost.predict.feasibility import problem_limits
from tilecost.predict.jit import _LAYOUT, CompiledShortlist, problem_constants
from tilecost.problem import Layout

# Per dtype code (the feature schema's order) the shipped kernels' ``fits``: the old arguments carry only the
# limits they give, so the old entry below looks them up here (a compile-time constant of the kernel).
_FITS = np.stack([problem_constants(d, Layout.NT, load_device("h200"))[1] for d in FEATURE_DTYPES])


@numba.njit(nogil=True)
def best_two_level_arrays(  # type: ignore[no-untyped-def]
    members, problem, limits, space_ints, config_columns, device, layout,
    word, threshold, value, default_right, roots, depth, base_score, roofline_column,
    level_word, level_threshold, level_value, level_default_right, level_roots, level_depth, level_base_score,
):  # fmt: skip
    """The old 22-argument entry: the shipped :func:`~tilecost.predict.jit_kernels.best_two_level` on the same
    inputs, unpacked from the per-query arrays."""
    constants = np.empty(8)
    constants[0], constants[1], constants[2], constants[3] = problem[3], problem[4], problem[5], problem[6]
    constants[4], constants[5], constants[6], constants[7] = limits[8], limits[7], device[0], device[1]
    return kernels.best_two_level(
        members, limits[0], limits[1], limits[2], constants, _FITS[int(problem[6])], space_ints, config_columns,
        layout, word, threshold, value, default_right, roots, depth, base_score, roofline_column,
        level_word, level_threshold, level_value, level_default_right, level_roots, level_depth, level_base_score,
    )  # fmt: skip


@dataclasses.dataclass(frozen=True, eq=False)
class ArraysShortlist(CompiledShortlist):
    """The shortlist kernel called as before the twenty-second session: per-query arrays built in Python."""

    device_values: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(2))
    rates: dict[Any, tuple[float, float, float, float]] = dataclasses.field(default_factory=dict)

    def _problem(self, problem: Problem) -> tuple[np.ndarray, np.ndarray]:
        """The old ``CompiledShortlist._problem``, as it was (the dtype's rates from a dict filled at build)."""
        dtype = problem.dtype
        rates = self.rates.get(dtype)
        if rates is None:
            rates = (dtype.in_bytes, dtype.out_bytes, self.device.peak_flops_per_s(dtype), FEATURE_DTYPES.index(dtype))
        values = np.array((problem.m, problem.n, problem.k, *rates), dtype=np.float64)
        max_m, max_n, max_k, tma_ok, split_k_tiles = problem_limits(problem, self.device)
        limits = np.array([problem.m, problem.n, problem.k, max_m, max_n, max_k, tma_ok, split_k_tiles,
                           problem.layout is Layout.NT], dtype=np.int64)  # fmt: skip
        return values, limits

    def best_two_level(self, problem: Problem, members: Any, roofline_column: int, level: Any) -> Any:
        values, limits = self._problem(problem)
        return best_two_level_arrays(
            np.asarray(members, dtype=np.intp), values, limits, self.space_ints, self.config_columns,
            self.device_values, _LAYOUT, *self.trees.arrays, roofline_column, *level.arrays,
        )  # fmt: skip


def arrays_predictor(path: str) -> Predictor:
    """The artifact at ``path`` loaded, every group's shortlist kernel called the old way."""
    predictor = Predictor.load(path)
    device = predictor.device
    device_values = np.array([device.sm_count, device.hbm_bytes_per_s], dtype=np.float64)
    rates = {d: (float(d.in_bytes), float(d.out_bytes), device.peak_flops_per_s(d), float(i))
             for i, d in enumerate(FEATURE_DTYPES) if d in device.peak_dense_tflops}  # fmt: skip
    return with_shortlists(predictor, ArraysShortlist, device_values=device_values, rates=rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=22)
    args = parser.parse_args()
    path = "tilecost/models/h200"
    predictors = {"arrays": arrays_predictor(path), "scalars": Predictor.load(path)}
    shapes = list(itertools.islice(distinct_problems(args.seed), 200 + args.shapes))
    print(f"{args.shapes} new shapes, {args.rounds} rounds (after the same answers on 200 others)")
    ratios = take_turns(predictors, shapes, args.rounds)
    print(f"scalars / arrays p50 over {args.rounds} rounds: {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
