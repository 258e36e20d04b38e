"""Experiment (eleventh session): does measuring a training problem over its whole space buy more than its rows?

The held-out groups whose training problems were measured over their whole candidate space (mostly bf16 nt)
score highest (0.957 on the held-out bf16 nt problems), those measured on a shared 25% sample of configurations
lowest (fp8 nt 0.903, where 30% of a held-out problem's candidates were never timed on any training problem
of its dtype and layout). Adding problems did not help (the learning curve, the tenth session's fp8 rows).
Whether more *configurations per problem* would, CV can answer on the problems that have them: fit arm A on
the fit folds as they are, arms B and C on the same folds with every problem measured over >= 90% of its
space cut to a shared random sample of its dtype × layout's configurations (25% and 50%, seeded per fold
seed), as the collector samples; judge the same test problems, each on every configuration it timed.

Grouped 5-fold CV over the training problems, fold seeds FIRST..FIRST+7 (the tenth session's lesson: four
fold seeds cannot tell a change of +0.007).

    .venv/bin/python benchmarks/experiments/config_coverage_cv.py [FIRST]      (~20 min, 2 cores)
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.model_selection import GroupKFold
from training_rows import TrainingRows

from tilecost.problem import Problem
from tilecost.space import problem_candidates

first = int(sys.argv[1]) if len(sys.argv) > 1 else 0
data = TrainingRows.load()
rows, groups = data.rows, data.groups
kind = (rows["dtype"] + "-" + rows["layout"]).to_numpy()
config = rows["config_id"].to_numpy()
counts = rows.groupby("problem_key").size()
full = {k for k in counts.index if counts[k] >= 0.9 * len(problem_candidates(Problem.from_key(k), "h200"))}
in_full = np.isin(groups, list(full))
problems = np.unique(groups)
first_rows = in_full & ~rows.duplicated("problem_key").to_numpy()
by_kind = ", ".join(f"{k} {n}" for k, n in zip(*np.unique(kind[first_rows], return_counts=True), strict=True))
print(f"{len(problems)} training problems, {len(full)} measured over >= 90% of their space ({by_kind})", flush=True)


def sampled(fraction: float, seed: int) -> np.ndarray:
    """Rows kept when full-space problems keep only a shared ``fraction`` of their kind's configurations."""
    keep = np.ones(len(rows), bool)
    rng = np.random.default_rng(seed)
    for value in np.unique(kind[in_full]):
        mine = in_full & (kind == value)
        ids = np.unique(config[mine])
        chosen = rng.choice(ids, size=max(1, round(fraction * len(ids))), replace=False)
        keep[mine & ~np.isin(config, chosen)] = False
    return keep


arms = {"A as measured": None, "B full-space cut to 25%": 0.25, "C full-space cut to 50%": 0.5}
scores: dict[str, dict[str, list[float]]] = {}
for seed in range(first, first + 8):
    per_seed: dict[str, list[float]] = {}
    keeps = {arm: (np.ones(len(rows), bool) if f is None else sampled(f, seed)) for arm, f in arms.items()}
    for fit_p, _ in GroupKFold(5, shuffle=True, random_state=seed).split(problems, groups=problems):
        in_fit = np.isin(groups, problems[fit_p])
        test_i = np.flatnonzero(~in_fit)
        for arm, keep in keeps.items():
            pred = data.fit(np.flatnonzero(in_fit & keep)).predict(data.X[test_i])
            for g, fr in data.top1_by_problem(test_i, pred).items():
                for name, member in (("all", True), (">=90% space", g in full), ("sampled", g not in full)):
                    if member:
                        scores.setdefault(arm, {}).setdefault(name, []).append(fr)
                per_seed.setdefault(arm, []).append(fr)
    line = ", ".join(f"{a.split()[0]} {np.exp(np.log(v).mean()):.3f}" for a, v in per_seed.items())
    print(f"fold seed {seed}: {line}", flush=True)
for arm, by in scores.items():
    line = [f"{name} {np.exp(np.log(fr).mean()):.3f} ({int((np.array(fr) < 0.9).sum())}/{len(fr)})"
            for name, fr in by.items()]  # fmt: skip
    print(f"{arm:<24}: " + ", ".join(line))
