"""Fit time against top-1 when half of the training rows whose time is a screening bound (``hopeless``) are dropped and
the rest weighted twice (BENCHMARKS §4, twenty-eighth session).

    .venv/bin/python benchmarks/experiments/hopeless_rows_cv.py [KEEP [SEEDS]]     (KEEP default 0.5, SEEDS "0")

A third of the dataset's rows are ``hopeless``: configurations the collector's screening found far slower than the
problem's best and timed only roughly. Training reads them at full weight (``hopeless_weight`` 1.0, the fifth
session's CV preferred it to 0.3). The fit's time grows with its rows and has passed issue 4's two minutes on this
machine; keeping a seeded fraction KEEP of the hopeless rows, weighted 1/KEEP so that they count as much in all, is
the cheapest cut. Grouped 5-fold CV over the training problems (``TrainingRows.folds``) fits both arms on the same
folds; each test problem's top-1 is judged within all of its timed configurations. Prints per fold the fit seconds of
each arm and per arm the geometric-mean top-1, the worst problem and the problems below 0.90.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from training_rows import TrainingRows

from tilecost.train.model import CostModel


def main(keep: float = 0.5, seeds: str = "0") -> None:
    rows = TrainingRows.load()
    hopeless = (rows.rows["status"] == "hopeless").to_numpy()
    kept = ~hopeless | (np.random.default_rng(0).random(len(hopeless)) < keep)
    print(f"{len(hopeless):,} training rows, {hopeless.sum():,} hopeless; the cut arm fits {kept.sum():,}", flush=True)
    arms = {"all rows": (np.ones(len(hopeless), bool), CostModel()),
            f"hopeless x{keep}": (kept, CostModel(hopeless_weight=1.0 / keep))}  # fmt: skip
    scores: dict[str, list[float]] = {a: [] for a in arms}
    seconds: dict[str, list[float]] = {a: [] for a in arms}
    for seed in (int(s) for s in seeds.split(",")):
        for fold, in_fit in enumerate(rows.folds(seed)):
            test_i = np.flatnonzero(~in_fit)
            for arm, (mask, model) in arms.items():
                start = time.perf_counter()
                fitted = rows.fit(np.flatnonzero(in_fit & mask), model)
                seconds[arm].append(time.perf_counter() - start)
                scores[arm].extend(rows.top1_by_problem(test_i, fitted.predict(rows.X[test_i])).values())
            line = ", ".join(f"{a} {seconds[a][-1]:.1f} s" for a in arms)
            print(f"fold seed {seed}, fold {fold}: fit {line}", flush=True)
    for arm in arms:
        v = np.array(scores[arm])
        print(f"{arm:<16}: top-1 {np.exp(np.log(v).mean()):.4f}, worst {v.min():.3f}, below 0.90 {(v < 0.9).sum()}"
              f" of {len(v)}; fit {np.mean(seconds[arm]):.1f} s a fold")  # fmt: skip


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 0.5, sys.argv[2] if len(sys.argv) > 2 else "0")
