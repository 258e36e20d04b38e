"""Candidate shortlists on a log2 grid of shapes: which few configurations a new shape scores.

Scoring every candidate of a problem (300-6,000) with the full model takes milliseconds; the
shortlist narrows them to a few dozen, precomputed when the artifact is exported.

Grid. Per (dtype, layout), cells of ``step_log2`` octaves along each of log2 M, log2 N, log2 K,
from ``origin_log2``, ``shape`` cells per axis, covering the training domain with a margin; a shape
outside is looked up in the nearest cell (it is flagged out of distribution anyway). Each cell has
8 *variants*, one per combination of "M, N, K a multiple of 16 or not", because alignment changes
which configurations are fast (tensor descriptors, vectorised loads: FACTS.md).

Contents. The list of a (cell, variant) is the union of the full model's top ``top_n`` over sample
shapes of that variant: the cell's 8 corners and ``interior_samples`` interior points (seeded random
extents, or along an axis whose cell holds at most ``interior_samples`` extents of the class, all of
them in turn).
Corners alone miss too much: for a model trained on the first H200 dataset (300 trees of depth 8),
the best configuration changed under a change of 3% in each dimension for 1 random shape in 4 (tile
counts against the 132 SMs), so interior points are what make the list hold the best configuration
of a shape inside the cell; benchmarks/predict_latency.py measures how often it does.

Lists are stored once each (``lists``, padded with -1) and referenced from ``table[i, j, l, v]``;
entries are indices into :func:`tilecost.space.config_space` of the group, whose digest the
artifact records so that a changed space is refused rather than misread.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tilecost.config import TileConfig
from tilecost.errors import ArtifactError
from tilecost.problem import MAX_DIM, DType, Layout, Problem

__all__ = ["GridSpec", "ShortlistTable", "build_shortlists", "space_digest"]

_MAX_LOG2 = math.log2(MAX_DIM)


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
    interior_samples: int
    seed: int
    radius_log2: float = math.inf  # cells farther from every training problem borrow the nearest built cell's lists

    def __post_init__(self) -> None:
        if not self.step_log2 > 0 or min(self.shape) < 1 or self.top_n < 1 or self.interior_samples < 0:
            raise ValueError(f"grid spec {self} needs step_log2 > 0, shape >= 1, top_n >= 1, interior_samples >= 0")
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
        interior_samples: int,
        seed: int,
        radius_log2: float = math.inf,
    ) -> GridSpec:
        """The grid covering [min - margin, max + margin] per axis (clipped to 1..2**31 - 1)."""
        origin, shape = [], []
        for low, high in zip(log2_min, log2_max, strict=True):
            start = max(0.0, math.floor((low - margin_log2) / step_log2) * step_log2)
            stop = min(_MAX_LOG2, high + margin_log2)
            origin.append(start)
            shape.append(max(1, math.ceil((stop - start) / step_log2)))
        return cls(tuple(origin), step_log2, tuple(shape), top_n, interior_samples, seed, radius_log2)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GridSpec:
        return cls(**data)


def _variant(m: int, n: int, k: int) -> int:
    return (m % 16 == 0) | (n % 16 == 0) << 1 | (k % 16 == 0) << 2


@dataclass(frozen=True, eq=False)
class ShortlistTable:
    """The lists of one (dtype, layout) group: ``table[i, j, l, variant]`` indexes ``lists``."""

    spec: GridSpec
    table: NDArray[np.int32]
    lists: NDArray[np.int32]

    def __post_init__(self) -> None:
        if self.table.shape != (*self.spec.shape, 8):
            raise ArtifactError(f"shortlist table has shape {self.table.shape}, the grid needs {(*self.spec.shape, 8)}")
        if self.table.size and not (self.table.min() >= 0 and self.table.max() < len(self.lists)):
            raise ArtifactError("shortlist table refers to lists that do not exist")

    def list_id(self, problem: Problem) -> int:
        """The list of the problem's cell (the nearest cell outside the grid) and alignment variant."""
        spec = self.spec
        cells = []
        for extent, origin, size in zip((problem.m, problem.n, problem.k), spec.origin_log2, spec.shape, strict=True):
            index = math.floor((math.log2(extent) - origin) / spec.step_log2)
            cells.append(0 if index < 0 else size - 1 if index >= size else index)
        return int(self.table[cells[0], cells[1], cells[2], _variant(problem.m, problem.n, problem.k)])

    def members(self, list_id: int) -> NDArray[np.intp]:
        """Space indices of one list, in ascending order."""
        row = self.lists[list_id]
        return row[row >= 0].astype(np.intp)

    def check_space(self, space_size: int) -> None:
        if self.lists.size and self.lists.max() >= space_size:
            raise ArtifactError(f"shortlists refer to config {int(self.lists.max())} of a space of {space_size}")


def _class_values(low_log2: float, high_log2: float, aligned: bool, limit: int) -> list[int] | None:
    """Every extent of the alignment class in the cell [2**low, 2**high) if there are at most
    ``limit`` of them, else None: small cells (M = 1..15, K = 3..) are sampled exhaustively, because
    there one step of an extent changes the tile counts the most."""
    low, high = math.ceil(2.0**low_log2), math.ceil(2.0**high_log2)
    if high - low > 16 * limit:
        return None
    values = [v for v in range(low, high) if (v % 16 == 0) == aligned]
    return values if len(values) <= limit else None


def _sample_value(low_log2: float, high_log2: float, aligned: bool, rng: np.random.Generator | None) -> int | None:
    """An extent of the alignment class in the cell [2**low, 2**high): its lower corner when ``rng`` is
    None, else a random point. ``None`` when no multiple of 16 lies in the cell (aligned class only)."""
    low, high = 2.0**low_log2, 2.0**high_log2
    value = low if rng is None else 2.0 ** rng.uniform(low_log2, high_log2)
    if aligned:
        first, last = 16 * math.ceil(low / 16), 16 * math.ceil(high / 16) - 16
        if last < first:
            return None
        return int(min(max(16 * round(value / 16), first), last, MAX_DIM - MAX_DIM % 16))
    value = min(max(1, round(value)), MAX_DIM)
    if rng is not None and value > 16:  # a random residue, so that 8-aligned extents are sampled too
        value = value - value % 16 + int(rng.integers(1, 16))
    elif value % 16 == 0:
        value += 1
    return min(value, MAX_DIM)


def _cell_centres(spec: GridSpec) -> NDArray[np.float64]:
    """log2 (m, n, k) of every cell's centre, in ``np.ndindex`` order."""
    axes = [o + (np.arange(s) + 0.5) * spec.step_log2 for o, s in zip(spec.origin_log2, spec.shape, strict=True)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


def build_shortlists(
    spec: GridSpec,
    dtype: DType,
    layout: Layout,
    top_configs: Callable[[Problem], NDArray[np.intp]],
    training_log2: NDArray[np.float64] | None = None,
) -> ShortlistTable:
    """Build a group's lists. ``top_configs(problem)`` returns the space indices of the full model's
    best ``spec.top_n`` candidates of ``problem``, best first; each distinct sample shape is scored once.

    Only cells whose centre lies within ``spec.radius_log2`` octaves of a training problem
    (``training_log2``, rows of log2 m, n, k) are built; every other cell takes the lists of the
    nearest built cell (such shapes are flagged as a sparse neighbourhood anyway), which keeps the
    export to the region where the model has data.
    """
    ranked: dict[Problem, tuple[int, ...]] = {}

    def top(problem: Problem) -> tuple[int, ...]:
        if problem not in ranked:
            ranked[problem] = tuple(int(i) for i in top_configs(problem)[: spec.top_n])
        return ranked[problem]

    ids: dict[tuple[int, ...], int] = {}
    table = np.full((*spec.shape, 8), -1, dtype=np.int32)
    step = spec.step_log2
    centres = _cell_centres(spec)
    if training_log2 is None or not math.isfinite(spec.radius_log2):
        built = np.ones(len(centres), dtype=bool)
    else:
        gaps = np.sqrt(((centres[:, None, :] - training_log2[None, :, :]) ** 2).sum(axis=2)).min(axis=1)
        built = gaps <= max(spec.radius_log2, gaps.min())  # at least the cell nearest the data
    for flat, cell in enumerate(np.ndindex(*spec.shape)):
        if not built[flat]:
            continue
        bounds = [(o + c * step, o + (c + 1) * step) for o, c in zip(spec.origin_log2, cell, strict=True)]
        # An axis whose cell holds no multiple of 16 has only the unaligned class; its aligned
        # variants are never looked up and share the unaligned list.
        possible = sum(1 << axis for axis, b in enumerate(bounds) if _sample_value(b[0], b[1], True, None) is not None)
        for variant in range(8):
            if variant & ~possible:
                continue
            aligned = [bool(variant >> axis & 1) for axis in range(3)]
            corners = [[_sample_value(b[side], b[side] + step, a, None) for side in (0, 1)]
                       for b, a in zip(bounds, aligned, strict=True)]  # fmt: skip
            rng = np.random.default_rng([spec.seed, *cell, variant])
            axes: list[list[int | None]] = [[] for _ in range(3)]  # per axis: the extent of each sample
            for axis, (b, a) in enumerate(zip(bounds, aligned, strict=True)):
                exact = _class_values(b[0], b[1], a, spec.interior_samples)
                axes[axis] = [exact[i % len(exact)] if exact else _sample_value(b[0], b[1], a, rng)
                              for i in range(spec.interior_samples)]  # fmt: skip
            samples = [(m, n, k) for m in corners[0] for n in corners[1] for k in corners[2]]
            samples += list(zip(*axes, strict=True))
            members: set[int] = set()
            for m, n, k in samples:
                if m is not None and n is not None and k is not None:  # an upper corner may lack a multiple of 16
                    members.update(top(Problem(m, n, k, dtype, layout)))
            members_key = tuple(sorted(members))
            table[cell + (variant,)] = ids.setdefault(members_key, len(ids))
        for variant in range(8):
            if variant & ~possible:
                table[cell + (variant,)] = table[cell + (variant & possible,)]
    flat_table, sources = table.reshape(-1, 8), centres[built]
    for start in range(0, len(centres), 256):  # the nearest built cell of each cell, 256 cells at a time
        block = centres[start : start + 256]
        nearest = ((block[:, None, :] - sources[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
        flat_table[start : start + 256] = flat_table[np.flatnonzero(built)[nearest]]
    width = max((len(key) for key in ids), default=0)
    lists = np.full((len(ids), width), -1, dtype=np.int32)
    for key, index in ids.items():
        lists[index, : len(key)] = key
    return ShortlistTable(spec, table, lists)
