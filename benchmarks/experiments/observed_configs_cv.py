"""Experiment (ninth session, not part of the product): pick only among configurations the training data timed.

The second held-out set's largest losses (BENCHMARKS §4, ninth session) are fp8 nt picks of configurations
that no fp8 nt training problem ever timed: the model's time for them is an extrapolation from other
dtypes and layouts. Here a problem's pick is restricted to the configurations its dtype × layout's training
problems timed at least K times (the fit folds'), and compared with the unrestricted pick.

Grouped 5-fold CV over the training problems (fold seeds 0-3); judged on the test folds' training problems
measured over >= 90% of their space (the others were timed on the shared sample the fit folds also timed,
so a restriction to timed configurations cannot change their pick).

    .venv/bin/python benchmarks/experiments/observed_configs_cv.py      (~3 min, 2 cores)
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import GroupKFold
from training_rows import TrainingRows

from tilecost.problem import Problem
from tilecost.space import problem_candidates

data = TrainingRows.load()
rows, X, t, groups = data.rows, data.X, data.time_us, data.groups
kind = (rows["dtype"] + "-" + rows["layout"]).to_numpy()
configs = rows["config_id"].to_numpy()
counts = rows.groupby("problem_key").size()
space = {k: len(problem_candidates(Problem.from_key(k), "h200")) for k in counts.index}
full = {k for k in counts.index if counts[k] >= 0.9 * space[k]}
print(f"{len(full)} of {len(counts)} training problems measured over >= 90% of their space")

results: dict[int, list[float]] = {}
for seed in range(4):
    for fit_i, test_i in GroupKFold(5, shuffle=True, random_state=seed).split(X, groups=groups):
        model = data.fit(fit_i)
        pred = model.predict(X[test_i])
        seen: dict[tuple[str, str], int] = {}
        for kd, c in zip(kind[fit_i], configs[fit_i], strict=True):
            seen[(kd, c)] = seen.get((kd, c), 0) + 1
        test_groups, test_times = groups[test_i], t[test_i]
        timed = np.array([seen.get((kd, c), 0) for kd, c in zip(kind[test_i], configs[test_i], strict=True)])
        for g in np.unique(test_groups):
            if g not in full:
                continue
            pos = np.flatnonzero(test_groups == g)
            times = test_times[pos]
            best = times.min()
            for k in (0, 1, 2, 4, 8):
                allowed = timed[pos] >= k
                if not allowed.any():
                    allowed[:] = True
                p = np.where(allowed, pred[pos], np.inf)
                results.setdefault(k, []).append(best / times[int(np.argmin(p))])
    print(f"fold seed {seed} done", flush=True)
for k, fr in results.items():
    fr = np.array(fr)
    name = "every candidate" if k == 0 else f"timed >= {k} times"
    print(
        f"{name:<18}: top-1 {np.exp(np.log(fr).mean()):.3f}, worst {fr.min():.3f},"
        f" below 0.90 {int((fr < 0.9).sum())}/{len(fr)}"
    )
