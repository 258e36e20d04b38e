"""Experiment (tenth session): a layout-aware column, the contiguous bytes of one row of the B tile.

fp8's best large tile flips with the layout (BENCHMARKS §4, tenth session: 128×128 on nt, 256×64×128 on nn,
by up to 2×), and the model still picks 256×64 on large fp8 nt problems. The B tile a program loads has rows
of BLOCK_K elements when B is stored N×K (nt) and of BLOCK_N elements when it is stored K×N (nn); the trees can
only reach that through an interaction of ``layout_nt``, ``block_k``, ``block_n`` and ``in_bytes``. Here it is
one more column, log2(bytes of a contiguous B-tile row), appended to the feature matrix (the model's column
list is widened for this script only; the product's schema is unchanged).

Grouped 5-fold CV over the training problems (fold seeds 0-3), (A) the shipped columns, (B) with the new one;
top-1 over all test problems, the fp8 ones, and those measured over >= 90% of their space.

    .venv/bin/python benchmarks/experiments/b_row_bytes_cv.py [FIRST_SEED]     (~5 min, 2 cores; fold seeds
    FIRST_SEED to FIRST_SEED + 3, default 0)
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.model_selection import GroupKFold
from training_rows import TrainingRows

import tilecost.train.model as model_module
from tilecost.features import FEATURE_NAMES
from tilecost.problem import DType, Problem
from tilecost.space import problem_candidates

data = TrainingRows.load()
rows, groups = data.rows, data.groups
in_bytes = rows["dtype"].map({d.value: d.in_bytes for d in DType}).to_numpy(dtype=float)
b_row = np.where(rows["layout"].to_numpy() == "nt", rows["block_k"].to_numpy(), rows["block_n"].to_numpy())
X_b = np.column_stack([data.X, np.log2(b_row * in_bytes)])
counts = rows.groupby("problem_key").size()
full = {k for k in counts.index if counts[k] >= 0.9 * len(problem_candidates(Problem.from_key(k), "h200"))}
fp8 = set(rows.loc[rows["dtype"] == "fp8e4m3", "problem_key"])
problems = np.unique(groups)
widened = (*FEATURE_NAMES, "log2_b_row_bytes")

scores: dict[str, dict[str, list[float]]] = {}
first_seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
for seed in range(first_seed, first_seed + 4):
    for fit_p, _ in GroupKFold(5, shuffle=True, random_state=seed).split(problems, groups=problems):
        in_fit = np.isin(groups, problems[fit_p])
        fit_i, test_i = np.flatnonzero(in_fit), np.flatnonzero(~in_fit)
        for arm in ("A shipped columns", "B + log2_b_row_bytes"):
            if arm.startswith("A"):
                pred = data.fit(fit_i).predict(data.X[test_i])
            else:
                model_module.FEATURE_NAMES = widened  # type: ignore[assignment]
                try:
                    model = model_module.CostModel().fit(
                        X_b[fit_i], data.time_us[fit_i], groups=groups[fit_i],
                        hopeless=(rows["status"].to_numpy()[fit_i] == "hopeless"),
                    )  # fmt: skip
                    pred = model.predict(X_b[test_i])
                finally:
                    model_module.FEATURE_NAMES = FEATURE_NAMES  # type: ignore[assignment]
            for g, fr in data.top1_by_problem(test_i, pred).items():
                for name, member in (("all", True), ("fp8", g in fp8), (">=90% space", g in full)):
                    if member:
                        scores.setdefault(arm, {}).setdefault(name, []).append(fr)
    per_seed = {arm: np.exp(np.log(by["all"][-len(problems) :]).mean()) for arm, by in scores.items()}
    print(f"fold seed {seed}: top-1 over all problems " + ", ".join(f"{a[0]} {v:.3f}" for a, v in per_seed.items()),
          flush=True)  # fmt: skip
for arm, by in scores.items():
    line = [f"{name} {np.exp(np.log(fr).mean()):.3f} ({int((np.array(fr) < 0.9).sum())}/{len(fr)})"
            for name, fr in by.items()]  # fmt: skip
    print(f"{arm:<22}: " + ", ".join(line))
