"""Write the eleventh session's chip-repeat plan: held-out bf16 nt problems already measured, to be measured
again on each GPU of one host, so that one H200's best configuration can be judged on another H200.

    .venv/bin/python scripts/chip_repeat_plan.py
    (seconds; writes datasets/plans/2026-11-30-chip-repeat-bf16-nt.json)

Why (BENCHMARKS §3c, eleventh session): the model is one per *device class*, and its held-out labels come from
whichever H200 a session was lent; §3c showed labels repeating to 0.9997 on one GPU minutes apart, never
between two chips. The problems: held-out bf16 nt with N and K multiples of 16 (one pointer pattern, so a
cold machine compiles one pattern and the descriptor kernel), 1e8 to 3e10 flop (seconds each over their
whole space), measured before by a run of the current timer. The repeats are filed in ``datasets/repeats``
(not the training dataset: a later run's rows would supersede the labels the held-out figures use).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds

OLD_TIMER_RUN = "r28ad8bf50e"
COUNT = 12

table = ds.dataset("datasets/measurements", partitioning="hive").to_table(
    columns=["problem_key", "m", "n", "k", "run_id"],
    filter=(ds.field("role") == "heldout") & (ds.field("dtype") == "bf16") & (ds.field("layout") == "nt"),
)
frame = table.to_pandas()
problems = frame.groupby("problem_key").agg(m=("m", "first"), n=("n", "first"), k=("k", "first"),
                                            runs=("run_id", lambda v: set(v) - {OLD_TIMER_RUN}))  # fmt: skip
problems["flop"] = 2.0 * problems.m * problems.n * problems.k
chosen = problems[(problems.n % 16 == 0) & (problems.k % 16 == 0) & problems.flop.between(1e8, 3e10)
                  & (problems.runs.str.len() > 0)].sort_values("flop")  # fmt: skip
# spread over the size range: every len/COUNT-th problem
chosen = chosen.iloc[[round(i * (len(chosen) - 1) / (COUNT - 1)) for i in range(COUNT)]]
plan = [dict(m=int(r.m), n=int(r.n), k=int(r.k), dtype="bf16", layout="nt", family="chip-repeat")
        for r in chosen.itertuples()]  # fmt: skip
path = Path("datasets/plans/2026-11-30-chip-repeat-bf16-nt.json")
path.write_text(json.dumps(plan, indent=0) + "\n")
print(f"{path}: {len(plan)} problems")
for e, r in zip(plan, chosen.itertuples(), strict=True):
    print(f"  {e['m']}x{e['n']}x{e['k']}  {r.flop:.2e} flop  measured by {sorted(r.runs)}")
