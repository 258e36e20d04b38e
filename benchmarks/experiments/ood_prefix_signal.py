"""Experiment (eighth session, not part of the product): does the model's own instability flag its bad picks?

For each held-out problem, signals the predictor could compute from one query: how much worse (by the whole
model) the best candidate of the first T main trees is than the whole model's best (T = 50, 100, 150, 200), the
predicted gap between the best two, and the spread of the best eight. Reported: each signal's ROC AUC for "the
model's pick is below 0.90 of the best measured" over the 78 held-out problems (0.5: no better than chance).

    .venv/bin/python benchmarks/experiments/ood_prefix_signal.py      (~1 min, 2 cores)
"""

from __future__ import annotations

import numpy as np
import xgboost as xgb
from sklearn.metrics import roc_auc_score

from tilecost.device import load_device
from tilecost.features import FEATURE_NAMES
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role

device = load_device("h200")
train, heldout = split_by_role(load_measurements("datasets/measurements", "h200"))
model = fit_rows(CostModel(), train, device)
rows = candidate_rows(heldout)
X = build_features(rows, device)
matrix = xgb.DMatrix(X, feature_names=list(FEATURE_NAMES))
main = model.booster_.num_boosted_rounds() - model.level_trees_
roofline = np.log(model.predict(X)) - model.booster_.predict(matrix)  # ln µs = booster output + ln roofline
full = model.booster_.predict(matrix, iteration_range=(0, main)) + roofline
prefixes = {t: model.booster_.predict(matrix, iteration_range=(0, t)) + roofline for t in (50, 100, 150, 200)}
bad, signals = (
    [],
    {**{f"first {t} trees' pick, worse by": [] for t in prefixes}, "-gap to second": [], "-spread of 8": []},
)
for _, index in rows.groupby("problem_key").indices.items():
    times = rows.time_us.to_numpy()[index]
    scores = full[index]
    best = int(np.argmin(scores))
    bad.append(times.min() / times[best] < 0.90)
    ordered = np.sort(scores)
    signals["-gap to second"].append(-(ordered[1] - ordered[0]))
    signals["-spread of 8"].append(-(ordered[min(7, len(ordered) - 1)] - ordered[0]))
    for t, prefix in prefixes.items():
        signals[f"first {t} trees' pick, worse by"].append(scores[int(np.argmin(prefix[index]))] - scores[best])
print(f"{sum(bad)} of {len(bad)} held-out problems below 0.90")
for name, values in signals.items():
    print(f"{name:32s} AUC {roc_auc_score(bad, values):.3f}")
