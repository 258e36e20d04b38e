"""How one configuration fares across N, from the dataset, beside the shipped model's view of one problem.

    .venv/bin/python benchmarks/experiments/config_across_n.py [--problem 6672x68x11440-fp32-nn]
        [--prefix tma-128x128x32] [--warps 4]   (~1 min, 1 core)

For every problem of the problem's dtype and layout that timed a configuration whose key begins with ``--prefix``
and has ``--warps`` warps: best time over that configuration's time, summarised by role and by N range. Then the
problem's timed configurations, fastest measured first and ranked by the shipped model (every candidate scored), so
that one sees whether the model's favourite is one the data calls poor elsewhere (the forty-seventh session, BENCHMARKS
§4: the held-out sets' worst answer).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="6672x68x11440-fp32-nn")
    parser.add_argument("--prefix", default="tma-128x128x32")
    parser.add_argument("--warps", type=int, default=4)
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    args = parser.parse_args(argv)

    import pandas as pd

    from tilecost import Predictor, Problem
    from tilecost.train.dataset import load_measurements

    problem = Problem.from_key(args.problem)
    frame = load_measurements(args.dataset, "h200").frame.dropna(subset=["time_us"])
    group = frame[(frame.dtype.astype(str) == problem.dtype.value) & (frame.layout.astype(str) == problem.layout.value)]
    best = group.groupby("problem_key").time_us.min()
    group = group.assign(fraction=group.problem_key.map(best) / group.time_us)
    ids = group.config_id.astype(str)
    chosen = group[ids.str.startswith(args.prefix) & ids.str.contains(f"-w{args.warps}-")]
    ranges = pd.cut(chosen.n, [0, 64, 128, 256, float("inf")])
    summary = chosen.groupby([chosen.role.astype(str), ranges], observed=True).fraction.describe()
    pd.set_option("display.width", 200)
    print(f"{args.prefix}* w{args.warps} over {problem.dtype.value} {problem.layout.value} problems: best / its time")
    print(summary[["count", "mean", "50%", "min"]].to_string())

    rows = frame[frame.problem_key == problem.key][["config_id", "time_us"]].copy()
    if rows.empty:
        raise SystemExit(f"--problem {problem.key}: the dataset timed no configuration of it")
    ranked = Predictor.load(args.artifact).rank(problem, k=10_000, exhaustive=True, measured=False)
    predicted = {r.config.key: r.time_us for r in ranked}
    rows = rows.assign(predicted_us=rows.config_id.map(predicted), fraction=rows.time_us.min() / rows.time_us)
    print(f"\n{problem.key}: {len(rows)} timed; fastest measured")
    print(rows.sort_values("time_us").head(8).to_string(index=False))
    print("the model's first (every candidate scored)")
    print(rows.sort_values("predicted_us").head(8).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
