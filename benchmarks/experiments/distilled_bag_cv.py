"""Experiment (eighth session, not part of the product): a bag of refits, distilled back into one model.

Refits on 90% of the training problems, averaged, ranked the held-out problems better than the one model fitted
on all of them (``bagged_refits_heldout.py``), but a bag ranks with five times the trees. Distilling keeps the
predictor's cost: one model with the shipped settings fitted to the bag's mean prediction (as if it were the
measured time, so the same weights and centring apply) on the same rows. Grouped 5-fold CV over the training
problems (fold seed SEED), each fold's problems ranked by (A) the shipped model fitted on the other folds,
(B) the bag of 5 refits on 90% of those problems, (C) B distilled.

    .venv/bin/python benchmarks/experiments/distilled_bag_cv.py [SEED]     (~5 min, 2 cores)
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.model_selection import GroupKFold

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.evaluate import evaluate_predictions
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
device = load_device("h200")
train, _ = split_by_role(load_measurements("datasets/measurements", "h200"))
X = build_features(train, device)
t = train.time_us.to_numpy()
groups = train.problem_key.to_numpy()


def fit(index: np.ndarray, time_us: np.ndarray) -> CostModel:
    return fit_rows(CostModel(), train.iloc[index], device, X=X[index], time_us=time_us)


predicted = {name: np.empty(len(train)) for name in ("A one model", "B bag of 5", "C bag distilled")}
for fold, (fit_i, test_i) in enumerate(GroupKFold(5, shuffle=True, random_state=SEED).split(X, groups=groups)):
    predicted["A one model"][test_i] = fit(fit_i, t[fit_i]).predict(X[test_i])
    problems = np.unique(groups[fit_i])
    logs_fit, logs_test = [], []
    for b in range(5):
        chosen = set(np.random.default_rng(100 * SEED + b).choice(problems, round(0.9 * len(problems)), replace=False))
        member = fit_i[np.isin(groups[fit_i], list(chosen))]
        model = fit(member, t[member])
        logs_fit.append(np.log(model.predict(X[fit_i])))
        logs_test.append(np.log(model.predict(X[test_i])))
    predicted["B bag of 5"][test_i] = np.exp(np.mean(logs_test, axis=0))
    predicted["C bag distilled"][test_i] = fit(fit_i, np.exp(np.mean(logs_fit, axis=0))).predict(X[test_i])
    print(f"fold {fold} done", flush=True)
for name, values in predicted.items():
    rows = candidate_rows(train.assign(_p=values))
    s = evaluate_predictions(rows, rows["_p"].to_numpy(), device).summary()
    print(f"{name:18s} top-1 {s['top1_geomean']:.3f} worst {s['top1_worst']:.3f} top-5 {s['top5_geomean']:.3f}")
