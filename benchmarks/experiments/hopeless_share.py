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

ROOT = Path(__file__).resolve().parents[2]
UNMEASURED = ("28756x9881x2425", "36881x1467x9045", "6695x1843x59949")


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
    rows["best_us"] = rows.groupby(["problem_key", "run_id"]).time_us.transform("min")

    problems = []
    for (key, run), g in rows.groupby(["problem_key", "run_id"]):
        total = g.kernel_s.sum()
        bands = {f: g.kernel_s[g.time_us > f * g.best_us].sum() / total for f in (3, 10, 30)}
        hopeless = g.kernel_s[g.status == "hopeless"].sum() / total
        problems.append((g.flop.iloc[0], key, run, len(g), total, hopeless, bands, g.role.iloc[0]))
    print(f"{args.device_class} {args.dtype} {args.layout}, N and K off multiples of 16: {len(problems)} measured runs")
    print("problem                          run          rows   flop      kernel s  hopeless  >3x    >10x   >30x")
    shown = sorted(problems, key=lambda p: -p[0])[: args.top]
    for flop, key, run, n, total, hopeless, bands, _ in shown:
        print(
            f"{key:32s} {run:12s} {n:5d}  {flop:.2e}  {total:7.1f}  {hopeless:7.0%}  "
            f"{bands[3]:5.0%}  {bands[10]:5.0%}  {bands[30]:5.0%}"
        )
    heldout = [p for p in problems if p[7] == "heldout"]
    if not heldout:
        print("no held-out problem of the class to scale from")
        return 0
    flop, key, _, n, total, hopeless, bands, _ = max(heldout, key=lambda p: p[0])
    print(f"estimates scaled by flop from {key} ({n} candidates, {total:.1f} kernel s at {flop:.2e} flop):")
    for extents in args.estimate:
        try:
            m, n_, k = (int(v) for v in extents.split("x"))
        except ValueError:
            parser.error(f"--estimate {extents!r}: want MxNxK with positive integers")
        if min(m, n_, k) < 1:
            parser.error(f"--estimate {extents!r}: want MxNxK with positive integers")
        scaled = total * 2.0 * m * n_ * k / flop
        print(
            f"  {extents:24s} ~{scaled:5.0f} kernel s; without the second launch of rows over 10x the best "
            f"~{scaled * (1 - bands[10] / 2):5.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
