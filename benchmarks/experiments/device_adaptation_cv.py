"""Experiment (fifty-sixth session, not part of the product): would the H100's measurements make an H100 model?

``device_transfer.py`` judges the shipped H200 model asked for the H100 (``device=h100_sxm``, the H100's spec as
features) at 0.959 of the H100's best over 504 held-out problems (36 answers below 0.90). The H100 rows measured
since the forty-ninth session are held-out problems of the H200's sets, every candidate timed; no H100 training
set exists (COLLECTING.md). This asks what they would be worth as training rows, by grouped 5-fold CV over the
H100's held-out problems (folds by problem, seeded; the H100's training problems, role ``train``, none yet but
planned by ``scripts/h100_train_plan.py``, join every fit set and are never tested, ``--no-train-role`` leaves them
out), each test fold ranked over every candidate it timed (``evaluate_predictions``, the training report's
evaluation) by:

* ``transfer``: the shipped H200 model with the H100's features, no H100 row (the predictor's ``device=`` answer,
  over every candidate instead of its shortlist);
* ``adapted``: the same model continued with residual trees fitted on the fit folds' H100 rows (XGBoost
  ``base_margin`` = the H200 model's output, the product's sample weights, ``--rounds`` trees of depth 6);
* ``h100 only``: a ``CostModel`` with the shipped settings fitted on the fit folds' H100 rows alone;

each also with the fit folds cut to a seeded 25% and 50% of their problems (the learning curve). Figures: the
geometric mean of top-1 (best over the chosen configuration's time), worst and the count below 0.90, over the
test folds' problems pooled.

    .venv/bin/python benchmarks/experiments/device_adaptation_cv.py [--seed 0] [--rounds 200] [--no-h100-only]
    (~10 min on this 2-core machine with the H100-only fits, ~1.5 min without)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

FRACTIONS = (0.25, 0.5, 1.0)


def residual_trees(
    X: np.ndarray,
    time_us: np.ndarray,
    keys: np.ndarray,
    hopeless: np.ndarray,
    base: np.ndarray,
    target: str,
    *,
    rounds: int,
    eta: float,
    depth: int = 6,
    seed: int = 0,
    center: bool = False,
) -> object:
    """A model continued on these rows: ``rounds`` XGBoost trees whose ``base_margin`` is its output ``base``,
    with the product's sample weights (``CostModel``'s defaults) and, with ``center``, each problem's weighted mean
    residual taken out, so the trees learn only the order within a problem. Score with :func:`continued`."""
    import xgboost as xgb

    from tilecost.features import FEATURE_NAMES
    from tilecost.train.model import CostModel, to_target

    _, inverse = np.unique(keys, return_inverse=True)
    weight = CostModel(n_jobs=2).sample_weight(time_us, inverse, hopeless)
    label = to_target(time_us, X, target)
    if center:
        label = (
            label
            - (np.bincount(inverse, weights=weight * (label - base)) / np.bincount(inverse, weights=weight))[inverse]
        )
    dfit = xgb.DMatrix(X, label, weight=weight, base_margin=base, feature_names=list(FEATURE_NAMES))
    params = {"objective": "reg:squarederror", "tree_method": "hist", "max_depth": depth, "eta": eta, "seed": seed,
              "nthread": 2}  # fmt: skip
    return xgb.train(params, dfit, num_boost_round=rounds)


def continued(residual: object, X: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The continued model's target for rows whose base model output is ``base``."""
    import xgboost as xgb

    from tilecost.features import FEATURE_NAMES

    return residual.predict(xgb.DMatrix(X, base_margin=base, feature_names=list(FEATURE_NAMES)))  # type: ignore[attr-defined]


def print_groups(top1: dict[str, dict[str, float]], names: list[str], title: str) -> None:
    """Each answer's top-1 geometric mean per dtype and layout (the problem key's tail), over the first's problems."""
    from tilecost.train.evaluate import geomean

    groups_of: dict[str, list[str]] = {}
    for key in top1[names[0]]:
        groups_of.setdefault(key.split("-", 1)[1], []).append(key)
    print(f"\n{title} (top-1 geomean): " + ", ".join(names))
    for group, keys in sorted(groups_of.items()):
        cells = "  ".join(f"{geomean([top1[n][k] for k in keys]):.3f}" for n in names)
        print(f"{group:12s} {len(keys):3d}  {cells}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--other", default="h100_sxm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=200, help="residual trees of the adapted model")
    parser.add_argument("--eta", type=float, default=0.1, help="their learning rate")
    parser.add_argument("--depth", type=int, default=6, help="their depth")
    parser.add_argument(
        "--center",
        action="store_true",
        help="fit each problem's residual less its weighted mean (only the order within a problem)",
    )
    parser.add_argument("--no-train-role", action="store_true", help="leave the other class's training problems out")
    parser.add_argument("--no-h100-only", action="store_true", help="skip the H100-only fits (the slow part)")
    args = parser.parse_args()

    from sklearn.model_selection import GroupKFold

    from tilecost.device import load_device
    from tilecost.train.dataset import load_measurements
    from tilecost.train.evaluate import evaluate_predictions, geomean
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.model import CostModel, from_target
    from tilecost.train.pipeline import build_features, candidate_rows

    started = time.perf_counter()
    device = load_device(args.other)
    rows = candidate_rows(load_measurements(args.dataset, args.other).frame)
    if args.no_train_role:
        rows = rows[rows["role"] == "heldout"]
    rows = rows[np.isfinite(rows["time_us"]) & (rows["time_us"] > 0)].reset_index(drop=True)
    X = build_features(rows, device)
    time_us = rows["time_us"].to_numpy(dtype=np.float64)
    groups = rows["problem_key"].to_numpy()
    hopeless = (rows["status"] == "hopeless").to_numpy()
    problems = np.unique(groups[(rows["role"] == "heldout").to_numpy()])  # the folds: tested, and fitted on
    trained = np.unique(groups[(rows["role"] == "train").to_numpy()])  # only ever fitted on
    home, _ = load_artifact_model(args.artifact)
    base = home.predict_target(X)  # the H200 model's output on the H100's features
    print(f"{len(problems)} held-out and {len(trained)} training problems measured on {args.other}, "
          f"{len(rows)} candidate rows; "
          f"grouped 5-fold CV seed {args.seed}, fit folds cut to {', '.join(f'{f:.0%}' for f in FRACTIONS)} "
          f"of their problems; {args.rounds} residual trees, depth {args.depth}, eta {args.eta}"
          f"{', centered per problem' if args.center else ''}", flush=True)  # fmt: skip

    top1: dict[str, dict[str, float]] = {}

    def score(name: str, test: np.ndarray, predicted_us: np.ndarray) -> None:
        evaluation = evaluate_predictions(rows.iloc[test].reset_index(drop=True), predicted_us, device)
        top1.setdefault(name, {}).update({r.problem.key: r.top1 for r in evaluation.problems})

    rng = np.random.default_rng(args.seed)
    folds = GroupKFold(5, shuffle=True, random_state=args.seed).split(problems, groups=problems)
    for fold, (fit_p, _) in enumerate(folds):
        tested = set(problems) - set(problems[fit_p])
        test = np.flatnonzero(np.array([g in tested for g in groups]))
        score("transfer", test, home.predict(X[test]))
        order = rng.permutation(np.concatenate([problems[fit_p], trained]))
        for fraction in FRACTIONS:
            chosen = set(order[: max(1, round(fraction * len(order)))])
            fit = np.flatnonzero(np.array([g in chosen for g in groups]))
            residual = residual_trees(X[fit], time_us[fit], groups[fit], hopeless[fit], base[fit], home.target_,
                                      rounds=args.rounds, eta=args.eta, depth=args.depth, seed=args.seed,
                                      center=args.center)  # fmt: skip
            adapted = continued(residual, X[test], base[test])
            score(f"adapted {fraction:.0%}", test, from_target(adapted, X[test], home.target_))
            if not args.no_h100_only:
                own = CostModel(n_jobs=2, seed=args.seed).fit(
                    X[fit], time_us[fit], groups=groups[fit], hopeless=hopeless[fit]
                )
                score(f"h100 only {fraction:.0%}", test, own.predict(X[test]))
        print(f"fold {fold}: {len(order)} fit problems, {len(problems) - len(fit_p)} test; "
              f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip

    print(f"\n{'answer':18s} problems  top-1 geomean  worst  below 0.90")
    for name, per_problem in top1.items():
        values = np.array(list(per_problem.values()))
        below = int((values < 0.90).sum())
        print(f"{name:18s} {len(values):8d}  {geomean(values):13.3f}  {values.min():.3f}  {below:10d}")
    names = [n for n in top1 if n in ("transfer", "adapted 100%", "h100 only 100%")]
    print_groups(top1, names, "per dtype and layout")
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
