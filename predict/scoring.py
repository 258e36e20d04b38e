"""Scoring candidates of one (device, dtype, layout) group with the full model.

A :class:`GroupScorer` holds what every query of its group shares: the candidate space, its integer
columns for the feasibility mask, its feature columns (:class:`~tilecost.features.ConfigFeatures`)
and the model. :meth:`GroupScorer.times_us` scores a :class:`CandidateSet` (the whole space, or one
shortlist) for a problem: mask the infeasible, build the features with
:func:`~tilecost.features.feature_matrix` (the function training used), evaluate the trees and turn
the model's target back into microseconds. :meth:`GroupScorer.top_configs` does the same for many
problems in large batches, which is how export ranks its sample shapes.

With the compiled path (:mod:`tilecost.predict.jit`: numba installed), :meth:`GroupScorer.times_us`
masks, featurises and scores a candidate set in one kernel call; the kernel reads the space's
columns by index, so a shortlist's :class:`CandidateSet` then never cuts its own columns.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tilecost.config import TileConfig
from tilecost.device import DeviceSpec
from tilecost.features import FEATURE_NAMES, ConfigArrays, ConfigFeatures, feature_matrix
from tilecost.problem import DType, Layout, Problem
from tilecost.space import config_space

from .feasibility import SpaceColumns, feasible_mask
from .jit import CompiledShortlist, CompiledTrees

__all__ = [
    "SMALL_HEAD",
    "CandidateSet",
    "GroupScorer",
    "Scorer",
    "calls_for_tail",
    "merge_best_two",
    "times_from_target",
]

# Problems featurised and scored together by top_configs: ~55,000 rows (~860 candidates each on the
# H200 bf16 space; at most ~2,600), 20-60 MB of float64, large enough for xgboost's batch speed.
_CHUNK_PROBLEMS = 64
# A shortlist head with fewer feasible members than this has the rest of its list scored too.
SMALL_HEAD = 3

# Something that maps feature rows to the model's target: TreeEnsemble.predict, or, at export, a
# faster equivalent such as xgboost.Booster.inplace_predict.
Scorer = Callable[[NDArray[np.float64]], ArrayLike]
_LOG2_ROOFLINE = FEATURE_NAMES.index("log2_roofline_time_us")


def times_from_target(target: str, predictions: ArrayLike, features: NDArray[np.float64]) -> NDArray[np.float64]:
    """Microseconds from the model's target (``predict.artifact.TARGETS``).

    ``log_time_us``: ``exp(prediction)``. ``log_time_over_roofline``: the roofline time of the same
    row (its ``log2_roofline_time_us`` feature) times ``exp(prediction)``.
    """
    times = np.exp(np.asarray(predictions, dtype=np.float64))
    if target == "log_time_over_roofline":
        times *= np.exp2(features[:, _LOG2_ROOFLINE])
    return times


def merge_best_two(
    a: tuple[int, float, float | None], b: tuple[int, float, float | None] | None
) -> tuple[int, float, float | None]:
    """The :meth:`GroupScorer.best_two` of two disjoint candidate sets together, from each one's: the
    same as scoring them as one set (ties: the first in space order)."""
    if b is None:
        return a
    if (b[1], b[0]) < (a[1], a[0]):
        a, b = b, a
    return a[0], a[1], min(x for x in (a[2], b[1]) if x is not None)


def calls_for_tail(found: tuple[int, float, float | None], count: int, late: NDArray[np.integer[Any]]) -> bool:
    """Whether a list head's answer ``found`` (of ``count`` feasible members) has the rest of the list scored: its
    best is one of the ``late`` members, or fewer than :data:`SMALL_HEAD` members were feasible
    (:meth:`GroupScorer.best_two_extending`)."""
    return count < SMALL_HEAD or (len(late) > 0 and found[0] in late.tolist())


@dataclass(frozen=True, eq=False)
class CandidateSet:
    """Some configurations of a group's space: their space indices and precomputed columns.

    Built from the whole space's columns (``space_columns``, ``space_features``) and cut on first
    use of :attr:`columns` or :attr:`features` (the compiled path never uses them)."""

    indices: NDArray[np.intp]
    space_columns: SpaceColumns = field(repr=False)
    space_features: ConfigFeatures = field(repr=False)
    whole: bool = False

    @functools.cached_property
    def columns(self) -> SpaceColumns:
        """The integer columns of these candidates (:func:`feasible_mask`'s input)."""
        return self.space_columns if self.whole else self.space_columns.take(self.indices)

    @functools.cached_property
    def features(self) -> ConfigFeatures:
        """The problem-independent feature columns of these candidates."""
        return self.space_features if self.whole else self.space_features.take(self.indices)


@dataclass(frozen=True, eq=False)
class GroupScorer:
    """The shared state of one (device, dtype, layout) group; build with :meth:`build`."""

    device: DeviceSpec
    dtype: DType
    layout: Layout
    space: tuple[TileConfig, ...]
    everything: CandidateSet
    target: str
    scorer: Scorer
    compiled: CompiledShortlist | None = None
    # The booster's per-problem level trees (``ArtifactMetadata.level_trees``), apart from ``scorer``'s: the
    # same for every row of a problem, so they are walked on one row and added to every prediction.
    level: Scorer | None = None
    compiled_level: CompiledTrees | None = None

    @classmethod
    def build(
        cls,
        device: DeviceSpec,
        dtype: DType,
        layout: Layout,
        target: str,
        scorer: Scorer,
        compiled_trees: CompiledTrees | None = None,
        level: Scorer | None = None,
        compiled_level: CompiledTrees | None = None,
    ) -> GroupScorer:
        """The group's space and columns; with ``compiled_trees`` (the scorer's trees, compiled),
        :meth:`times_us` takes the compiled path. ``level`` (and ``compiled_level``, with
        ``compiled_trees``): the level trees, when the scorer's trees leave them out."""
        space = config_space(device, dtype, layout)
        columns = SpaceColumns.from_configs(space)
        arrays = ConfigArrays(
            block_m=columns.block_m, block_n=columns.block_n, block_k=columns.block_k, group_m=columns.group_m,
            split_k=columns.split_k, num_warps=np.array([c.num_warps for c in space]),
            num_stages=np.array([c.num_stages for c in space]), is_tma=columns.is_tma,
        )  # fmt: skip
        features = ConfigFeatures.build(arrays, device, dtype)
        everything = CandidateSet(np.arange(len(space), dtype=np.intp), columns, features, whole=True)
        compiled = None if compiled_trees is None else CompiledShortlist.build(compiled_trees, columns, features)
        if compiled is None or level is None:
            compiled_level = None
        elif compiled_level is None:
            raise ValueError("a compiled path with level trees needs compiled_level")
        return cls(device, dtype, layout, space, everything, target, scorer, compiled, level, compiled_level)

    def subset(self, indices: Sequence[int] | NDArray[np.intp]) -> CandidateSet:
        """A candidate set of the given space indices (ascending)."""
        index = np.asarray(indices, dtype=np.intp)
        return CandidateSet(index, self.everything.columns, self.everything.features)

    def times_us(self, problem: Problem, candidates: CandidateSet) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """Space indices of the feasible members of ``candidates`` and their predicted times in µs."""
        if self.compiled is not None:
            indices, x, predictions = self.compiled.score(problem, candidates.indices)
            return indices, times_from_target(self.target, self._with_level(predictions, x), x)
        mask = feasible_mask(problem, candidates.columns, self.device)
        features = candidates.features
        if len(features) > 4 * int(mask.sum()) + 64:  # mostly infeasible: cut before the features
            features = features.take(mask)
            x = feature_matrix(problem, features, self.device)
        else:
            x = feature_matrix(problem, features, self.device)[mask]
        if not len(x):
            return candidates.indices[mask], np.empty(0)
        return candidates.indices[mask], times_from_target(self.target, self._with_level(self.scorer(x), x), x)

    def _with_level(self, predictions: ArrayLike, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """``predictions`` plus the problem's level (the level trees on the first row), if any."""
        out = np.asarray(predictions, dtype=np.float64)
        if self.level is None or not len(x):
            return out
        return out + float(np.asarray(self.level(x[:1]))[0])

    def best_two(self, problem: Problem, candidates: CandidateSet) -> tuple[int, float, float | None] | None:
        """The fastest feasible member of ``candidates`` (space index), its predicted µs and the
        second-fastest µs (None with one feasible member); None with none. What :meth:`times_us`
        followed by ``argmin`` (ties: the first in space order) and ``np.partition`` give; the
        compiled path does it in the kernel call, without returning the feature rows."""
        return self._best_two_counted(problem, candidates)[0]

    def _best_two_counted(
        self, problem: Problem, candidates: CandidateSet
    ) -> tuple[tuple[int, float, float | None] | None, int]:
        """:meth:`best_two` and how many members of ``candidates`` were feasible."""
        if self.compiled is not None:
            return self.compiled_best_two(problem, candidates.indices)
        indices, times = self.times_us(problem, candidates)
        if not len(indices):
            return None, 0
        best = int(np.argmin(times))
        second = float(np.partition(times, 1)[1]) if len(times) > 1 else None
        return (int(indices[best]), float(times[best]), second), len(indices)

    def compiled_best_two(
        self, problem: Problem, members: NDArray[np.intp]
    ) -> tuple[tuple[int, float, float | None] | None, int]:
        """:meth:`_best_two_counted` of the space indices ``members`` (ascending), by the compiled path's one kernel
        call, without a candidate set (:attr:`compiled` must be set)."""
        assert self.compiled is not None
        roofline = _LOG2_ROOFLINE if self.target == "log_time_over_roofline" else -1
        if self.compiled_level is not None:
            found = self.compiled.best_two_level(problem, members, roofline, self.compiled_level)
        else:
            found = self.compiled.best_two(problem, members, roofline)
        index, best_us, second_us, count = found
        if count == 0:
            return None, 0
        return (int(index), float(best_us), (float(second_us) if count > 1 else None)), int(count)

    def best_two_extending(
        self,
        problem: Problem,
        head: CandidateSet,
        late: NDArray[np.integer[Any]],
        tail: Callable[[], CandidateSet] | None,
    ) -> tuple[tuple[int, float, float | None] | None, bool]:
        """:meth:`best_two` of ``head``; of ``head`` and ``tail()`` together (:func:`merge_best_two`;
        ``tail`` is called only then, so a caller may build it lazily) when the head's best is one of
        ``late`` or when fewer than :data:`SMALL_HEAD` of the head's members are feasible (some, not
        none: with none the caller scores every candidate). Returns the answer and whether ``tail``
        was scored.

        Why the small heads: a head that leaves a shape one or two configurations to run is no choice
        by the model. Measured on the seventeenth session's artifact (``benchmarks/experiments/
        small_heads.py``), 13 of 765 shapes were answered from such heads and 3 of those 13 agreed
        with scoring every candidate, against 569 of the other 752."""
        found, count = self._best_two_counted(problem, head)
        if found is None or tail is None or not calls_for_tail(found, count, late):
            return found, False
        return merge_best_two(found, self.best_two(problem, tail())), True

    def ranked(
        self, problem: Problem, candidates: CandidateSet | None = None
    ) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """Like :meth:`times_us` (all candidates by default), fastest first; ties keep space order."""
        indices, times = self.times_us(problem, self.everything if candidates is None else candidates)
        order = np.argsort(times, kind="stable")
        return indices[order], times[order]

    def top_configs(
        self,
        problems: Sequence[Problem],
        top_n: int,
        *,
        workers: int | None = None,
        prescore: Scorer | None = None,
        keep: int = 64,
    ) -> NDArray[np.intp]:
        """Space indices of the ``top_n`` fastest candidates of each problem by the full model, fastest
        first (ties keep space order, as :meth:`ranked`), ``-1`` where a problem has fewer candidates.

        Problems are featurised and scored in chunks of 64, ``workers`` chunks at once
        (threads; default: one per CPU): with ``xgboost.Booster.inplace_predict`` as the scorer, which
        releases the GIL and is thread-safe for tree models, one chunk is scored while the next is
        featurised. The numpy evaluator gives the same ranking, more slowly.

        ``prescore`` (a cheaper model of the same target, such as the first 150 of the model's 300
        trees, :meth:`~tilecost.predict.trees.TreeEnsemble.first_trees`): the full model ranks only
        each problem's ``keep`` best candidates by it, so the ranking is the full model's among
        those (:func:`~tilecost.predict.export.prepare_artifact_files` says how close and how much
        cheaper).
        """
        if top_n < 1:
            raise ValueError(f"top_n={top_n} is not allowed; use an int >= 1")
        if prescore is not None and keep < top_n:
            raise ValueError(f"keep={keep} is not allowed; use an int >= top_n ({top_n})")
        chunks = [
            list(range(i, min(i + _CHUNK_PROBLEMS, len(problems)))) for i in range(0, len(problems), _CHUNK_PROBLEMS)
        ]
        out = np.full((len(problems), top_n), -1, dtype=np.intp)

        def rank_chunk(members: list[int]) -> None:
            parts, bounds, indices = [], [0], []
            for i in members:
                problem = problems[i]
                mask = feasible_mask(problem, self.everything.columns, self.device)
                parts.append(feature_matrix(problem, self.everything.features.take(mask), self.device))
                indices.append(np.flatnonzero(mask))
                bounds.append(bounds[-1] + len(parts[-1]))
            if bounds[-1] == 0:
                return
            x = np.concatenate(parts)
            if prescore is not None:  # the full model scores each problem's `keep` best by the prescore
                coarse = np.log(times_from_target(self.target, prescore(x), x))
                picked, picked_bounds = [], [0]
                for row in range(len(members)):
                    start, stop = bounds[row], bounds[row + 1]
                    order = np.sort(np.argpartition(coarse[start:stop], keep)[:keep]) if stop - start > keep else None
                    rows_kept = np.arange(start, stop) if order is None else start + order
                    picked.append(rows_kept)
                    indices[row] = indices[row][rows_kept - start]
                    picked_bounds.append(picked_bounds[-1] + len(rows_kept))
                x, bounds = x[np.concatenate(picked)], picked_bounds
            log_times = np.log(times_from_target(self.target, self.scorer(x), x))
            for row, i in enumerate(members):
                segment = log_times[bounds[row] : bounds[row + 1]]
                best = np.argsort(segment, kind="stable")[:top_n]
                out[i, : len(best)] = indices[row][best]

        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            for _ in pool.map(rank_chunk, [c for c in chunks if c]):
                pass
        return out
