"""The fit's input matrix: ``xgboost.QuantileDMatrix`` (quantised once, straight from X; ``CostModel.fit`` since the
twenty-ninth session) against the float ``DMatrix`` it replaced, on the same training rows (BENCHMARKS §4).

    .venv/bin/python benchmarks/experiments/quantile_dmatrix.py [PROBLEMS [TREES [ARMS]]]
        (PROBLEMS default 0: every training problem, else a seeded sample; TREES default 300; ARMS default
        "dmatrix,quantile", run in that order; ~5 min on this 2-core machine with the defaults)

Each arm fits ``CostModel(n_estimators=TREES)`` (the shipped settings otherwise) through ``TrainingRows.fit``; the
``dmatrix`` arm has ``xgboost.QuantileDMatrix`` stand in for a plain ``DMatrix`` of the same arguments. Prints each
arm's fit seconds and the largest difference of its predictions from the first arm's over every training row
(0.0: the same trees).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import xgboost as xgb
from training_rows import TrainingRows

from tilecost.train.model import CostModel

QUANTILE = xgb.QuantileDMatrix


def plain(data, label=None, *, weight=None, feature_names=None, max_bin=None):  # noqa: ARG001 (DMatrix has no bins)
    return xgb.DMatrix(data, label, weight=weight, feature_names=feature_names)


def main(problems: int = 0, trees: int = 300, arms: str = "dmatrix,quantile") -> None:
    start = time.perf_counter()
    rows = TrainingRows.load()
    keys = np.unique(rows.groups)
    if problems:
        keys = np.random.default_rng(0).choice(keys, problems, replace=False)
    index = np.flatnonzero(np.isin(rows.groups, keys))
    print(f"loaded in {time.perf_counter() - start:.1f} s; {len(keys):,} problems, {len(index):,} rows", flush=True)
    first = None
    for arm in arms.split(","):
        xgb.QuantileDMatrix = {"dmatrix": plain, "quantile": QUANTILE}[arm]
        try:
            start = time.perf_counter()
            model = rows.fit(index, CostModel(n_estimators=trees))
            seconds = time.perf_counter() - start
        finally:
            xgb.QuantileDMatrix = QUANTILE
        predicted = model.booster_.inplace_predict(rows.X[index])
        first = predicted if first is None else first
        print(f"{arm:<9} fit {seconds:6.1f} s | max |prediction - first arm's| {np.abs(predicted - first).max():.3g}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 0, int(args[1]) if len(args) > 1 else 300, args[2] if len(args) > 2 else
         "dmatrix,quantile")  # fmt: skip
