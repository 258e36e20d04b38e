"""Write the eighth session's model-top plans: for every training problem of the dataset measured on less
than 90% of its space, the K configurations the cost model (the shipped settings, fitted on the training
problems) ranks fastest among those never timed on it, as plan files restricted to them (``only``).

    .venv/bin/python scripts/model_top_plan.py 64      (~1 min; writes datasets/plans/2026-11-30-model-top64-*.json)

One file for bf16/fp16 and one for fp8/fp32, so that two GPUs compile disjoint kernels. The nightly loop does
the same for a few problems a night with the champion artifact (``tilecost nightly --model-top N``).
"""

from __future__ import annotations

import collections
import json
import sys

import numpy as np
import pandas as pd

from tilecost.collect.compile import specialisation_key
from tilecost.device import load_device
from tilecost.problem import Problem
from tilecost.space import problem_candidates
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role

K = int(sys.argv[1]) if len(sys.argv) > 1 else 64
device = load_device("h200")
train, _ = split_by_role(load_measurements("datasets/measurements", "h200"))
model = fit_rows(CostModel(), train, device)
rows = candidate_rows(train)
timed = rows.groupby("problem_key").config_id.agg(set)
first = rows.drop_duplicates("problem_key").set_index("problem_key")
kernels: dict[str, set] = collections.defaultdict(set)
plans: dict[str, list] = collections.defaultdict(list)
for key, r in first.iterrows():
    p = Problem(int(r.m), int(r.n), int(r.k), r["dtype"], r["layout"])
    cands = list(problem_candidates(p, "h200"))
    if len(timed[key]) >= 0.9 * len(cands):
        continue
    frame = pd.DataFrame(
        [dict(m=p.m, n=p.n, k=p.k, dtype=p.dtype.value, layout=p.layout.value, variant=c.variant.value,
              block_m=c.block_m, block_n=c.block_n, block_k=c.block_k, group_m=c.group_m, split_k=c.split_k,
              num_warps=c.num_warps, num_stages=c.num_stages) for c in cands]
    )  # fmt: skip
    order = np.argsort(model.predict(build_features(frame, device)))
    pick = [cands[i] for i in order if cands[i].key not in timed[key]][:K]
    group = "16bit" if p.dtype.value in ("bf16", "fp16") else "fp8fp32"
    kernels[group].update((*specialisation_key(p, c), c.key) for c in pick)
    plans[group].append(
        dict(m=p.m, n=p.n, k=p.k, dtype=p.dtype.value, layout=p.layout.value, family="model-top", role="train",
             only={"config_id": sorted(c.key for c in pick)})
    )  # fmt: skip
for group, entries in plans.items():
    pairs = sum(len(e["only"]["config_id"]) for e in entries)
    print(f"{group}: {len(entries)} problems, {pairs} pairs, {len(kernels[group])} distinct kernels")
    with open(f"datasets/plans/2026-11-30-model-top{K}-{group}.json", "w") as out:
        json.dump(entries, out, indent=0)
