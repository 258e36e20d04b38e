"""Experiment (sixty-fifth session, not part of the product): how good is a model small enough to score exhaustively?

Issue 5's agreement bar asks the fast path to choose what scoring every candidate with the full model chooses on 99%
of held-out problems. The shipped predictor scores a shortlist with the full model (300 trees of up to 768 leaves,
~3 µs a candidate on the compiled path, BENCHMARKS §5) and agrees on ~80%: the full model's best changes under tiny
changes of shape, and scoring every candidate (300-6,000 a problem) takes milliseconds. One redesign the planners were
offered is a model so small that scoring every candidate *is* the fast path: agreement is then 100% by construction,
and the question is what such a model loses in speed of the answers. This measures it:

* each arm is a ``CostModel`` with the shipped settings but fewer, shallower trees (depth-wise, no leaf limit) and a
  larger learning rate, fitted on every H200 training problem (the shipped dataset), and judged on the held-out
  problems over every candidate each timed (``evaluate_predictions``, as ``tilecost train`` reports top-1);
* the reference is the shipped artifact's booster, judged the same way (its held-out top-1 over every candidate);
* the cost of scoring: XGBoost's ``inplace_predict`` on one thread over the same 20,000 held-out candidate rows, the
  ranking trees only (the level trees, constant within a problem, left out), µs a row. The predictor's compiled walk
  is not XGBoost's, so only the *ratio* to the shipped booster's figure is carried over, onto BENCHMARKS §5b's
  breakdown of a compiled query (113 µs for 17.6 rows: the tree walk ~50 µs, the mask and features ~5, the rest
  ~57 µs a query): ``est. query`` is 57 µs + the median held-out problem's candidates x (0.28 µs of features +
  2.84 µs of walk x the ratio). An estimate from those figures, not a measurement of the predictor.

    .venv/bin/python benchmarks/experiments/small_model_exhaustive.py [--arms 25x6,50x6,100x6,50x8]
    (~45 s to read, build features and judge the shipped model, then ~0.5-3 min an arm on this 2-core machine)

An arm ``TxD`` is T trees of depth D (learning rate ``--eta``, default 0.3).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# BENCHMARKS §5b's breakdown of one compiled query with the shipped model (17.6 candidates, 113 µs): the tree walk
# ~50 µs, the mask and features ~5 µs, everything else ~57 µs a query.
WALK_US_PER_CANDIDATE = 50 / 17.6
FEATURES_US_PER_CANDIDATE = 5 / 17.6
QUERY_US = 113 - 56


def _arms(text: str) -> list[tuple[int, int]]:
    out = []
    for item in text.split(","):
        trees, _, depth = item.strip().partition("x")
        if not (trees.isdigit() and depth.isdigit() and int(trees) > 0 and int(depth) > 0):
            raise argparse.ArgumentTypeError(f"arm {item!r}: write TREESxDEPTH, e.g. 50x6")
        out.append((int(trees), int(depth)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--arms", type=_arms, default=_arms("25x6,50x6,100x6,50x8"))
    parser.add_argument("--eta", type=float, default=0.3, help="the small arms' learning rate")
    parser.add_argument("--timing-rows", type=int, default=20_000)
    args = parser.parse_args()

    from tilecost.device import load_device
    from tilecost.train.dataset import load_measurements
    from tilecost.train.evaluate import evaluate_predictions, geomean
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.model import CostModel
    from tilecost.train.pipeline import build_features, candidate_rows, split_by_role

    started = time.perf_counter()
    device = load_device("h200")
    train, held = split_by_role(load_measurements(args.dataset, "h200"))
    held = candidate_rows(held)
    held = held[np.isfinite(held["time_us"]) & (held["time_us"] > 0)].reset_index(drop=True)
    X_train, X_held = build_features(train, device), build_features(held, device)
    times = train["time_us"].to_numpy(dtype=np.float64)
    keys = train["problem_key"].to_numpy().astype(object)
    hopeless = (train["status"] == "hopeless").to_numpy()
    rng = np.random.default_rng(0)
    timing = X_held[rng.choice(len(X_held), size=min(args.timing_rows, len(X_held)), replace=False)]
    print(f"{train['problem_key'].nunique()} training problems ({len(train):,} rows), {held['problem_key'].nunique()} "
          f"held-out ({len(held):,} candidate rows); {time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
    per_problem = held.groupby("problem_key").size().to_numpy()
    median_candidates = float(np.median(per_problem))
    print(f"candidates timed per held-out problem: median {median_candidates:.0f}, "
          f"90th percentile {np.percentile(per_problem, 90):.0f}, largest {per_problem.max()}", flush=True)  # fmt: skip

    def us_per_row(model: CostModel, trees: int) -> float:
        booster = model.booster_.copy()
        booster.set_param({"nthread": 1})
        booster.inplace_predict(timing[:100], iteration_range=(0, trees))  # warm-up
        best = np.inf
        for _ in range(3):
            t0 = time.perf_counter()
            booster.inplace_predict(timing, iteration_range=(0, trees))
            best = min(best, time.perf_counter() - t0)
        return best / len(timing) * 1e6

    def report(name: str, model: CostModel, trees: int, reference_us: float | None) -> float:
        evaluation = evaluate_predictions(held, model.predict(X_held), device)
        top1 = np.array([r.top1 for r in evaluation.problems])
        top5 = np.array([r.top5 for r in evaluation.problems])
        cost = us_per_row(model, trees)
        per_candidate = FEATURES_US_PER_CANDIDATE + WALK_US_PER_CANDIDATE * cost / (reference_us or cost)
        estimate = QUERY_US + median_candidates * per_candidate
        below = int((top1 < 0.90).sum())
        print(f"{name:22s} top-1 {geomean(top1):.3f}  worst {top1.min():.3f}  below 0.90 {below:3d}  "
              f"top-5 {geomean(top5):.3f}  xgboost {cost:.3f} µs/row  est. query {estimate:,.0f} µs  "
              f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
        return cost

    shipped, metadata = load_artifact_model(args.artifact)
    shipped_trees = shipped.booster_.num_boosted_rounds() - int(metadata.level_trees)
    reference = report(f"shipped ({shipped_trees} trees)", shipped, shipped_trees, None)
    for trees, depth in args.arms:
        model = CostModel(n_estimators=trees, max_depth=depth, max_leaves=0, learning_rate=args.eta,
                          level_estimators=1, n_jobs=2)  # fmt: skip
        model.fit(X_train, times, groups=keys, hopeless=hopeless)
        report(f"{trees} trees, depth {depth}", model, trees, reference)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
