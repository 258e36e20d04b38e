"""Judging a cost model the way its users meet it: on shapes it never saw, against the best measured.

For each evaluation problem every timed candidate is ranked (held-out problems were measured over
their whole candidate space, so the best of the space is known). Per problem:

* **top-1** = best measured time / time of the model's first choice (1.0 = it found the best);
* **top-5** = best measured time / the best time among the model's first five (the case where a
  user benchmarks the shortlist, as NVIDIA's heuristics are used);
* **Kendall τ** (τ-b) between predicted and measured times, over all candidates;
* **log-RMSE** of the predicted time, ``sqrt(mean((ln predicted - ln measured)²))``, pooled over
  the rows of all problems.

Across problems: the geometric mean and the worst problem. Side by side, on the same problems, the
baselines of :mod:`tilecost.train.baselines` (fixed config, tutorial autotune list, roofline model;
the best in the space is 1.0 by definition), broken down by dtype, layout, skinny M (M <= 64),
unaligned dims (N or K not a multiple of 16) and size (2·M·N·K below or above 1e10 FLOP).

Failed statuses are not candidates; ``hopeless`` rows are (they are valid measured times). A measured
configuration that the space no longer offers the problem (:func:`tilecost.space.problem_infeasibility`, e.g.
split-K at K <= 256 since the twenty-eighth session) is not chosen by any ranker, since the predictor cannot
answer it, but its time still counts for the best: a rule that refused a problem's best shows as a loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tilecost.config import KernelVariant, TileConfig
from tilecost.device import DeviceSpec
from tilecost.features import ConfigArrays
from tilecost.predict.feasibility import SpaceColumns, feasible_mask
from tilecost.problem import Problem, nk_pattern
from tilecost.space import config_space

from .baselines import fixed_choice, roofline_order, tutorial_choice

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BASELINES",
    "GROUP_MIN_PROBLEMS",
    "Evaluation",
    "GroupGain",
    "ProblemResult",
    "alignment_group",
    "evaluate_predictions",
    "geomean_interval",
    "problem_groups",
]

BASELINES = ("fixed", "tutorial", "roofline")
SKINNY_M = 64
SMALL_FLOP = 1e10
TOP_K = 5
# A group of fewer held-out problems is not judged on its own by :meth:`Evaluation.paired_group_gains`.
GROUP_MIN_PROBLEMS = 8


@dataclass(frozen=True)
class ProblemResult:
    """One evaluation problem: its candidates, the best measured and how each ranker did."""

    problem: Problem
    candidates: int
    best_config: str
    best_time_us: float
    model_config: str
    top1: float
    top5: float
    kendall_tau: float
    log_rmse: float
    baselines: dict[str, float] = field(default_factory=dict)  # name -> best time / its pick's time
    baseline_configs: dict[str, str] = field(default_factory=dict)


def problem_groups(problem: Problem) -> list[tuple[str, str]]:
    """The breakdown groups ``(slug, label)`` a problem belongs to, ``("all", "all")`` first."""
    groups = [
        ("all", "all"),
        (f"dtype_{problem.dtype.value}", f"dtype {problem.dtype.value}"),
        (f"layout_{problem.layout.value}", f"layout {problem.layout.value}"),
    ]
    groups.append(("skinny_m", f"M <= {SKINNY_M}") if problem.m <= SKINNY_M else ("wide_m", f"M > {SKINNY_M}"))
    unaligned = problem.n % 16 or problem.k % 16
    groups.append(("unaligned", "N or K % 16 != 0") if unaligned else ("aligned", "N, K % 16 == 0"))
    groups.append(("small", "2MNK < 1e10") if problem.flops < SMALL_FLOP else ("large", "2MNK >= 1e10"))
    return groups


def alignment_group(problem: Problem) -> str:
    """The group :meth:`Evaluation.paired_group_gains` judges a problem in: its dtype, layout and pattern of N and K
    modulo 16 (``"bf16 nt 16-x"``). The groups partition the problems, and are where targeted data goes and where
    the shipped model's answers differed most (BENCHMARKS §5, fortieth session)."""
    return f"{problem.dtype.value} {problem.layout.value} {nk_pattern(problem.n, problem.k)}"


@dataclass(frozen=True)
class GroupGain:
    """The paired top-1 gain of one model over another on one :func:`alignment_group`'s problems: the ratio of the
    geometric means and its bootstrap interval, at the level the comparison of every group holds jointly."""

    group: str
    problems: int
    ratio: float
    low: float
    high: float
    level: float

    @property
    def verdict(self) -> str:
        """``"better"`` (the interval above 1), ``"worse"`` (below 1) or ``"level"``."""
        return "better" if self.low > 1.0 else "worse" if self.high < 1.0 else "level"

    def __str__(self) -> str:
        return f"{self.group} ({self.problems}) x{self.ratio:.4f} (x{self.low:.4f}-x{self.high:.4f})"


def _check_bootstrap(level: float, draws: int) -> None:
    if not 0 < level < 1 or draws < 1:
        raise ValueError(f"level={level} must lie in (0, 1) and draws={draws} be >= 1")


def geomean_interval(logs: np.ndarray, level: float, draws: int, seed: int) -> tuple[float, float]:
    """A ``level`` bootstrap interval of exp(mean(``logs``)): the values resampled with replacement
    ``draws`` times. Given per-problem differences of logs (ln B - ln A, each problem keeping both scores) it is
    the paired interval of the ratio of two geometric means, as :meth:`Evaluation.paired_top1_gain` uses it."""
    picks = np.random.default_rng(seed).integers(0, len(logs), size=(draws, len(logs)))
    low, high = np.quantile(np.exp(logs[picks].mean(axis=1)), [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def geomean(values: Sequence[float]) -> float:
    """The geometric mean of positive ``values`` (fractions of the best, times); NaN when there are none."""
    return float(np.exp(np.mean(np.log(values)))) if len(values) else math.nan


@dataclass(frozen=True)
class Evaluation:
    """Per-problem results and their aggregates; :meth:`metrics` for MLflow, :meth:`table` for people."""

    problems: tuple[ProblemResult, ...]
    log_rmse: float
    rows: int

    def summary(self, slug: str = "all") -> dict[str, float]:
        """Aggregates over the problems of one breakdown group (see :func:`problem_groups`)."""
        chosen = [r for r in self.problems if any(s == slug for s, _ in problem_groups(r.problem))]
        out: dict[str, float] = {"problems": float(len(chosen))}
        if not chosen:
            return out
        top1 = [r.top1 for r in chosen]
        top5 = [r.top5 for r in chosen]
        out.update(
            top1_geomean=geomean(top1),
            top1_worst=min(top1),
            top5_geomean=geomean(top5),
            top5_worst=min(top5),
            kendall_tau=float(np.nanmean([r.kendall_tau for r in chosen])),
        )
        for name in BASELINES:
            values = [r.baselines[name] for r in chosen]
            out[f"{name}_geomean"] = geomean(values)
            out[f"{name}_worst"] = min(values)
        return out

    def groups(self) -> list[tuple[str, str]]:
        """Every breakdown group present, ``all`` first, each once, in a stable order."""
        seen: dict[str, str] = {}
        for result in self.problems:
            for slug, label in problem_groups(result.problem):
                seen.setdefault(slug, label)
        order = ["all", "skinny_m", "wide_m", "unaligned", "aligned", "small", "large"]
        return sorted(seen.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else 1, kv[0]))

    def metrics(self, prefix: str = "heldout") -> dict[str, float]:
        """Flat metrics: ``<prefix>_<name>`` for all problems, ``<prefix>_<name>/<group>`` per group."""
        out = {f"{prefix}_{k}": v for k, v in self.summary("all").items()}
        out[f"{prefix}_log_rmse"] = self.log_rmse
        out[f"{prefix}_top1_interval_low"], out[f"{prefix}_top1_interval_high"] = self.top1_interval()
        for slug, _ in self.groups()[1:]:
            for key, value in self.summary(slug).items():
                out[f"{prefix}_{key}/{slug}"] = value
        return {k: float(v) for k, v in out.items()}

    def top1_interval(self, level: float = 0.90, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
        """A ``level`` bootstrap interval of the top-1 geometric mean: the problems resampled with replacement
        ``draws`` times, the model's choices fixed. How far the figure depends on which problems were held
        out; two models whose figures differ by less are not told apart by these problems (on the 78 H200
        held-out problems of the eighth session: 0.901-0.938 around 0.922; on the ninth session's 155:
        0.910-0.934 around 0.923)."""
        _check_bootstrap(level, draws)
        logs = np.log([r.top1 for r in self.problems])
        if len(logs) == 0:
            return math.nan, math.nan
        return geomean_interval(logs, level, draws, seed)

    def paired_top1_gain(
        self, other: Evaluation, level: float = 0.90, draws: int = 2000, seed: int = 0
    ) -> tuple[float, float, float]:
        """How much better this evaluation's top-1 is than ``other``'s on the problems both scored: the ratio of
        their geometric means (above 1: this one is better) and a ``level`` paired bootstrap interval of it (the
        problems resampled with replacement, each keeping both models' scores, so which problems are hard
        cancels out). Two fits of the same data differ by ±0.01-0.02 of top-1 on the H200's held-out problems
        (BENCHMARKS §4, tenth session); an interval that holds 1 does not tell the two apart."""
        _check_bootstrap(level, draws)
        _, diff = self._paired_logs(other)
        if not len(diff):
            raise ValueError("the two evaluations share no problem; compare models on the same problems")
        return (float(np.exp(diff.mean())), *geomean_interval(diff, level, draws, seed))

    def _paired_logs(self, other: Evaluation) -> tuple[list[Problem], np.ndarray]:
        """The problems both evaluations scored, in this one's order, and ln(this top-1 / ``other``'s) for each."""
        theirs = {r.problem.key: r.top1 for r in other.problems}
        shared = [r for r in self.problems if r.problem.key in theirs]
        diff = np.log([r.top1 for r in shared]) - np.log([theirs[r.problem.key] for r in shared])
        return [r.problem for r in shared], np.asarray(diff, dtype=np.float64)

    def paired_group_gains(
        self,
        other: Evaluation,
        level: float = 0.90,
        min_problems: int = GROUP_MIN_PROBLEMS,
        draws: int = 4000,
        seed: int = 0,
        groups: Collection[str] | None = None,
    ) -> tuple[GroupGain, ...]:
        """:meth:`paired_top1_gain` within each :func:`alignment_group` that holds at least ``min_problems`` of the
        problems both scored (of ``groups`` only, when given), sorted by group. Each interval is taken at the
        Bonferroni level ``1 - (1 - level) / groups judged``, so that the chance that *any* group's interval leaves out
        1 when neither model is better in any group stays below ``1 - level``: with 20 groups at 90% each, two would
        by chance."""
        _check_bootstrap(level, draws)
        if min_problems < 2:
            raise ValueError(f"min_problems={min_problems} must be >= 2 (one problem has no interval)")
        problems, diff = self._paired_logs(other)
        diffs: dict[str, list[float]] = {}
        for problem, value in zip(problems, diff, strict=True):
            diffs.setdefault(alignment_group(problem), []).append(value)
        judged = {
            g: np.array(d)
            for g, d in sorted(diffs.items())
            if len(d) >= min_problems and (groups is None or g in groups)
        }
        joint = 1 - (1 - level) / max(len(judged), 1)
        gains = []
        for group, logs in judged.items():
            low, high = geomean_interval(logs, joint, draws, seed)
            gains.append(GroupGain(group, len(logs), float(np.exp(logs.mean())), low, high, joint))
        return tuple(gains)

    def score(self) -> tuple[float, float, float]:
        """What "better" means between two models on the same problems, compared in this order:
        top-1 geometric mean, top-1 worst problem, top-5 geometric mean."""
        s = self.summary("all")
        return (s["top1_geomean"], s["top1_worst"], s["top5_geomean"])

    def table(self, per_problem: bool = True) -> str:
        """The readable report: a breakdown table, then (optionally) one line per problem."""
        lines = [
            f"{'group':<20} {'probs':>5} | {'model top1':>10} {'worst':>6} {'top5':>6} {'worst':>6} {'tau':>5} |"
            f" {'fixed':>6} {'tutorial':>8} {'roofline':>8} {'best':>5}",
        ]
        lines.append("-" * len(lines[0]))
        for slug, label in self.groups():
            s = self.summary(slug)
            lines.append(
                f"{label:<20} {int(s['problems']):>5} | {s['top1_geomean']:>10.3f} {s['top1_worst']:>6.3f}"
                f" {s['top5_geomean']:>6.3f} {s['top5_worst']:>6.3f} {s['kendall_tau']:>5.2f} |"
                f" {s['fixed_geomean']:>6.3f} {s['tutorial_geomean']:>8.3f} {s['roofline_geomean']:>8.3f} {1:>5.3f}"
            )
        lines.append(
            f"geometric means of best time / chosen time over problems; 'worst' is the worst problem; "
            f"log-RMSE of predicted time {self.log_rmse:.3f} over {self.rows:,} candidates"
        )
        low, high = self.top1_interval()
        lines.append(
            f"top-1 over these {len(self.problems)} problems resampled (2,000 bootstrap draws): 90% interval "
            f"{low:.3f}-{high:.3f}; models closer than that are not told apart by these problems"
        )
        if per_problem:
            lines.append("")
            head = (
                f"{'problem':<26} {'cands':>5} {'best us':>9} {'top1':>6} {'top5':>6} {'tau':>5} |"
                f" {'fixed':>6} {'tutor':>6} {'roof':>6} | best config / model's choice"
            )
            lines.append(head)
            lines.append("-" * len(head))
            for r in sorted(self.problems, key=lambda r: r.top1):
                b = r.baselines
                lines.append(
                    f"{r.problem.key:<26} {r.candidates:>5} {r.best_time_us:>9.2f} {r.top1:>6.3f} {r.top5:>6.3f}"
                    f" {r.kendall_tau:>5.2f} | {b['fixed']:>6.3f} {b['tutorial']:>6.3f} {b['roofline']:>6.3f} |"
                    f" {r.best_config} / {r.model_config}"
                )
        return "\n".join(lines)


def _space_rank(problem: Problem, device: DeviceSpec, keys: Sequence[str], cache: dict) -> np.ndarray:
    """Each key's position in the candidate space of the problem's dtype and layout (unknown keys last)."""
    slot = (problem.dtype, problem.layout)
    if slot not in cache:
        cache[slot] = {c.key: i for i, c in enumerate(config_space(device, problem.dtype, problem.layout))}
    order = cache[slot]
    return np.array([order.get(k, len(order)) for k in keys], dtype=np.int64)


def _config(made: dict[tuple[Any, ...], TileConfig], *columns: Any) -> TileConfig:
    """The configuration of one row's columns (variant, block_m ... num_stages), validated once per distinct
    configuration: the 273,205 candidate rows of the twentieth session's held-out problems hold 7,992 (built and
    validated row by row, they took ~4 s of the evaluation)."""
    config = made.get(columns)
    if config is None:
        v, bm, bn, bk, g, s, w, p = columns
        config = made[columns] = TileConfig(
            KernelVariant.parse(v), int(bm), int(bn), int(bk), int(g), int(s), int(w), int(p)
        )
    return config


def _offered(problem: Problem, configs: Sequence[TileConfig], device: DeviceSpec) -> np.ndarray:
    """Which of the problem's measured ``configs`` the space offers it today (the predictor's own mask)."""
    return feasible_mask(problem, SpaceColumns.from_configs(configs), device)


def _kendall_tau(predicted: np.ndarray, measured: np.ndarray) -> float:
    from scipy.stats import kendalltau

    if len(predicted) < 2:
        return math.nan
    return float(kendalltau(predicted, measured).statistic)


def evaluate_predictions(
    frame: pd.DataFrame,
    predicted_us: np.ndarray,
    device: DeviceSpec,
    *,
    roofline: Callable[[Problem, ConfigArrays, DeviceSpec, np.ndarray], np.ndarray] = roofline_order,
) -> Evaluation:
    """Evaluate predicted times of the candidate rows in ``frame`` (one row per timed candidate).

    ``frame`` needs ``problem_key``, ``config_id``, ``time_us`` and the configuration columns
    (``variant``, ``block_m`` ... ``num_stages``) of :mod:`tilecost.collect.store`; ``predicted_us``
    is aligned with its rows. Ties in the prediction go to the earlier candidate in the space's order.
    """
    predicted_us = np.asarray(predicted_us, dtype=np.float64)
    if len(predicted_us) != len(frame):
        raise ValueError(f"predicted_us has {len(predicted_us)} values for {len(frame)} rows")
    if len(frame) == 0:
        raise ValueError("no candidate rows to evaluate")
    if not (np.isfinite(predicted_us) & (predicted_us > 0)).all():
        raise ValueError("predicted_us must be positive and finite")
    measured = frame["time_us"].to_numpy(dtype=np.float64)
    cache: dict = {}
    made: dict[tuple[Any, ...], TileConfig] = {}
    results = []
    for key, index in frame.groupby("problem_key", sort=True).indices.items():
        rows = frame.iloc[index]
        problem = Problem.from_key(str(key))
        keys = rows["config_id"].astype(str).tolist()
        if len(set(keys)) != len(keys):
            raise ValueError(f"{problem}: a configuration appears twice among its candidates; deduplicate first")
        all_times = measured[index]
        all_pred = predicted_us[index]
        best_config = keys[int(np.argmin(all_times))]
        best = float(all_times.min())
        configs = [
            _config(made, v, bm, bn, bk, g, s, w, p)
            for v, bm, bn, bk, g, s, w, p in zip(
                rows["variant"], rows["block_m"], rows["block_n"], rows["block_k"],
                rows["group_m"], rows["split_k"], rows["num_warps"], rows["num_stages"], strict=True,
            )
        ]  # fmt: skip
        offered = _offered(problem, configs, device)
        if not offered.any():
            raise ValueError(f"{problem}: none of its {len(keys)} measured configurations is offered by the space")
        if not offered.all():
            keep = np.flatnonzero(offered)
            keys = [keys[i] for i in keep]
            configs = [configs[i] for i in keep]
        times, pred = all_times[offered], all_pred[offered]
        rank = _space_rank(problem, device, keys, cache)
        order = np.lexsort((rank, pred))
        arrays = ConfigArrays.from_configs(configs)
        fixed = fixed_choice(problem, configs)
        tutorial = tutorial_choice(problem, configs, times)
        roof = int(roofline(problem, arrays, device, rank)[0])
        results.append(
            ProblemResult(
                problem=problem,
                candidates=len(keys),
                best_config=best_config,
                best_time_us=best,
                model_config=keys[order[0]],
                top1=best / float(times[order[0]]),
                top5=best / float(times[order[:TOP_K]].min()),
                kendall_tau=_kendall_tau(all_pred, all_times),
                log_rmse=float(np.sqrt(np.mean((np.log(all_pred) - np.log(all_times)) ** 2))),
                baselines={
                    "fixed": best / float(times[fixed.index]),
                    "tutorial": best / float(times[tutorial.index]),
                    "roofline": best / float(times[roof]),
                },
                baseline_configs={"fixed": keys[fixed.index], "tutorial": keys[tutorial.index], "roofline": keys[roof]},
            )
        )
    log_rmse = float(np.sqrt(np.mean((np.log(predicted_us) - np.log(measured)) ** 2)))
    return Evaluation(problems=tuple(results), log_rmse=log_rmse, rows=len(frame))
