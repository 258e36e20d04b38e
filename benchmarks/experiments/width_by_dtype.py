"""Experiment (thirty-seventh session): the shipped predictor's answers on the held-out problems per dtype, at several
shortlist widths (never from the tuning database): geometric mean of best / answer, answers below 0.90, problems.

    .venv/bin/python benchmarks/experiments/width_by_dtype.py     (~30 s, this 2-core machine)
"""

import math
import sys

import numpy as np

sys.path.insert(0, ".")
from tilecost import Predictor, Problem
from tilecost.train.dataset import load_measurements
from tilecost.train.pipeline import split_by_role

_, h = split_by_role(load_measurements("datasets/measurements", "h200"))
for width in (8, 12, 16, 24):
    p = Predictor.load("h200", shortlist_width=width)
    out = {}
    for key, rows in h.groupby("problem_key"):
        prob = Problem.from_key(str(key))
        times = dict(zip(rows["config_id"].astype(str), rows["time_us"].astype(float), strict=True))
        a = p.predict_best(prob, measured=False)
        out.setdefault(prob.dtype.value, []).append(min(times.values()) / times.get(a.config.key, math.inf))
    print(
        width,
        {
            d: (round(float(np.exp(np.log(v).mean())), 4), int((np.array(v) < 0.9).sum()), len(v))
            for d, v in sorted(out.items())
        },
    )
