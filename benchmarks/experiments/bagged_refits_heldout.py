"""Experiment (eighth session, not part of the product): the average of models refitted on 90% of the training
problems (problem-level bagging), evaluated on the held-out problems after each added member.

Exploration only: a bag of 5 ranks with 5 × 300 trees, five times the predictor's per-candidate work, so it was not
a candidate for the product; the held-out problems chose nothing.

    .venv/bin/python benchmarks/experiments/bagged_refits_heldout.py      (~1 min, 2 cores)
"""

import numpy as np

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.evaluate import evaluate_predictions
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role

device = load_device("h200")
train, heldout = split_by_role(load_measurements("datasets/measurements", "h200"))
rows = candidate_rows(heldout)
Xh = build_features(rows, device)
problems = np.array(sorted(train.problem_key.unique()))
preds = []
for seed in range(5):
    chosen = set(np.random.default_rng(seed).choice(problems, round(0.9 * len(problems)), replace=False))
    part = train[train.problem_key.isin(chosen)]
    m = fit_rows(CostModel(), part, device)
    preds.append(np.log(m.predict(Xh)))
    avg = np.exp(np.mean(preds, axis=0))
    s = evaluate_predictions(rows, avg, device).summary()
    print(
        "bag of",
        seed + 1,
        f"top1 {s['top1_geomean']:.3f} worst {s['top1_worst']:.3f} top5 {s['top5_geomean']:.3f}",
        flush=True,
    )
