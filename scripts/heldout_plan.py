"""Write the ninth session's second held-out set: new held-out problems, measured over every candidate.

    .venv/bin/python scripts/heldout_plan.py      (a few seconds; writes datasets/plans/2026-11-30-heldout-b-*.json)

The built-in families (random 60, layers 112, decode 40, unaligned 40 per dtype and layout, seed 41) are
drawn, and only the problems that :func:`~tilecost.collect.plans.is_heldout` holds out, and that the dataset
has not measured, are kept: the same hash as every plan, so no shape is ever on both sides. A held-out
problem compiles its pattern's whole space (minutes per pattern, COLLECTING.md), so the set is a few
patterns with at most ``CAP`` problems each (in the families' seeded order), in two lanes of disjoint
kernels, one per GPU of a two-H200 machine: fp8 (both layouts) and 16-bit (bf16 both layouts, fp16 nn).

    .venv/bin/python scripts/heldout_plan.py NAME SEED[,SEED...] CAP MAX_FLOP PATTERN[,PATTERN...]

writes one plan, datasets/plans/NAME.json, of the same draws with those seeds (in turn): at most CAP problems of each
pattern given, of at most MAX_FLOP (``2·M·N·K``; so that a set of them measures in one device call). The
twenty-eighth session's fourth held-out set: ``heldout_plan.py 2026-12-03-s28-heldout-d 28,29,30 24 2e10
bf16-nt-x-x`` (one pointer pattern, so one compile).
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import pyarrow.dataset as ds

from tilecost.collect.compile import problem_pattern
from tilecost.collect.plans import is_heldout, plan_family
from tilecost.problem import DType, Layout

SEED = 41
CAP = 10
FAMILIES = (("random", 60), ("layers", 112), ("decode", 40), ("unaligned", 40))
LANES = {
    "fp8": ("fp8e4m3-nn-16-16", "fp8e4m3-nn-x-x", "fp8e4m3-nt-16-16", "fp8e4m3-nt-x-x"),
    "16bit": ("bf16-nn-16-16", "bf16-nn-x-x", "bf16-nt-16-16", "bf16-nt-x-x", "fp16-nn-16-16"),
}


def draw(seeds: list[int], max_flop: float | None = None) -> dict[str, list[dict]]:
    """The held-out problems of the families' draws with ``seeds`` that the dataset has not measured, by pattern, in
    the families' seeded order, seed after seed (at most ``max_flop`` each, if given)."""
    measured = set(
        ds.dataset("datasets/measurements", partitioning="hive").to_table(columns=["problem_key"])
        .column("problem_key").unique().to_pylist()
    )  # fmt: skip
    by_pattern: dict[str, list[dict]] = {}
    for seed, dtype, layout in itertools.product(seeds, DType, Layout):
        for family, count in FAMILIES:
            for p in plan_family(family, count, dtype, layout, seed):
                if not is_heldout(p) or p.key in measured:
                    continue
                if max_flop is not None and 2 * p.m * p.n * p.k > max_flop:
                    continue
                group = by_pattern.setdefault(problem_pattern(p), [])
                if p.key not in {e["key"] for e in group}:
                    group.append({"key": p.key, "m": p.m, "n": p.n, "k": p.k, "dtype": dtype.value,
                                  "layout": layout.value, "family": family, "role": "heldout"})  # fmt: skip
    return by_pattern


def write(path: Path, by_pattern: dict[str, list[dict]], patterns: tuple[str, ...], cap: int) -> None:
    plan = [{k: v for k, v in e.items() if k != "key"} for pat in patterns for e in by_pattern.get(pat, [])[:cap]]
    path.write_text(json.dumps(plan, indent=1) + "\n")
    counts = ", ".join(f"{p} {min(cap, len(by_pattern.get(p, [])))}" for p in patterns)
    print(f"{path}: {len(plan)} problems, {counts}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        if len(sys.argv) != 6:
            sys.exit("usage: heldout_plan.py [NAME SEED[,SEED...] CAP MAX_FLOP PATTERN[,PATTERN...]]")
        name, seed, cap, max_flop, patterns = sys.argv[1:]
        chosen = tuple(patterns.split(","))
        write(
            Path(f"datasets/plans/{name}.json"),
            draw([int(x) for x in seed.split(",")], float(max_flop)),
            chosen,
            int(cap),
        )
    else:
        drawn = draw([SEED])
        for lane, lane_patterns in LANES.items():
            write(Path(f"datasets/plans/2026-11-30-heldout-b-{lane}.json"), drawn, lane_patterns, CAP)
