"""Experiment (seventh session, not part of the product): a feature relative to the problem's best analytical time.

Every feature today describes one (problem, config) pair on its own; the trees must learn from absolute values
which configs are the problem's front-runners. This adds ``log2_roofline_time_us`` minus its minimum over the
problem's whole feasible candidate space (the seed's analytical model: how far behind the analytically best
config of the same problem this one is, 0 for that config), computed identically for training and prediction.
It takes the column of ``in_bytes`` (which the dtype's one-hot columns already determine), so the model keeps
its feature count. Grouped 5-fold CV over the training problems (fold seeds 0-3), against the same CV without it.

    .venv/bin/python benchmarks/experiments/relative_roofline_cv.py      (~5 min, 2 cores)
"""

from __future__ import annotations

import numpy as np

from tilecost import Problem
from tilecost.device import load_device
from tilecost.features import FEATURE_NAMES, ConfigArrays, feature_matrix
from tilecost.space import problem_candidates
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, grouped_cross_validation, split_by_role

ROOFLINE = FEATURE_NAMES.index("log2_roofline_time_us")
REPLACED = FEATURE_NAMES.index("in_bytes")

device = load_device("h200")
train, _ = split_by_role(load_measurements("datasets/measurements", "h200"))
X = build_features(train, device)
space_min: dict[str, float] = {}
for key in train.problem_key.unique():
    problem = Problem.from_key(key)
    x = feature_matrix(problem, ConfigArrays.from_configs(problem_candidates(problem, device)), device)
    space_min[key] = float(x[:, ROOFLINE].min())
relative = X[:, ROOFLINE] - train.problem_key.map(space_min).to_numpy()
print(f"{len(train):,} rows, {len(space_min)} problems; relative roofline: median {np.median(relative):.2f}, "
      f"share at 0 {np.mean(relative == 0):.4f}")  # fmt: skip
X_new = X.copy()
X_new[:, REPLACED] = relative

for name, features in (("without", X), ("with relative roofline", X_new)):
    top1, top5 = [], []
    for seed in range(4):
        evaluation = grouped_cross_validation(CostModel(), train, features, folds=5, seed=seed)
        top1 += [r.top1 for r in evaluation.problems]
        top5 += [r.top5 for r in evaluation.problems]
    print(f"{name:24s} top-1 {np.exp(np.mean(np.log(top1))):.3f}  top-5 {np.exp(np.mean(np.log(top5))):.3f}")
