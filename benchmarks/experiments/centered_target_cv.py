"""Experiment (seventh session, not part of the product): fit each problem's candidates relative to one another.

The shipped target is ln(time / roofline time) of each (problem, config) row. The trees must then get both a
problem's level and the order of its candidates right, and only the order decides the pick. Here the target
is centred per problem: ln(time / roofline) minus its weighted mean over the problem's training rows (the same
near-best weights), so every split is spent on telling a problem's candidates apart. Predicting µs would need a
second, per-problem model of the level (one row per query, cheap); ranking does not, so the CV below ranks with
the centred model alone. Same booster settings and weights as CostModel; grouped 5-fold CV over the training
problems, fold seeds 0-3, against the shipped target.

    .venv/bin/python benchmarks/experiments/centered_target_cv.py      (~4 min, 2 cores)

Result (seventh session, 310 training problems): top-1 0.901 against 0.883, top-5 0.965 against 0.958, better
on each of the four fold seeds; adopted as ``CostModel(center_problems=True)`` (the level from 200 trees of
depth 6 appended to the booster; docs/BENCHMARKS.md §4).
"""

from __future__ import annotations

import numpy as np
import xgboost as xgb
from sklearn.model_selection import GroupKFold

from tilecost.device import load_device
from tilecost.features import FEATURE_NAMES
from tilecost.train.dataset import load_measurements
from tilecost.train.evaluate import evaluate_predictions
from tilecost.train.model import CostModel, from_target, to_target
from tilecost.train.pipeline import build_features, candidate_rows, split_by_role

device = load_device("h200")
train, _ = split_by_role(load_measurements("datasets/measurements", "h200"))
X = build_features(train, device)
t = train.time_us.to_numpy()
groups = train.problem_key.to_numpy()
hopeless = (train.status == "hopeless").to_numpy()
y = to_target(t, X, "log_time_over_roofline")
base = CostModel()
params = base.xgb_params()

results: dict[str, list[tuple[float, float]]] = {"shipped target": [], "centred per problem": []}
for seed in range(4):
    splitter = GroupKFold(n_splits=5, shuffle=True, random_state=seed)
    pred = {name: np.empty(len(train)) for name in results}
    for fit_i, test_i in splitter.split(X, groups=groups):
        _, inverse = np.unique(groups[fit_i], return_inverse=True)
        w = base.sample_weight(t[fit_i], inverse, hopeless[fit_i])
        level = np.bincount(inverse, weights=w * y[fit_i]) / np.bincount(inverse, weights=w)
        for name, target in (("shipped target", y[fit_i]), ("centred per problem", y[fit_i] - level[inverse])):
            booster = xgb.train(
                params, xgb.DMatrix(X[fit_i], target, weight=w, feature_names=list(FEATURE_NAMES)), base.n_estimators
            )
            out = booster.predict(xgb.DMatrix(X[test_i], feature_names=list(FEATURE_NAMES)))
            pred[name][test_i] = from_target(out, X[test_i], "log_time_over_roofline")
    for name in results:
        rows = train.assign(_p=pred[name])
        rows = candidate_rows(rows)
        evaluation = evaluate_predictions(rows, rows["_p"].to_numpy(), device)
        results[name] += [(r.top1, r.top5) for r in evaluation.problems]
        s = evaluation.summary()
        print(f"seed {seed} {name:22s} top-1 {s['top1_geomean']:.3f} top-5 {s['top5_geomean']:.3f}", flush=True)
for name, values in results.items():
    a = np.array(values)
    print(f"{name:22s} top-1 {np.exp(np.log(a[:, 0]).mean()):.3f}  top-5 {np.exp(np.log(a[:, 1]).mean()):.3f}")
