"""Write a plan of shapes whose strides suit tensor descriptors while N or K is off multiples of 16, each restricted
to the configurations the predictors compared in ``benchmarks/stride_ragged_answers.py`` would answer from.

    .venv/bin/python scripts/stride_ragged_plan.py NAME COUNT SEED [TOP]
        (COUNT random shapes of bf16, fp16 and fp32, nt and nn, log-uniform 16..16384 per extent, N and K rounded
         down to a multiple of the element's 16-byte step; written to datasets/plans/NAME.json; TOP, default 32:
         how many of the full model's fastest to add)

Per shape (``only``): the full model's ``TOP`` fastest of every candidate, the first 8 of the shape's own list and
of the aligned variant's list, and the answers of the predictor with and without the latter (the shipped artifact),
so that every answer compared is timed. The twenty-fourth session's plans: ``2026-12-02-s24-stride-ragged.json``
(12 hand-picked bf16 nt shapes, written by this script's first form) and ``stride_ragged_plan.py
2026-12-02-s24-stride-ragged-random 60 24 24``. Collect with ``--sample-fraction 1.0``.

    .venv/bin/python scripts/stride_ragged_plan.py --heldout NAME PER_GROUP SEED
        (a held-out set of the same kind, measured over every candidate: random shapes of the same draw that
         ``is_heldout`` holds out, that the dataset has not measured, and of at most ``MAX_HELDOUT_FLOP``; in each of
         the groups ``HELDOUT_GROUPS``, the first PER_GROUP of one pointer-kernel pattern (the group's most frequent
         among the draws), so that a group compiles one pointer pattern and one descriptor set)

    .venv/bin/python scripts/stride_ragged_plan.py --train NAME PER_GROUP SEED
        (training problems drawn the same way, among the shapes ``is_heldout`` leaves to training)

The twenty-fifth session's held-out set: ``stride_ragged_plan.py --heldout 2026-12-02-s25-stride-ragged-heldout 3 25``;
the twenty-seventh session's training set: ``stride_ragged_plan.py --train 2026-12-03-s27-stride-ragged-every 9 27``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.stride_ragged_answers import own_list_predictor, stride_ragged_shapes  # noqa: E402
from tilecost import Predictor, Problem  # noqa: E402
from tilecost.collect.compile import problem_pattern  # noqa: E402
from tilecost.collect.plans import is_heldout  # noqa: E402

# The held-out set's groups, most wanted first (a collection that stops early keeps the first): the class's
# commonest dtype and layouts, then fp16 and fp32.
HELDOUT_GROUPS = (("bf16", "nt"), ("bf16", "nn"), ("fp16", "nt"), ("fp32", "nt"))
MAX_HELDOUT_FLOP = 1e11  # a few hundred µs a launch at most: every candidate is timed


def entry(problem: Problem, new: Predictor, old: Predictor, top: int) -> dict[str, object]:
    group = new._group(problem.dtype, problem.layout)
    table, space = group.shortlist, group.scorer.space
    assert table is not None
    keys = {space[i].key for i in table.cut(table.list_id(problem), 8, None).head}
    stride = table.stride_list_id(problem)
    if stride is not None:
        keys |= {space[i].key for i in table.cut(stride, 8, None).head}
    times = new.predicted_times_us(problem)
    keys |= {c.key for c in sorted(times, key=times.__getitem__)[:top]}
    keys |= {p.predict_best(problem, measured=False).config.key for p in (new, old)}
    return {"m": problem.m, "n": problem.n, "k": problem.k, "dtype": problem.dtype.value,
            "layout": problem.layout.value, "family": "stride-ragged", "role": "train",
            "only": {"config_id": sorted(keys)}}  # fmt: skip


def every_candidate(per_group: int, seed: int, role: str) -> list[dict[str, object]]:
    """Shapes of the class to measure over every candidate, of one role (``heldout`` or ``train``), per group of
    :data:`HELDOUT_GROUPS` the first ``per_group`` of its commonest pointer pattern (module docstring)."""
    import pyarrow.dataset as ds

    dataset = ds.dataset(Path(__file__).resolve().parents[1] / "datasets" / "measurements", partitioning="hive")
    measured = set(dataset.to_table(columns=["problem_key"]).column("problem_key").unique().to_pylist())
    drawn = [
        p for p in stride_ragged_shapes(4000, seed)
        if is_heldout(p) == (role == "heldout") and p.key not in measured and 2 * p.m * p.n * p.k <= MAX_HELDOUT_FLOP
    ]  # fmt: skip
    plan: list[dict[str, object]] = []
    for dtype, layout in HELDOUT_GROUPS:
        group = [p for p in drawn if p.dtype.value == dtype and p.layout.value == layout]
        patterns = [problem_pattern(p) for p in group]
        if not group:
            raise SystemExit(f"no {role} {dtype} {layout} shape among the draws; try another seed")
        pattern = max(dict.fromkeys(patterns), key=patterns.count)
        chosen = [p for p in group if problem_pattern(p) == pattern][:per_group]
        plan += [{"m": p.m, "n": p.n, "k": p.k, "dtype": dtype, "layout": layout, "family": "stride-ragged",
                  "role": role} for p in chosen]  # fmt: skip
    return plan


def main() -> None:
    if sys.argv[1] in ("--heldout", "--train"):
        name, per_group, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        role = sys.argv[1][2:]
        plan = every_candidate(per_group, seed, role)
        path = Path(__file__).resolve().parents[1] / "datasets" / "plans" / f"{name}.json"
        path.write_text(json.dumps(plan, indent=1) + "\n")
        print(f"{path}: {len(plan)} {role} problems: " + ", ".join(
            f"{e['m']}x{e['n']}x{e['k']} {e['dtype']} {e['layout']}" for e in plan))  # fmt: skip
        return
    name, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    new, old = Predictor.load("h200", cache_size=0), own_list_predictor("h200")
    plan = [entry(p, new, old, top) for p in stride_ragged_shapes(count, seed)]
    path = Path(__file__).resolve().parents[1] / "datasets" / "plans" / f"{name}.json"
    path.write_text(json.dumps(plan, indent=1) + "\n")
    print(f"{path}: {len(plan)} problems, {sum(len(e['only']['config_id']) for e in plan)} pairs")  # type: ignore[index]


if __name__ == "__main__":
    main()
