"""Experiment (forty-first session, not part of the product): would a promotion rule that also judges groups of
problems let targeted data ship, and would it keep the fit's own noise out?

The registry's rule (``train/tracking.judge``) promotes a challenger only when its paired top-1 gain over the champion,
over every held-out problem, has a 90% bootstrap interval above 1. Data aimed at a thin group lifts that group (the
twelfth held-out set, 20 bf16 nt problems with one of N, K off multiples of 16: 0.889 -> 0.933 in the fortieth
session's refit) and cannot move a 583-problem geometric mean, so such refits never ship. Here two artifacts are
scored over every candidate of the dataset's held-out problems (``evaluate_saved_model``), and the paired top-1 gain
is reported overall and per group (dtype, layout and whether N and K are multiples of 16: the OOD check's pattern
neighbourhood), each group's interval at the Bonferroni level ``1 - (1 - LEVEL) / groups`` so that the chance of any
group's interval excluding 1 by chance stays near ``1 - LEVEL``.

    .venv/bin/python benchmarks/experiments/per_group_promotion.py CHAMPION_DIR CHALLENGER_DIR [--min-problems 8]

Either side may be ``models:/NAME/VERSION`` of an MLflow store (``--tracking-uri``): two fits of the same data that
differ only by seed are what the rule must not promote.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

LEVEL = 0.90


def group_of(problem: object) -> str:
    p = problem  # a tilecost Problem
    return (
        f"{p.dtype.value} {p.layout.value} N{'16' if p.n % 16 == 0 else 'x'}"  # type: ignore[attr-defined]
        f" K{'16' if p.k % 16 == 0 else 'x'}"  # type: ignore[attr-defined]
    )


def paired(logs: np.ndarray, level: float, draws: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    picks = np.random.default_rng(seed).integers(0, len(logs), size=(draws, len(logs)))
    means = logs[picks].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(np.exp(logs.mean())), float(np.exp(low)), float(np.exp(high))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("champion")
    parser.add_argument("challenger")
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--min-problems", type=int, default=8)
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args()

    from train.loading import evaluate_saved_model

    def evaluate(where: str):  # an artifact directory or models:/NAME/VERSION (with --tracking-uri)
        if where.startswith("models:/"):
            return evaluate_saved_model(args.dataset, "h200", model_uri=where, tracking_uri=args.tracking_uri)
        return evaluate_saved_model(args.dataset, "h200", artifact=where)

    ours, what_ours = evaluate(args.challenger)
    theirs, what_theirs = evaluate(args.champion)
    print(f"challenger: {what_ours}\nchampion: {what_theirs}")
    other = {r.problem.key: r.top1 for r in theirs.problems}
    rows = [(group_of(r.problem), np.log(r.top1) - np.log(other[r.problem.key])) for r in ours.problems]
    logs = np.array([d for _, d in rows])
    ratio, low, high = paired(logs, LEVEL)
    print(f"all {len(logs)} problems: x{ratio:.4f} ({LEVEL:.0%} x{low:.4f}-x{high:.4f})")
    groups: dict[str, list[float]] = {}
    for g, d in rows:
        groups.setdefault(g, []).append(d)
    judged = {g: np.array(v) for g, v in groups.items() if len(v) >= args.min_problems}
    level = 1 - (1 - LEVEL) / len(judged)
    print(f"{len(judged)} groups of >= {args.min_problems} problems, each at {level:.4f}")
    print(f"{'group':<22} {'n':>4} {'ours':>6} {'theirs':>6} {'gain':>7} {'low':>7} {'high':>7} verdict")
    ours_top1 = {r.problem.key: r.top1 for r in ours.problems}
    for g in sorted(groups):
        keys = [r.problem.key for r in ours.problems if group_of(r.problem) == g]
        a = float(np.exp(np.mean(np.log([ours_top1[k] for k in keys]))))
        b = float(np.exp(np.mean(np.log([other[k] for k in keys]))))
        if g not in judged:
            print(f"{g:<22} {len(keys):>4} {a:>6.3f} {b:>6.3f}   (too few to judge)")
            continue
        r, lo, hi = paired(judged[g], level)
        verdict = "better" if lo > 1 else "worse" if hi < 1 else "-"
        print(f"{g:<22} {len(keys):>4} {a:>6.3f} {b:>6.3f} {r:>7.4f} {lo:>7.4f} {hi:>7.4f} {verdict}")


if __name__ == "__main__":
    main()
