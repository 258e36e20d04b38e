"""Experiment (seventh session, not part of the product): does the model's own error on nearby training
problems tell where its answer for a new shape will be poor?

Out-of-fold top-1 of every training problem comes from a grouped 5-fold CV over the training problems
(each ranked by a model that never saw it). For each held-out problem, the signal is the mean out-of-fold
top-1 of its K nearest training problems (log2 M, N, K; same dtype and layout, or any if ``--any-kind``).
The model fitted on every training problem gives each held-out problem's real top-1; a problem is *bad*
below 0.90. Printed: the AUC of each signal for "bad" (1.0: a threshold separates them perfectly; 0.5:
no better than chance), beside the nearest-neighbour distance the predictor uses today, and the best
single threshold's catch rate at <= 10% of good problems flagged.

    .venv/bin/python benchmarks/experiments/ood_local_error.py        (~1.5 min, 2 cores)
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, evaluate_model, grouped_cross_validation, split_by_role

device = load_device("h200")
train, heldout = split_by_role(load_measurements("datasets/measurements", "h200"))
X = build_features(train, device)
oof: dict[str, list[float]] = {}
for seed in (0, 1):
    for r in grouped_cross_validation(CostModel(), train, X, folds=5, seed=seed).problems:
        oof.setdefault(r.problem.key, []).append(r.top1)
model = CostModel().fit(
    X, train.time_us.to_numpy(), groups=train.problem_key.to_numpy(), hopeless=(train.status == "hopeless").to_numpy()
)
held = evaluate_model(model, heldout, device).problems

tkeys = sorted(oof)
tprobs = train.drop_duplicates("problem_key").set_index("problem_key").loc[tkeys]
tcoords = np.log2(tprobs[["m", "n", "k"]].to_numpy(dtype=float))
tkind = (tprobs.dtype.astype(str) + "-" + tprobs.layout.astype(str)).to_numpy()
tscore = np.array([np.exp(np.mean(np.log(oof[k]))) for k in tkeys])

bad = np.array([r.top1 < 0.90 for r in held])
print(f"{len(held)} held-out problems, {bad.sum()} with top-1 < 0.90; {len(tkeys)} training problems")


def signal(r, neighbours: int, same_kind: bool) -> tuple[float, float]:
    p = r.problem
    q = np.log2([p.m, p.n, p.k])
    mask = tkind == f"{p.dtype.value}-{p.layout.value}" if same_kind else np.ones(len(tkeys), bool)
    if mask.sum() < neighbours:
        mask = np.ones(len(tkeys), bool)
    d = np.linalg.norm(tcoords[mask] - q, axis=1)
    order = np.argsort(d)[:neighbours]
    return float(np.mean(tscore[mask][order])), float(d[order[-1]])


def report(name: str, values: np.ndarray) -> None:
    auc = roc_auc_score(bad, values)
    best = 0.0
    for t in np.unique(values):
        flagged = values >= t
        if flagged[~bad].mean() <= 0.10:
            best = max(best, flagged[bad].mean())
    print(f"{name:44s} AUC {auc:.3f}   catch at <=10% false flags {best:.2f}")


for same_kind in (True, False):
    for neighbours in (1, 3, 5, 8):
        sig = np.array([signal(r, neighbours, same_kind) for r in held])
        kind = "same kind" if same_kind else "any kind"
        report(f"1 - mean OOF top-1 of {neighbours} nearest ({kind})", 1 - sig[:, 0])
        if neighbours == 5:
            report(f"distance to 5th nearest ({kind})", sig[:, 1])
