"""The vectorised feasibility mask selects exactly ``problem_candidates``."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecost import DType, Layout, Problem, config_space, load_device, problem_candidates
from tilecost.predict.feasibility import SpaceColumns, feasible_mask

H200 = load_device("h200")


@functools.cache
def _space(dtype: DType, layout: Layout) -> tuple[tuple, SpaceColumns]:
    space = config_space(H200, dtype, layout)
    return space, SpaceColumns.from_configs(space)


def _masked(problem: Problem) -> tuple:
    space, columns = _space(problem.dtype, problem.layout)
    return tuple(c for c, ok in zip(space, feasible_mask(problem, columns, H200), strict=True) if ok)


EDGES = [
    (1, 1, 1), (1, 4096, 262144), (16, 16, 16), (17, 15, 31), (32, 7168, 8192), (128, 128, 32),
    (129, 257, 33), (1000, 1000, 8192), (4000, 3000, 1000), (4096, 4096, 4096), (8192, 8192, 8192),
    (65536, 65536, 65536), (2**31 - 1, 8, 8), (3, 2**20, 5), (264, 132, 4096), (1, 1, 2**31 - 1),
]  # fmt: skip


@pytest.mark.parametrize("dims", EDGES)
@pytest.mark.parametrize("dtype", list(DType))
def test_equals_problem_candidates_on_edge_shapes(dims: tuple[int, int, int], dtype: DType) -> None:
    for layout in Layout:
        problem = Problem(*dims, dtype, layout)

        assert _masked(problem) == problem_candidates(problem, H200)


extent = st.one_of(
    st.integers(1, 300),
    st.integers(1, 2**17),
    st.integers(1, 2**12).map(lambda x: 16 * x),
    st.integers(1, 2**13).map(lambda x: 8 * x),
)


@settings(max_examples=80, deadline=None)
@given(extent, extent, extent, st.sampled_from(list(DType)), st.sampled_from(list(Layout)))
def test_equals_problem_candidates_on_random_shapes(m: int, n: int, k: int, dtype: DType, layout: Layout) -> None:
    problem = Problem(m, n, k, dtype, layout)

    assert _masked(problem) == problem_candidates(problem, H200)


def test_take_keeps_the_rows_it_is_given() -> None:
    space, columns = _space(DType.BF16, Layout.NT)
    index = np.array([0, 5, len(space) - 1])
    problem = Problem(1000, 1000, 1000)

    np.testing.assert_array_equal(
        feasible_mask(problem, columns.take(index), H200), feasible_mask(problem, columns, H200)[index]
    )
