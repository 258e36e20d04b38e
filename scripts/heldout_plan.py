"""Write the ninth session's second held-out set: new held-out problems, measured over every candidate.

    .venv/bin/python scripts/heldout_plan.py      (a few seconds; writes datasets/plans/2026-11-30-heldout-b-*.json)

The built-in families (random 60, layers 112, decode 40, unaligned 40 per dtype and layout, seed 41) are
drawn, and only the problems that :func:`~tilecost.collect.plans.is_heldout` holds out, and that the dataset
has not measured, are kept: the same hash as every plan, so no shape is ever on both sides. A held-out
problem compiles its pattern's whole space (minutes per pattern, COLLECTING.md), so the set is a few
patterns with at most ``CAP`` problems each (in the families' seeded order), in two lanes of disjoint
kernels, one per GPU of a two-H200 machine: fp8 (both layouts) and 16-bit (bf16 both layouts, fp16 nn).
"""

from __future__ import annotations

import json
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

measured = set(
    ds.dataset("datasets/measurements", partitioning="hive").to_table(columns=["problem_key"])
    .column("problem_key").unique().to_pylist()
)  # fmt: skip
by_pattern: dict[str, list[dict]] = {}
for dtype in DType:
    for layout in Layout:
        for family, count in FAMILIES:
            for p in plan_family(family, count, dtype, layout, SEED):
                if not is_heldout(p) or p.key in measured:
                    continue
                group = by_pattern.setdefault(problem_pattern(p), [])
                if p.key not in {e["key"] for e in group}:
                    group.append({"key": p.key, "m": p.m, "n": p.n, "k": p.k, "dtype": dtype.value,
                                  "layout": layout.value, "family": family, "role": "heldout"})  # fmt: skip
for lane, patterns in LANES.items():
    plan = [{k: v for k, v in e.items() if k != "key"} for pat in patterns for e in by_pattern[pat][:CAP]]
    path = Path(f"datasets/plans/2026-11-30-heldout-b-{lane}.json")
    path.write_text(json.dumps(plan, indent=1) + "\n")
    print(f"{path}: {len(plan)} problems, " + ", ".join(f"{p} {min(CAP, len(by_pattern[p]))}" for p in patterns))
