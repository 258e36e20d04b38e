"""Write the H100's training plans: H200 training problems, to be measured on an H100 as ``h100_sxm``.

The fifty-sixth session's grouped CV over the H100's 506 held-out problems (``benchmarks/experiments/
device_adaptation_cv.py``, docs/BENCHMARKS.md §5) found that a model of ~405 H100 problems alone ranks below the H200
model asked for the H100 (0.939 against 0.958 of the best), gaining ~0.018 per doubling: an H100 model needs a
training set of the H200's kind, well over 850 sampled problems. The first round (below) was its first part.

Each plan holds one kernel pattern (a dtype, a layout and alignment to 16 or not: the sixteen main ones, so that a
device call compiles one pattern and finishes its plan), ``CAP`` problems drawn (seeded) from the shipped dataset's H200
training problems of that pattern that were measured on a 25% sample, at most ``MAX_FLOP`` (``2·M·N·K``) each, neither
measured on the H100 nor in a plan of its queue (``datasets/plans/queue.json``; the first round's draw, before the queue
existed, had only the first test), role ``train``, each with its H200 family. Measured with ``SAMPLE=0.25`` and the
collector's default seed, an H100 run times the seeded 25% share the H200's runs timed (on the first six problems of the
bf16 nt x-x plan, every configuration the H100 would time the H200 timed; the H200 has a few more where model-top runs
added them), so the two devices' rows pair. The collector measures a plan's cheapest problems first, so a call cut short
keeps the cheap ones; 16 plans of ``CAP`` 32 are 512 problems, ~244,000 configurations.

    .venv/bin/python scripts/h100_train_plan.py [CAP [MAX_FLOP [SEED [NAME]]]]
    (defaults 32, 2e12, 56, 2026-12-06-s56-h100-train; writes datasets/plans/NAME-<pattern>.json for each pattern
    with a problem left, ~2 s; refuses while they exist: they are the H100 queue's, and a resumed run must find its
    plan as it was)

The fifty-sixth session's first round is the defaults (the H100 queue's rht01-rht16). The seventy-second session's
second round, ``h100_train_plan.py 64 2e12 72 2026-12-07-s72-h100-train2`` (up to 64 more of each pattern, drawn
from the problems the H100 still lacks; the queue's rh2t01-rh2t16), serves an H100 model: by the seventy-second
session a model fitted on the H100's 2,561 training problems alone reached 0.943 of the best on its 575 held-out
problems against the transfer's 0.958 (``benchmarks/experiments/joint_fit_heldout.py``), and the H100's training
problems since the first round were layer shapes, not the random extents the held-out problems span.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as ds

from tilecost.collect.compile import problem_pattern
from tilecost.collect.plans import PlanEntry, Role
from tilecost.collect.queue import load_queue, planned_keys
from tilecost.collect.store import DatasetStore
from tilecost.problem import DType, Layout, Problem
from tilecost.train.nightly_plan import plan_json

REPO = Path(__file__).resolve().parents[1]
FIRST_ROUND = "2026-12-06-s56-h100-train"


def main(argv: list[str]) -> int:
    if len(argv) > 4:
        sys.exit("usage: h100_train_plan.py [CAP [MAX_FLOP [SEED [NAME]]]]")
    name = argv[3] if len(argv) > 3 else FIRST_ROUND
    written = sorted((REPO / "datasets/plans").glob(f"{name}-*.json"))
    if written:  # the H100 queue's plans (docs/COLLECTING.md): a resumed run must find its plan as it was
        sys.exit(f"{len(written)} plans {name}-*.json exist (the H100 queue's); to draw others, give another NAME")
    cap = int(argv[0]) if argv else 32
    max_flop = float(argv[1]) if len(argv) > 1 else 2e12
    seed = int(argv[2]) if len(argv) > 2 else 56
    rows = ds.dataset(REPO / "datasets/measurements/device_class=h200", partitioning="hive").to_table(
        columns=["problem_key", "family", "role", "sample_fraction"],
        filter=(pc.field("role") == "train")
        & (pc.field("sample_fraction") > 0.24)
        & (pc.field("sample_fraction") < 0.26),
    )
    families = dict(zip(rows.column("problem_key").to_pylist(), rows.column("family").to_pylist(), strict=True))
    store = DatasetStore(REPO / "datasets/measurements")
    measured_h100 = store.problem_keys(store.files("h100_sxm"))
    taken = measured_h100 | planned_keys(load_queue(REPO / "datasets/plans/queue.json"), "h100_sxm", REPO)
    rng = np.random.default_rng(seed)
    by_pattern: dict[str, list[Problem]] = {
        f"{dtype.value}-{layout.value}-{align}": []
        for dtype in DType
        for layout in Layout
        for align in ("16-16", "x-x")
    }
    for key in sorted(families):
        problem = Problem.from_key(key)
        pattern = problem_pattern(problem)
        if pattern in by_pattern and key not in taken and problem.flops <= max_flop:
            by_pattern[pattern].append(problem)
    for pattern, problems in by_pattern.items():
        drawn = [problems[i] for i in rng.permutation(len(problems))[:cap]]
        if not drawn:  # an empty plan would sit in the queue measuring nothing
            print(f"{pattern}: nothing to plan (every such problem is measured, queued or over MAX_FLOP)")
            continue
        path = REPO / "datasets/plans" / f"{name}-{pattern}.json"
        path.write_text(plan_json([PlanEntry(p, families[p.key], Role.TRAIN) for p in drawn]) + "\n")
        print(f"{path.relative_to(REPO)}: {len(drawn)} of {len(problems)} problems")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
