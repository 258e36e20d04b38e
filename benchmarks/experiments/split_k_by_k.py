"""Where split-K wins on the H200, by K: the evidence for ``tilecost.space.SPLIT_K_MIN_K`` (BENCHMARKS §4, twenty-eighth
session).

    .venv/bin/python benchmarks/experiments/split_k_by_k.py [DATASET]

For every problem of the dataset (default ``datasets/measurements``; both roles) with timed (``ok``) rows of both
kinds, the best time with split-K and the best without; per K range, how many problems have both and on how many
split-K is the faster (and by more than 5%), then the split-K wins of lowest K. Rows measured before the rule keep
their split-K configurations, which is what this counts.
"""

from __future__ import annotations

import sys

import pandas as pd
import pyarrow.dataset as ds

RANGES = [(0, 128), (128, 256), (256, 512), (512, 1024), (1024, 2048), (2048, 4096), (4096, None)]


def main(root: str = "datasets/measurements") -> None:
    table = ds.dataset(root, format="parquet", partitioning="hive").to_table(
        columns=["problem_key", "role", "k", "split_k", "time_us"], filter=ds.field("status") == "ok"
    )
    frame = table.to_pandas()
    split = frame["split_k"] > 1
    best = pd.DataFrame({
        "unsplit": frame[~split].groupby("problem_key")["time_us"].min(),
        "split": frame[split].groupby("problem_key")["time_us"].min(),
    }).dropna()  # fmt: skip
    best["k"] = frame.groupby("problem_key")["k"].first()
    best["ratio"] = best["split"] / best["unsplit"]
    print(f"{len(best)} problems with both kinds timed; split-K the faster on {(best.ratio < 1).sum()}")
    for lo, hi in RANGES:
        part = best[(best.k > lo) & ((best.k <= hi) if hi else True)]
        label = f"K in ({lo}, {hi}]" if hi else f"K > {lo}"
        print(
            f"{label:<20} {len(part):>5} problems, split-K faster on {(part.ratio < 1).sum():>4}, by > 5% on "
            f"{(part.ratio < 0.95).sum():>4}; best split-K / best unsplit at least {part.ratio.min():.3f}"
        )
    low = best[best.k <= 256]
    print(f"K <= 256: {len(low)} problems, best split-K / best unsplit {low.ratio.min():.3f}-{low.ratio.max():.3f}")
    print("the split-K wins of lowest K:")
    print(best[best.ratio < 1].sort_values("k").head(8).to_string())


if __name__ == "__main__":
    main(*sys.argv[1:])
