"""Experiment (eleventh session): the learning curve again, by grouped CV on the training problems alone.

The held-out learning curve (``learning_curve.py``, BENCHMARKS §4, eleventh session) found ~+0.02 of top-1 per
doubling of the training problems. This checks the slope without the held-out problems: in grouped 5-fold CV
over the training problems, each test fold is judged by models fitted on a seeded random 25%, 50% and all of
the fit folds' problems (all their rows), each test problem on the configurations it timed.

    .venv/bin/python benchmarks/experiments/learning_curve_cv.py [SEEDS [FIRST]]   (~6 min for 4 fold seeds, 2 cores)
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.model_selection import GroupKFold
from training_rows import TrainingRows

seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
first = int(sys.argv[2]) if len(sys.argv) > 2 else 0
FRACTIONS = (0.25, 0.5, 1.0)
data = TrainingRows.load()
groups = data.groups
problems = np.unique(groups)
print(f"{len(problems)} training problems; fit folds of ~{round(0.8 * len(problems))} problems, cut to "
      + ", ".join(f"{f:.0%}" for f in FRACTIONS), flush=True)  # fmt: skip
scores: dict[float, list[float]] = {f: [] for f in FRACTIONS}
for seed in range(first, first + seeds):
    per_seed: dict[float, list[float]] = {f: [] for f in FRACTIONS}
    for fold, (fit_p, _) in enumerate(GroupKFold(5, shuffle=True, random_state=seed).split(problems, groups=problems)):
        test_i = np.flatnonzero(~np.isin(groups, problems[fit_p]))
        rng = np.random.default_rng(1000 * seed + fold)
        for fraction in FRACTIONS:
            chosen = (
                problems[fit_p]
                if fraction == 1.0
                else rng.choice(problems[fit_p], round(fraction * len(fit_p)), replace=False)
            )
            pred = data.fit(np.flatnonzero(np.isin(groups, chosen))).predict(data.X[test_i])
            per_seed[fraction].extend(data.top1_by_problem(test_i, pred).values())
    for f in FRACTIONS:
        scores[f].extend(per_seed[f])
    print(f"fold seed {seed}: " + ", ".join(f"{f:.0%} {np.exp(np.log(per_seed[f]).mean()):.3f}" for f in FRACTIONS),
          flush=True)  # fmt: skip
means = {f: float(np.exp(np.log(scores[f]).mean())) for f in FRACTIONS}
print("over all fold seeds: " + ", ".join(f"{f:.0%} {means[f]:.3f}" for f in FRACTIONS)
      + f"; per doubling {means[0.5] - means[0.25]:+.3f}, then {means[1.0] - means[0.5]:+.3f}")  # fmt: skip
