"""Write one plan of new *training* problems of one dtype, segment by segment (layout, pointer pattern, count,
families, flop cap), skipping the problems of earlier plans that are not in the dataset yet.

    .venv/bin/python scripts/segment_plan.py NAME DTYPE SEED SEGMENT... [--exclude PLAN.json ...]
                                                            (seconds; writes datasets/plans/NAME.json)

SEGMENT is ``LAYOUT:PATTERN:COUNT[:FAMILY+FAMILY...[:MAX_FLOP]]`` (families default to the four of
``scripts/train_plan.py``, MAX_FLOP to 2e11); each is drawn with :func:`train_plan.draw_training_plan` in the order
given, so a collect that stops at its budget leaves the last segments. The thirtieth session's fp32 plans, drawn with
the same calls from a snippet (``benchmarks/results/2026-12-03-s30/calls.md``), are:

    segment_plan.py 2026-12-03-s30-train-fp32 fp32 301 nn:16-16:60 nn:x-x:60 nt:16-16:50 nt:x-x:50 \\
        nn:16-16:40:aligned:3e11 nt:16-16:40:aligned:3e11

(``-b``: seed 302, counts 45 45 45 45 35 35, ``--exclude`` the first; ``-c``: seed 303, ``nn:x-x:40 nt:x-x:40
nn:16-16:30:aligned:3e11 nt:16-16:30:aligned:3e11``, ``--exclude`` both). Run against the dataset as it stood before
those runs landed, it gives the same plans; run today it skips what they measured.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from train_plan import FAMILIES, POOL, draw_training_plan

from tilecost.collect.plans import load_plan_file
from tilecost.problem import DType, Layout, Problem

PATTERNS = ("16-16", "x-x")


def parse_segment(text: str) -> tuple[str, str, int, list[str], float]:
    """``LAYOUT:PATTERN:COUNT[:FAMILIES[:MAX_FLOP]]`` as (layout, pattern, count, families, max_flop); a clear
    error naming the part that is off and what it allows."""
    parts = text.split(":")
    if not 3 <= len(parts) <= 5:
        raise argparse.ArgumentTypeError(f"segment {text!r}: expected LAYOUT:PATTERN:COUNT[:FAMILIES[:MAX_FLOP]]")
    layout, pattern, count = parts[:3]
    allowed = [x.value for x in Layout]
    if layout not in allowed:
        raise argparse.ArgumentTypeError(f"segment {text!r}: layout {layout!r} is not one of {allowed}")
    if pattern not in PATTERNS:
        raise argparse.ArgumentTypeError(f"segment {text!r}: pattern {pattern!r} is not one of {list(PATTERNS)}")
    if not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"segment {text!r}: count {count!r} is not a whole number ≥ 1")
    families = parts[3].split("+") if len(parts) > 3 and parts[3] else FAMILIES
    unknown = [f for f in families if f not in POOL]
    if unknown:
        raise argparse.ArgumentTypeError(f"segment {text!r}: families {unknown} are not among {sorted(POOL)}")
    try:
        max_flop = float(parts[4]) if len(parts) > 4 else 2e11
    except ValueError:
        raise argparse.ArgumentTypeError(f"segment {text!r}: max flop {parts[4]!r} is not a number") from None
    return layout, pattern, int(count), families, max_flop


def entry_key(entry: dict) -> str:
    return Problem(entry["m"], entry["n"], entry["k"], entry["dtype"], entry["layout"]).key


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the plan's name: writes datasets/plans/NAME.json")
    parser.add_argument("dtype", choices=[d.value for d in DType])
    parser.add_argument("seed", type=int)
    parser.add_argument("segments", nargs="+", type=parse_segment, metavar="SEGMENT")
    parser.add_argument("--exclude", nargs="*", type=Path, default=[], metavar="PLAN", help="earlier plans' problems")
    args = parser.parse_args()
    path = Path(f"datasets/plans/{args.name}.json")
    if path.exists():
        parser.error(f"{path} exists: a plan is never rewritten (a run may be resuming it)")
    try:
        taken = {entry.problem.key for plan in args.exclude for entry in load_plan_file(plan)}
    except ValueError as exc:  # a missing or malformed plan: the reader's message names the file and the entry
        parser.error(f"--exclude: {exc}")
    plan: list[dict] = []
    for layout, pattern, count, families, max_flop in args.segments:
        part = draw_training_plan(args.dtype, layout, count, [pattern], args.seed, max_flop, families, taken)
        taken |= {entry_key(e) for e in part}
        plan += part
        print(f"{layout} {pattern} {'+'.join(families)} ≤ {max_flop:.0e} flop: {len(part)} of {count}")
    path.write_text(json.dumps(plan, indent=0) + "\n")
    print(f"{path}: {len(plan)} training problems")


if __name__ == "__main__":
    main()
