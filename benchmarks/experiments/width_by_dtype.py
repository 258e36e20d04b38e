"""Experiment (thirty-seventh session): the shipped predictor's answers on the held-out problems per dtype, at several
shortlist widths (never from the tuning database): geometric mean of best / answer, answers below 0.90, problems.

    .venv/bin/python benchmarks/experiments/width_by_dtype.py     (~30 s, this 2-core machine)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tilecost import Predictor
from tilecost.train.answer_gate import artifact_answers
from tilecost.train.dataset import load_measurements
from tilecost.train.pipeline import split_by_role

_, heldout = split_by_role(load_measurements("datasets/measurements", "h200"))
for width in (8, 12, 16, 24):
    answers = artifact_answers(Predictor.load("h200", shortlist_width=width), heldout)
    by_dtype: dict[str, list[str]] = {}
    for key in answers.fractions:
        by_dtype.setdefault(key.rsplit("-", 2)[1], []).append(key)
    figures = {}
    for dtype, keys in sorted(by_dtype.items()):
        summary = answers.summary(keys, 0.90)
        figures[dtype] = (summary["geomean"], summary["bad"], len(keys))
    print(width, figures)
