"""Write the tenth session's tile-gap plans: training problems of one dtype × layout with the large tiles
measured that its shared 25% sample left out.

    .venv/bin/python scripts/tile_gap_plan.py fp8e4m3 nt 10 16-16
    (seconds; writes datasets/plans/2026-11-30-tile-gap-fp8e4m3-nt.json)

Arguments: dtype, layout, how many new problems, and the pointer-kernel patterns (N-K classes, comma
separated) they may take (one pattern keeps the lane's compile to one pointer pattern and the descriptor
kernel). Why (BENCHMARKS §4, ninth session): the model's largest losses on the second held-out set were large
fp8 nt problems picking 256×64 descriptor tiles that no fp8 nt training problem had timed, because a
dtype × layout's training problems share one seeded 25% sample of its configurations.

Two kinds of entries, all training problems restricted by ``only`` to exact configurations:

* new problems from the built-in ``layers`` and ``random`` families (seed 43; never held out, never
  measured, :data:`MIN_FLOP` to :data:`MAX_FLOP`, M ≥ 128): every *large tile* (BLOCK_M and BLOCK_N both in
  64, 128, 256; both variants), where their fastest configurations lie (their small tiles, slower on such
  problems, are what the other training problems teach already);
* the dtype × layout's training problems already measured (the same sizes): the large
  tiles they never timed (a later run supersedes only the configurations it times, so these add to them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.dataset as ds

from tilecost.collect.compile import problem_pattern
from tilecost.collect.plans import is_heldout, plan_family
from tilecost.device import load_device
from tilecost.problem import DType, Layout, Problem
from tilecost.space import problem_candidates

SEED = 43
MIN_FLOP = 4e9
MAX_FLOP = 1.5e11  # a problem of 1e12 flop measures at ~15 configurations a second (ninth session)
LARGE = (64, 128, 256)

dtype, layout, count, patterns = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
device = load_device("h200")
table = ds.dataset("datasets/measurements", partitioning="hive").to_table(
    columns=["problem_key", "m", "n", "k", "dtype", "layout", "role", "config_id"],
    filter=(ds.field("dtype") == dtype) & (ds.field("layout") == layout),
)
rows = table.to_pandas()
timed = rows.groupby("problem_key").config_id.agg(set)  # its keys: every measured problem of this dtype x layout


def large(problem: Problem) -> list[str]:
    cands = problem_candidates(problem, device)
    return [c.key for c in cands if c.block_m in LARGE and c.block_n in LARGE]


def big(p: Problem) -> bool:
    return p.m >= 128 and MIN_FLOP <= 2 * p.m * p.n * p.k <= MAX_FLOP


plan: list[dict] = []
seen: set[str] = set()
for family, n in (("layers", 112), ("random", 200)):
    for p in plan_family(family, n, DType(dtype), Layout(layout), SEED):
        if len(plan) >= count:  # only new problems so far: the re-timed ones are added below
            break
        if p.key in timed or p.key in seen or is_heldout(p) or not big(p):
            continue
        if problem_pattern(p).split("-", 2)[2] not in patterns:
            continue
        seen.add(p.key)
        only = sorted(large(p))
        plan.append(dict(m=p.m, n=p.n, k=p.k, dtype=dtype, layout=layout, family=f"tile-gap-{family}", role="train",
                         only={"config_id": only}))  # fmt: skip
first = rows[rows.role == "train"].drop_duplicates("problem_key")
for r in first.itertuples():
    p = Problem(int(r.m), int(r.n), int(r.k), dtype, layout)
    if not big(p):
        continue
    missing = sorted(set(large(p)) - timed[r.problem_key])
    if missing:
        plan.append(dict(m=p.m, n=p.n, k=p.k, dtype=dtype, layout=layout, family="tile-gap-retime", role="train",
                         only={"config_id": missing}))  # fmt: skip
path = Path(f"datasets/plans/2026-11-30-tile-gap-{dtype}-{layout}.json")
path.write_text(json.dumps(plan, indent=0) + "\n")
pairs = sum(len(e["only"]["config_id"]) for e in plan)
new = [e for e in plan if e["family"] != "tile-gap-retime"]
print(f"{path}: {len(new)} new problems, {len(plan) - len(new)} re-timed, {pairs} pairs")
for e in plan:
    print(f"  {e['family']:18s} {e['m']}x{e['n']}x{e['k']} {len(e['only']['config_id'])} configs")
