"""Diagnostic (nineteenth session): how much of a model's own top is untimed on the training problems.

Training problems are timed on a sample of their space (25% for most), so cross-validation scores a model only
among the configurations each problem timed, while a held-out problem is scored over its whole space. For each
training problem this ranks every feasible candidate with an artifact's booster (the whole space, as
``predict_best`` would) and counts how many of the top K were never timed on it. On the eighteenth session's
artifact the first choice was untimed on 52% of the 4,096 training problems and 4.7 of the top 8 on average, which
is what the model-top rounds (``scripts/model_top_plan.py``) then measured.

    .venv/bin/python benchmarks/experiments/untimed_top.py [ARTIFACT_DIR]      (~2 min; default tilecost/models/h200)
"""

from __future__ import annotations

import collections
import json
import sys
import time
from pathlib import Path

import numpy as np
import xgboost as xgb

from tilecost.device import load_device
from tilecost.predict.scoring import GroupScorer
from tilecost.problem import Problem
from tilecost.train.dataset import load_measurements
from tilecost.train.pipeline import candidate_rows, split_by_role

K = 16
artifact = Path(sys.argv[1] if len(sys.argv) > 1 else "tilecost/models/h200")
start = time.monotonic()
device = load_device("h200")
meta = json.loads((artifact / "metadata.json").read_text())
booster = xgb.Booster()
booster.load_model(str(artifact / "model.ubj"))
main_trees = booster.num_boosted_rounds() - meta["level_trees"]  # the level trees shift a problem's candidates alike


def score(x: np.ndarray) -> np.ndarray:
    return booster.inplace_predict(x, iteration_range=(0, main_trees))


train, _ = split_by_role(load_measurements("datasets/measurements", "h200"))
rows = candidate_rows(train)
timed = rows.groupby("problem_key").config_id.agg(set)
first = rows.drop_duplicates("problem_key").set_index("problem_key")
by_kind: dict[tuple[object, object], list[tuple[str, Problem]]] = collections.defaultdict(list)
for key, r in first.iterrows():
    p = Problem(int(r.m), int(r.n), int(r.k), r["dtype"], r["layout"])
    by_kind[(p.dtype, p.layout)].append((str(key), p))
flags = []  # per problem: 1 where the model's i-th choice was timed on it
for (dtype, layout), items in sorted(by_kind.items(), key=str):
    group = GroupScorer.build(device, dtype, layout, meta["target"], score)
    for (key, _), top in zip(items, group.top_configs([p for _, p in items], K, workers=1), strict=True):
        keys = [group.space[i].key for i in top if i >= 0]
        flags.append([int(k in timed[key]) for k in keys] + [1] * (K - len(keys)))
    print(f"{dtype.value} {layout.value}: {len(items)} problems ({time.monotonic() - start:.0f} s)", flush=True)
a = np.array(flags)
print(f"{artifact}: {len(a)} training problems")
for k in (1, 2, 4, 8, 16):
    untimed = k - a[:, :k].sum(1)
    print(f"top-{k}: {untimed.mean():.2f} untimed per problem, {(untimed == 0).mean():.3f} of problems with all timed")
