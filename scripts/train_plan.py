"""Write a plan of new *training* problems of one dtype × layout and pointer patterns, for more problems per
device call (eleventh session: BENCHMARKS §4's learning curves gain +0.014 (CV) to +0.019 (held out) of top-1
per doubling of the training problems).

    .venv/bin/python scripts/train_plan.py bf16 nt 60 16-16 [SEED [MAX_FLOP [FAMILIES [MAX_K [MAX_M [MIN_N]]]]]]
    (seconds; writes datasets/plans/train-bf16-nt-seed53.json)

Problems from the built-in families (FAMILIES, comma separated, default ``layers,random,decode,unaligned``; the
twelfth session's second plans drew from ``aligned`` alone) with SEED (default 53), one of each in turn, kept when
not held out (a held-out problem is measured over its whole space: minutes, not seconds), not measured yet, of the
given pointer patterns (N-K classes, comma separated: one pattern keeps a cold machine's compile to one pointer
pattern and the descriptor kernel), at most MAX_FLOP (default 2e10, so that each measures in seconds) and K at most
MAX_K (default: any; the twenty-eighth session's ``train_plan.py bf16 nt 16 x-x 28 2e10 random,unaligned 256``, renamed
``2026-12-03-s28-train-small-k.json``, drew problems where the space offers no split-K) and M at most MAX_M (default:
any; ``-`` for MAX_K leaves K free: the thirty-eighth session's ``... random,decode,unaligned - 256`` drew skinny
problems, where 13 of the 23 held-out answers below 0.90 of the best lay) and N at least MIN_N (default: any; ``-``
for MAX_M leaves M free). SEED may be a range, ``66-140``: each seed's draws in turn until COUNT (a narrow region
needs many). Collect
with ``--sample-fraction 0.25`` (the shared sample) and its own ``--run-id``.
The eleventh session's call 6 ran the first version of this script (families in order, not in turn):
``datasets/plans/2026-11-30-train-bf16-{nt,nn}.json``, whose rows did not come back (COLLECTING.md).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pyarrow.dataset as ds

from tilecost.collect.compile import problem_pattern
from tilecost.collect.plans import is_heldout, plan_family
from tilecost.problem import DType, Layout, Problem

FAMILIES = ["layers", "random", "decode", "unaligned"]
POOL = {"layers": 400, "random": 800, "decode": 200, "unaligned": 200, "aligned": 800}  # draws per family


@functools.cache
def measured_keys(dtype: str, layout: str, dataset: str = "datasets/measurements") -> frozenset[str]:
    """The problem keys of one dtype × layout that ``dataset`` holds (read once per process: a script that draws
    several plans reads each dtype × layout once, not once per plan)."""
    table = ds.dataset(dataset, partitioning="hive").to_table(
        columns=["problem_key"], filter=(ds.field("dtype") == dtype) & (ds.field("layout") == layout)
    )
    return frozenset(table.column("problem_key").to_pylist())


def draw_training_plan(
    dtype: str,
    layout: str,
    count: int,
    patterns: list[str],
    seed: int = 53,
    max_flop: float = 2e10,
    families: list[str] = FAMILIES,
    exclude: set[str] = frozenset(),  # type: ignore[assignment]
    max_k: int | None = None,
    max_m: int | None = None,
    min_n: int | None = None,
) -> list[dict]:
    """Up to ``count`` plan entries of new training problems (the rules of this script's docstring); problem keys
    in ``exclude`` (or already measured) are skipped."""
    skip = measured_keys(dtype, layout) | set(exclude)
    plan: list[dict] = []
    seen: set[str] = set()
    draws = {f: iter(plan_family(f, POOL[f], DType(dtype), Layout(layout), seed)) for f in families}
    while len(plan) < count and draws:
        for family in list(draws):  # one problem of each family in turn, so that no family fills the plan alone
            for p in draws[family]:
                if p.key in skip or p.key in seen or is_heldout(p) or 2 * p.m * p.n * p.k > max_flop:
                    continue
                if max_k is not None and p.k > max_k:
                    continue
                if max_m is not None and p.m > max_m:
                    continue
                if min_n is not None and p.n < min_n:
                    continue
                if problem_pattern(p).split("-", 2)[2] not in patterns:
                    continue
                seen.add(p.key)
                plan.append(dict(m=p.m, n=p.n, k=p.k, dtype=dtype, layout=layout, family=f"train-{family}",
                                 role="train"))  # fmt: skip
                break
            else:
                del draws[family]  # this family has no more problems that qualify
            if len(plan) >= count:
                break
    return plan


if __name__ == "__main__":
    dtype, layout, count, patterns = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
    seed_text = sys.argv[5] if len(sys.argv) > 5 else "53"
    first, _, last = seed_text.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    max_flop = float(sys.argv[6]) if len(sys.argv) > 6 else 2e10
    wanted = sys.argv[7].split(",") if len(sys.argv) > 7 else FAMILIES
    max_k = int(sys.argv[8]) if len(sys.argv) > 8 and sys.argv[8] != "-" else None
    max_m = int(sys.argv[9]) if len(sys.argv) > 9 and sys.argv[9] != "-" else None
    min_n = int(sys.argv[10]) if len(sys.argv) > 10 else None
    plan: list[dict] = []
    for seed in seeds:  # a narrow region can need many seeds' draws
        keys = {Problem(e["m"], e["n"], e["k"], DType(dtype), Layout(layout)).key for e in plan}
        plan += draw_training_plan(dtype, layout, count - len(plan), patterns, seed, max_flop, wanted, exclude=keys,
                                   max_k=max_k, max_m=max_m, min_n=min_n)  # fmt: skip
        if len(plan) >= count:
            break
    path = Path(f"datasets/plans/train-{dtype}-{layout}-seed{seed_text}.json")
    path.write_text(json.dumps(plan, indent=0) + "\n")
    families = {f: sum(e["family"] == f for e in plan) for f in sorted({e["family"] for e in plan})}
    print(f"{path}: {len(plan)} training problems {families}")
