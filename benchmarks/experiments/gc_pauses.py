"""Python's garbage collector during a stream of new shapes: how often it runs and what it does to p99 and max.

    .venv/bin/python benchmarks/experiments/gc_pauses.py [--shapes 2000] [--rounds 6]

A diagnostic of the twenty-second session (BENCHMARKS §5). ``predict_best`` on distinct new shapes (every dtype
and layout, never from measurements) in rounds of ``--shapes``, the collector on in even rounds and off
(``gc.disable()``) in odd ones; ``gc.callbacks`` times every collection. Nothing in tilecost changes the
collector's settings: this shows how much of the tail the collector's pauses are.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import time
from typing import Any

import numpy as np

# walk_lockstep.py's stream of distinct random problems (every dtype and layout)
from walk_lockstep import distinct_problems  # type: ignore[import-not-found]

from tilecost import Predictor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args()
    predictor = Predictor.load("h200")
    shapes = list(itertools.islice(distinct_problems(args.seed), 200 + args.rounds * args.shapes))
    for shape in shapes[:200]:
        predictor.predict_best(shape, measured=False)
    collections: list[tuple[int, float]] = []
    started = [0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter_ns()
        else:
            collections.append((info["generation"], (time.perf_counter_ns() - started[0]) / 1e3))

    gc.callbacks.append(timed)
    try:
        for round_ in range(args.rounds):
            on = round_ % 2 == 0
            gc.enable() if on else gc.disable()
            batch = shapes[200 + round_ * args.shapes : 200 + (round_ + 1) * args.shapes]
            spent, before = [], len(collections)
            for shape in batch:
                start = time.perf_counter_ns()
                predictor.predict_best(shape, measured=False)
                spent.append((time.perf_counter_ns() - start) / 1e3)
            these = collections[before:]
            print(f"round {round_}, collector {'on ' if on else 'off'}: p50 {np.percentile(spent, 50):.1f}, "
                  f"p99 {np.percentile(spent, 99):.1f}, max {max(spent):.0f} µs; {len(these)} collections "
                  f"(generation 2: {sum(1 for g, _ in these if g == 2)}), longest "
                  f"{max((d for _, d in these), default=0.0):.0f} µs", flush=True)  # fmt: skip
    finally:
        gc.callbacks.remove(timed)
        gc.enable()


if __name__ == "__main__":
    main()
