"""Experiment (forty-seventh session, not part of the product): re-rank the cost model's top few by a configuration's
standing over its dtype and layout, instead of giving the trees that standing as a column.

As a column (``extra_features.py --columns prior``) the prior lifted the held-out sets' worst answer (0.470 → 0.651)
and lost the first pick elsewhere (×0.993). Here the model is left as it is; among its ``k`` fastest-predicted
configurations of a problem, the pick minimises ln(predicted time) + λ · prior, where the prior is the median over
the fit folds' problems of the same dtype and layout of the configuration's centred log time (ln time minus the mean
ln time of that problem's timed rows; configurations no fit-fold problem timed get the prior 0).

Grouped 5-fold CV over the training problems (fold seed SEED, :class:`training_rows.TrainingRows`): each test
problem's top-1 within its timed configurations, per λ and k, against λ = 0 (the model alone), as the geometric
mean, the answers below 0.90 and the paired ratio with its 90% bootstrap interval over problems.

    .venv/bin/python benchmarks/experiments/prior_rerank_cv.py [SEED]      (~12 min, 2 cores)
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from training_rows import TrainingRows, centred_log_time, config_keys

LAMBDAS = (0.0, 0.1, 0.25, 0.5, 1.0)
TOPS = (3, 5, 10)


def main(argv: list[str]) -> int:
    seed = int(argv[0]) if argv else 0
    data = TrainingRows.load()
    keys = config_keys(data.rows).to_numpy()
    centred = centred_log_time(data.rows)
    problem_rows = data.problem_rows()
    fractions: dict[tuple[float, int], dict[str, float]] = {}
    for fold, in_fit in enumerate(data.folds(seed)):
        fit_i, test_i = np.flatnonzero(in_fit), np.flatnonzero(~in_fit)
        predicted = np.full(len(keys), np.nan)
        predicted[test_i] = np.log(data.fit(fit_i).predict(data.X[test_i]))
        medians = pd.Series(centred[fit_i]).groupby(keys[fit_i]).median()
        prior = np.zeros(len(keys))
        prior[test_i] = pd.Series(keys[test_i]).map(medians).fillna(0.0).to_numpy()
        for pos in problem_rows:
            if in_fit[pos[0]]:
                continue
            best = data.time_us[pos].min()
            ranked = pos[np.argsort(predicted[pos], kind="stable")]
            for top in TOPS:
                head = ranked[:top]
                for lam in LAMBDAS:
                    pick = head[int(np.argmin(predicted[head] + lam * prior[head]))]
                    fractions.setdefault((lam, top), {})[str(data.groups[pos[0]])] = float(best / data.time_us[pick])
        print(f"fold {fold}: {len(test_i):,} test rows done", flush=True)
    base = fractions[(0.0, TOPS[0])]
    problems = sorted(base)
    rng = np.random.default_rng(0)
    draws = rng.integers(0, len(problems), size=(2000, len(problems)))
    base_log = np.log([base[p] for p in problems])
    print(f"grouped 5-fold CV, fold seed {seed}: {len(problems)} training problems, top-1 within timed configurations")
    print("lambda  top-k | top-1 geomean  below 0.90 | paired ratio to the model alone (90%)")
    for (lam, top), by in sorted(fractions.items()):
        values = np.log([by[p] for p in problems])
        diff = values - base_log
        low, high = np.exp(np.quantile(diff[draws].mean(axis=1), [0.05, 0.95]))
        print(f"{lam:6.2f} {top:6d} | {np.exp(values.mean()):.4f} {int((values < np.log(0.9)).sum()):11d} | "
              f"x{np.exp(diff.mean()):.4f} (x{low:.4f}-x{high:.4f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
