"""Experiment (sixty-eighth session, not part of the product): one model per dtype, or per dtype and layout.

The eighth session tried this on 397 training problems with grouped CV (``per_group_models_cv.py``): splitting cost
the sparse groups more than it bought the dense one. The H200 now has ~9,700 training problems, every dtype and
layout with 909-2,061, so the question is asked again, on the held-out problems (role ``heldout``, every
candidate timed), which none of the fits saw. Each arm ranks every candidate each held-out problem timed
(``evaluate_predictions``, the training report's evaluation):

* ``shipped``: the shipped artifact's booster;
* ``refit``: a ``CostModel`` with the shipped settings on all training rows (the shipped model's fit again: what
  a refit differs by from seed and bagging alone);
* ``per dtype``: one such model per dtype, each on its dtype's training rows, each held-out problem ranked by its own
  dtype's model;
* ``per dtype x layout``: the same per (dtype, layout).

Each arm's top-1 geometric mean, worst and count below 0.90, then its paired gain over ``shipped`` and over
``refit`` (``Evaluation.paired_top1_gain``, 90% paired bootstrap), and the top-1 per dtype and layout. An arm that
beats ``refit`` beyond its interval is a lead for an artifact holding one booster per group (its latency unchanged:
a query walks one group's trees).

    .venv/bin/python benchmarks/experiments/per_group_models_heldout.py [--arms refit,dtype,dtype-layout]
    (~4 min per arm on this 2-core machine: each arm fits all training rows once in all)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_adaptation_cv import print_groups  # noqa: E402

ARMS = {"refit": (), "dtype": ("dtype",), "dtype-layout": ("dtype", "layout")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--device-class", default="h200")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    args = parser.parse_args()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        parser.error(f"--arms {args.arms!r}: each must be one of {', '.join(ARMS)}")

    from tilecost.device import load_device
    from tilecost.train.dataset import load_measurements
    from tilecost.train.evaluate import Evaluation, evaluate_predictions, geomean
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.model import CostModel
    from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role

    started = time.perf_counter()
    device = load_device(args.device_class)
    train, held = split_by_role(load_measurements(args.dataset, args.device_class))
    held = candidate_rows(held)  # load_measurements keeps only timed rows, each with a positive finite time
    X_train, X_held = build_features(train, device), build_features(held, device)
    print(f"{args.device_class}: {train['problem_key'].nunique()} training problems ({len(train):,} rows), "
          f"{held['problem_key'].nunique()} held-out ({len(held):,} rows); {time.perf_counter() - started:.0f} s",
          flush=True)  # fmt: skip

    evaluations: dict[str, Evaluation] = {}

    def score(name: str, predicted_us: np.ndarray) -> None:
        evaluation = evaluate_predictions(held, predicted_us, device)
        evaluations[name] = evaluation
        values = np.array([r.top1 for r in evaluation.problems])
        print(f"{name:20s} {len(values):4d} problems  top-1 {geomean(values):.4f}  worst {values.min():.3f}  "
              f"below 0.90: {int((values < 0.90).sum()):3d}  ({time.perf_counter() - started:.0f} s)",
              flush=True)  # fmt: skip

    shipped, _ = load_artifact_model(args.artifact)
    score("shipped", shipped.predict(X_held))

    def fit(rows: np.ndarray) -> CostModel:  # the shipped settings on these training rows, as `tilecost train` fits
        return fit_rows(CostModel(n_jobs=2), train.iloc[rows], device, X=X_train[rows])

    for arm in arms:
        columns = list(ARMS[arm])
        predicted = np.full(len(held), np.nan)
        if not columns:
            predicted = fit(np.arange(len(train))).predict(X_held)
        else:
            held_groups = held.groupby(columns, sort=True).indices
            for group, train_rows in train.groupby(columns, sort=True).indices.items():
                if group in held_groups:
                    rows = held_groups[group]
                    predicted[rows] = fit(np.asarray(train_rows)).predict(X_held[rows])
            missing = held.loc[np.isnan(predicted), columns].drop_duplicates()
            if len(missing):
                raise SystemExit(f"{arm}: held-out groups with no training rows: {missing.to_dict('records')}")
        score(arm, predicted)

    print("\npaired top-1 gain (90% paired bootstrap over the held-out problems):")
    bases = [b for b in ("shipped", "refit") if b in evaluations]
    for name, evaluation in evaluations.items():
        cells = []
        for base in bases:
            if base != name:
                gain, low, high = evaluation.paired_top1_gain(evaluations[base])
                cells.append(f"over {base} x{gain:.4f} ({low:.4f}-{high:.4f})")
        if cells:
            print(f"  {name:20s} " + "; ".join(cells))
    top1 = {n: {r.problem.key: r.top1 for r in e.problems} for n, e in evaluations.items()}
    print_groups(top1, list(top1), "per dtype and layout")
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
