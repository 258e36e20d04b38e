"""Should training set the K-ragged correctness probe's rows aside? Grouped CV with and without them.

    .venv/bin/python benchmarks/experiments/probe_rows_cv.py [--repeats 1] [--runs r24kc,r24kc2]

The probe (runs r24kc, r24kc2, twenty-fourth session) timed one narrow family (pointer BLOCK_M 32 × BLOCK_K 128)
on 13 bf16/fp16 nt problems, some of them also measured by other runs. A refit on all rows picked that family for one
held-out problem at 0.675 of its best (0.828 without the probe's rows; BENCHMARKS §5). Here the training problems
that the probe's runs did not touch are split into the same shuffled GroupKFold folds for both arms; each fold is
ranked by a model fitted on the other folds and the probe's problems' rows of other runs (arm ``without``), or on
those plus every row of the probe's runs (arm ``with``). Both arms are judged on the same problems, against each
one's best measured (a sample, as ``benchmarks/train_quality.py``): geometric mean and worst top-1 and top-5, the
problems below 0.90 and how many of the judged problems' answers fall in the probe's family.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.evaluate import evaluate_predictions
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, split_by_role


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="datasets/measurements")
    parser.add_argument("--runs", default="r24kc,r24kc2")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    from sklearn.model_selection import GroupKFold

    device = load_device("h200")
    train, _ = split_by_role(load_measurements(args.dataset, "h200"))
    probe_runs = set(args.runs.split(","))
    in_probe = train["run_id"].isin(probe_runs).to_numpy()
    probe_problems = set(train.loc[in_probe, "problem_key"])
    judged = ~train["problem_key"].isin(probe_problems).to_numpy()
    X = build_features(train, device)
    groups = train["problem_key"].to_numpy()
    times = train["time_us"].to_numpy()
    hopeless = (train["status"] == "hopeless").to_numpy()
    print(f"{len(train):,} training rows; the probe: {in_probe.sum():,} rows of {len(probe_problems)} problems, "
          f"whose other runs' rows ({(~judged & ~in_probe).sum():,}) train both arms", flush=True)  # fmt: skip
    judged_index = np.flatnonzero(judged)
    others = np.flatnonzero(~judged & ~in_probe)  # the probe problems' rows of other runs: in both arms
    probe = np.flatnonzero(in_probe)
    for seed in range(args.repeats):
        predicted = {"without": np.empty(len(train)), "with": np.empty(len(train))}
        splitter = GroupKFold(n_splits=args.folds, shuffle=True, random_state=seed)
        for fold, (fit_local, test_local) in enumerate(splitter.split(judged_index, groups=groups[judged_index])):
            fit, test = judged_index[fit_local], judged_index[test_local]
            arms = (("without", np.concatenate([fit, others])), ("with", np.concatenate([fit, others, probe])))
            for arm, rows in arms:
                started = time.perf_counter()
                model = CostModel().fit(X[rows], times[rows], groups=groups[rows], hopeless=hopeless[rows])
                predicted[arm][test] = model.predict(X[test])
                print(f"seed {seed} fold {fold} {arm}: fit {time.perf_counter() - started:.0f} s", flush=True)
        for arm, values in predicted.items():
            frame = train.iloc[judged_index].assign(_predicted=values[judged_index])
            rows = candidate_rows(frame)
            ev = evaluate_predictions(rows, rows["_predicted"].to_numpy(), device)
            top1 = np.array([r.top1 for r in ev.problems])
            top5 = np.array([r.top5 for r in ev.problems])
            family = sum(r.model_config.startswith("ptr-32x") and r.model_config.split("-")[1].endswith("x128")
                         for r in ev.problems)  # fmt: skip
            print(f"seed {seed} {arm:>7}: {len(top1)} problems, top-1 {np.exp(np.log(top1).mean()):.4f} "
                  f"(worst {top1.min():.3f}, below 0.90: {(top1 < 0.9).sum()}), top-5 {np.exp(np.log(top5).mean()):.4f}"
                  f" (worst {top5.min():.3f}); answers in the probe's family: {family}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
