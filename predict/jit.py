"""The predictor's optional compiled path: numba kernels for the trees and for one shortlist.

A new shape's query spends most of its time in numpy's per-call overhead on ~20-row arrays: the
level-wise tree walk (~200 µs for 300 trees of depth 8), the feature matrix (~90 µs), the
feasibility mask (~20 µs). With numba installed (``pip install tilecost[fast]``) the predictor
replaces them with two kernels (:mod:`tilecost.predict.jit_kernels`): :class:`CompiledTrees`
evaluates the same trees to the same bits, and :class:`CompiledShortlist` masks, featurises and
scores one shortlist in a single call. Without numba, or with ``TILECOST_JIT=0`` in the
environment, the numpy path runs; it stays the reference the compiled one is tested against
(tests/test_predict_jit.py), and the numpy feature functions stay the only definition training
uses.

Costs: this module imports nothing heavy; ``import numba`` (~0.2 s) happens when a predictor is
loaded (:meth:`tilecost.predict.Predictor.load`), and the kernels compile on first use (a few
seconds) or, from numba's on-disk cache (``cache=True``: ``__pycache__`` beside the kernels'
module, or ``NUMBA_CACHE_DIR``), load in tens of milliseconds.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tilecost.device import DeviceSpec
from tilecost.features import (
    CONFIG_FEATURES,
    DTYPE_FEATURES,
    DTYPES,
    FEATURE_NAMES,
    PAIR_FEATURES,
    PROBLEM_FEATURES,
    ConfigFeatures,
)
from tilecost.problem import DType, Layout, Problem
from tilecost.space import SPLIT_K_MIN_K

from .feasibility import SpaceColumns, block_options, split_k_tile_limit

if TYPE_CHECKING:
    from .trees import TreeEnsemble

__all__ = [
    "JIT_ENV",
    "CompiledShortlist",
    "CompiledTrees",
    "compiled_distance",
    "compiled_stump",
    "jit_enabled",
    "problem_constants",
]

# TILECOST_JIT=0 (or false/no/off) keeps the numpy path even where numba is installed.
JIT_ENV = "TILECOST_JIT"
_OFF = ("0", "false", "no", "off")
# Node ids live above the 6 feature bits of a uint32 word.
_MAX_NODES = 1 << 26
_MAX_FEATURES = 64


def jit_enabled() -> bool:
    """Whether the compiled path is used: numba is installed and ``TILECOST_JIT`` does not turn it off.

    Looks the package up without importing it (``importlib.util.find_spec``, ~50 µs)."""
    if os.environ.get(JIT_ENV, "1").strip().lower() in _OFF:
        return False
    return importlib.util.find_spec("numba") is not None


@functools.cache
def _kernels() -> ModuleType:
    return importlib.import_module("tilecost.predict.jit_kernels")


def compiled_distance() -> Any:
    """The compiled :func:`~tilecost.predict.ood._kth_distance` (``kernel(points, q0, q1, q2,
    neighbours)``), compiled or loaded now; None where the path is off."""
    if not jit_enabled():
        return None
    kernel = _kernels().kth_distance
    kernel(np.zeros((1, 3)), 0.0, 0.0, 0.0, 1)
    return kernel


def compiled_stump() -> Any:
    """The compiled :func:`~tilecost.predict.dispatch._stump` (``kernel(regret, rows, points, min_leaf)``,
    :func:`jit_kernels.dispatch_stump`), compiled or loaded now; None where the path is off."""
    if not jit_enabled():
        return None
    kernel = _kernels().dispatch_stump
    kernel(np.zeros((2, 1)), np.arange(2), np.zeros((2, 3)), 1)
    return kernel


def _frozen(array: NDArray[Any], dtype: type[np.generic] | None = None) -> NDArray[Any]:
    """``array`` (as ``dtype``, if given) read-only and C-contiguous: numba compiles one specialisation
    per array type, flags included. Every array the kernels take passes through here, the shortlist
    members of each query too: shortlists are read-only and a widened or merged list is not, and
    before the members did, the first widened query compiled a second specialisation of two kernels
    (2.5 s where numba's cache was empty, as in a fresh install or a read-only one). A writable array
    is frozen as a read-only view, so the caller's array stays as it was."""
    array = np.ascontiguousarray(array, dtype=dtype)
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


@dataclass(frozen=True, eq=False)
class CompiledTrees:
    """A :class:`~tilecost.predict.trees.TreeEnsemble` in the kernels' layout (module docstring of
    :mod:`~tilecost.predict.jit_kernels`). Build with :meth:`from_ensemble`."""

    num_features: int
    word: NDArray[np.uint32]
    threshold: NDArray[np.float32]
    value: NDArray[np.float32]
    default_right: NDArray[np.uint8]
    roots: NDArray[np.uint64]
    depth: int
    base_score: float

    @classmethod
    def from_ensemble(cls, ensemble: TreeEnsemble) -> CompiledTrees | None:
        """The compiled trees, or None where the path is off (:func:`jit_enabled`) or the model does
        not fit the layout (more than 64 features or 2**26 nodes). Imports numba and compiles (or
        loads from numba's cache) the tree kernel."""
        size = len(ensemble.left)
        if not jit_enabled() or ensemble.num_features > _MAX_FEATURES or size + 1 >= _MAX_NODES:
            return None
        leaf = size  # an extra zero-valued leaf pads the roots to whole lanes
        lanes = _kernels().LANES
        threshold = np.where(ensemble.is_leaf, np.float32(np.nan), ensemble.threshold).astype(np.float32)
        compiled = cls(
            num_features=ensemble.num_features,
            word=_frozen(np.append((ensemble.left << 6) | ensemble.feature, leaf << 6).astype(np.uint32)),
            threshold=_frozen(np.append(threshold, np.float32(np.nan))),
            value=_frozen(np.append(ensemble.value, np.float32(0.0)).astype(np.float32)),
            default_right=_frozen(np.append(~ensemble.default_left & ~ensemble.is_leaf, False).astype(np.uint8)),
            roots=_frozen(np.append(ensemble.roots, [leaf] * (-ensemble.num_trees % lanes)).astype(np.uint64)),
            depth=ensemble.depth,
            base_score=ensemble.base_score,
        )
        compiled.predict(np.zeros((1, ensemble.num_features), dtype=np.float32))  # compile or load now
        return compiled

    @property
    def arrays(self) -> tuple[Any, ...]:
        """The kernels' tree arguments, in their order."""
        return (self.word, self.threshold, self.value, self.default_right, self.roots, self.depth, self.base_score)

    def predict(self, features: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
        """As :meth:`TreeEnsemble.predict` (rows × num_features; NaN takes each node's default)."""
        x = np.array(features, dtype=np.float32, order="C", ndmin=2)  # a fresh writable array: one kernel type
        return _kernels().walk_trees(x, *self.arrays)  # type: ignore[no-any-return]


# Where the kernel finds the columns it reads (schema order is checked here, once, at import).
_CONFIG_START = len(PROBLEM_FEATURES)
_PAIR_START = _CONFIG_START + len(CONFIG_FEATURES)
assert PROBLEM_FEATURES[4 : 4 + len(DTYPE_FEATURES)] == DTYPE_FEATURES
assert CONFIG_FEATURES[:7] == ("block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages")
assert PAIR_FEATURES[0] == "log2_tiles" and PAIR_FEATURES[13] == "roofline_compute_over_memory"
assert PAIR_FEATURES[14:] == ("log2_a_loads_per_thread", "log2_b_loads_per_thread", "log2_c_stores_per_thread")
_LAYOUT = np.array(
    [_CONFIG_START, _PAIR_START, CONFIG_FEATURES.index("blocks_per_sm"), len(FEATURE_NAMES), len(DTYPE_FEATURES)],
    dtype=np.int64,
)
_LAYOUT.flags.writeable = False


def problem_constants(
    dtype: DType, layout: Layout, device: DeviceSpec
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """What every problem of a (dtype, layout) group on ``device`` gives the shortlist kernels
    (:func:`jit_kernels.shortlist_features`): ``constants``, float64 ``[in_bytes, out_bytes,
    peak_flops_per_s, dtype code, layout is nt, split-K tile limit, sm_count, hbm_bytes_per_s, the largest K
    refusing split-K]``, and
    ``fits``, int64 ``(2, L)``: :func:`~tilecost.predict.feasibility.block_options`, each row padded by
    repeating its largest. Raises as ``feature_matrix`` does for a dtype the device has no rate for."""
    constants = np.array(
        [dtype.in_bytes, dtype.out_bytes, device.peak_flops_per_s(dtype), DTYPES.index(dtype), layout is Layout.NT,
         split_k_tile_limit(device), device.sm_count, device.hbm_bytes_per_s, SPLIT_K_MIN_K],
        dtype=np.float64,
    )  # fmt: skip
    rows = block_options(dtype)
    width = max(len(r) for r in rows)
    fits = np.array([list(r) + [r[-1]] * (width - len(r)) for r in rows], dtype=np.int64)
    return _frozen(constants), _frozen(fits)


@dataclass(frozen=True, eq=False)
class CompiledShortlist:
    """One (device, dtype, layout) group's candidate space for :func:`jit_kernels.score_shortlist`.

    ``space_ints`` and ``config_columns`` are the whole space's; a query passes the space indices
    of the members it scores, its extents, and the constants its dtype and layout share
    (:meth:`_constants`, built once each), so that nothing per query is built in Python."""

    trees: CompiledTrees
    device: DeviceSpec
    space_ints: NDArray[np.int64]
    config_columns: NDArray[np.float64]
    # Per (dtype, layout) the kernels' ``constants`` and ``fits`` (jit_kernels.shortlist_features), once.
    group_constants: dict[tuple[DType, Layout], tuple[NDArray[np.float64], NDArray[np.int64]]] = field(
        default_factory=dict
    )

    @classmethod
    def build(cls, trees: CompiledTrees, columns: SpaceColumns, features: ConfigFeatures) -> CompiledShortlist:
        flags = [columns.is_tma.astype(np.int64), columns.ragged_k_unsafe.astype(np.int64)]
        ints = np.stack([columns.block_m, columns.block_n, columns.block_k, columns.group_m, columns.split_k, *flags],
                        axis=1)  # fmt: skip
        return cls(trees, features.device, _frozen(ints.astype(np.int64)),
                   _frozen(features.columns.astype(np.float64)))  # fmt: skip

    def _constants(self, problem: Problem) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """The kernels' ``constants`` and ``fits`` for the problem's dtype and layout."""
        key = (problem.dtype, problem.layout)
        found = self.group_constants.get(key)
        if found is None:
            found = self.group_constants[key] = problem_constants(problem.dtype, problem.layout, self.device)
        return found

    def features(self, problem: Problem, members: NDArray[np.intp]) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """The feasible members (space indices, in the given order) and their feature rows: what
        ``feasible_mask`` and ``feature_matrix`` give."""
        constants, fits = self._constants(problem)
        return _kernels().shortlist_features(  # type: ignore[no-any-return]
            _frozen(members, np.intp), problem.m, problem.n, problem.k, constants, fits, self.space_ints,
            self.config_columns, _LAYOUT,
        )  # fmt: skip

    def best_two(
        self, problem: Problem, members: NDArray[np.intp], roofline_column: int
    ) -> tuple[int, float, float, int]:
        """The fastest feasible member (space index, -1 if none), its predicted µs, the second
        fastest µs (inf if none) and how many members were feasible, in one kernel call
        (:func:`jit_kernels.best_two`; ``roofline_column``: see there)."""
        constants, fits = self._constants(problem)
        return _kernels().best_two(  # type: ignore[no-any-return]
            _frozen(members, np.intp), problem.m, problem.n, problem.k, constants, fits, self.space_ints,
            self.config_columns, _LAYOUT, *self.trees.arrays, roofline_column,
        )  # fmt: skip

    def best_two_level(
        self, problem: Problem, members: NDArray[np.intp], roofline_column: int, level: CompiledTrees
    ) -> tuple[int, float, float, int]:
        """:meth:`best_two` with ``level``'s trees (the booster's per-problem level) walked once on the
        first feasible row and added to every prediction (:func:`jit_kernels.best_two_level`)."""
        constants, fits = self._constants(problem)
        return _kernels().best_two_level(  # type: ignore[no-any-return]
            _frozen(members, np.intp), problem.m, problem.n, problem.k, constants, fits, self.space_ints,
            self.config_columns, _LAYOUT, *self.trees.arrays, roofline_column, *level.arrays,
        )  # fmt: skip

    def score(
        self, problem: Problem, members: NDArray[np.intp]
    ) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
        """The feasible members, their feature rows and the model's predictions, in one kernel call."""
        constants, fits = self._constants(problem)
        return _kernels().score_shortlist(  # type: ignore[no-any-return]
            _frozen(members, np.intp), problem.m, problem.n, problem.k, constants, fits, self.space_ints,
            self.config_columns, _LAYOUT, *self.trees.arrays,
        )  # fmt: skip
