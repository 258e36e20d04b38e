"""Experiment (twelfth session): does a larger model pay now that there are 2.6 times the training problems?

The seventh session found depth 10 generalising worse than the shipped depth 8 in CV on ~300 training problems
(0.883 against 0.901), and the eleventh that larger models fit the held-out problems in sample almost perfectly
(0.988-0.996): the limit was carrying the order to unseen shapes. With 1,045 training problems the balance may
have moved. Grouped 5-fold CV over the training problems, per fold seed, each arm a CostModel's settings fitted
on the same fit folds; every test problem judged on the configurations it timed. The held-out problems are not
used. The predictor's latency grows with the trees scored (BENCHMARKS §5), so a gain here is weighed against it.

    .venv/bin/python benchmarks/experiments/capacity_cv.py [SEEDS [FIRST [ARMS]]]    (~6 min per fold seed, 2 cores)

ARMS (comma separated, default shipped,600d8,600d10): also 300d10 (depth 10 at the shipped tree count and rate).
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.model_selection import GroupKFold
from training_rows import TrainingRows

from tilecost.train.model import CostModel

seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
first = int(sys.argv[2]) if len(sys.argv) > 2 else 0
KNOWN = {
    "shipped": ("shipped (300 trees, depth 8)", {}),
    "600d8": ("600 trees, depth 8", {"n_estimators": 600}),
    "600d10": ("600 trees, depth 10, lr 0.05", {"n_estimators": 600, "max_depth": 10, "learning_rate": 0.05}),
    "300d10": ("300 trees, depth 10", {"max_depth": 10}),
}
chosen = sys.argv[3].split(",") if len(sys.argv) > 3 else ["shipped", "600d8", "600d10"]
ARMS = dict(KNOWN[name] for name in chosen)
data = TrainingRows.load()
problems = np.unique(data.groups)
big_m = {str(g) for g in problems if int(str(g).split("x", 1)[0]) > 64}
print(f"{len(problems)} training problems ({len(big_m)} with M > 64); arms: {', '.join(ARMS)}", flush=True)
scores: dict[str, list[float]] = {a: [] for a in ARMS}
scores_big: dict[str, list[float]] = {a: [] for a in ARMS}
for seed in range(first, first + seeds):
    per_seed: dict[str, list[float]] = {a: [] for a in ARMS}
    for fit_p, _ in GroupKFold(5, shuffle=True, random_state=seed).split(problems, groups=problems):
        in_fit = np.isin(data.groups, problems[fit_p])
        fit_i, test_i = np.flatnonzero(in_fit), np.flatnonzero(~in_fit)
        for arm, settings in ARMS.items():
            pred = data.fit(fit_i, CostModel(**settings)).predict(data.X[test_i])
            for g, fr in data.top1_by_problem(test_i, pred).items():
                per_seed[arm].append(fr)
                scores[arm].append(fr)
                if g in big_m:
                    scores_big[arm].append(fr)
    line = ", ".join(f"{a.split(' (')[0]} {np.exp(np.log(v).mean()):.3f}" for a, v in per_seed.items())
    print(f"fold seed {seed}: {line}", flush=True)
for arm in ARMS:
    a, b = np.array(scores[arm]), np.array(scores_big[arm])
    print(f"{arm:<30}: all {np.exp(np.log(a).mean()):.3f} ({int((a < 0.9).sum())}/{len(a)} below 0.90), "
          f"M > 64 {np.exp(np.log(b).mean()):.3f}")  # fmt: skip
