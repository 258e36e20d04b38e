"""Experiment (tenth session): one cost model for every dtype × layout, or one per dtype, or one per dtype × layout?

The large fp8 nt held-out problems keep picking 256×64 descriptor tiles, which win on fp8 nn, although the
tenth session's fp8 nt training problems show 128×128 tiles 7-19% faster on every one of them with M ≥ 2048
(BENCHMARKS §4, tenth session): the shared trees may carry one group's preference into another. Here each
arm fits the shipped settings on the fit folds' rows, (A) one model on all, (B) one model per dtype, (C) one
per dtype × layout, and picks each test problem's fastest predicted configuration with its own group's model.

Grouped 5-fold CV over the training problems (fold seeds 0-3); top-1 of each test problem within its measured
configurations, over all test problems, the fp8 ones, and those measured over >= 90% of their space.

    .venv/bin/python benchmarks/experiments/per_group_models_cv.py      (~12 min, 2 cores)
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import GroupKFold
from training_rows import TrainingRows

from tilecost.problem import Problem
from tilecost.space import problem_candidates

data = TrainingRows.load()
rows, groups = data.rows, data.groups
dtype = rows["dtype"].to_numpy()
kind = (rows["dtype"] + "-" + rows["layout"]).to_numpy()
counts = rows.groupby("problem_key").size()
full = {k for k in counts.index if counts[k] >= 0.9 * len(problem_candidates(Problem.from_key(k), "h200"))}
fp8 = set(rows.loc[rows["dtype"] == "fp8e4m3", "problem_key"])
problems = np.unique(groups)

scores: dict[str, dict[str, list[float]]] = {}
for seed in range(4):
    for fit_p, _ in GroupKFold(5, shuffle=True, random_state=seed).split(problems, groups=problems):
        in_fit = np.isin(groups, problems[fit_p])
        test_i = np.flatnonzero(~in_fit)
        arms: dict[str, np.ndarray] = {"A one model": np.zeros(len(rows), dtype=object), "B per dtype": dtype,
                                       "C per dtype x layout": kind}  # fmt: skip
        for arm, label in arms.items():
            pred = np.empty(len(test_i))
            for value in np.unique(label[test_i]):
                fit_i = np.flatnonzero(in_fit & (label == value))
                where = label[test_i] == value
                pred[where] = data.fit(fit_i).predict(data.X[test_i[where]])
            for g, fr in data.top1_by_problem(test_i, pred).items():
                for name, member in (("all", True), ("fp8", g in fp8), (">=90% space", g in full)):
                    if member:
                        scores.setdefault(arm, {}).setdefault(name, []).append(fr)
    print(f"fold seed {seed} done", flush=True)
for arm, by in scores.items():
    line = [f"{name} {np.exp(np.log(fr).mean()):.3f} ({int((np.array(fr) < 0.9).sum())}/{len(fr)})"
            for name, fr in by.items()]  # fmt: skip
    print(f"{arm:<22}: " + ", ".join(line))
