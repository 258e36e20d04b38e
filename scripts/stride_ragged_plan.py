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
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.stride_ragged_answers import own_list_predictor, stride_ragged_shapes  # noqa: E402
from tilecost import Predictor, Problem  # noqa: E402


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


def main() -> None:
    name, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    new, old = Predictor.load("h200", cache_size=0), own_list_predictor("h200")
    plan = [entry(p, new, old, top) for p in stride_ragged_shapes(count, seed)]
    path = Path(__file__).resolve().parents[1] / "datasets" / "plans" / f"{name}.json"
    path.write_text(json.dumps(plan, indent=1) + "\n")
    print(f"{path}: {len(plan)} problems, {sum(len(e['only']['config_id']) for e in plan)} pairs")  # type: ignore[index]


if __name__ == "__main__":
    main()
