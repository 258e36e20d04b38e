"""How much later rows improved a device's tuning table on a plan's problems: the table at a commit against now.

The shipped artifact answers a shape that a device measured with that device's measured best (its ``measured.json``,
or ``measured-<class>.json`` for another class). A model-top round (``scripts/model_top_plan.py``) times more
configurations of problems already measured, so a refresh (``tilecost refresh-measured``) can only lower their best
times. This prints, over the plans' problems that the table at REV held, the geometric mean of the earlier best time
over the current one (the fraction of the new best that the earlier answer reached), its worst, how many fall below
0.90, and the same per dtype and layout.

    .venv/bin/python benchmarks/experiments/table_gain.py REV TABLE PLAN [PLAN ...]
    (TABLE: a file of tilecost/models/h200/, as measured-h100_sxm.json; a second or so)

The seventieth session's: ``table_gain.py ca7c7ab measured-h100_sxm.json
datasets/plans/2026-12-07-s67-h100-model-top8-{a,b,c}.json`` (rhmt8a-c) and ``table_gain.py d3305cb
measured-h100_sxm.json datasets/plans/2026-12-07-s70-h100-model-top8.json`` (rhmt8d); the seventy-first's
``table_gain.py d08b255 measured-h100_sxm.json datasets/plans/2026-12-07-s71-h100-model-top8.json`` (rhmt8e).
"""

from __future__ import annotations

import collections
import json
import math
import subprocess
import sys
from pathlib import Path

from tilecost.collect.plans import load_plan_file

REPO = Path(__file__).resolve().parents[2]
ARTIFACT = "tilecost/models/h200"


def _problems(data: dict) -> dict:
    return data.get("problems", data)  # another class's table wraps its problems


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        sys.exit(__doc__)
    rev, table, plans = argv[0], argv[1], argv[2:]
    before = _problems(json.loads(subprocess.check_output(["git", "show", f"{rev}:{ARTIFACT}/{table}"], cwd=REPO)))
    now = _problems(json.loads((REPO / ARTIFACT / table).read_text()))
    ratios: dict[str, list[float]] = collections.defaultdict(list)
    for plan in plans:
        for problem in (entry.problem for entry in load_plan_file(plan)):
            if problem.key in before:
                kind = f"{problem.dtype.value}-{problem.layout.value}"
                ratios[kind].append(now[problem.key]["time_us"] / before[problem.key]["time_us"])
    every = [r for group in ratios.values() for r in group]
    if not every:
        sys.exit(f"none of the plans' problems is in {table} at {rev}")
    print(f"{table}: {rev} -> now, on the {len(every)} problems of {len(plans)} plan(s) it held then")
    for name, group in [("all", every), *sorted(ratios.items())]:
        geomean = math.exp(sum(map(math.log, group)) / len(group))
        print(
            f"  {name:12s} {len(group):5d}  earlier best / new best {geomean:.4f}"
            f"  worst {min(group):.3f}  below 0.90: {sum(r < 0.9 for r in group):3d}"
            f"  faster now: {sum(r < 1 for r in group):4d}  slower: {sum(r > 1 for r in group)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
