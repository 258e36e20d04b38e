"""The compiled path from an empty numba cache: what a fresh installation pays, and whether any query compiles.

    .venv/bin/python benchmarks/experiments/numba_cold_start.py [--artifact DIR] [--shapes 4000] [--slow-ms 50]

An experiment harness of the sixty-fourth session (BENCHMARKS §5). Runs the same child process twice with
``NUMBA_CACHE_DIR`` set to a new empty directory: cold (numba compiles every kernel), then warm (it loads them
from that cache). Each child times ``import tilecost``, ``Predictor.load`` and the first query, then answers
``--shapes`` random shapes of every dtype and layout (``predict_best``, ``rank``, a few exhaustive ``rank``s) and
reports every query slower than ``--slow-ms`` after the first (``groups_first``: the first of its dtype and
layout, which reads that group's shortlists, ~0.1 s) and every kernel that gained a compiled specialisation
after the first query (a first use, as ``rank``'s ``score_shortlist``, or a second one). numba compiles one
specialisation per argument type, read-only and writable arrays included: before the sixty-fourth session's
fix, a widened shortlist compiled a second pair of kernels mid-stream (2.5 s). A clean run's slow queries are
its groups' first ones (and, cold, the odd garbage collection of the compiler's objects, ~0.1 s), and no kernel
holds two specialisations.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def child(artifact: str, shapes: int, slow_ms: float) -> None:
    """Time the start and stream the shapes in this process; print one JSON line."""
    import time

    started = time.perf_counter()
    import numpy as np

    from tilecost import Predictor, Problem
    from tilecost.predict import jit
    from tilecost.problem import DType, Layout

    imported = time.perf_counter()
    predictor = Predictor.load(artifact)
    loaded = time.perf_counter()
    predictor.predict_best((1000, 2000, 3000), measured=False)
    first = time.perf_counter()
    kernels = jit._kernels() if jit.jit_enabled() else None

    def specialisations() -> dict[str, int]:
        if kernels is None:
            return {}
        return {name: len(getattr(kernels, name).signatures) for name in dir(kernels)
                if hasattr(getattr(kernels, name), "signatures")}  # fmt: skip

    after_first = specialisations()
    rng = np.random.default_rng(1)
    slow, groups_seen = [], set()
    for i in range(shapes):
        dims = [max(1, int(2 ** rng.uniform(0, 16))) for _ in range(3)]
        problem = Problem(*dims, DType(rng.choice([d.value for d in DType])), Layout(rng.choice(["nt", "nn"])))
        t = time.perf_counter()
        if i % 40 == 2:
            predictor.rank(problem, 3, exhaustive=True, measured=False)
        elif i % 4 == 0:
            predictor.rank(problem, 5, measured=False)
        else:
            predictor.predict_best(problem, measured=i % 4 == 1)
        elapsed_ms = (time.perf_counter() - t) * 1e3
        group = (problem.dtype, problem.layout)
        if elapsed_ms > slow_ms:
            slow.append({"query": i, "problem": problem.key, "ms": round(elapsed_ms, 1),
                         "groups_first": group not in groups_seen})  # fmt: skip
        groups_seen.add(group)
    final = specialisations()
    print(json.dumps({
        "import_s": round(imported - started, 3), "load_s": round(loaded - imported, 3),
        "first_query_s": round(first - loaded, 3), "slow_queries": slow,
        "new_specialisations": {name: [after_first.get(name, 0), count] for name, count in final.items()
                                if count != after_first.get(name, 0)},
        "specialisations": final,
    }))  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost" / "models" / "h200"))
    parser.add_argument("--shapes", type=int, default=4000)
    parser.add_argument("--slow-ms", type=float, default=50.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.artifact, args.shapes, args.slow_ms)
        return 0
    with tempfile.TemporaryDirectory(prefix="tilecost-numba-cache-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for run in ("cold", "warm"):
            out = subprocess.run([sys.executable, __file__, "--child", "--artifact", args.artifact, "--shapes",
                                  str(args.shapes), "--slow-ms", str(args.slow_ms)],
                                 env=env, cwd=REPO, check=True, capture_output=True, text=True).stdout  # fmt: skip
            print(f"{run}: {out.strip().splitlines()[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
