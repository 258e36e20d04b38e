"""Experiment (sixth session, not part of the product): do compile-metadata features help the cost model?

Spills and measured registers depend on the config, dtype, layout and the N/K divisibility pattern only, so
a table of them (built here on the fit folds of a grouped 5-fold CV over the training problems) could be
looked up for any shape. Prints CV top-1/top-5 with and without the two extra columns (fold seeds 0, 1).

    .venv/bin/python benchmarks/experiments/compile_metadata_features_cv.py      (~2 min, 2 cores)

Result (docs/BENCHMARKS.md §4, sixth session): worse with them, so not added.
"""

import sys
import time

import numpy as np
import pandas as pd
import pyarrow.dataset as pads
from sklearn.model_selection import GroupKFold

import tilecost.train.model as M
from tilecost.device import load_device
from tilecost.features import FEATURE_NAMES
from tilecost.train.dataset import load_measurements
from tilecost.train.evaluate import evaluate_predictions
from tilecost.train.pipeline import build_features, candidate_rows, split_by_role

device = load_device("h200")
train, _ = split_by_role(load_measurements("datasets/measurements", "h200"))
X = build_features(train, device)
meta = (
    pads.dataset("datasets/measurements", format="parquet", partitioning="hive")
    .to_table(columns=["problem_key", "config_id", "run_id", "registers", "spills"])
    .to_pandas()
    .drop_duplicates(["problem_key", "config_id", "run_id"])
)
train = train.reset_index(drop=True)
merged = train[["problem_key", "config_id", "run_id"]].merge(
    meta, on=["problem_key", "config_id", "run_id"], how="left"
)
assert len(merged) == len(train)
train["registers"] = merged["registers"].to_numpy()
train["spills"] = merged["spills"].to_numpy()
print(
    len(train),
    train.problem_key.nunique(),
    train.registers.notna().mean(),
    train.spills.notna().mean(),
    file=sys.stderr,
)
pat = np.where(
    train.variant.to_numpy() == "tma",
    "t",
    (train.n.to_numpy() % 16 == 0).astype(str).astype(object)
    + (train.k.to_numpy() % 16 == 0).astype(str).astype(object),
)
key = (
    train.dtype.astype(str)
    + "|"
    + train.layout.astype(str)
    + "|"
    + train.config_id.astype(str)
    + "|"
    + pd.Series(pat, index=train.index)
)
key = key.to_numpy()
regs = train.registers.to_numpy(dtype=float)
spills = train.spills.to_numpy(dtype=float)
ext = tuple(FEATURE_NAMES) + ("spills_measured", "registers_measured")
groups = train.problem_key.to_numpy()
y = train.time_us.to_numpy()
hop = (train.status == "hopeless").to_numpy()


def run(extra: bool, seed: int):
    pred = np.empty(len(train))
    for fit_i, test_i in GroupKFold(n_splits=5, shuffle=True, random_state=seed).split(X, groups=groups):
        if extra:
            tab = pd.DataFrame({"key": key[fit_i], "r": regs[fit_i], "s": spills[fit_i]}).groupby("key").median()
            look = tab.reindex(key)
            Xe = np.column_stack([X, look.s.to_numpy(), look.r.to_numpy()])
            M.FEATURE_NAMES = ext
        else:
            Xe = X
            M.FEATURE_NAMES = tuple(FEATURE_NAMES)
        m = M.CostModel().fit(Xe[fit_i], y[fit_i], groups=groups[fit_i], hopeless=hop[fit_i])
        pred[test_i] = m.predict(Xe[test_i])
        if extra:
            cov = np.isfinite(look.s.to_numpy()[test_i]).mean()
    rows = candidate_rows(train.assign(_predicted=pred))
    ev = evaluate_predictions(rows, rows["_predicted"].to_numpy(), device)
    s = ev.summary()
    return s, (cov if extra else None)


for extra in (False, True):
    for seed in (0, 1):
        t = time.time()
        s, cov = run(extra, seed)
        print(
            extra,
            seed,
            {k: round(v, 3) for k, v in s.items() if k in ("top1_geomean", "top1_worst", "top5_geomean", "top5_worst")},
            cov,
            round(time.time() - t),
            flush=True,
        )
