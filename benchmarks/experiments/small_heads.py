"""Diagnostic (seventeenth session): how often the predictor answers from a set of one or two feasible configurations.

The shortlist's head (its first ``shortlist_width`` members, extended to the whole list when the best sits late) can
hold few configurations that a shape can run; with none the predictor scores every candidate, with one or two it
answers from them. For the held-out problems and 600 random shapes (log-uniform M 1-16K, N 16-128K, K 16-32K, every
dtype and layout), this counts the answered sets by their feasible size (1, 2, 3 or more) and, in each, how often
the answer equals scoring every candidate with the full model.

    .venv/bin/python benchmarks/experiments/small_heads.py      (~1 min)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tilecost import Predictor, Problem
from tilecost.problem import DType, Layout

ARTIFACT = Path("tilecost/models/h200")


def main() -> None:
    predictor = Predictor.load(ARTIFACT)
    heldout = json.loads((ARTIFACT / "metadata.json").read_text())["ood"]["heldout_top1"]
    problems = [Problem.from_key(key) for key in heldout]
    rng = np.random.default_rng(0)
    for _ in range(600):
        m, n, k = (int(2**x) for x in rng.uniform([0, 4, 4], [14, 17, 15]))
        dtype = DType(("bf16", "fp16", "fp32", "fp8e4m3")[rng.integers(4)])
        problems.append(Problem(m, n, k, dtype, Layout(("nt", "nn")[rng.integers(2)])))
    counts: dict[int, list[int]] = {}
    for problem in problems:
        group = predictor._group(problem.dtype, problem.layout)
        feasible, _ = group.scorer.ranked(problem, group.answered_from(problem))
        answer = predictor.predict_best(problem, measured=False).config
        everything = predictor.rank(problem, 1, exhaustive=True, measured=False)[0].config
        row = counts.setdefault(min(len(feasible), 3), [0, 0])
        row[0] += 1
        row[1] += answer == everything
    for size, (shapes, agree) in sorted(counts.items()):
        label = f"{size}" if size < 3 else "3 or more"
        print(f"answered from {label} feasible: {shapes} shapes, {agree} agree with scoring every candidate")


if __name__ == "__main__":
    main()
