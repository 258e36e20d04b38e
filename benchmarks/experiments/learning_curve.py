"""Experiment (eighth session, not part of the product): how the held-out figures move with the number of
training problems, to judge what more measuring would buy.

For each fraction of the training problems (a seeded random subset of problems, all their rows) a model with
the shipped settings is fitted and evaluated on the 78 held-out problems exactly as ``tilecost train`` does.
The held-out problems only report the curve here; nothing is chosen by it.

    .venv/bin/python benchmarks/experiments/learning_curve.py [FRACTIONS [DRAWS]]      (~3 min, 2 cores)

FRACTIONS (comma separated, default 0.25,0.5,0.75,1.0) and DRAWS (seeded subsets per fraction below 1,
default 3): the eleventh session ran ``0.125,0.25,0.5,1.0 4`` to measure the slope per doubling.
"""

from __future__ import annotations

import sys

import numpy as np

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import evaluate_model, fit_rows, split_by_role

device = load_device("h200")
train, heldout = split_by_role(load_measurements("datasets/measurements", "h200"))
problems = np.array(sorted(train.problem_key.unique()))
print(f"{len(problems)} training problems, {heldout.problem_key.nunique()} held out")
print(f"{'fraction':>8} {'problems':>8} {'seed':>4} {'top1':>6} {'worst':>6} {'top5':>6} {'logRMSE':>7}")
fractions = [float(f) for f in sys.argv[1].split(",")] if len(sys.argv) > 1 else [0.25, 0.5, 0.75, 1.0]
draws = int(sys.argv[2]) if len(sys.argv) > 2 else 3
for fraction in fractions:
    for seed in range(draws if fraction < 1 else 1):
        chosen = np.random.default_rng(seed).choice(problems, round(fraction * len(problems)), replace=False)
        part = train[train.problem_key.isin(set(chosen))]
        model = fit_rows(CostModel(), part, device)
        s = evaluate_model(model, heldout, device)
        summary = s.summary()
        print(
            f"{fraction:>8.2f} {len(chosen):>8} {seed:>4} {summary['top1_geomean']:>6.3f} {summary['top1_worst']:>6.3f}"
            f" {summary['top5_geomean']:>6.3f} {s.log_rmse:>7.3f}",
            flush=True,
        )
