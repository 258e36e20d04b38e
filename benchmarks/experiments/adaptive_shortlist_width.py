"""Experiment (sixth session, not part of the product): extend the shortlist only when its answer looks unsure.

For the 78 held-out problems of the shipped artifact (read from the predictor benchmark's JSON) and 300
random bf16 nt shapes, it scores the first 22 members of each shape's shortlist (the default), notes where in
the list the winner sits and its predicted gap to the second best, and, under a rule "extend when the winner's
position >= T or the gap < G", scores the first 64 instead. It prints how often the final answer equals
scoring every candidate, and how many queries were extended.

    .venv/bin/python benchmarks/experiments/adaptive_shortlist_width.py      (~1 min)

Result (docs/BENCHMARKS.md §5, sixth session): position >= 8 gives 74/78 held-out (70 at width 22, 76 at 64)
with 14 of 78 queries extended; the extended queries cost a width-64 scoring, so the tail latency grows.
"""

import json
from pathlib import Path

import numpy as np

from tilecost.predict import Predictor
from tilecost.problem import Problem

RESULTS = "benchmarks/results/2026-11-30-s8/predict-latency.json"


def answers(predictor: Predictor, problem: Problem) -> tuple[dict[int, tuple[int, float, float | None, int]], int]:
    """Per width: (winner's space index, its µs, second's µs, winner's position in the list), and the
    exhaustive winner."""
    group = predictor._group(problem.dtype, problem.layout)
    row = group.shortlist.lists[group.shortlist.list_id(problem)]
    members = [int(x) for x in row[row >= 0][:64]]
    out = {}
    for width in (22, 32, 64):
        best, best_us, second_us = group.scorer.best_two(problem, group.scorer.subset(sorted(members[:width])))
        out[width] = (best, best_us, second_us, members.index(best))
    return out, group.scorer.best_two(problem, group.scorer.everything)[0]


def main() -> None:
    held = [Problem.from_key(r["problem"]) for r in json.loads(Path(RESULTS).read_text())["ood"]["per_problem"]]
    rng = np.random.default_rng(1)
    rand = [
        Problem(*(int(round(2 ** rng.uniform(lo, hi))) for lo, hi in ((0, 14), (4, 15), (4, 15))), "bf16", "nt")
        for _ in range(300)
    ]
    predictor = Predictor.load("tilecost/models/h200", shortlist_width=64)
    for name, problems in (("held-out", held), ("random", rand)):
        rows = [answers(predictor, p) for p in problems]
        n = len(rows)
        fixed = {w: sum(o[w][0] == e for o, e in rows) for w in (22, 32, 64)}
        print(name, "fixed widths:", ", ".join(f"{w}: {a}/{n}" for w, a in fixed.items()))
        for position in (4, 6, 8, 12, 22):
            for gap in (0.0, 0.005, 0.01):
                agree = extended = 0
                for out, exhaustive in rows:
                    best, best_us, second_us, pos = out[22]
                    extend = pos >= position or (second_us is not None and second_us / best_us - 1 < gap)
                    agree += (out[64][0] if extend else best) == exhaustive
                    extended += extend
                print(f"{name} position >= {position}, gap < {gap}: agree {agree}/{n}, extended {extended}/{n}")


if __name__ == "__main__":
    main()
