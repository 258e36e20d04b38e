"""How far one run's best configuration holds in another run of the same problem (the labels' own noise).

    .venv/bin/python benchmarks/label_stability.py [--dataset datasets/measurements] [--device-class h200]

Problems measured by two or more sweep runs (re-measured held-out problems, layer shapes that two seeded plans
both drew) give, for each pair of runs and the configs both timed: the best config of the earlier run judged
by the later run's times (later best / later time of earlier best), the same the other way round, and the
Spearman correlation of the common configs' times. These are the ceiling a cost model's top-1 can be held to:
a model that picked exactly one run's best would score this against another run. Pairs with fewer than 20
common configs are left out. `--exclude-run` leaves out runs (e.g. the first run, timed before the current
timer: r28ad8bf50e). Prints one line per pair and the summary; reads the dataset only.
"""

from __future__ import annotations

import argparse
import itertools
import sys

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
from scipy.stats import spearmanr


def pairs(frame: pd.DataFrame, min_common: int = 20) -> pd.DataFrame:
    """One row per (problem, earlier run, later run) with the cross-run top-1 figures."""
    rows = []
    for key, group in frame.groupby("problem_key"):
        runs = group.groupby("run_id")["timestamp"].max().sort_values().index.tolist()
        for old, new in itertools.combinations(runs, 2):
            a = group[group["run_id"] == old].set_index("config_id")["time_us"]
            b = group[group["run_id"] == new].set_index("config_id")["time_us"]
            common = a.index.intersection(b.index)
            if len(common) < min_common:
                continue
            a, b = a[common], b[common]
            rows.append(
                {
                    "problem": key,
                    "old_run": old,
                    "new_run": new,
                    "common": len(common),
                    "old_best_in_new": float(b.min() / b[a.idxmin()]),
                    "new_best_in_old": float(a.min() / a[b.idxmin()]),
                    "spearman": float(spearmanr(a.to_numpy(), b.to_numpy()).statistic),
                }
            )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="datasets/measurements")
    parser.add_argument("--device-class", default="h200")
    parser.add_argument("--exclude-run", action="append", default=[])
    args = parser.parse_args(argv)
    columns = ["run_id", "problem_key", "config_id", "status", "time_us", "timestamp", "device_class"]
    table = ds.dataset(args.dataset, partitioning="hive").to_table(columns=columns)
    frame = table.to_pandas()
    frame = frame[(frame["status"] == "ok") & (frame["device_class"] == args.device_class)]
    frame = frame[~frame["run_id"].isin(args.exclude_run)]
    result = pairs(frame)
    if result.empty:
        print("no problem was measured by two runs with ≥ 20 common configs")
        return 1
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(result.sort_values("old_best_in_new").to_string(index=False, float_format="%.3f"))
    both = np.concatenate([result["old_best_in_new"], result["new_best_in_old"]])
    print(
        f"{len(result)} run pairs over {result['problem'].nunique()} problems: one run's best in the other run, "
        f"geometric mean {np.exp(np.log(both).mean()):.4f}, worst {both.min():.3f}, "
        f"share ≥ 0.98 {np.mean(both >= 0.98):.3f}, share ≥ 0.95 {np.mean(both >= 0.95):.3f}; "
        f"Spearman median {result['spearman'].median():.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
