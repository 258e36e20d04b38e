"""Experiment (eleventh session): can the model fit the held-out problems at all? The bars' in-sample ceiling.

Six sessions of data, settings and model changes left the held-out top-1 at ~0.93. This separates the two
reasons a pick can miss: the model cannot express the problem's order (capacity, features), or it can but
does not carry it over to shapes it never saw (generalisation). Each arm fits on the training problems *and*
the held-out ones, then scores the held-out problems, whose every candidate it has seen; a last arm scores the
training problems with the shipped fit (in sample too). Diagnostic only: no setting is chosen from it.

    .venv/bin/python benchmarks/experiments/insample_ceiling.py      (~4 min, 2 cores)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tilecost.device import load_device  # noqa: E402
from tilecost.train.dataset import load_measurements  # noqa: E402
from tilecost.train.model import CostModel  # noqa: E402
from tilecost.train.pipeline import evaluate_model, fit_rows, split_by_role  # noqa: E402

KEYS = ("top1_geomean", "top1_worst", "top5_geomean", "top5_worst")
device = load_device("h200")
train, heldout = split_by_role(load_measurements("datasets/measurements", "h200"))
both = pd.concat([train, heldout])
arms: list[tuple[str, dict, pd.DataFrame, pd.DataFrame]] = [
    ("shipped settings, fit on training only, held-out (the reported figure)", {}, train, heldout),
    ("shipped settings, fit on training + held-out, held-out in sample", {}, both, heldout),
    ("shipped settings, fit on training only, training in sample", {}, train, train),
    ("1000 trees of depth 10, training + held-out, held-out in sample", {"n_estimators": 1000, "max_depth": 10},
     both, heldout),
    ("1000 trees of depth 12, half-life 0.5, training + held-out, held-out in sample",
     {"n_estimators": 1000, "max_depth": 12, "fast_halflife_octaves": 0.5}, both, heldout),
]  # fmt: skip
for name, settings, fit_on, judged in arms:
    start = time.perf_counter()
    summary = evaluate_model(fit_rows(CostModel(**settings), fit_on, device), judged, device).summary()
    figures = " ".join(f"{k} {summary[k]:.3f}" for k in KEYS)
    print(f"{name}: {int(summary['problems'])} problems | {figures} | {time.perf_counter() - start:.0f} s"
          f" {json.dumps(settings)}", flush=True)  # fmt: skip
