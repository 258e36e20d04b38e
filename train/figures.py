"""The figures of ``tilecost report`` and of the notebooks: the seed's tile heatmaps from real measurements,
and the cost model's quality on held-out problems.

Data first, drawing second: :func:`tile_grid` and :func:`quality_data` compute what a figure shows
(tested without a display), the ``*_figure`` functions draw it on a :class:`matplotlib.figure.Figure`
built without pyplot (no global state, no display needed; a notebook shows the returned figure).

**The seed's figure** (shared/seeds/001: "the time of every tile shape for four problem shapes"),
from the H200 measurements: for each problem a grid of BLOCK_M × BLOCK_N at BLOCK_K = 64, each cell
the fastest measured configuration of that tile (variant, GROUP_M, SPLIT_K, warps and stages at
their best), next to what the seed's analytical model (:func:`tilecost.features.roofline_time_us`,
on the H200's spec, SPLIT_K = 1) predicts for the same cells. The best, the worst and the fixed
128 × 128 cell are marked with their ratios to the best. A cell whose every row is ``hopeless``
carries only a lower bound (one screening launch, more than 3× the best): it is hatched and its
ratio written ``≥``. Cells the candidate space does not offer the problem (a tile far larger than
M, say) are left blank.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tilecost.device import DeviceSpec, load_device
from tilecost.errors import DatasetError
from tilecost.features import ConfigArrays, roofline_time_us
from tilecost.problem import Problem
from tilecost.space import BLOCK_MN

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from .evaluate import Evaluation

__all__ = [
    "SEED_BLOCK_K",
    "SEED_PROBLEMS",
    "QualityData",
    "TileGrid",
    "ood_figure",
    "predicted_vs_measured_figure",
    "quality_data",
    "read_problem_rows",
    "seed_figure",
    "tile_grid",
    "top1_figure",
    "weakest_figure",
]

# The seed's three (8192³, 1000×1000×8192, a 16-token decode) and a fourth: N and K not multiples
# of 16, where the pointer kernel loses its wide loads and the tile choice turns on the variant.
SEED_PROBLEMS: tuple[Problem, ...] = (
    Problem(8192, 8192, 8192),
    Problem(1000, 1000, 8192),
    Problem(16, 7168, 8192),
    Problem(4000, 3000, 1000),
)
SEED_BLOCK_K = 64
FIXED_TILE = (128, 128)


# ------------------------------------------------------------------------------------------- data
def read_problem_rows(dataset: str | Path, device_class: str, keys: Sequence[str]) -> pd.DataFrame:
    """The timed rows (``ok`` and ``hopeless``) of some problems, read with the dataset's own reader."""
    import pyarrow.compute as pc

    from tilecost.collect.store import DatasetStore

    table = DatasetStore(dataset).read(
        device_class, filters=[pc.field("problem_key").isin(list(keys)), pc.field("status").isin(["ok", "hopeless"])]
    )
    return table.to_pandas()


@dataclass(frozen=True, eq=False)
class TileGrid:
    """One problem's cells: rows BLOCK_M, columns BLOCK_N (both :data:`BLOCK_MN`).

    ``measured_us``: the cell's fastest measured time (NaN where no candidate was timed);
    ``lower_bound``: the cell's rows are all ``hopeless``, so its time only bounds it from below;
    ``offered``: the candidate space offers the problem that tile; ``model_us``: the seed's model.
    """

    problem: Problem
    block_k: int
    block_m: tuple[int, ...]
    block_n: tuple[int, ...]
    measured_us: np.ndarray
    lower_bound: np.ndarray
    offered: np.ndarray
    config: np.ndarray
    model_us: np.ndarray

    def _cell(self, values: np.ndarray, pick: str, exact_only: bool) -> tuple[int, int] | None:
        usable = np.isfinite(values) & (~self.lower_bound if exact_only else True)
        if not usable.any():
            return None
        masked = np.where(usable, values, np.inf if pick == "min" else -np.inf)
        flat = int(np.argmin(masked) if pick == "min" else np.argmax(masked))
        return divmod(flat, values.shape[1])

    def best(self, which: str = "measured") -> tuple[int, int] | None:
        """(row, column) of the fastest cell; measured: among exact times only."""
        return self._cell(self._values(which), "min", exact_only=which == "measured")

    def worst(self, which: str = "measured") -> tuple[int, int] | None:
        """(row, column) of the slowest cell (a lower bound may be the slowest measured)."""
        return self._cell(self._values(which), "max", exact_only=False)

    def fixed(self) -> tuple[int, int] | None:
        """(row, column) of the fixed 128 × 128 tile, if the problem is offered it."""
        r, c = self.block_m.index(FIXED_TILE[0]), self.block_n.index(FIXED_TILE[1])
        return (r, c) if self.offered[r, c] else None

    def _values(self, which: str) -> np.ndarray:
        if which not in ("measured", "model"):
            raise ValueError(f"which={which!r} is not allowed; use 'measured' or 'model'")
        return self.measured_us if which == "measured" else np.where(self.offered, self.model_us, np.nan)

    def ratio(self, cell: tuple[int, int] | None, which: str = "measured") -> float:
        """Time of ``cell`` over the best cell's (NaN if either is missing)."""
        best = self.best(which)
        if cell is None or best is None:
            return math.nan
        values = self._values(which)
        return float(values[cell] / values[best])

    def label(self, cell: tuple[int, int] | None) -> str:
        return "-" if cell is None else f"{self.block_m[cell[0]]}×{self.block_n[cell[1]]}"


def tile_grid(frame: pd.DataFrame, problem: Problem | str, *, block_k: int = SEED_BLOCK_K,
              device: DeviceSpec | str = "h200") -> TileGrid:  # fmt: skip
    """The :class:`TileGrid` of ``problem`` from dataset rows (``problem_key``, ``config_id``,
    ``block_m``, ``block_n``, ``block_k``, ``status``, ``time_us``). A configuration measured by several
    runs counts with its median ``ok`` time, or its fastest screening bound when never ``ok``.

    Raises :class:`~tilecost.errors.DatasetError` when the problem has no timed row at this BLOCK_K.
    """
    from tilecost.space import problem_candidates

    problem = Problem.from_key(problem) if isinstance(problem, str) else problem
    spec = load_device(device)
    rows = frame[(frame["problem_key"] == problem.key) & (frame["block_k"] == block_k)
                 & frame["status"].isin(["ok", "hopeless"])]  # fmt: skip
    if rows.empty:
        raise DatasetError(
            f"{problem.key} is not in the dataset with BLOCK_K = {block_k}; measure it first with "
            f"`tilecost collect --plan FILE --sample-fraction 1.0` and the plan entry "
            f'{{"m": {problem.m}, "n": {problem.n}, "k": {problem.k}, "only": {{"block_k": [{block_k}]}}}} '
            "(datasets/plans/seed_figure.json holds the seed's four problems)"
        )
    per_config = []
    for config_id, group in rows.groupby("config_id", sort=True):
        ok = group[group["status"] == "ok"]
        exact = not ok.empty
        time_us = float(ok["time_us"].median()) if exact else float(group["time_us"].min())
        first = group.iloc[0]
        per_config.append((int(first["block_m"]), int(first["block_n"]), time_us, not exact, str(config_id)))
    shape = (len(BLOCK_MN), len(BLOCK_MN))
    measured = np.full(shape, np.nan)
    lower = np.zeros(shape, dtype=bool)
    config = np.full(shape, "", dtype=object)
    for bm, bn, time_us, bound, key in per_config:
        r, c = BLOCK_MN.index(bm), BLOCK_MN.index(bn)
        current, current_bound = measured[r, c], lower[r, c]
        # an exact time beats any bound; among equals the faster
        if np.isnan(current) or (current_bound and not bound) or (current_bound == bound and time_us < current):
            measured[r, c], lower[r, c], config[r, c] = time_us, bound, key
    offered = np.zeros(shape, dtype=bool)
    for candidate in problem_candidates(problem, spec):
        if candidate.block_k == block_k:
            offered[BLOCK_MN.index(candidate.block_m), BLOCK_MN.index(candidate.block_n)] = True
    offered |= np.isfinite(measured)
    bm_grid, bn_grid = np.meshgrid(np.array(BLOCK_MN, dtype=float), np.array(BLOCK_MN, dtype=float), indexing="ij")
    ones = np.ones(bm_grid.size)
    cells = ConfigArrays(bm_grid.ravel(), bn_grid.ravel(), ones * block_k, ones, ones, ones * 4, ones * 3,
                         np.zeros(bm_grid.size, dtype=bool))  # fmt: skip
    model = roofline_time_us(problem, cells, spec).reshape(shape)
    return TileGrid(problem, block_k, BLOCK_MN, BLOCK_MN, measured, lower, offered, config, model)


@dataclass(frozen=True, eq=False)
class QualityData:
    """A model on held-out problems: the evaluation, every candidate's predicted and measured time,
    and each problem's out-of-distribution verdict (flagged, distance in octaves to the nearest
    training problem, reasons) with the sparse-neighbourhood threshold used."""

    evaluation: Evaluation
    problem_key: np.ndarray
    predicted_us: np.ndarray
    measured_us: np.ndarray
    hopeless: np.ndarray
    ood: Mapping[str, tuple[bool, float, tuple[str, ...]]]
    threshold_log2: float


def quality_data(model: Any, heldout: pd.DataFrame, device: DeviceSpec | str, checker: Any) -> QualityData:
    """Score every held-out candidate with ``model`` (a fitted :class:`~tilecost.train.model.CostModel`)
    and check each problem with ``checker`` (a :class:`tilecost.predict.ood.OODChecker`)."""
    from .evaluate import evaluate_predictions
    from .pipeline import build_features, candidate_rows

    spec = load_device(device)
    rows = candidate_rows(heldout)
    if rows.empty:
        raise DatasetError("no held-out rows to judge the model on")
    predicted = model.predict(build_features(rows, spec))
    evaluation = evaluate_predictions(rows, predicted, spec)
    ood = {}
    for r in evaluation.problems:
        verdict = checker.verdict(r.problem)
        ood[r.problem.key] = (bool(verdict), float(verdict.neighbour_distance_log2),
                              tuple(x.value for x in verdict.reasons))  # fmt: skip
    return QualityData(
        evaluation=evaluation,
        problem_key=rows["problem_key"].to_numpy(),
        predicted_us=np.asarray(predicted, dtype=float),
        measured_us=rows["time_us"].to_numpy(dtype=float),
        hopeless=(rows["status"] == "hopeless").to_numpy(),
        ood=ood,
        threshold_log2=float(checker.sparse_distance_log2),
    )


# ------------------------------------------------------------------------------------------- drawing
def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _us(value: float) -> str:
    """A cell's time in µs, at most five characters: 1.23, 12.3, 123.4 -> 123, 13630."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _heatmap(ax: Any, grid: TileGrid, which: str, title: str) -> Any:
    """One panel, coloured by time over the best cell's (log scale), each cell labelled in µs."""
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    values = grid._values(which)
    best = float(np.nanmin(values))
    ratio = values / best
    top = max(float(np.nanmax(ratio)), 1.1)  # a flat panel (a memory-bound decode) still gets a scale
    norm = LogNorm(vmin=1.0, vmax=top)
    image = ax.imshow(np.ma.masked_invalid(ratio), cmap="magma_r", norm=norm, origin="upper")
    ax.set_xticks(range(len(grid.block_n)), [str(x) for x in grid.block_n])
    ax.set_yticks(range(len(grid.block_m)), [str(x) for x in grid.block_m])
    ax.set_xlabel("BLOCK_N")
    ax.set_ylabel("BLOCK_M")
    ax.set_title(title, fontsize=8)
    for r in range(values.shape[0]):
        for c in range(values.shape[1]):
            if not np.isfinite(values[r, c]):
                if grid.offered[r, c] and which == "measured":
                    ax.text(c, r, "n/m", ha="center", va="center", fontsize=6, color="0.4")
                continue
            bound = which == "measured" and grid.lower_bound[r, c]
            if bound:
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.55", lw=0))
            dark = norm(ratio[r, c]) > 0.55
            ax.text(c, r + 0.12, f"{'≥' if bound else ''}{_us(values[r, c])}", ha="center", va="center", fontsize=6,
                    color="white" if dark else "black")  # fmt: skip
    marks = [(grid.best(which), "*", "#00c000", "best"), (grid.worst(which), "X", "#d00000", "worst"),
             (grid.fixed(), "s", "#1f77b4", "fixed 128×128")]  # fmt: skip
    for cell, marker, color, name in marks:
        if cell is not None and np.isfinite(values[cell]):
            offset = {"best": -0.25, "worst": 0.0, "fixed 128×128": 0.25}[name]
            ax.plot(cell[1] + offset, cell[0] - 0.28, marker=marker, color=color, markersize=9 if marker == "*" else 6,
                    markeredgecolor="white", markeredgewidth=0.6, linestyle="none", label=name)  # fmt: skip
    return image


def _colorbar(fig: Any, image: Any, ax: Any, label: str) -> None:
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    bar = fig.colorbar(image, ax=ax, label=label, shrink=0.85)
    top = image.norm.vmax
    candidates = (
        (1, 1.1, 1.25, 1.5) if top <= 1.6 else (1, 1.25, 1.5, 2, 3) if top <= 4 else (1, 1.5, 2, 3, 5, 8, 16, 32)
    )
    ticks = [t for t in candidates if t <= top * 1.0001]
    bar.ax.yaxis.set_major_locator(FixedLocator(ticks))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.ax.yaxis.set_major_formatter(ScalarFormatter())


def _ratio_text(grid: TileGrid, which: str) -> str:
    best, worst, fixed = grid.best(which), grid.worst(which), grid.fixed()
    values = grid._values(which)
    bound = which == "measured" and worst is not None and bool(grid.lower_bound[worst])
    parts = [f"best {grid.label(best)} {_us(values[best])} µs" if best is not None else "best -"]
    parts.append(f"worst {grid.label(worst)} {'≥' if bound else ''}{grid.ratio(worst, which):.2f}×")
    if fixed is not None and np.isfinite(values[fixed]):
        fixed_bound = which == "measured" and bool(grid.lower_bound[fixed])
        parts.append(f"128×128 {'≥' if fixed_bound else ''}{grid.ratio(fixed, which):.2f}×")
    return ", ".join(parts)


def seed_figure(grids: Sequence[TileGrid]) -> Figure:
    """The seed's figure from measurements: per problem, the measured heatmap next to the seed model's."""
    if not grids:
        raise ValueError("grids is empty: give at least one problem's TileGrid")
    fig = _figure(11.5, 3.9 * len(grids))
    axes = fig.subplots(len(grids), 2, squeeze=False)
    for row, grid in zip(axes, grids, strict=True):
        p = grid.problem
        name = f"{p.m}×{p.n}×{p.k} {p.dtype.value} {p.layout.value}"
        image = _heatmap(row[0], grid, "measured", f"{name}: measured on the H200 (BLOCK_K {grid.block_k}), µs\n"
                         f"{_ratio_text(grid, 'measured')}")  # fmt: skip
        _colorbar(fig, image, row[0], "× the best cell")
        model_best = grid.best("model")
        picked = ""
        if model_best is not None and np.isfinite(grid.measured_us[model_best]):
            ratio = grid.ratio(model_best, "measured")
            bound = "≥" if grid.lower_bound[model_best] else ""
            picked = f"\nits best cell measured {bound}{ratio:.2f}× the measured best"
        image = _heatmap(row[1], grid, "model", f"{name}: the seed's model (H200 spec), µs\n"
                         f"{_ratio_text(grid, 'model')}{picked}")  # fmt: skip
        _colorbar(fig, image, row[1], "× the best cell")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=8,
                   title="hatched: every row hopeless, the time is a lower bound (≥); n/m: offered, not measured; "
                   "blank: not in the problem's candidate space",
                   title_fontsize=8)  # fmt: skip
    return fig


def predicted_vs_measured_figure(q: QualityData) -> Figure:
    """Predicted against measured time of every held-out candidate (log-log)."""
    fig = _figure(6.4, 5.6)
    ax = fig.subplots()
    ok = ~q.hopeless
    ax.scatter(q.measured_us[ok], q.predicted_us[ok], s=3, alpha=0.25, color="#1f77b4", label="ok (median time)",
               rasterized=True)  # fmt: skip
    ax.scatter(q.measured_us[q.hopeless], q.predicted_us[q.hopeless], s=3, alpha=0.25, color="#ff7f0e",
               marker="^", label="hopeless (screening bound)", rasterized=True)  # fmt: skip
    low = float(min(q.measured_us.min(), q.predicted_us.min()))
    high = float(max(q.measured_us.max(), q.predicted_us.max()))
    ax.plot([low, high], [low, high], color="black", lw=0.8, label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured µs")
    ax.set_ylabel("predicted µs")
    ax.set_title(f"{len(q.measured_us):,} held-out candidates of {len(q.evaluation.problems)} problems; "
                 f"log-RMSE {q.evaluation.log_rmse:.3f}", fontsize=9)  # fmt: skip
    ax.legend(fontsize=8, markerscale=3)
    return fig


def _ecdf(ax: Any, values: Sequence[float], label: str, **style: Any) -> None:
    xs = np.sort(np.asarray(values, dtype=float))
    ax.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post", label=label, **style)


def top1_figure(q: QualityData) -> Figure:
    """The distribution over held-out problems of top-1 (best / time of the pick), model against baselines."""
    fig = _figure(6.4, 4.6)
    ax = fig.subplots()
    results = q.evaluation.problems
    s = q.evaluation.summary()
    _ecdf(ax, [r.top1 for r in results], f"model top-1 (geomean {s['top1_geomean']:.3f})", color="black", lw=2)
    _ecdf(ax, [r.top5 for r in results], f"model top-5 (geomean {s['top5_geomean']:.3f})", color="0.5", ls="--")
    for name, color in (("tutorial", "#2ca02c"), ("fixed", "#1f77b4"), ("roofline", "#d62728")):
        _ecdf(ax, [r.baselines[name] for r in results], f"{name} ({s[f'{name}_geomean']:.3f})", color=color, lw=1)
    ax.axvline(0.95, color="0.7", lw=0.8, ls=":")
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("fraction of the best measured time reached (best / chosen)")
    ax.set_ylabel("share of held-out problems at or below")
    ax.set_title(f"top-1 over {len(results)} held-out problems", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def weakest_figure(q: QualityData, count: int = 10) -> Figure:
    """Where the model is weakest: top-1 per problem group, and the ``count`` worst problems."""
    from .evaluate import BASELINES

    fig = _figure(12, 4.8)
    left, right = fig.subplots(1, 2, width_ratios=[1, 1.3])
    total = len(q.evaluation.problems)
    # a group holding every problem (one dtype, one layout) repeats "all"
    groups = [(slug, label) for slug, label in q.evaluation.groups()
              if slug == "all" or q.evaluation.summary(slug)["problems"] < total]  # fmt: skip
    width = 0.8 / (1 + len(BASELINES))
    for i, (name, color) in enumerate([("model", "black"), ("tutorial", "#2ca02c"), ("fixed", "#1f77b4"),
                                       ("roofline", "#d62728")]):  # fmt: skip
        key = "top1_geomean" if name == "model" else f"{name}_geomean"
        values = [q.evaluation.summary(slug)[key] for slug, _ in groups]
        left.bar(np.arange(len(groups)) + i * width, values, width, color=color, label=name)
    left.set_xticks(np.arange(len(groups)) + 1.5 * width,
                    [f"{label}\n({int(q.evaluation.summary(slug)['problems'])})" for slug, label in groups],
                    fontsize=7, rotation=30, ha="right")  # fmt: skip
    left.set_ylim(0, 1.05)
    left.set_ylabel("top-1 geometric mean")
    left.set_title("by problem group (problems)", fontsize=9)
    left.legend(fontsize=7)
    worst = sorted(q.evaluation.problems, key=lambda r: r.top1)[:count]
    y = np.arange(len(worst))
    right.barh(y, [r.top1 for r in worst], color="black", height=0.4, label="model")
    right.barh(y + 0.4, [r.baselines["tutorial"] for r in worst], color="#2ca02c", height=0.4, label="tutorial")
    right.set_yticks(y + 0.2, [f"{r.problem.key} (best {r.best_time_us:.3g} µs)" for r in worst], fontsize=7)
    right.invert_yaxis()
    right.set_xlim(0, 1.05)
    right.set_xlabel("top-1 (best / chosen)")
    right.set_title(f"the {len(worst)} weakest held-out problems", fontsize=9)
    right.legend(fontsize=7, loc="lower right")
    return fig


def ood_figure(q: QualityData, good_fraction: float = 0.90) -> Figure:
    """The out-of-distribution verdicts against the actual error: top-1 by distance to the nearest
    training problem, flagged problems in red, with the counts of the 2 × 2 table."""
    fig = _figure(6.4, 4.8)
    ax = fig.subplots()
    rows = [(q.ood[r.problem.key], r.top1) for r in q.evaluation.problems]
    flagged = np.array([v[0] for v, _ in rows])
    distance = np.array([min(v[1], 1e3) for v, _ in rows])
    top1 = np.array([t for _, t in rows])
    bad = top1 < good_fraction
    counts = (f"flagged: {int((flagged & bad).sum())} of {int(bad.sum())} with top-1 < {good_fraction}, "
              f"{int((flagged & ~bad).sum())} of {int((~bad).sum())} others")  # fmt: skip
    ax.scatter(distance[~flagged], top1[~flagged], color="#1f77b4", label="not flagged")
    ax.scatter(distance[flagged], top1[flagged], color="#d62728", marker="D", label="flagged OOD")
    if math.isfinite(q.threshold_log2) and q.threshold_log2 < 100:
        ax.axvline(q.threshold_log2, color="#d62728", lw=0.8, ls="--", label="sparse-neighbourhood threshold")
    ax.axhline(good_fraction, color="0.6", lw=0.8, ls=":")
    ax.set_xlabel("distance to the nearest training problem (octaves in log2 M, N, K)")
    ax.set_ylabel("top-1 (best / chosen)")
    ax.set_ylim(0, 1.05)
    ax.set_title(counts, fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    return fig
