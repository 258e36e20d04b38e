"""Experiment (eighth session, not part of the product): do training rows at the top of the model's own
ranking teach it more than as many random rows?

Training problems are measured on a 25% seeded sample of their space, so the configurations a model ranks
first on a problem are often never timed there; its held-out misses are mostly such confident picks (a 128×128
descriptor tile with BLOCK_K 128 over BLOCK_K 64 on large bf16 problems). The 88 training problems measured
over (nearly) their whole space let this be tried without the held-out problems: grouped 5-fold CV over
them; in each fold every other training problem is used as measured, except that the other full-space
problems are cut to a 25% sample by a shared seeded rank per dtype × layout (as the collector samples) and
then given, per variant, nothing more (A), the top-K configurations of model A's own ranking of their whole
space (B: what re-measuring the model's picks would add), or K more random ones (C: as many rows, no aim);
variant E draws C's K from a second shared 25% pool (so that collecting them compiles a quarter of the
space, not all of it); variant D cuts them instead to an independent 25% per problem (no shared rank).
Scored on the test fold's problems over their whole measured space.

    .venv/bin/python benchmarks/experiments/model_topk_rows_cv.py [K [SEED]]     (~2 min, 2 cores)
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from tilecost.device import load_device
from tilecost.problem import Problem
from tilecost.space import problem_candidates
from tilecost.train.dataset import load_measurements
from tilecost.train.evaluate import evaluate_predictions
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role

K = int(sys.argv[1]) if len(sys.argv) > 1 else 64
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 0  # draws the shared samples (they move A by ±0.02)
device = load_device("h200")
train, _ = split_by_role(load_measurements("datasets/measurements", "h200"))
train = candidate_rows(train)
first = train.drop_duplicates("problem_key").set_index("problem_key")
problems = {key: Problem(int(r.m), int(r.n), int(r.k), r["dtype"], r["layout"]) for key, r in first.iterrows()}
measured = train.groupby("problem_key").size()
full = sorted(k for k, p in problems.items() if measured[k] >= 0.9 * len(list(problem_candidates(p, "h200"))))
print(f"{len(problems)} training problems, {len(full)} measured over >= 90% of their space", flush=True)

pool_rank = {}  # a second shared rank, the pool of variant E
rank = {}  # the collector's shared seeded sample: one random rank per config of a dtype × layout
rng = np.random.default_rng(SEED)
for key in full:
    p = problems[key]
    for c in problem_candidates(p, "h200"):
        rank.setdefault((p.dtype.value, p.layout.value, c.key), rng.random())
        pool_rank.setdefault((p.dtype.value, p.layout.value, c.key), rng.random())
train["_sampled"] = [
    rank.get((d, lay, c), 0.0) < 0.25 or key not in set(full)
    for key, d, lay, c in zip(train.problem_key, train["dtype"], train["layout"], train.config_id, strict=True)
]


def fit(frame: pd.DataFrame) -> CostModel:
    return fit_rows(CostModel(), frame, device)


def own_sample(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The full-space problems of ``frame`` cut to an independent random 25% each, the rest as measured."""
    cut = frame.problem_key.isin(set(full))
    parts = [frame[~cut]] + [g.sample(frac=0.25, random_state=seed) for _, g in frame[cut].groupby("problem_key")]
    return pd.concat(parts)


scores: dict[str, list[float]] = {
    "A 25%": [],
    f"B 25% + model top-{K}": [],
    f"C 25% + {K} random": [],
    "D 25% per problem": [],
    f"E 25% + {K} random of a 2nd 25%": [],
}
top5: dict[str, list[float]] = {k: [] for k in scores}
full_arr = np.array(full)
for fold, (fit_i, test_i) in enumerate(GroupKFold(5, shuffle=True, random_state=0).split(full_arr, groups=full_arr)):
    test = set(full_arr[test_i])
    others = train[~train.problem_key.isin(test)]
    base = others[others._sampled]
    model_a = fit(base)
    cut = [k for k in full_arr[fit_i]]
    top_rows, random_rows, pool_rows = [], [], []
    for key in cut:
        rows = others[(others.problem_key == key) & ~others._sampled]
        scored = rows.assign(_p=model_a.predict(build_features(rows, device)))
        top_rows.append(scored.nsmallest(K, "_p").drop(columns="_p"))
        random_rows.append(rows.sample(min(K, len(rows)), random_state=fold))
        pooled = rows[
            [
                pool_rank.get((d, lay, c), 1.0) < 0.25
                for d, lay, c in zip(rows["dtype"], rows["layout"], rows.config_id, strict=True)
            ]
        ]
        pool_rows.append(pooled.sample(min(K, len(pooled)), random_state=fold))
    test_rows = train[train.problem_key.isin(test)]
    for name, model in (
        ("A 25%", model_a),
        (f"B 25% + model top-{K}", fit(pd.concat([base, *top_rows]))),
        (f"C 25% + {K} random", fit(pd.concat([base, *random_rows]))),
        ("D 25% per problem", fit(own_sample(others, fold))),
        (f"E 25% + {K} random of a 2nd 25%", fit(pd.concat([base, *pool_rows]))),
    ):
        ev = evaluate_predictions(test_rows, model.predict(build_features(test_rows, device)), device)
        scores[name] += [r.top1 for r in ev.problems]
        top5[name] += [r.top5 for r in ev.problems]
    print(f"fold {fold}: " + "  ".join(f"{n}: {np.exp(np.mean(np.log(v))):.3f}" for n, v in scores.items()), flush=True)
for name in scores:
    t1, t5 = np.array(scores[name]), np.array(top5[name])
    print(
        f"{name:24s} top-1 {np.exp(np.log(t1).mean()):.3f} worst {t1.min():.3f} top-5 {np.exp(np.log(t5).mean()):.3f}"
    )
