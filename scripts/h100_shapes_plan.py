"""Write an H100 plan of the H200's training problems of some families that the H100 has not measured yet.

The H100's queue serves its tuning table (docs/COLLECTING.md): a shape the H100 measured is answered with its own
measured best (``measured-h100_sxm.json``), where any other is answered by the H200 model with the H100's spec
(0.958 of the best on the H100's held-out problems) or by the H200's measured best (0.985-0.987 of the H100's best on
rhlay's and rhdw's shapes). By the seventieth session the H100 had measured rhlay's 1,016 current-model layers and
rhdw's 209 decode-sized wide layers, but only 10 of the H200's 165 training problems of family ``layers`` (the
first sessions' Llama 3, Mistral, GPT-2, BERT, Qwen 2 and Phi-3 projections, ``collect.plans.LAYER_SHAPES``, at M
1-8,192 in every dtype and layout) and 5 of its 70 of family ``decode`` (the same layers at M 1-64). This script
draws such problems.

A problem is taken when the H200 measured it as a training problem of one of FAMILIES, the H100 has neither measured
it nor planned it (a plan of its queue, ``datasets/plans/queue.json``: a second run id would time it again; the
scripts before the seventy-third session's had only the first test), and ``2·M·N·K`` is at most MAX_FLOP; each keeps
its H200 family and role ``train``. Measured with ``SAMPLE=0.25`` and the collector's default seed, the H100 times
the seeded 25% share that the H200's 25% runs timed (a subset of what its 35% and full runs timed), so the two
devices' rows pair. The collector measures a plan's cheapest problems first.

    .venv/bin/python scripts/h100_shapes_plan.py NAME FAMILIES [MAX_FLOP]
    (FAMILIES comma-separated; MAX_FLOP default 2e12; writes datasets/plans/NAME.json, ~2 s; refuses to overwrite
    it: a resumed run must find its plan as it was)

The seventieth session's ``h100_shapes_plan.py 2026-12-07-s70-h100-layers-decode layers,decode`` is the H100
queue's rhld; the seventy-first session's ``... 2026-12-07-s71-h100-train-layers-decode train-layers,train-decode``
(the training plans' layer and decode draws, ``scripts/train_plan.py``: 838 problems in all eight dtype-layout
groups) its rhtld.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds

from tilecost.collect.plans import PlanEntry, Role
from tilecost.collect.queue import load_queue, planned_keys
from tilecost.collect.store import DatasetStore
from tilecost.problem import Problem
from tilecost.train.nightly_plan import plan_json

REPO = Path(__file__).resolve().parents[1]
MEASUREMENTS = REPO / "datasets/measurements"
QUEUE = REPO / "datasets/plans/queue.json"


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    name, families = argv[0], [family for family in argv[1].split(",") if family]
    max_flop = float(argv[2]) if len(argv) > 2 else 2e12
    path = REPO / "datasets/plans" / f"{name}.json"
    if path.exists():
        sys.exit(f"{path.relative_to(REPO)} exists; a resumed run must find its plan as it was: choose another NAME")
    rows = ds.dataset(MEASUREMENTS / "device_class=h200", partitioning="hive").to_table(
        columns=["problem_key", "family"],
        filter=(pc.field("role") == "train") & pc.field("family").isin(families),
    )
    family_of = dict(zip(rows.column("problem_key").to_pylist(), rows.column("family").to_pylist(), strict=True))
    if not family_of:
        sys.exit(f"FAMILIES={argv[1]!r}: the H200 has no training problem of these families")
    store = DatasetStore(MEASUREMENTS)
    taken = store.problem_keys(store.files("h100_sxm")) | planned_keys(load_queue(QUEUE), "h100_sxm", REPO)
    candidates = [Problem.from_key(key) for key in sorted(family_of) if key not in taken]
    problems = [p for p in candidates if p.flops <= max_flop]
    if not problems:
        over = f", and the other {len(candidates)} are over MAX_FLOP={max_flop:g}" if candidates else ""
        sys.exit(
            f"nothing to plan: of the H200's {len(family_of)} training problems of {families}, the H100 has measured "
            f"or queued {len(family_of) - len(candidates)}{over}"
        )
    path.write_text(plan_json([PlanEntry(p, family_of[p.key], Role.TRAIN) for p in problems]) + "\n")
    kinds = collections.Counter(f"{p.dtype.value}-{p.layout.value}" for p in problems)
    print(
        f"{path.relative_to(REPO)}: {len(problems)} problems ({len(candidates) - len(problems)} over MAX_FLOP left "
        f"out) of the H200's {len(family_of)} training problems of {families}; by kind {dict(sorted(kinds.items()))}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
