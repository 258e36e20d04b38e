"""Candidate shortlists on a log2 grid of shapes: which few configurations a new shape scores.

Scoring every candidate of a problem (300-6,000) with the full model takes milliseconds; the
shortlist narrows them to a few dozen, precomputed when the artifact is exported.

Grid. Per (dtype, layout), cells of ``step_log2`` octaves along each of log2 M, log2 N, log2 K,
from ``origin_log2``, ``shape`` cells per axis, covering the training domain with a margin; a shape
outside is looked up in the nearest cell (it is flagged out of distribution anyway). Each cell has
8 *variants*, one per combination of "M, N, K a multiple of 16 or not", because alignment changes
which configurations are fast (tensor descriptors, vectorised loads: FACTS.md), and, in artifacts exported
since the twenty-fifth session, 8 more for the same combinations of shapes whose row strides suit tensor
descriptors while N or K is off multiples of 16 (:func:`stride_ragged`: bf16 N = 3000, K = 1000), which are
served by ``tma`` configurations almost always and whose lists are built from their own samples
(:func:`stride_ragged_samples`). A table of 8 variants (older artifacts) serves such a shape from the aligned
variant's list with its own list's head added (:meth:`ShortlistTable.problem_cut`).

Contents, from sample shapes (:func:`sample_shapes`): ``samples`` shapes drawn half log-uniformly
over the grid and half around the training problems (a normal of ``near_sigma_log2`` octaves), each
extent a multiple of 16 or not with even odds (so each alignment variant gets an eighth of them),
and each ranked with the full model over every candidate (``top_n`` best kept). A configuration's
weight in a (cell, variant) is the sum over the samples of that variant in the cell of
``2**-rank``, times 8, plus the same sum over the samples in the 26 neighbouring cells: the cell's
own winners first, its neighbours' to fill. The list holds the
``list_width`` configurations of largest weight, in that order, so that a predictor may score only
a prefix of it (:meth:`ShortlistTable.members`). A (cell, variant) with no sample in reach takes the
list of the nearest cell of that variant that has one.

Why this way (measured on the first H200 model, 300 trees of depth 8): the full model's best
configuration is a nervous function of the shape: the predicted gap between its best and second
best is under 2% for half of the shapes, 1,609 distinct configurations were the best of 20,000 random
shapes, and one 1-octave cell of one alignment variant holds 22-80 distinct winners. A list of the
frequent winners of many samples contains a new shape's best far more often, per member, than the
top-8 of the cell's corners did. The export records how often, on shapes it did not sample
(``validation`` in ``predictor.json``), for several prefix widths.

Lists are stored once each (``lists``, padded with -1) and referenced from ``table[i, j, l, v]``;
entries are indices into :func:`tilecost.space.config_space` of the group, whose digest the
artifact records so that a changed space is refused rather than misread.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tilecost.config import TileConfig
from tilecost.errors import ArtifactError
from tilecost.problem import MAX_DIM, DType, Layout, Problem
from tilecost.space import tma_aligned

__all__ = [
    "EXTEND_FROM",
    "GridSpec",
    "ListCut",
    "STRIDE_SHARE",
    "ShortlistTable",
    "build_shortlists",
    "containment",
    "sample_shapes",
    "space_digest",
    "stride_ragged",
    "stride_ragged_samples",
    "stride_steps",
]

_MAX_LOG2 = math.log2(MAX_DIM)
# A shape whose best among its list's first members sits this far down the list (0 = the list's first)
# has its whole list scored: a late winner says the cell's order misjudged this shape, and the rest of
# the list then often holds a better one (BENCHMARKS §5, ninth session: 63 -> 72 of 78 held-out
# problems answered as scoring every candidate does; a sixth of random shapes' queries extended, 29% of held-out).
EXTEND_FROM = 8
_NONE = np.empty(0, dtype=np.intp)
# A sample counts this many times more in its own cell than in a neighbouring one.
_OWN_CELL_WEIGHT = 8.0
# The 27 offsets of a cell's neighbourhood, its own first.
# The export adds this share of a group's samples drawn from the stride-ragged class (:func:`stride_ragged_samples`),
# whose 8 variants would otherwise get what the residues 1..15 give them: 1 sample in 15 ragged extents for 16-bit
# types (1 in 225 with N and K both ragged), so their lists held pointer configurations almost only (BENCHMARKS §5,
# twenty-fourth and twenty-fifth sessions). The other variants keep their samples, drawn as before.
STRIDE_SHARE = 0.25
_NEIGHBOURHOOD = sorted(itertools.product((-1, 0, 1), repeat=3), key=lambda o: o != (0, 0, 0))


def space_digest(space: Sequence[TileConfig]) -> str:
    """SHA-256 of the space's config keys in order: shortlist indices are valid only for this order."""
    return hashlib.sha256("\n".join(c.key for c in space).encode()).hexdigest()


@dataclass(frozen=True)
class GridSpec:
    """Where the cells lie (log2 units) and how their lists were built."""

    origin_log2: tuple[float, float, float]
    step_log2: float
    shape: tuple[int, int, int]
    top_n: int
    samples: int
    list_width: int
    seed: int
    near_sigma_log2: float = 1.0

    def __post_init__(self) -> None:
        if not self.step_log2 > 0 or min(self.shape) < 1 or self.top_n < 1 or self.samples < 1 or self.list_width < 1:
            raise ValueError(
                f"grid spec {self} needs step_log2 > 0, shape >= 1, top_n >= 1, samples >= 1, list_width >= 1"
            )
        object.__setattr__(self, "origin_log2", tuple(float(x) for x in self.origin_log2))
        object.__setattr__(self, "shape", tuple(int(x) for x in self.shape))

    @classmethod
    def covering(
        cls,
        log2_min: Sequence[float],
        log2_max: Sequence[float],
        *,
        step_log2: float,
        margin_log2: float,
        top_n: int,
        samples: int,
        list_width: int,
        seed: int,
        near_sigma_log2: float = 1.0,
    ) -> GridSpec:
        """The grid covering [min - margin, max + margin] per axis (clipped to 1..2**31 - 1)."""
        origin, shape = [], []
        for low, high in zip(log2_min, log2_max, strict=True):
            start = max(0.0, math.floor((low - margin_log2) / step_log2) * step_log2)
            stop = min(_MAX_LOG2, high + margin_log2)
            origin.append(start)
            shape.append(max(1, math.ceil((stop - start) / step_log2)))
        return cls(tuple(origin), step_log2, tuple(shape), top_n, samples, list_width, seed, near_sigma_log2)  # type: ignore[arg-type]

    @property
    def log2_low(self) -> NDArray[np.float64]:
        return np.array(self.origin_log2)

    @property
    def log2_high(self) -> NDArray[np.float64]:
        return np.minimum(np.array(self.origin_log2) + np.array(self.shape) * self.step_log2, _MAX_LOG2)

    def cells(self, shapes: NDArray[np.int64]) -> NDArray[np.intp]:
        """The (i, j, l) cell of each row of ``shapes`` (m, n, k), nearest cell outside the grid."""
        index = np.floor((np.log2(shapes) - self.log2_low) / self.step_log2).astype(np.intp)
        return np.clip(index, 0, np.array(self.shape) - 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GridSpec:
        return cls(**data)


def stride_ragged(problem: Problem) -> bool:
    """Whether the problem's row strides suit tensor descriptors (:func:`~tilecost.space.tma_aligned`) while N or K
    is not a multiple of 16: bf16 N = 3000 or K = 1000, fp32 K = 1004, fp8 nt N = 3000 with K a multiple of 16."""
    return (problem.n % 16 != 0 or problem.k % 16 != 0) and tma_aligned(problem)


def stride_steps(dtype: DType, layout: Layout) -> tuple[int, int]:
    """The smallest steps of N and of K whose multiples give every row stride of the group 16 bytes; 16 where only
    multiples of 16 do (fp8's K), so the group has stride-ragged shapes only where a step is below 16."""

    def step(*element_bytes: int) -> int:
        return max(16 // math.gcd(16, b) for b in element_bytes)

    n_bytes = (dtype.out_bytes, dtype.in_bytes) if layout is Layout.NN else (dtype.out_bytes,)
    return step(*n_bytes), step(dtype.in_bytes)


def _variant(m: int, n: int, k: int) -> int:
    return (m % 16 == 0) | (n % 16 == 0) << 1 | (k % 16 == 0) << 2


def _variants(shapes: NDArray[np.int64], strided: NDArray[np.bool_] | None = None) -> NDArray[np.intp]:
    aligned = (shapes % 16 == 0).astype(np.intp)
    base = aligned[:, 0] | aligned[:, 1] << 1 | aligned[:, 2] << 2
    return base if strided is None else base + 8 * np.asarray(strided, dtype=np.intp)


@dataclass(frozen=True, eq=False)
class ListCut:
    """A shape's list cut for scoring: ``head`` (the first members, ascending space indices) is scored
    first; when its best is one of ``late`` (head members at ``extend_from`` or later, in list order),
    ``tail`` (the rest of the list, in list order) is scored too. All three are views of the table's arrays
    (not to be written): ``late`` and ``tail`` as stored (int32)."""

    head: NDArray[np.intp]
    late: NDArray[np.integer[Any]]
    tail: NDArray[np.integer[Any]]


@dataclass(frozen=True, eq=False)
class ShortlistTable:
    """The lists of one (dtype, layout) group: ``table[i, j, l, variant]`` indexes ``lists``, whose
    rows hold space indices by decreasing weight, padded with -1. ``variant`` is the alignment's 3 bits, plus 8
    for a :func:`stride_ragged` shape where the table has 16 variants (exported since the twenty-fifth session)."""

    spec: GridSpec
    table: NDArray[np.int32]
    lists: NDArray[np.int32]
    lengths: list[int] = field(init=False, repr=False)
    # Per head width, every list's first members sorted (:meth:`_heads`), built on first use.
    sorted_heads: dict[int, NDArray[np.intp]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        # Members per list (rows are padded with -1 at the end), so a query cuts its list without a mask.
        object.__setattr__(self, "lengths", (self.lists >= 0).sum(axis=1).tolist())
        if self.table.shape not in ((*self.spec.shape, 8), (*self.spec.shape, 16)):
            raise ArtifactError(
                f"shortlist table has shape {self.table.shape}, the grid needs {(*self.spec.shape, 8)} or 16 variants"
            )
        if self.table.size and not (self.table.min() >= 0 and self.table.max() < len(self.lists)):
            raise ArtifactError("shortlist table refers to lists that do not exist")

    @property
    def stride_variants(self) -> bool:
        """Whether the table has lists of their own for :func:`stride_ragged` shapes (16 variants)."""
        return self.table.shape[-1] == 16

    def list_id(self, problem: Problem) -> int:
        """The list of the problem's cell (the nearest cell outside the grid) and alignment variant."""
        i, j, c = self._cell(problem)
        variant = _variant(problem.m, problem.n, problem.k)
        if self.stride_variants and stride_ragged(problem):
            variant += 8
        return int(self.table[i, j, c, variant])

    def _cell(self, problem: Problem) -> tuple[int, int, int]:
        """The problem's grid cell, the nearest one for a problem outside the grid."""
        spec = self.spec
        cells = []
        for extent, origin, size in zip((problem.m, problem.n, problem.k), spec.origin_log2, spec.shape, strict=True):
            index = math.floor((math.log2(extent) - origin) / spec.step_log2)
            cells.append(0 if index < 0 else size - 1 if index >= size else index)
        return cells[0], cells[1], cells[2]

    def stride_list_id(self, problem: Problem) -> int | None:
        """The list of the variant with N and K counted as aligned, for a problem whose row strides suit tensor
        descriptors (every one a multiple of 16 bytes) while N or K is not a multiple of 16 (N = 3000, K = 1000 in
        bf16); None for any other problem.

        Why: sample extents off multiples of 16 take a residue 1..15 at the export, so in a ragged variant's samples
        ``tma`` configurations are feasible for 1 of 15 ragged extents (1 of 225 with N and K both ragged), and those
        lists hold pointer configurations almost only. On 300 random such shapes the shipped lists gave the full
        model's own best 38 times at width 8, its predicted time of the answer 1.154× its best's (geometric mean);
        adding the aligned variant's head, 123 and 1.049 (``benchmarks/experiments/stride_aligned_lists.py``,
        BENCHMARKS §5, twenty-fourth session). None for a table with lists of the class's own (16 variants)."""
        if self.stride_variants or not stride_ragged(problem):
            return None
        i, j, c = self._cell(problem)
        return int(self.table[i, j, c, _variant(problem.m, 16, 16)])

    def problem_cut(
        self, problem: Problem, width: int | None, extend_from: int | None = EXTEND_FROM
    ) -> tuple[int | tuple[int, int], ListCut]:
        """The cut a problem is scored from, and a key for it: its list's (:meth:`cut`); for a problem
        :meth:`stride_list_id` names another list, that list's cut with the problem's own list's head added to
        its head (its late members and tail are the stride list's)."""
        own = self.list_id(problem)
        strided = self.stride_list_id(problem)
        if strided is None or strided == own:
            return own, self.cut(own, width, extend_from)
        parts = self.cut(strided, width, extend_from)
        head = np.union1d(parts.head, self.cut(own, width, None).head).astype(np.intp)
        return (strided, own), ListCut(head, parts.late, parts.tail)

    def members(self, list_id: int, width: int | None = None) -> NDArray[np.intp]:
        """Space indices of the first ``width`` members of one list (all by default), ascending."""
        row = self.lists[list_id]
        row = row[row >= 0][:width]
        return np.sort(row).astype(np.intp)

    def cut(self, list_id: int, width: int | None, extend_from: int | None = EXTEND_FROM) -> ListCut:
        """The list's first ``width`` members, which of them sit at position ``extend_from`` or later,
        and the members after the first ``width`` (none when ``extend_from`` is None).

        A head is a row of :meth:`_heads`, sorted once for every list: a query whose list is new to the
        predictor's cache then slices three views instead of sorting and converting (3.8 µs instead of 7.0 here)."""
        row = self.lists[list_id]
        length = self.lengths[list_id]
        if width is None:
            return ListCut(np.sort(row[:length]).astype(np.intp), _NONE, _NONE)
        head = self._heads(width)[list_id, : min(width, length)]
        if extend_from is None or length <= width:
            return ListCut(head, _NONE, _NONE)
        return ListCut(head, row[extend_from:width], row[width:length])

    def _heads(self, width: int) -> NDArray[np.intp]:
        """Every list's first ``width`` members in ascending order, padded with -1 at the end (read-only)."""
        heads = self.sorted_heads.get(width)
        if heads is None:
            heads = self.lists[:, :width].astype(np.intp)
            last = np.iinfo(np.intp).max  # no space index: the padding sorts to the end, then is -1 again
            heads[heads < 0] = last
            heads.sort(axis=1)
            heads[heads == last] = -1
            heads.flags.writeable = False
            self.sorted_heads[width] = heads
        return heads

    def check_space(self, space_size: int) -> None:
        if self.lists.size and self.lists.max() >= space_size:
            raise ArtifactError(f"shortlists refer to config {int(self.lists.max())} of a space of {space_size}")


def sample_shapes(spec: GridSpec, training_log2: NDArray[np.float64], count: int, seed: int) -> NDArray[np.int64]:
    """``count`` shapes (rows of m, n, k) for the lists or their validation, deterministic in ``seed``.

    Half log-uniform over the grid, half a training problem's log2 extents plus a normal of
    ``spec.near_sigma_log2`` octaves per axis (clipped to the grid). Each extent then becomes a
    ragged number (a random residue 1..15 modulo 16 above 16) with odds 1/2, else a *round* number
    (the nearest ``c · 2**j`` with ``c`` in 1, 3, 5, 7, 9: 768, 3584, 4096, 14336, the extents of
    real layers) or a multiple of 16 with odds 1/4 each, so that the shapes people ask about most are
    sampled exactly (without round numbers, the lists held the full model's best for 11 of the 19
    held-out H200 problems at width 24) and each of the 8 alignment variants gets an eighth of the
    samples, 8-aligned extents among the ragged ones. Odds of 1/3 each gave the all-ragged variant
    1/27 of them: on the 61-held-out H200 model, lists from 16,000 such samples held the full
    model's best for 68% of random (mostly ragged) bf16/nt shapes at ~17 rows scored, 76% with these
    odds, and as often for held-out problems.
    """
    rng = np.random.default_rng([seed, count])
    low, high = spec.log2_low, spec.log2_high
    uniform = count - count // 2 if len(training_log2) else count
    points = [rng.uniform(low, high, size=(uniform, 3))]
    if len(training_log2):
        near = training_log2[rng.integers(0, len(training_log2), count - uniform)]
        points.append(np.clip(near + rng.normal(0.0, spec.near_sigma_log2, near.shape), low, high))
    log2 = np.concatenate(points)
    extents = np.clip(np.rint(np.exp2(log2)), 1, MAX_DIM).astype(np.int64)
    kind = np.minimum(rng.integers(0, 4, extents.shape), 2)  # 0 round, 1 multiple of 16, 2 ragged (odds 1/2)
    residue = rng.integers(1, 16, extents.shape)
    multiple = np.maximum(16, np.rint(extents / 16).astype(np.int64) * 16)
    ragged = np.where(extents > 16, extents - extents % 16 + residue, extents)
    out = np.where(kind == 0, _round(log2), np.where((kind == 1) & (extents >= 16), multiple, ragged))
    return np.clip(out, 1, MAX_DIM - MAX_DIM % 16)


def stride_ragged_samples(
    spec: GridSpec, training_log2: NDArray[np.float64], count: int, seed: int, steps: tuple[int, int]
) -> NDArray[np.int64]:
    """``count`` shapes of the stride-ragged class for a group whose N and K steps (:func:`stride_steps`) are
    ``steps``, deterministic in ``seed``: :func:`sample_shapes`' draws with each N or K off multiples of 16 moved to
    a residue that is a multiple of its step (8 for 16-bit types; 4, 8 or 12 for fp32; a multiple of 16 where the
    step is 16), kept where N or K is still off multiples of 16. None where both steps are 16 (fp8 nn)."""
    if min(steps) >= 16 or count <= 0:
        return np.empty((0, 3), dtype=np.int64)
    rng = np.random.default_rng([seed, count, 16])
    found: list[NDArray[np.int64]] = []
    total, draw = 0, 0
    while total < count:
        shapes = sample_shapes(spec, training_log2, 2 * count + 64, seed + 1000 * (draw + 1)).copy()
        draw += 1
        for axis, step in zip((1, 2), steps, strict=True):
            column = shapes[:, axis]
            ragged = column % 16 != 0
            residue = step * rng.integers(1, max(2, 16 // step), len(column)) if step < 16 else 16
            column[ragged] = (column - column % 16 + residue)[ragged]
        shapes = np.clip(shapes, 1, MAX_DIM - MAX_DIM % 16)
        keep = (shapes[:, 1] % 16 != 0) | (shapes[:, 2] % 16 != 0)
        found.append(shapes[keep])
        total += int(keep.sum())
        if draw > 50:
            raise ValueError(f"no stride-ragged shapes for steps {steps}")  # cannot happen with a step below 16
    return np.concatenate(found)[:count]


_ROUND_FACTORS = np.array([1, 3, 5, 7, 9])


def _round(log2: NDArray[np.float64]) -> NDArray[np.int64]:
    """The number ``c · 2**j`` (``c`` in :data:`_ROUND_FACTORS`, ``j >= 0``) nearest each ``2**log2``
    in log2 distance."""
    exponents = np.maximum(0, np.rint(log2[..., None] - np.log2(_ROUND_FACTORS)))
    candidates = _ROUND_FACTORS * np.exp2(exponents)
    best = np.abs(np.log2(candidates) - log2[..., None]).argmin(axis=-1)
    return np.take_along_axis(candidates, best[..., None], axis=-1)[..., 0].astype(np.int64)


def build_shortlists(
    spec: GridSpec, shapes: NDArray[np.int64], tops: NDArray[np.intp], strided: NDArray[np.bool_] | None = None
) -> ShortlistTable:
    """A group's lists from sample ``shapes`` (rows of m, n, k) and the full model's best candidates
    of each (``tops``: rows of space indices, best first, -1 padded; :meth:`GroupScorer.top_configs`).
    See the module docstring for the weights. With ``strided`` (per shape, whether it is :func:`stride_ragged`
    in the group's dtype and layout), the table has 16 variants, the class's 8 built from its shapes alone."""
    if len(shapes) != len(tops) or not len(shapes):
        raise ValueError(f"{len(shapes)} shapes and {len(tops)} rankings: give one ranking per shape, at least one")
    if strided is not None and len(strided) != len(shapes):
        raise ValueError(f"{len(strided)} stride flags for {len(shapes)} shapes: give one per shape")
    grid = np.array(spec.shape)
    count = 8 if strided is None else 16
    cells, variants = spec.cells(shapes), _variants(shapes, strided)
    ranks = np.broadcast_to(np.arange(tops.shape[1]), tops.shape)
    valid = tops >= 0
    sample = np.broadcast_to(np.arange(len(tops))[:, None], tops.shape)[valid]
    config, weight = tops[valid], np.exp2(-ranks[valid].astype(np.float64))
    space_size = int(config.max()) + 1
    keys, weights = [], []
    for offset in _NEIGHBOURHOOD:
        target = cells[sample] + offset
        inside = ((target >= 0) & (target < grid)).all(axis=1)
        flat_cell = np.ravel_multi_index(target[inside].T, spec.shape)
        keys.append((flat_cell * count + variants[sample][inside]) * space_size + config[inside])
        weights.append(weight[inside] * (_OWN_CELL_WEIGHT if offset == (0, 0, 0) else 1.0))
    unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    total = np.bincount(inverse, weights=np.concatenate(weights))
    slot, member = np.divmod(unique, space_size)  # slot = flat cell * count + variant
    order = np.lexsort((member, -total, slot))  # per slot: heaviest first, ties to the lower index
    slot, member = slot[order], member[order]
    starts = np.flatnonzero(np.r_[True, slot[1:] != slot[:-1]])
    position = np.arange(len(slot)) - np.repeat(starts, np.diff(np.r_[starts, len(slot)]))
    keep = position < spec.list_width
    slot, member, position = slot[keep], member[keep], position[keep]
    filled = np.unique(slot)
    rows = np.full((len(filled), spec.list_width), -1, dtype=np.int32)
    rows[np.searchsorted(filled, slot), position] = member
    rows, list_of_filled = np.unique(rows, axis=0, return_inverse=True)
    flat_table = np.full(int(np.prod(grid)) * count, -1, dtype=np.int32)
    flat_table[filled] = list_of_filled.ravel()
    table = flat_table.reshape(-1, count)
    _fill_from_nearest(table, spec)
    return ShortlistTable(spec, table.reshape(*spec.shape, count), rows)


def _fill_from_nearest(table: NDArray[np.int32], spec: GridSpec) -> None:
    """Give each empty (cell, variant) the list of the nearest filled cell of that variant, in place; ``table`` is
    (cells, 8 or 16). A variant with no list anywhere takes, per cell, its alignment's plain variant (a stride-ragged
    variant no shape of the group can be in: N and K multiples of 16, or fp8 nn), else any variant's."""
    axes = [np.arange(s, dtype=np.float64) for s in spec.shape]
    centres = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    any_filled = (table >= 0).any(axis=1)
    for variant in range(table.shape[1]):  # the plain variants first: a stride variant may borrow theirs
        column = table[:, variant]
        donors = np.flatnonzero(column >= 0)
        if not len(donors) and variant >= 8 and (table[:, variant - 8] >= 0).all():
            column[:] = table[:, variant - 8]
            continue
        source = column if len(donors) else table.max(axis=1)
        if not len(donors):
            donors = np.flatnonzero(any_filled)
        empty = np.flatnonzero(column < 0)
        for start in range(0, len(empty), 256):  # 256 cells at a time: (256, donors) distances
            block = empty[start : start + 256]
            nearest = ((centres[block, None, :] - centres[None, donors, :]) ** 2).sum(axis=2).argmin(axis=1)
            column[block] = source[donors[nearest]]


def containment(
    table: ShortlistTable,
    shapes: NDArray[np.int64],
    best: NDArray[np.intp],
    widths: Sequence[int],
    like: Problem | None = None,
) -> dict[int, float]:
    """How often each shape's best configuration (``best``: a space index per row of ``shapes``) is
    among the first ``width`` members of its list, per width. ``like`` gives the group's dtype and layout (bf16 nt
    by default), which decide the stride-ragged variants."""
    dtype, layout = (like.dtype, like.layout) if like is not None else (DType.BF16, Layout.NT)
    ids = [table.list_id(Problem(int(m), int(n), int(k), dtype, layout)) for m, n, k in shapes]
    lists = table.lists[ids]
    found = lists == np.asarray(best)[:, None]
    rank = np.where(found.any(axis=1), found.argmax(axis=1), lists.shape[1])
    return {int(w): float((rank < w).mean()) for w in widths}
