"""Experiment (thirty-third session, not part of the product): how often a shape's whole shortlist holds only one or
two feasible configurations in an artifact.

Then ``predict_best`` answers from that list (the list's best, with no runner-up for the model-side OOD rules, or
one), while ``rank(k)`` with k above the count ranks every candidate, so the two can name different firsts. The tests'
fixture model met this for 64x4096x4096 after the thirty-third session's data; this counts it for an artifact over
every problem of the dataset and ``--shapes`` random shapes of every dtype and layout (log-uniform extents 1-32768,
seed 0).

    .venv/bin/python benchmarks/experiments/small_lists.py [--artifact h200] [--shapes 3000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default="h200")
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--shapes", type=int, default=3000)
    args = parser.parse_args()

    from tilecost import Predictor, Problem
    from tilecost.train.dataset import load_measurements

    predictor = Predictor.load(args.artifact)
    frame = load_measurements(args.dataset, "h200").frame.drop_duplicates("problem_key")
    problems = [Problem(int(r.m), int(r.n), int(r.k), str(r.dtype), str(r.layout)) for r in frame.itertuples()]
    rng = np.random.default_rng(0)
    for _ in range(args.shapes):
        m, n, k = (int(round(2 ** rng.uniform(0, 15))) for _ in range(3))
        problems.append(
            Problem(m, n, k, ("bf16", "fp16", "fp32", "fp8e4m3")[rng.integers(4)], ("nt", "nn")[rng.integers(2)])
        )
    counts = {0: 0, 1: 0, 2: 0}
    for problem in problems:
        group = predictor._group(problem.dtype, problem.layout)
        cut = group.cut(problem)
        if cut is None:
            continue
        feasible = len(group.scorer.times_us(problem, cut.whole())[0])
        if feasible in counts:
            counts[feasible] += 1
            if feasible:
                print(f"{problem.key}: {feasible} feasible in its list")
    print(
        f"{len(problems)} shapes; whole list with 0 / 1 / 2 feasible configurations:"
        f" {counts[0]} / {counts[1]} / {counts[2]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
