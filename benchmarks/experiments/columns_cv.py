"""Experiment (forty-fourth session): grouped 5-fold CV over the training problems of one of
``extra_features.py``'s column sets, the evidence that does not lean on the held-out problems.

``extra_features.py`` fits twice and compares on the held-out problems; its paired interval covers which
problems were held out, not how far widening the matrix moves a deterministic fit. Here every training problem is
a test problem once per fold seed: (A) the schema as it is and (B) with the chosen columns appended are fitted on
the same four folds and judged on the fifth (top-1 within the configurations each problem timed), and the paired
ratio of B over A is reported over all test problems, per layout and for the half-aligned problems (one of N, K a
multiple of 16), with a bootstrap interval over problems. ``--placebo SEED`` adds an arm (C) with the same columns'
rows shuffled, as in ``extra_features.py``: columns that say nothing, whose ratio over A is how far widening the
matrix alone moves the fit. Nothing here changes the feature schema (the model's column list is swapped in this
process).

    .venv/bin/python benchmarks/experiments/columns_cv.py --columns loads [--seeds 0,1] [--placebo SEED]
    (~15 min a fold seed on 9,394 training problems, ~23 min with the placebo arm; 2 cores)
"""

from __future__ import annotations

import argparse

import numpy as np
from extra_features import COLUMN_SETS
from training_rows import TrainingRows

import tilecost.train.model as model_module
from tilecost.features import FEATURE_NAMES
from tilecost.problem import Problem
from tilecost.train.evaluate import geomean_interval


def paired(b: dict[str, float], a: dict[str, float], keys: list[str], draws: int = 4000) -> str:
    """B's top-1 over A's on ``keys``: the ratio of geometric means and its 90% bootstrap interval over problems."""
    diff = np.log([b[k] for k in keys]) - np.log([a[k] for k in keys])
    low, high = geomean_interval(diff, 0.90, draws, seed=0)
    return f"x{np.exp(diff.mean()):.4f} (x{low:.4f}-x{high:.4f}), {len(keys)} problems"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--columns", choices=sorted(COLUMN_SETS), required=True)
    parser.add_argument("--seeds", default="0", help="fold seeds, comma-separated")
    parser.add_argument("--placebo", type=int, default=None, metavar="SEED")
    args = parser.parse_args()

    data = TrainingRows.load()
    names, columns = COLUMN_SETS[args.columns]
    extra = columns(data.rows)
    widened = {"B": np.hstack([data.X, extra])}
    if args.placebo is not None:
        widened["C"] = np.hstack([data.X, extra[np.random.default_rng(args.placebo).permutation(len(extra))]])
    hopeless = data.rows["status"].to_numpy() == "hopeless"
    for seed in (int(s) for s in args.seeds.split(",")):
        top1: dict[str, dict[str, float]] = {arm: {} for arm in ("A", *widened)}
        for in_fit in data.folds(seed):
            fit_i, test_i = np.flatnonzero(in_fit), np.flatnonzero(~in_fit)
            top1["A"].update(data.top1_by_problem(test_i, data.fit(fit_i).predict(data.X[test_i])))
            model_module.FEATURE_NAMES = (*FEATURE_NAMES, *names)  # type: ignore[assignment]
            try:
                for arm, X in widened.items():
                    model = model_module.CostModel().fit(
                        X[fit_i], data.time_us[fit_i], groups=data.groups[fit_i], hopeless=hopeless[fit_i]
                    )
                    top1[arm].update(data.top1_by_problem(test_i, model.predict(X[test_i])))
            finally:
                model_module.FEATURE_NAMES = FEATURE_NAMES  # type: ignore[assignment]
            print(f"  fold done: {len(top1['A'])} problems so far", flush=True)
        a = top1["A"]
        keys = sorted(a)
        problems = {k: Problem.from_key(k) for k in keys}
        half = [k for k in keys if (problems[k].n % 16 == 0) != (problems[k].k % 16 == 0)]
        means = ", ".join(f"{arm} {np.exp(np.mean(np.log([t[k] for k in keys]))):.4f}" for arm, t in top1.items())
        print(f"fold seed {seed}: top-1 {means}")
        for arm in widened:
            b = top1[arm]
            print(f"  {arm} over A, all: {paired(b, a, keys)}")
            for layout in ("nn", "nt"):
                chosen = [k for k in keys if problems[k].layout.value == layout]
                print(f"  {arm} over A, {layout}: {paired(b, a, chosen)}")
                print(f"  {arm} over A, {layout} half-aligned: {paired(b, a, [k for k in half if k in chosen])}")
            for dtype in sorted({p.dtype.value for p in problems.values()}):
                print(f"  {arm} over A, {dtype}: {paired(b, a, [k for k in keys if problems[k].dtype.value == dtype])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
