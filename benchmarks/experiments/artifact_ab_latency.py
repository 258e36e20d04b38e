"""Experiment (thirteenth session): new-shape latency of two artifacts in one process, queries alternating.

Machine-state drift (this 2-core machine measured 20-25% slower on some days than on others: BENCHMARKS §5)
swamps small differences between separate runs; alternating the two predictors query by query over the same
never-measured shapes puts both under the same conditions. Used to check that the UBJSON artifact (schema 2)
answers as fast as the JSON one (schema 1) of the same model.

    .venv/bin/python benchmarks/experiments/artifact_ab_latency.py ARTIFACT_A ARTIFACT_B [SHAPES]   (~10 s)
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from tilecost import Predictor  # noqa: E402

paths = sys.argv[1:3]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
predictors = [Predictor.load(path) for path in paths]
rng = np.random.default_rng(7)
shapes = [tuple(int(x) for x in 2 ** rng.uniform([0, 7, 7], [13, 15, 15])) for _ in range(200 + count)]
for shape in shapes[:200]:  # warm-up: each group's candidate space and feature columns
    for predictor in predictors:
        predictor.predict_best(shape)
times: list[list[float]] = [[], []]
for i, shape in enumerate(shapes[200:]):
    for j in (0, 1) if i % 2 else (1, 0):  # each goes first on every other shape
        started = time.perf_counter_ns()
        predictors[j].predict_best(shape)
        times[j].append((time.perf_counter_ns() - started) / 1e3)
for path, t in zip(paths, times, strict=True):
    p50, p90, p99 = np.percentile(t, [50, 90, 99])
    print(f"{path}: p50 {p50:.1f} µs, p90 {p90:.1f}, p99 {p99:.1f} ({len(t)} new shapes)")
