"""Experiment (sixty-first session, not part of the product): where a large held-out problem's measuring time goes.

The sixty-first session found three held-out problems of the second set's fp8 plan (28756x9881x2425,
36881x1467x9045, 6695x1843x59949: fp8e4m3 nt, N and K off multiples of 16, 1.0-1.5e12 flop, 1,676 candidates)
that outlast a device call (docs/COLLECTING.md). This reads the measured problems of one dtype and layout whose N
and K are both off multiples of 16 and prints, for the largest, the kernel time their measuring spent (each row's
``time_us`` times its ``reps``: the launches behind its median, or for a ``hopeless`` row the screening launches, one
or two, whose faster one is its bound; docs/PROTOCOL.md): in all, on hopeless rows, and on rows slower than 3, 10
and 30 times the problem's best. Then, per problem named with ``--estimate``, that time scaled by flop from the
largest held-out problem of the class (measured over every candidate, as the named ones would be; 52256x618x1447
has 1,676 candidates, as the three do): a rough figure of the kernel time alone (no compile, no host work between
launches), and of it without the second (confirming) launch of the rows over 10 times the best.

    .venv/bin/python benchmarks/experiments/hopeless_share.py [--device-class h100_sxm] [--dtype fp8e4m3]
        [--layout nt] [--top 6] [--estimate 36881x1467x9045 ...]   (~5 s)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow.dataset as ds

from tilecost.problem import Problem

ROOT = Path(__file__).resolve().parents[2]
UNMEASURED = ("28756x9881x2425", "36881x1467x9045", "6695x1843x59949")
BANDS = (3, 10, 30)  # times the problem's best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default=str(ROOT / "datasets" / "measurements"))
    parser.add_argument("--device-class", default="h100_sxm")
    parser.add_argument("--dtype", default="fp8e4m3")
    parser.add_argument("--layout", default="nt", choices=("nt", "nn"))
    parser.add_argument("--top", type=int, default=6, help="how many of the largest problems to print (>= 1)")
    parser.add_argument("--estimate", nargs="*", default=list(UNMEASURED), help="MxNxK extents to estimate")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top={args.top}: must be >= 1")
    part = Path(args.dataset) / f"device_class={args.device_class}" / f"dtype={args.dtype}" / f"layout={args.layout}"
    if not part.is_dir():
        parser.error(f"no partition {part}")
    columns = ["problem_key", "run_id", "role", "m", "n", "k", "status", "time_us", "reps"]
    rows = ds.dataset(part, format="parquet", partitioning="hive").to_table(columns=columns).to_pandas()
    rows = rows[(rows.n % 16 != 0) & (rows.k % 16 != 0)].copy()
    if rows.empty:
        parser.error("no problem of that class has N and K both off multiples of 16")
    rows["flop"] = 2.0 * rows.m * rows.n * rows.k
    rows["kernel_s"] = rows.time_us * rows.reps / 1e6
    best_us = rows.groupby(["problem_key", "run_id"]).time_us.transform("min")
    rows["hopeless_s"] = rows.kernel_s.where(rows.status == "hopeless", 0.0)
    for f in BANDS:
        rows[f"over{f}_s"] = rows.kernel_s.where(rows.time_us > f * best_us, 0.0)
    # The confirming launch of a hopeless row over 10x the best (one of its two; under confirm_below, since the
    # sixty-second session, such rows have none, reps = 1).
    confirmed_far = (rows.status == "hopeless") & (rows.reps >= 2) & (rows.time_us > 10 * best_us)
    rows["confirm10_s"] = (rows.kernel_s / rows.reps).where(confirmed_far, 0.0)
    sums = {c: (c, "sum") for c in ["kernel_s", "hopeless_s", *(f"over{f}_s" for f in BANDS), "confirm10_s"]}
    per = rows.groupby(["problem_key", "run_id"]).agg(
        flop=("flop", "first"), role=("role", "first"), candidates=("status", "size"), **sums
    )
    print(f"{args.device_class} {args.dtype} {args.layout}, N and K off multiples of 16: {len(per)} measured runs")
    print("problem                          run          rows   flop      kernel s  hopeless  >3x    >10x   >30x")
    for (key, run), p in per.sort_values("flop", ascending=False, kind="stable").head(args.top).iterrows():
        shares = "  ".join(f"{p[f'over{f}_s'] / p.kernel_s:5.0%}" for f in BANDS)
        print(
            f"{key:32s} {run:12s} {p.candidates:5d}  {p.flop:.2e}  {p.kernel_s:7.1f}  "
            f"{p.hopeless_s / p.kernel_s:7.0%}  {shares}"
        )
    heldout = per[per.role == "heldout"]
    if heldout.empty:
        print("no held-out problem of the class to scale from")
        return 0
    largest = heldout.flop.idxmax()  # (problem key, run id)
    key, ref = largest[0], heldout.loc[largest]
    print(
        f"estimates scaled by flop from {key} ({ref.candidates} candidates, {ref.kernel_s:.1f} kernel s at "
        f"{ref.flop:.2e} flop):"
    )
    for extents in args.estimate:
        try:
            problem = Problem.from_key(f"{extents}-{args.dtype}-{args.layout}")
        except ValueError as exc:
            parser.error(f"--estimate {extents!r}: want MxNxK with positive integers ({exc})")
        scaled = ref.kernel_s * problem.flops / ref.flop
        print(
            f"  {extents:24s} ~{scaled:5.0f} kernel s; without the second launch of rows over 10x the best "
            f"~{scaled * (1 - ref.confirm10_s / ref.kernel_s):5.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
