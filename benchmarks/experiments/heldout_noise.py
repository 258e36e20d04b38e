"""Experiment (eighth session, not part of the product): how far the held-out figures can be told apart.

Two sources of spread around the shipped model's held-out top-1 (geometric mean over the 78 problems):

1. **the held-out sample itself**: the 78 problems resampled with replacement (2,000 bootstrap draws) with the
   model fixed: a 90% interval of the geometric mean and of the worst problem;
2. **the training data**: the model refitted on 90% of the training problems (5 seeded draws), the same 78
   problems evaluated.

    .venv/bin/python benchmarks/experiments/heldout_noise.py      (~2 min, 2 cores)
"""

from __future__ import annotations

import numpy as np

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import evaluate_model, fit_rows, split_by_role

device = load_device("h200")
train, heldout = split_by_role(load_measurements("datasets/measurements", "h200"))


def fit(frame):
    return fit_rows(CostModel(), frame, device)


full = evaluate_model(fit(train), heldout, device)
top1 = np.array([r.top1 for r in full.problems])
rng = np.random.default_rng(0)
draws = rng.integers(0, len(top1), size=(2000, len(top1)))
geo = np.exp(np.log(top1[draws]).mean(axis=1))
worst = top1[draws].min(axis=1)
print(f"all training problems: top-1 {np.exp(np.log(top1).mean()):.3f}, worst {top1.min():.3f}, {len(top1)} held out")
low, high = np.quantile(geo, [0.05, 0.95])
print(f"bootstrap over the held-out problems: top-1 90% interval {low:.3f}-{high:.3f}")
print(f"  worst problem 90% interval {np.quantile(worst, 0.05):.3f}-{np.quantile(worst, 0.95):.3f}")
print(f"  share of draws at or above 0.95: {(geo >= 0.95).mean():.3f}")
problems = np.array(sorted(train.problem_key.unique()))
for seed in range(5):
    chosen = set(np.random.default_rng(seed).choice(problems, round(0.9 * len(problems)), replace=False))
    ev = evaluate_model(fit(train[train.problem_key.isin(chosen)]), heldout, device).summary()
    print(
        f"90% of training problems, draw {seed}: top-1 {ev['top1_geomean']:.3f}, worst {ev['top1_worst']:.3f},"
        f" top-5 {ev['top5_geomean']:.3f}",
        flush=True,
    )
