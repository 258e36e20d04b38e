"""Experiment (fifty-ninth session, not part of the product): one model fitted on both devices' training rows.

The H100's first training rows (the `rht` plans, role ``train``, each problem a seeded 25% sample of its
candidates, docs/COLLECTING.md) are apart from its held-out problems (role ``heldout``, every candidate timed), so
each answer below is judged on problems none of the fits saw, without cross-validation. Ranked over every
candidate each held-out problem timed (``evaluate_predictions``, the training report's evaluation):

* ``transfer``: the shipped H200 model with the other device's spec as features, no H100 row (the predictor's
  ``device=`` answer, over every candidate instead of its shortlist);
* ``adapted``: that model continued with ``--rounds`` residual trees fitted on the H100's training rows, each
  problem's weighted mean residual taken out (as ``device_adaptation_cv.py --center``);
* ``h100 only``: a ``CostModel`` with the shipped settings fitted on the H100's training rows alone;
* ``joint xR``: a ``CostModel`` with the shipped settings fitted on the H200's training rows (H200 features) and
  the H100's (H100 features) together, each H100 problem counted ``R`` times (``--repeats``; the model weighs every
  problem alike, so this is the H100 problems' share of the weight). Up to the seventy-fourth session each H100
  problem's rows were given ``R`` times under ``R`` problem keys (x8: 16.8M rows, 17.7 GB peak); since the
  seventy-fifth they are given once with ``CostModel.fit``'s ``problem_weight`` ``R``, the same fit without the
  copies;
  ``joint x0`` is the same fit on the H200's rows alone, a refit of the shipped model: the baseline the joint fits
  differ from by the H100's rows alone (a refit's seed and bagging noise included).

The joint fits are also judged on the H200's held-out problems, against the shipped model's own figure, so that a
fit which helps the H100 and costs the H200 shows it. Figures: geometric mean of top-1, worst, count below 0.90.

    .venv/bin/python benchmarks/experiments/joint_fit_heldout.py [--repeats 1,8] [--rounds 50]
    (~4.5 min per joint fit on this 2-core machine; 707 s and 10.3 GB peak for --repeats 1,8, seventy-fifth session)
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
from device_adaptation_cv import continued, print_groups, residual_trees  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--home", default="h200")
    parser.add_argument("--other", default="h100_sxm")
    parser.add_argument("--repeats", default="1,8", help="comma-separated R of the joint fits ('' for none)")
    parser.add_argument("--rounds", type=int, default=50, help="residual trees of the adapted model")
    parser.add_argument("--eta", type=float, default=0.05, help="their learning rate")
    args = parser.parse_args()
    repeats = [int(r) for r in args.repeats.split(",") if r.strip()]
    if any(r < 0 for r in repeats):
        parser.error(f"--repeats {args.repeats!r}: each R must be an integer >= 0")

    import pandas as pd

    from tilecost.device import load_device
    from tilecost.train.dataset import load_measurements
    from tilecost.train.evaluate import evaluate_predictions, geomean
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.model import CostModel, from_target
    from tilecost.train.pipeline import build_features, candidate_rows, split_by_role

    started = time.perf_counter()

    home_device, other_device = load_device(args.home), load_device(args.other)
    home_train, home_held = split_by_role(load_measurements(args.dataset, args.home))
    # load_measurements keeps only timed rows, each with a positive finite time: candidate_rows is all they need
    other_train, other_held = (candidate_rows(f) for f in split_by_role(load_measurements(args.dataset, args.other)))
    home_held = candidate_rows(home_held)
    X_home_train = build_features(home_train, home_device)
    X_other_train = build_features(other_train, other_device)
    X_other_held = build_features(other_held, other_device)
    X_home_held = build_features(home_held, home_device)
    print(f"{args.home}: {home_train['problem_key'].nunique()} training problems ({len(home_train):,} rows), "
          f"{home_held['problem_key'].nunique()} held-out; {args.other}: {other_train['problem_key'].nunique()} "
          f"training ({len(other_train):,} rows), {other_held['problem_key'].nunique()} held-out; "
          f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip

    results: dict[str, dict[str, float]] = {}

    def score(name: str, rows: pd.DataFrame, predicted_us: np.ndarray, device: object) -> None:
        evaluation = evaluate_predictions(rows, predicted_us, device)
        results[name] = {r.problem.key: r.top1 for r in evaluation.problems}
        values = np.array(list(results[name].values()))
        below = int((values < 0.90).sum())
        print(f"{name:34s} {len(values):4d} problems  top-1 {geomean(values):.3f}  worst {values.min():.3f}  "
              f"below 0.90: {below:3d}  ({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip

    shipped, _ = load_artifact_model(args.artifact)
    held_base = shipped.predict_target(X_other_held)  # the transfer's target, and the adapted model's margin
    score(f"transfer on {args.other}", other_held, from_target(held_base, X_other_held, shipped.target_), other_device)
    score(f"shipped on {args.home}", home_held, shipped.predict(X_home_held), home_device)

    time_us = other_train["time_us"].to_numpy(dtype=np.float64)
    other_keys = other_train["problem_key"].to_numpy().astype(object)
    other_hopeless = (other_train["status"] == "hopeless").to_numpy()

    # adapted: residual trees on the other device's training rows, centred per problem
    residual = residual_trees(X_other_train, time_us, other_keys, other_hopeless, shipped.predict_target(X_other_train),
                              shipped.target_, rounds=args.rounds, eta=args.eta, center=True)  # fmt: skip
    adapted = continued(residual, X_other_held, held_base)
    score(f"adapted on {args.other}", other_held, from_target(adapted, X_other_held, shipped.target_), other_device)

    own = CostModel(n_jobs=2).fit(X_other_train, time_us, groups=other_keys, hopeless=other_hopeless)
    score(f"{args.other} only on {args.other}", other_held, own.predict(X_other_held), other_device)

    home_times = home_train["time_us"].to_numpy(dtype=np.float64)
    home_keys = home_train["problem_key"].to_numpy().astype(object)
    home_hopeless = (home_train["status"] == "hopeless").to_numpy()
    if any(repeats):  # both devices' rows once; the other device's problems under keys of their own
        X_both = np.vstack([X_home_train, X_other_train])
        both_times = np.concatenate([home_times, time_us])
        both_groups = np.concatenate([home_keys, other_keys + f"@{args.other}"])
        both_hopeless = np.concatenate([home_hopeless, other_hopeless])
    for r in repeats:  # each of the other device's problems counted r times (r = 0: the home rows alone)
        if r == 0:
            joint = CostModel(n_jobs=2).fit(X_home_train, home_times, groups=home_keys, hopeless=home_hopeless)
        else:
            weight = np.concatenate([np.ones(len(home_times)), np.full(len(time_us), float(r))])
            joint = CostModel(n_jobs=2).fit(X_both, both_times, groups=both_groups, hopeless=both_hopeless,
                                            problem_weight=weight)  # fmt: skip
        score(f"joint x{r} on {args.other}", other_held, joint.predict(X_other_held), other_device)
        score(f"joint x{r} on {args.home}", home_held, joint.predict(X_home_held), home_device)

    names = [n for n in results if n.endswith(args.other)]
    by_answer = {n.rsplit(" on ", 1)[0]: results[n] for n in names}
    print_groups(by_answer, list(by_answer), f"per dtype and layout on {args.other}")
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
