"""Which width-8 answers to widen: the signals a query has against agreement with scoring every candidate.

    .venv/bin/python benchmarks/experiments/extension_signals.py [--random 600] [--seed 5]

An experiment of the twenty-third session (BENCHMARKS §5). At the default width (8) the predictor agrees with
scoring every candidate on 135 of the 165 held-out problems without extension (140 with the small-head rule),
at width 16 on 153, at 24 on 158; every member scored costs ~5 µs of a ~85 µs query. Scoring 16 or 24 members only
where the width-8 answer looks unsure would buy agreement at a fraction of that cost if some signal picked the
disagreements. Two signals a query has for free:

* the predicted gap between the head's best and second best (``second_us / best_us``): a near-tie;
* the list position of the head's best (0 = the list's first): an answer the list ranked low.

For each threshold: the share of problems widened, and how many then agree (answered at width 16 or 24 when
widened, at width 8 otherwise; no extension rule, so that only the signal decides). On the held-out problems and on
``--random`` random shapes of every dtype and layout (log-uniform 1..16384 per extent).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.test_predict_fixture import load_dataset  # noqa: E402
from tilecost import Predictor, Problem  # noqa: E402

WIDTHS = (8, 16, 24)


def signals(predictors: dict[int, Predictor], problems: list[Problem]) -> dict[str, np.ndarray]:
    """Per problem: the width-8 gap and position, and whether widths 8, 16, 24 agree with scoring every candidate."""
    narrow = predictors[WIDTHS[0]]
    gap, position, agree = [], [], {w: [] for w in WIDTHS}
    for problem in problems:
        group = narrow._group(problem.dtype, problem.layout)
        assert group.shortlist is not None
        found, _, _ = group.choose(problem)
        assert found is not None
        best, best_us, second_us = found
        gap.append(second_us / best_us if second_us else np.inf)
        position.append(list(group.shortlist.lists[group.shortlist.list_id(problem)]).index(best))
        full = narrow.rank(problem, 1, exhaustive=True, measured=False)[0].config
        for width, predictor in predictors.items():
            agree[width].append(predictor.predict_best(problem, measured=False).config == full)
    return {"gap": np.array(gap), "position": np.array(position), **{str(w): np.array(a) for w, a in agree.items()}}


def report(name: str, found: dict[str, np.ndarray]) -> None:
    narrow = found[str(WIDTHS[0])]
    print(f"{name}: {len(narrow)} problems; agree at width " + ", ".join(
        f"{w}: {int(found[str(w)].sum())}" for w in WIDTHS))  # fmt: skip
    rules = [(f"gap < {g}", found["gap"] < g) for g in (1.005, 1.01, 1.02, 1.03, 1.05)]
    rules += [(f"position >= {q}", found["position"] >= q) for q in range(2, 8)]
    for label, widen in rules:
        print(f"  widen where {label:<14} {widen.mean():5.0%} widened; agree " + ", ".join(
            f"widened to {w}: {int(np.where(widen, found[str(w)], narrow).sum())}" for w in WIDTHS[1:]))  # fmt: skip
    print(f"  gap quartiles where width 8 disagrees {np.percentile(found['gap'][~narrow], [25, 50, 75]).round(3)}, "
          f"agrees {np.percentile(found['gap'][narrow], [25, 50, 75]).round(3)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--random", type=int, default=600)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    predictors = {w: Predictor.load("h200", shortlist_width=w, extend_from=None) for w in WIDTHS}
    groups = set(predictors[WIDTHS[0]]._group_specs)
    heldout = [
        p
        for p in load_dataset(groups=None, until=None).problems("heldout")
        if f"{p.dtype.value}-{p.layout.value}" in groups
    ]
    rng = np.random.default_rng(args.seed)
    shapes = []
    for _ in range(args.random):
        m, n, k = (max(1, int(round(2 ** rng.uniform(0, 14)))) for _ in range(3))
        dtype, layout = ("bf16", "fp16", "fp32", "fp8e4m3")[rng.integers(4)], ("nt", "nn")[rng.integers(2)]
        shapes.append(Problem(m, n, k, dtype, layout))  # type: ignore[arg-type]
    report("held-out", signals(predictors, heldout))
    report("random", signals(predictors, shapes))


if __name__ == "__main__":
    main()
