"""Compare CostModel settings by grouped cross-validation over the training problems (never held-out).

    .venv/bin/python benchmarks/train_quality.py --device-class h200 --repeats 2 \\
        --setting '{}' --setting '{"hopeless_weight": 0.3}' --setting '{"target": "log_time_us"}'

Each setting is a JSON object of CostModel parameters over the defaults. For each repeat, the
training problems are split into 5 shuffled GroupKFold folds (a problem's rows in one fold only);
each fold is ranked by a model fitted on the others. Reported per setting: the geometric mean and
worst of top-1 and top-5 (against the best of each problem's *measured sample*: training problems
are measured on ~35% of their candidates, so these figures compare settings and are not the
held-out figures), the log-RMSE of predicted time, and seconds per fit. The held-out problems are
not read at all, so that choosing settings here cannot leak them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, grouped_cross_validation, split_by_role


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="datasets/measurements")
    parser.add_argument("--device-class", default="h200")
    parser.add_argument("--setting", action="append", default=None, help="JSON object of CostModel parameters")
    parser.add_argument("--repeats", type=int, default=1, help="shuffled GroupKFold repeats (seeds 0..R-1)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=None)
    args = parser.parse_args(argv)

    device = load_device(args.device_class)
    train, _ = split_by_role(load_measurements(args.dataset, args.device_class))
    X = build_features(train, device)
    print(f"{len(train):,} rows of {train['problem_key'].nunique()} training problems", file=sys.stderr)
    header = f"{'top1 geo':>8} {'worst':>6} {'top5 geo':>8} {'worst':>6} {'logRMSE':>7} {'s/fit':>6}  setting"
    print(header)
    for text in args.setting or ["{}"]:
        params = {**json.loads(text), **({"n_jobs": args.n_jobs} if args.n_jobs else {})}
        top1, top5, worst1, worst5, rmse = [], [], [], [], []
        started = time.perf_counter()
        for seed in range(args.repeats):
            evaluation = grouped_cross_validation(CostModel(**params), train, X, folds=args.folds, seed=seed)
            top1 += [r.top1 for r in evaluation.problems]
            top5 += [r.top5 for r in evaluation.problems]
            s = evaluation.summary()
            worst1.append(s["top1_worst"])
            worst5.append(s["top5_worst"])
            rmse.append(evaluation.log_rmse)
        per_fit = (time.perf_counter() - started) / (args.repeats * args.folds)
        print(
            f"{np.exp(np.mean(np.log(top1))):>8.3f} {np.median(worst1):>6.3f} {np.exp(np.mean(np.log(top5))):>8.3f}"
            f" {np.median(worst5):>6.3f} {np.mean(rmse):>7.3f} {per_fit:>6.1f}  {text}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
