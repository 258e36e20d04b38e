"""Experiment (sixth session, not part of the product): re-rank the model's top T by neighbour evidence.

For each problem of a grouped 5-fold CV over the training problems, the model (fitted on the other folds)
ranks the measured candidates; each of its top T gets a penalty, the distance-weighted mean of -ln(best /
time) of that config on the K nearest fit-fold problems of the same dtype and layout (log2 M, N, K), and the
choice minimises ln(predicted time) + alpha * penalty. alpha = 0 is the model alone.

    .venv/bin/python benchmarks/experiments/rerank_top_by_neighbours_cv.py      (~1.5 min, 2 cores)

Result (docs/BENCHMARKS.md §4, sixth session): +0.004 and +0.015 top-1 at best (alpha 0.25-0.5, K 8, T 5),
within the folds' noise; not built into the predictor.
"""

import numpy as np
from sklearn.model_selection import GroupKFold

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, split_by_role

device = load_device("h200")
train, _ = split_by_role(load_measurements("datasets/measurements", "h200"))
train = candidate_rows(train)
X = build_features(train, device)
groups = train.problem_key.to_numpy()
t = train.time_us.to_numpy()
best = train.groupby("problem_key").time_us.transform("min").to_numpy()
train["rel"] = best / t
probs = train.drop_duplicates("problem_key").set_index("problem_key")[["m", "n", "k", "dtype", "layout"]]
coords = np.log2(probs[["m", "n", "k"]].to_numpy(dtype=float))
kind = (probs.dtype.astype(str) + probs.layout.astype(str)).to_numpy()
pidx = {p: i for i, p in enumerate(probs.index)}
rel = {(p, c): r for p, c, r in zip(train.problem_key, train.config_id, train.rel, strict=True)}
by_cfg = train.groupby("config_id").problem_key.apply(list).to_dict()

ALPHAS = (0.0, 0.25, 0.5, 1.0, 2.0)
KS = (3, 8)
TOPS = (5, 10)
for seed in (0, 1):
    pred = np.empty(len(train))
    folds = list(GroupKFold(n_splits=5, shuffle=True, random_state=seed).split(X, groups=groups))
    results = {(a, K, T): [] for a in ALPHAS for K in KS for T in TOPS}
    for fit_i, test_i in folds:
        m = CostModel().fit(
            X[fit_i], t[fit_i], groups=groups[fit_i], hopeless=(train.status == "hopeless").to_numpy()[fit_i]
        )
        pred[test_i] = m.predict(X[test_i])
        fit_probs = set(groups[fit_i])
        test = train.iloc[test_i].assign(pred=pred[test_i])
        for p, rows in test.groupby("problem_key"):
            rows = rows.sort_values("pred")
            i = pidx[p]
            for T in TOPS:
                top = rows.head(T)
                for K in KS:
                    pen = []
                    for c in top.config_id:
                        qs = [q for q in by_cfg.get(c, ()) if q in fit_probs and kind[pidx[q]] == kind[i]]
                        if not qs:
                            pen.append(np.nan)
                            continue
                        d = np.linalg.norm(coords[[pidx[q] for q in qs]] - coords[i], axis=1)
                        near = np.argsort(d)[:K]
                        w = np.exp(-d[near])
                        r = np.array([rel[(qs[j], c)] for j in near])
                        pen.append(-np.sum(w * np.log(r)) / np.sum(w))
                    pen = np.array(pen)
                    pen = np.where(np.isnan(pen), np.nanmedian(pen) if np.isfinite(pen).any() else 0.0, pen)
                    for a in ALPHAS:
                        score = np.log(top.pred.to_numpy()) + a * pen
                        chosen = top.iloc[int(np.argmin(score))]
                        results[(a, K, T)].append(chosen.rel)
    for key, vals in results.items():
        v = np.array(vals)
        print(seed, key, f"top1 {np.exp(np.mean(np.log(v))):.3f} worst {v.min():.3f} n={len(v)}", flush=True)
