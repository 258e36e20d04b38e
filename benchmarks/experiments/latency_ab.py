"""Experiment (forty-fifth session): the new-shape latency of two predictors on the same machine at the same time.

``predict_latency.py`` measures one artifact; figures from two sessions differ by the machine as much as by the
predictor (the forty-fifth session's run gave p50 84 µs where the forty-third's gave 50 µs, its machine reference
12-20% slower). Here each side is an interpreter (its own checkout and virtual environment, e.g. a ``git worktree``
of an older commit with its artifact) and an artifact; rounds alternate A, B, A, B, ..., each in a fresh process
(one thread): load, warm up on 200 shapes, then time ``predict_best`` on the same never-queried shapes, drawn
log-uniformly (M, N, K in 1-16384, bf16 nt). Prints each round's p50 / p90 / p99 and the median of each over the
rounds, and the ratio B / A.

    python benchmarks/experiments/latency_ab.py --a PYTHON_A ARTIFACT_A --b PYTHON_B ARTIFACT_B [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

ROUND = r"""
import json, sys, time
import numpy as np
from tilecost import Predictor
predictor = Predictor.load(sys.argv[1])
rng = np.random.default_rng(int(sys.argv[2]))
shapes = [tuple(int(x) for x in np.exp2(rng.uniform(0, 14, 3)).round()) for _ in range(200 + int(sys.argv[3]))]
for shape in shapes[:200]:
    predictor.predict_best(shape)
times = []
for shape in shapes[200:]:
    started = time.perf_counter_ns()
    predictor.predict_best(shape)
    times.append((time.perf_counter_ns() - started) / 1e3)
q = np.percentile(times, [50, 90, 99])
print(json.dumps({"p50": q[0], "p90": q[1], "p99": q[2]}))
"""


def one_round(python: str, artifact: str, seed: int, shapes: int) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    result = subprocess.run([python, "-c", ROUND, artifact, str(seed), str(shapes)], env=env, check=True,
                            capture_output=True, text=True)  # fmt: skip
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", nargs=2, metavar=("PYTHON", "ARTIFACT"), required=True)
    parser.add_argument("--b", nargs=2, metavar=("PYTHON", "ARTIFACT"), required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rounds: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for i in range(args.rounds):
        for side, (python, artifact) in (("A", args.a), ("B", args.b)):
            figures = one_round(python, artifact, args.seed, args.shapes)
            rounds[side].append(figures)
            print(f"round {i} {side}: " + ", ".join(f"{k} {v:.1f} us" for k, v in figures.items()), flush=True)
    medians = {side: {k: statistics.median(r[k] for r in runs) for k in ("p50", "p90", "p99")}
               for side, runs in rounds.items()}  # fmt: skip
    for side, figures in medians.items():
        print(f"{side} median over {args.rounds} rounds: " + ", ".join(f"{k} {v:.1f} us" for k, v in figures.items()))
    print("B / A: " + ", ".join(f"{k} x{medians['B'][k] / medians['A'][k]:.3f}" for k in ("p50", "p90", "p99")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
