"""Run-time dispatch: a few configurations and a rule that picks one from the extents at launch.

The seed's third arrangement: a kernel compiled for 2-4 configurations ahead of time, and a tiny
decision on log2 M, N, K that a launcher evaluates in nanoseconds, for shapes known only at run time
(a token count). :func:`fit_dispatch` builds it from the full model: it scores every candidate of
each training problem, then searches every decision tree of depth two on (log2 M, log2 N, log2 K)
whose leaves each hold at least ``min_leaf_fraction`` of the problems, giving each leaf the one
configuration with the least total log slowdown against each problem's best candidate.
Only pointer-kernel configurations take part: they run on every shape, the tensor-descriptor kernel
needs 16-byte aligned strides. :func:`dispatch_speed` reports the speed kept against per-shape
choice from measured times (docs/BENCHMARKS.md has the held-out figures).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tilecost.config import KernelVariant, TileConfig
from tilecost.problem import DType, Layout, Problem

if TYPE_CHECKING:
    from .scoring import GroupScorer

__all__ = ["DispatchRule", "dispatch_speed", "fit_dispatch"]

_AXES = ("m", "n", "k")
# Log slowdown charged where a configuration is not a candidate of a training problem (a tile larger
# than the problem, a split of K into more parts than it has steps): e**5, about 150x.
_NOT_A_CANDIDATE = 5.0

Node = Mapping[str, Any]  # {"config": i} or {"axis": "m", "threshold_log2": t, "below": Node, "above": Node}


@dataclass(frozen=True)
class DispatchRule:
    """Configurations and a decision tree over log2 extents choosing among them."""

    dtype: DType
    layout: Layout
    configs: tuple[TileConfig, ...]
    tree: Node

    def choose(self, m: int, n: int, k: int) -> TileConfig:
        """The configuration for a launch of M×N×K: walk the tree (``log2(extent) < threshold``: below)."""
        node, extents = self.tree, {"m": m, "n": n, "k": k}
        while "config" not in node:
            node = node["below"] if math.log2(extents[node["axis"]]) < node["threshold_log2"] else node["above"]
        return self.configs[node["config"]]

    def describe(self) -> str:
        """The rule as nested if/else text."""

        def walk(node: Node, indent: str) -> list[str]:
            if "config" in node:
                return [f"{indent}{self.configs[node['config']].key}"]
            head = f"{indent}if log2({node['axis']}) < {node['threshold_log2']:.3f}:"
            return [
                head,
                *walk(node["below"], indent + "    "),
                f"{indent}else:",
                *walk(node["above"], indent + "    "),
            ]

        return "\n".join(walk(self.tree, ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype.value,
            "layout": self.layout.value,
            "configs": [c.key for c in self.configs],
            "tree": self.tree,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DispatchRule:
        configs = tuple(TileConfig.from_key(key) for key in data["configs"])
        return cls(DType.parse(data["dtype"]), Layout.parse(data["layout"]), configs, data["tree"])


def _leaf(regret: NDArray[np.float64]) -> tuple[float, dict[str, Any]]:
    """One configuration for all rows: the column of least total regret."""
    totals = regret.sum(axis=0)
    column = int(np.argmin(totals))
    return float(totals[column]), {"config": column}


def _cuts(points: NDArray[np.float64], min_leaf: int) -> list[tuple[int, float, NDArray[np.intp], int]]:
    """Every (axis, threshold, row order, rows below) leaving at least ``min_leaf`` rows on each side,
    thresholds halfway between consecutive distinct values."""
    rows, out = len(points), []
    for axis in range(3):
        order = np.argsort(points[:, axis], kind="stable")
        values = points[order, axis]
        for cut in range(min_leaf, rows - min_leaf + 1):
            if values[cut - 1] < values[cut]:
                out.append((axis, float(values[cut - 1] + values[cut]) / 2, order, cut))
    return out


def _stump(regret: NDArray[np.float64], points: NDArray[np.float64], min_leaf: int) -> tuple[float, dict[str, Any]]:
    """The best tree of depth at most one (prefix sums over each axis' order: one pass per axis)."""
    best = _leaf(regret)
    for axis in range(3):
        order = np.argsort(points[:, axis], kind="stable")
        values = points[order, axis]
        cumulative = np.cumsum(regret[order], axis=0)
        cuts = np.array(
            [c for c in range(min_leaf, len(points) - min_leaf + 1) if values[c - 1] < values[c]], dtype=int
        )
        if not len(cuts):
            continue
        below, above = cumulative[cuts - 1], cumulative[-1] - cumulative[cuts - 1]
        costs = below.min(axis=1) + above.min(axis=1)
        i = int(np.argmin(costs))
        if costs[i] < best[0]:
            cut = int(cuts[i])
            best = (float(costs[i]), {
                "axis": _AXES[axis],
                "threshold_log2": round(float(values[cut - 1] + values[cut]) / 2, 6),
                "below": {"config": int(np.argmin(below[i]))},
                "above": {"config": int(np.argmin(above[i]))},
            })  # fmt: skip
    return best


def _stump_of(
    regret: NDArray[np.float64], rows: NDArray[np.intp], points: NDArray[np.float64], min_leaf: int, kernel: Any
) -> tuple[float, dict[str, Any]]:
    """:func:`_stump` of ``regret[rows]`` and ``points[rows]``; with ``kernel``
    (:func:`tilecost.predict.jit.compiled_stump`), the compiled search, which gives the same."""
    if kernel is None:
        return _stump(regret[rows], points[rows], min_leaf)
    cost, leaf, axis, below, above, value_below, value_above = kernel(regret, rows, points, min_leaf)
    if axis < 0:
        return float(cost), {"config": int(leaf)}
    return float(cost), {
        "axis": _AXES[axis],
        "threshold_log2": round(float(value_below + value_above) / 2, 6),
        "below": {"config": int(below)},
        "above": {"config": int(above)},
    }


def _depth_two(
    regret: NDArray[np.float64], points: NDArray[np.float64], min_leaf: int, kernel: Any = None
) -> dict[str, Any] | None:
    """The best tree whose root splits (so at least two configurations) and whose children are stumps
    (``kernel``: see :func:`_stump_of`)."""
    best: tuple[float, dict[str, Any]] | None = None
    regret, points = np.ascontiguousarray(regret), np.ascontiguousarray(points)
    for axis, threshold, order, cut in _cuts(points, min_leaf):
        below, above = order[:cut], order[cut:]
        low, high = (
            _stump_of(regret, below, points, min_leaf, kernel),
            _stump_of(regret, above, points, min_leaf, kernel),
        )
        cost = low[0] + high[0]
        if best is None or cost < best[0]:
            node = {"axis": _AXES[axis], "threshold_log2": round(threshold, 6), "below": low[1], "above": high[1]}
            best = (cost, node)
    return None if best is None else best[1]


def regret_matrix(group: GroupScorer, problems: Sequence[Problem]) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """The pointer-kernel configurations (space indices) and, per problem and configuration, the model's log
    slowdown against the problem's best candidate (tensor-descriptor ones included; ``_NOT_A_CANDIDATE`` where
    the configuration is not one of its candidates): what :func:`fit_dispatch` searches."""
    pool = np.flatnonzero([c.variant is KernelVariant.PTR for c in group.space])
    position = np.full(len(group.space), -1)
    position[pool] = np.arange(len(pool))
    regret = np.full((len(problems), len(pool)), _NOT_A_CANDIDATE)
    for row, problem in enumerate(problems):
        indices, times = group.times_us(problem, group.everything)
        ptr = position[indices] >= 0
        regret[row, position[indices[ptr]]] = np.log(times[ptr] / times.min())
    return pool, regret


def fit_dispatch(
    group: GroupScorer, problems: Sequence[Problem], *, min_leaf_fraction: float = 0.1, compiled: bool | None = None
) -> DispatchRule:
    """A rule of 2-4 pointer-kernel configurations of ``group`` fitted to the model's times on
    ``problems`` (the group's training problems): the depth-two tree on log2 extents, each leaf
    holding at least ``min_leaf_fraction`` of the problems, of least summed log slowdown against each
    problem's best candidate (tensor-descriptor ones included). Too few problems to split: one leaf.

    The search is exhaustive, ~18 · problems² · configurations additions. ``compiled`` (default: where numba
    is, :func:`tilecost.predict.jit.jit_enabled`; True raises without it) searches each side's stumps with
    :func:`tilecost.predict.jit_kernels.dispatch_stump`, the same sums in the same order without numpy's
    copies: the same rule, and on the shipped H200 model's 1,013 bf16-nt problems × 3,020 configurations 22.5 s
    instead of 199.8 s on a 2-core machine (docs/BENCHMARKS.md §5)."""
    if not problems:
        raise ValueError("fit_dispatch needs at least one problem")
    pool, regret = regret_matrix(group, problems)
    points = np.log2(np.array([[p.m, p.n, p.k] for p in problems], dtype=np.float64))
    min_leaf = max(1, math.ceil(min_leaf_fraction * len(problems)))
    kernel = None
    if compiled is not False:
        from .jit import compiled_stump

        kernel = compiled_stump()
        if kernel is None and compiled:
            raise RuntimeError("compiled=True needs numba (pip install tilecost[fast]) and TILECOST_JIT not off")
    tree = _depth_two(regret, points, min_leaf, kernel) or _leaf(regret)[1]
    columns: list[int] = []

    def renumber(node: dict[str, Any]) -> dict[str, Any]:
        if "config" in node:
            if node["config"] not in columns:
                columns.append(node["config"])
            return {"config": columns.index(node["config"])}
        return {**node, "below": renumber(node["below"]), "above": renumber(node["above"])}

    tree = renumber(tree)
    first = problems[0]
    return DispatchRule(first.dtype, first.layout, tuple(group.space[pool[c]] for c in columns), tree)


def dispatch_speed(rule: DispatchRule, measured: Mapping[Problem, Mapping[str, float]]) -> dict[str, Any]:
    """Speed the rule keeps against per-shape choice, from measured times.

    ``measured[problem]`` maps config keys to measured µs (every candidate measured, as for the
    held-out problems). Per problem: best measured time over the time of the rule's configuration;
    problems where that configuration was not measured (it is not one of their candidates) are
    counted in ``unmeasured`` and left out of the averages.
    """
    fractions, unmeasured = [], []
    for problem, times in measured.items():
        chosen = rule.choose(problem.m, problem.n, problem.k).key
        if chosen not in times:
            unmeasured.append(problem.key)
            continue
        fractions.append(min(times.values()) / times[chosen])
    values = np.array(fractions)
    return {
        "problems": len(fractions),
        "unmeasured": unmeasured,
        "mean_speed_fraction": float(values.mean()) if len(values) else math.nan,
        "geomean_speed_fraction": float(np.exp(np.log(values).mean())) if len(values) else math.nan,
        "min_speed_fraction": float(values.min()) if len(values) else math.nan,
    }
