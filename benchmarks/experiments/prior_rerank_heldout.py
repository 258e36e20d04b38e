"""Experiment (forty-eighth session, not part of the product): the held-out check of ``prior_rerank_cv.py``'s re-rank.

``prior_rerank_cv.py`` found, on grouped 5-fold CV over the training problems, that re-ranking the model's top ``k``
by ln(predicted time) + λ · prior (a configuration's median centred log time over the training problems of its dtype
and layout) helps a little at λ 0.1, k 3. Here the shipped artifact's model ranks every candidate of every held-out
problem (as ``tilecost evaluate`` does), the prior comes from every training problem, and each arm's choice is judged
by the held-out evaluation (measured best over the chosen configuration's time, over the configurations the space
offers), against the model alone (λ 0): geometric mean, worst, answers below 0.90 and the paired ratio with its 90%
bootstrap interval, overall and per dtype. The heads are taken over every timed row, so a configuration the space no
longer offers can take a place in one (on 1 of the 660 held-out problems in the forty-eighth session) and the
evaluation then chooses from one fewer.

    .venv/bin/python benchmarks/experiments/prior_rerank_heldout.py [--artifact DIR] [--dataset DIR]   (~3 min)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

ARMS = ((0.1, 3), (0.1, 5), (0.25, 3))
OUTSIDE = 1e9  # a row outside the re-ranked head: predicted this many times slower, never chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    args = parser.parse_args()

    from training_rows import centred_log_time, config_keys

    from tilecost.device import load_device
    from tilecost.train.dataset import load_measurements
    from tilecost.train.evaluate import evaluate_predictions
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.pipeline import build_features, candidate_rows, split_by_role

    device = load_device("h200")
    train, heldout = split_by_role(load_measurements(args.dataset, "h200"))
    train = candidate_rows(train)
    medians = pd.Series(centred_log_time(train)).groupby(config_keys(train)).median()
    rows = candidate_rows(heldout)
    predicted = load_artifact_model(args.artifact)[0].predict(build_features(rows, device))
    prior = config_keys(rows).map(medians).to_numpy(dtype=np.float64, copy=True)
    untimed = np.isnan(prior)
    prior[untimed] = 0.0
    print(f"{rows['problem_key'].nunique()} held-out problems, {len(rows):,} rows; {int(untimed.sum()):,} rows' "
          "configurations timed by no training problem (prior 0)")  # fmt: skip
    base = evaluate_predictions(rows, predicted, device)
    per_problem = rows.groupby("problem_key", sort=True).indices
    print("lambda top-k | top-1 geomean / worst / below 0.90 | paired ratio to the model alone (90%) | per dtype")
    print(f"  0.00     -- | {base.summary()['top1_geomean']:.4f} / {base.summary()['top1_worst']:.3f} / "
          f"{sum(p.top1 < 0.9 for p in base.problems):3d}")  # fmt: skip
    for lam, top in ARMS:
        adjusted = np.full(len(rows), OUTSIDE) * predicted
        for index in per_problem.values():
            head = index[np.argsort(predicted[index], kind="stable")[:top]]
            adjusted[head] = predicted[head] * np.exp(lam * prior[head])
        arm = evaluate_predictions(rows, adjusted, device)
        ratio, low, high = arm.paired_top1_gain(base)
        dtypes = ", ".join(
            f"{label} {arm.summary(slug)['top1_geomean']:.4f}/{base.summary(slug)['top1_geomean']:.4f}"
            for slug, label in base.groups() if slug.startswith("dtype")
        )  # fmt: skip
        below = sum(p.top1 < 0.9 for p in arm.problems)
        print(f"{lam:6.2f} {top:6d} | {arm.summary()['top1_geomean']:.4f} / {arm.summary()['top1_worst']:.3f} / "
              f"{below:3d} | x{ratio:.4f} (x{low:.4f}-x{high:.4f}) | {dtypes}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
