"""Write a session's training plans, one per GPU lane, each grouped by dtype × layout × pointer pattern.

    .venv/bin/python scripts/lane_plans.py PREFIX [SEED [PENDING_PLAN ...]]
                                                    (seconds; writes datasets/plans/PREFIX-<lane>.json)

The twelfth session merged `scripts/train_plan.py`'s per-(dtype, layout, pattern) plans into one plan per lane by
hand; this does it from the table below. Lanes ``a`` and ``b`` draw the four built-in families (``MAX_FLOP``
2e11), ``c`` and ``d`` the ``aligned`` family (3e11; seed SEED + 1); ``a``/``c`` hold bf16 and fp16, ``b``/``d``
fp8 and fp32 (a cold fp8 pattern compiles for minutes, so the 16-bit lanes never wait on it). Within a lane the
entries come pattern by pattern, so that each pattern's kernels compile while the previous one measures. Counts
were about 1.5 times the twelfth session's, in its proportions (the held-out set's kinds); since the sixteenth
session the families' 16-16 segments of bf16 and fp8 are nearly used up under 2e11 flop (4e11 found only a few more),
so their counts moved to x-x: ~840 problems, more
than one session's 30 device-minutes measure on two GPUs (~650), so a session resumes a lane under its run id
(`RUN_ID=... PLAN=...`, COLLECTING.md) or leaves its end for the next. No problem is in two lanes, none is held
out and none is measured yet (at the time of writing: rerun after new data lands). Problems of the PENDING_PLAN
files (earlier plans a session has yet to finish, which may run beside the new ones) are skipped too, so that no
problem is measured twice by two runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from train_plan import FAMILIES, draw_training_plan

from tilecost.problem import DType, Layout, Problem

PREFIX = sys.argv[1]
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 71
PENDING = [json.loads(Path(path).read_text()) for path in sys.argv[3:]]
# lane: (families, max flop, seed offset, [(dtype, layout, pattern, count), ...])
LANES = {
    "a": (FAMILIES, 2e11, 0, [("bf16", "nt", "16-16", 5), ("bf16", "nt", "x-x", 150), ("bf16", "nn", "16-16", 10),
                              ("bf16", "nn", "x-x", 95), ("fp16", "nn", "16-16", 38), ("fp16", "nn", "x-x", 15),
                              ("fp16", "nt", "16-16", 15), ("fp16", "nt", "x-x", 15)]),
    "b": (FAMILIES, 2e11, 0, [("fp8e4m3", "nt", "16-16", 5), ("fp8e4m3", "nt", "x-x", 105),
                              ("fp8e4m3", "nn", "16-16", 10), ("fp8e4m3", "nn", "x-x", 80), ("fp32", "nt", "16-16", 15),
                              ("fp32", "nt", "x-x", 15), ("fp32", "nn", "16-16", 10), ("fp32", "nn", "x-x", 5)]),
    "c": (["aligned"], 3e11, 1, [("bf16", "nt", "16-16", 60), ("bf16", "nn", "16-16", 45), ("fp16", "nn", "16-16", 23),
                                 ("fp16", "nt", "16-16", 12)]),
    "d": (["aligned"], 3e11, 1, [("fp8e4m3", "nt", "16-16", 60), ("fp8e4m3", "nn", "16-16", 52),
                                 ("fp32", "nt", "16-16", 12), ("fp32", "nn", "16-16", 12)]),
}  # fmt: skip

taken = {Problem(e["m"], e["n"], e["k"], DType(e["dtype"]), Layout(e["layout"])).key for plan in PENDING for e in plan}
for lane, (families, max_flop, offset, segments) in LANES.items():
    plan: list[dict] = []
    for dtype, layout, pattern, count in segments:
        part = draw_training_plan(dtype, layout, count, [pattern], SEED + offset, max_flop, families, taken)
        taken |= {Problem(e["m"], e["n"], e["k"], DType(dtype), Layout(layout)).key for e in part}
        plan += part
        print(f"lane {lane}: {dtype} {layout} {pattern}: {len(part)} of {count}")
    path = Path(f"datasets/plans/{PREFIX}-{lane}.json")
    path.write_text(json.dumps(plan, indent=0) + "\n")
    print(f"{path}: {len(plan)} training problems")
