"""Experiment (forty-second session, not part of the product): climb from the shortlist's answer through the
configurations next to it, and see how often the climb ends on the full model's own best.

The predictor scores a shape's shortlist (8 members, more when the best sits late) and answers its best; on 82% of
held-out problems that is the configuration scoring every candidate picks (issue 5's bar: 99%). Wider lists agree
more (64 members: 97.6%) but each member costs a row of tree walks wherever it lies. A climb spends its rows next to
the answer instead: from the answer, score the feasible candidates that differ from it in one setting (its
*neighbours*), move to the best of them when it is better, and repeat. Two neighbourhoods:

* ``adjacent``: one setting moved to the next value up or down (BLOCK_M/N/K, warps, stages, split-K), or the other
  kernel variant or GROUP_M;
* ``axis``: one setting changed to any of its values.

Everything is simulated from one exhaustive scoring per problem (the same model, the same predicted times, ties to the
first in space order as the predictor breaks them), so the figures are the rows a climb would score and whether it
would end on the exhaustive best; no latency is measured here (a row costs ~1.5-3 µs on the compiled path, §5).

    .venv/bin/python benchmarks/experiments/answer_neighbourhood_climb.py [--artifact DIR] [--steps N,...] [--width W]
        (~15 s)

Held-out problems: those of the predictor benchmark's JSON (``--heldout-json``); random shapes: 300 of every group
the artifact has lists for, log-uniform, drawn as the benchmark draws them (seed 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import astuple
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tilecost.predict import Predictor  # noqa: E402
from tilecost.problem import Problem  # noqa: E402

AXES = ("variant", "block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages")


def neighbour_table(space: list, kind: str) -> list[list[int]]:
    """For each config of ``space``, the indices of the configs of the space next to it (``kind``: adjacent, axis)."""
    index = {astuple(c): i for i, c in enumerate(space)}
    values = [sorted({astuple(c)[a] for c in space}, key=lambda v: getattr(v, "value", v)) for a in range(len(AXES))]
    table = []
    for config in space:
        row = astuple(config)
        out = []
        for axis, options in enumerate(values):
            here = options.index(row[axis])
            if kind == "axis" or len(options) <= 2:
                picks = [v for v in options if v != row[axis]]
            else:
                picks = [options[j] for j in (here - 1, here + 1) if 0 <= j < len(options)]
            for value in picks:
                other = index.get(row[:axis] + (value,) + row[axis + 1 :])
                if other is not None:
                    out.append(other)
        table.append(out)
    return table


def climb(start: int, times: dict[int, float], scored: set[int], table: list[list[int]], steps: int) -> tuple[int, int]:
    """The climb's end and how many rows it scored beyond ``scored`` (``times``: every feasible candidate's µs)."""
    seen = set(scored)
    here = start
    for _ in range(steps):
        near = [j for j in table[here] if j in times]  # its feasible neighbours
        seen.update(near)
        best = min([here, *near], key=lambda j: (times[j], j))
        if best == here:
            break
        here = best
    return here, len(seen) - len(scored)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default="tilecost/models/h200")
    parser.add_argument("--heldout-json", default="benchmarks/results/2026-12-05-s42/predict-latency.json")
    parser.add_argument("--steps", default="1,2,4,16")
    parser.add_argument(
        "--width", type=int, default=None, help="shortlist members scored first (default: the artifact's)"
    )
    args = parser.parse_args()
    predictor = Predictor.load(args.artifact, shortlist_width=args.width)
    held = [
        Problem.from_key(r["problem"]) for r in json.loads(Path(args.heldout_json).read_text())["ood"]["per_problem"]
    ]
    groups = sorted(predictor._shortlists)
    rng = np.random.default_rng(1)
    rand = []
    for _ in range(300):
        dtype, layout = groups[int(rng.integers(len(groups)))].split("-")
        m, n, k = (int(round(2 ** rng.uniform(lo, hi))) for lo, hi in ((0, 14), (4, 15), (4, 15)))
        rand.append(Problem(m, n, k, dtype, layout))
    tables: dict[tuple[str, str], list[list[int]]] = {}
    steps = [int(s) for s in args.steps.split(",")]
    for name, problems in (("held-out", held), ("random", rand)):
        base = 0
        results: dict[tuple[str, int], list[tuple[bool, int]]] = {}
        for problem in problems:
            group = predictor._group(problem.dtype, problem.layout)
            indices, us = group.scorer.times_us(problem, group.scorer.everything)
            times = {int(i): float(t) for i, t in zip(indices, us, strict=True)}
            full = min(times, key=lambda j: (times[j], j))
            found = group.best(problem)
            assert found is not None
            start = int(found[0])
            scored = {int(i) for i in group.answered_from(problem).indices if int(i) in times}
            base += start == full
            for kind in ("adjacent", "axis"):
                key = (problem.dtype.value, problem.layout.value, kind)
                if key not in tables:
                    tables[key] = neighbour_table(list(group.scorer.space), kind)
                for s in steps:
                    end, rows = climb(start, times, scored, tables[key], s)
                    results.setdefault((kind, s), []).append((end == full, rows))
        n = len(problems)
        print(f"{name} ({n}): the predictor's answer agrees on {base} ({base / n:.1%})")
        for (kind, s), rows in sorted(results.items()):
            agree = sum(a for a, _ in rows)
            extra = np.array([r for _, r in rows])
            print(f"  {kind:8} up to {s:2} steps: agrees on {agree} ({agree / n:.1%}); rows added mean "
                  f"{extra.mean():.1f}, p50 {np.median(extra):.0f}, p90 {np.percentile(extra, 90):.0f}, "
                  f"max {extra.max()}")  # fmt: skip


if __name__ == "__main__":
    main()
