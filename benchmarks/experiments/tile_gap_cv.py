"""Experiment (tenth session): do the tile-gap runs help on training problems, not only on the held-out ones?

The tenth session's runs r10f8ntgap1 and r10f8nngap1 (``scripts/tile_gap_plan.py``) measured fp8 training
problems on their large tiles: 20 new problems, and the untimed large tiles of 15 already measured. They were
collected because of a gap the ninth session found on held-out problems, so the held-out gain they bring is
checked here on the training problems measured before them, which that diagnosis never looked at.

Grouped 5-fold CV over the training problems measured before this session (fold seeds 0-3); every test
problem is judged on its rows from before this session (the same rows in both arms). The fit folds get
(A) their rows from before this session, or (B) those, the new runs' rows of the same problems and every new
problem. Printed: top-1 (geometric mean of best / picked, over the test problems) for all, the fp8 ones, and
those measured over >= 90% of their space, with the number below 0.90.

    .venv/bin/python benchmarks/experiments/tile_gap_cv.py      (~6 min, 2 cores)
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import GroupKFold
from training_rows import TrainingRows

from tilecost.problem import Problem
from tilecost.space import problem_candidates

NEW_RUNS = ("r10f8ntgap1", "r10f8nngap1")

data = TrainingRows.load()
rows, groups = data.rows, data.groups
new_row = rows["run_id"].isin(NEW_RUNS).to_numpy()
old_problems = np.unique(groups[~new_row])
new_problems = np.setdiff1d(np.unique(groups[new_row]), old_problems)
print(f"{len(old_problems)} problems measured before, {len(new_problems)} new, {int(new_row.sum())} new rows")
counts = rows[~new_row].groupby("problem_key").size()
full = {k for k in old_problems if counts[k] >= 0.9 * len(problem_candidates(Problem.from_key(k), "h200"))}
fp8 = set(rows.loc[rows["dtype"] == "fp8e4m3", "problem_key"])

old_i = np.flatnonzero(~new_row)
scores: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
for seed in range(4):
    for fit_p, test_p in GroupKFold(5, shuffle=True, random_state=seed).split(old_problems, groups=old_problems):
        fit_set, test_set = set(old_problems[fit_p]), set(old_problems[test_p])
        in_fit = np.array([g in fit_set for g in groups])
        test_i = old_i[np.array([groups[i] in test_set for i in old_i])]
        arms = {
            "A": np.flatnonzero(in_fit & ~new_row),
            "B": np.flatnonzero(in_fit | np.isin(groups, new_problems)),
        }
        for arm, fit_i in arms.items():
            pred = data.fit(fit_i).predict(data.X[test_i])
            for g, fr in data.top1_by_problem(test_i, pred).items():
                for name, member in (("all", True), ("fp8", g in fp8), (">=90% space", g in full)):
                    if member:
                        scores[arm].setdefault(name, []).append(fr)
    print(f"fold seed {seed} done", flush=True)
for name in scores["A"]:
    line = []
    for arm in ("A", "B"):
        fr = np.array(scores[arm][name])
        line.append(f"{arm} {np.exp(np.log(fr).mean()):.3f} ({int((fr < 0.9).sum())}/{len(fr)} below 0.90)")
    print(f"{name:<12}: " + ", ".join(line))
