"""Experiment (eleventh session): does measuring a training problem over its whole space buy more than its rows?

The held-out groups whose training problems were measured over their whole candidate space (mostly bf16 nt)
score highest (0.957 on the held-out bf16 nt problems), those measured on a shared 25% sample of configurations
lowest (fp8 nt 0.903, where 30% of a held-out problem's candidates were never timed on any training problem
of its dtype and layout). Adding problems did not help (the learning curve, the tenth session's fp8 rows).
Whether more *configurations per problem* would, CV can answer on the problems that have them: fit arm A on
the fit folds as they are, arms B and C on the same folds with every problem measured over >= 90% of its
space cut to a shared random sample of its dtype × layout's configurations (25% and 50%, seeded per fold
seed), as the collector samples; judge the same test problems, each on every configuration it timed.

Grouped 5-fold CV over the training problems, COUNT (default 8) fold seeds from FIRST (the tenth session's
lesson: four fold seeds cannot tell a change of +0.007).

    .venv/bin/python benchmarks/experiments/config_coverage_cv.py [FIRST [COUNT]]      (~20 min, 2 cores)
"""

from __future__ import annotations

import sys

import numpy as np
from training_rows import TrainingRows

from tilecost.problem import Problem
from tilecost.space import problem_candidates

first = int(sys.argv[1]) if len(sys.argv) > 1 else 0
count = int(sys.argv[2]) if len(sys.argv) > 2 else 8
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
data.cv_arms(
    lambda seed: {arm: (np.ones(len(rows), bool) if f is None else sampled(f, seed)) for arm, f in arms.items()},
    {"all": lambda g: True, ">=90% space": lambda g: g in full, "sampled": lambda g: g not in full},
    range(first, first + count),
)
