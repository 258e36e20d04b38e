"""Experiment (thirty-third session, not part of the product): the same problems timed on two H200 leases.

The session's third device call started on a fresh machine before the second call's archive had been unpacked
into the tree it sent, so it timed again the first 86 problems the second call had timed (run r32lt, the same plan,
the same 25% sample of each problem's candidates), ten minutes later on another lease. Its archive is kept apart
from the dataset (`benchmarks/results/2026-12-03-s33/call3/measurements-repeat.tgz`); this compares the two:

- the rows' timings where both calls timed the configuration ok (ratio, and |ln ratio| quantiles);
- per problem, whether both calls measured the same best configuration, and the second call's speed of the first
  call's best (its best time / its time of the first call's best): how much a re-measurement on another machine
  could take from an answer that is "the measured best".

    .venv/bin/python benchmarks/experiments/cross_machine_repeat.py [--archive A] [--dataset D] [--run r32lt]
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]


def compare(first: pd.DataFrame, second: pd.DataFrame) -> dict[str, float]:
    """The figures above for two timings of the same problems (rows keyed by problem_key and config_id)."""
    both = first.merge(second, on=["problem_key", "config_id"], suffixes=("_1", "_2"))
    ok = both[(both.status_1 == "ok") & (both.status_2 == "ok")]
    ratio = np.log(ok.time_us_2.to_numpy() / ok.time_us_1.to_numpy())
    same, speed = 0, []
    for _, rows in ok.groupby("problem_key"):
        best_1 = rows.config_id.to_numpy()[rows.time_us_1.to_numpy().argmin()]
        best_2 = rows.config_id.to_numpy()[rows.time_us_2.to_numpy().argmin()]
        same += best_1 == best_2
        speed.append(rows.time_us_2.min() / rows.loc[rows.config_id == best_1, "time_us_2"].iloc[0])
    speed_arr = np.array(speed)
    return {
        "problems": float(len(speed_arr)),
        "rows_both_timed": float(len(both)),
        "status_agree": float((both.status_1 == both.status_2).mean()),
        "ok_rows_both": float(len(ok)),
        "median_ratio": float(np.exp(np.median(ratio))),
        "abs_log_ratio_p50": float(np.median(np.abs(ratio))),
        "abs_log_ratio_p90": float(np.quantile(np.abs(ratio), 0.9)),
        "abs_log_ratio_p99": float(np.quantile(np.abs(ratio), 0.99)),
        "same_best": float(same),
        "speed_of_first_best_mean": float(speed_arr.mean()),
        "speed_of_first_best_min": float(speed_arr.min()),
        "speed_of_first_best_below_0.97": float((speed_arr < 0.97).sum()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--archive", default=str(REPO / "benchmarks/results/2026-12-03-s33/call3/measurements-repeat.tgz")
    )
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--run", default="r32lt")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(args.archive) as tar:
            tar.extractall(tmp, filter="data")
        second = pd.concat(pd.read_parquet(p) for p in sorted(Path(tmp).rglob("*.parquet")))
    keys = set(second.problem_key)
    first = pd.concat(pd.read_parquet(p) for p in sorted(Path(args.dataset).rglob(f"{args.run}.parquet")))
    first = first[first.problem_key.isin(keys)]
    if first.problem_key.nunique() != len(keys):
        print(
            f"error: the dataset's run {args.run} holds {first.problem_key.nunique()}"
            f" of the archive's {len(keys)} problems",
            file=sys.stderr,
        )
        return 1
    print(
        f"first: {first.timestamp.min():%H:%M}-{first.timestamp.max():%H:%M} UTC; "
        f"second: {second.timestamp.min():%H:%M}-{second.timestamp.max():%H:%M} UTC"
    )
    for name, value in compare(first, second).items():
        print(f"{name:32s} {value:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
