"""Experiment (eleventh session): where the shipped model's held-out top-1 is lost, and what a nearby measured
shape would have given instead. Diagnostic only: no setting is chosen from it.

Fits the shipped settings on the training problems, ranks every candidate of each held-out problem, then:

1. **Which decision costs the most.** For each field of a configuration (the tile BLOCK_M × BLOCK_N, BLOCK_K,
   split-K, the kernel variant, warps × stages, GROUP_M), the model's pick among only the candidates that
   share the best configuration's value of that field (an oracle for that one decision): the top-1 it
   would reach.
2. **How far a neighbour's best carries.** For each held-out problem and its 8 nearest training problems of
   the same dtype × layout measured over >= 90% of their space (distance: Euclidean in log2 M, N, K), the
   neighbour's best configuration timed on the held-out problem (best / its time), by distance; and the
   model's own top-1 on the same problems.
3. **Coverage.** Per dtype × layout: training problems, how often the held-out best configuration was never
   timed on a training problem of its kind, and the share of a held-out problem's candidates never timed.

    .venv/bin/python benchmarks/experiments/heldout_error_anatomy.py      (~1 min, 2 cores)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tilecost.device import load_device  # noqa: E402
from tilecost.problem import Problem  # noqa: E402
from tilecost.space import problem_candidates  # noqa: E402
from tilecost.train.dataset import load_measurements  # noqa: E402
from tilecost.train.model import CostModel  # noqa: E402
from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role  # noqa: E402

DECISIONS = {
    "tile (BLOCK_M x BLOCK_N)": ["block_m", "block_n"],
    "BLOCK_K": ["block_k"],
    "split-K": ["split_k"],
    "variant": ["variant"],
    "warps x stages": ["num_warps", "num_stages"],
    "GROUP_M": ["group_m"],
    "tile and BLOCK_K": ["block_m", "block_n", "block_k"],
    "all but warps x stages": ["block_m", "block_n", "block_k", "split_k", "variant", "group_m"],
}


def geomean(values) -> float:  # type: ignore[no-untyped-def]
    return float(np.exp(np.log(np.asarray(values, dtype=float)).mean()))


device = load_device("h200")
train, heldout = split_by_role(load_measurements("datasets/measurements", "h200"))
model = fit_rows(CostModel(), train, device)
held = candidate_rows(heldout)
held["pred"] = model.predict(build_features(held, device))
trained = candidate_rows(train)

# 1. decisions
model_top1, by_decision = [], {name: [] for name in DECISIONS}
for _, g in held.groupby("problem_key"):
    best = g.loc[g["time_us"].idxmin()]
    model_top1.append(best["time_us"] / g.loc[g["pred"].idxmin(), "time_us"])
    for name, fields in DECISIONS.items():
        same = np.logical_and.reduce([g[f].to_numpy() == best[f] for f in fields])
        pick = g[same].loc[g[same]["pred"].idxmin()]
        by_decision[name].append(best["time_us"] / pick["time_us"])
print(f"{held['problem_key'].nunique()} held-out problems; the model's top-1 {geomean(model_top1):.3f} "
      f"({sum(v < 0.9 for v in model_top1)} below 0.90)")  # fmt: skip
print("top-1 if one decision were made right (the model picks the rest):")
for name, values in by_decision.items():
    print(f"  {name:<24} {geomean(values):.3f} ({sum(v < 0.9 for v in values)} below 0.90)")

# 2. neighbours measured over their whole space
sizes = trained.groupby("problem_key").size()
full = [k for k in sizes.index if sizes[k] >= 0.9 * len(problem_candidates(Problem.from_key(k), device))]
print(f"\n{len(full)} training problems measured over >= 90% of their space")
rows = []
for (dtype, layout), hg in held.groupby(["dtype", "layout"]):
    tg = trained[(trained["dtype"] == dtype) & (trained["layout"] == layout) & trained["problem_key"].isin(full)]
    if tg["problem_key"].nunique() < 5:
        continue
    times = {q: g.set_index("config_id")["time_us"] for q, g in tg.groupby("problem_key")}
    where = {q: np.log2(g[["m", "n", "k"]].iloc[0].to_numpy(dtype=float)) for q, g in tg.groupby("problem_key")}
    for _, g in hg.groupby("problem_key"):
        t = g.set_index("config_id")["time_us"]
        at = np.log2(g[["m", "n", "k"]].iloc[0].to_numpy(dtype=float))
        top1 = t.min() / t[g.set_index("config_id")["pred"].idxmin()]
        for q in sorted(times, key=lambda q: float(np.linalg.norm(where[q] - at)))[:8]:
            common = times[q].index.intersection(t.index)
            rows.append({"kind": f"{dtype} {layout}", "distance": float(np.linalg.norm(where[q] - at)),
                         "neighbour": t.min() / t[times[q][common].idxmin()], "model": top1})  # fmt: skip
near = pd.DataFrame(rows)
near["octaves"] = pd.cut(near["distance"], [0, 0.5, 1, 2, 4, 32])
print("a neighbour's best configuration on the held-out problem, by distance (log2 octaves):")
for span, g in near.groupby("octaves", observed=True):
    print(f"  {str(span):<12} {len(g):>4} pairs: neighbour's best {geomean(g['neighbour']):.3f}, "
          f"the model on the same problems {geomean(g['model']):.3f}")  # fmt: skip
nearest = near.groupby(["kind", "model"], as_index=False)["distance"].min()
print(
    "distance from a held-out problem to its nearest such neighbour, median by kind: "
    + ", ".join(f"{k} {v:.2f}" for k, v in nearest.groupby("kind")["distance"].median().items())
)

# 3. coverage
timed = trained.groupby(["dtype", "layout", "config_id"]).size()
print("\ncoverage by dtype x layout: training problems; held-out problems; their best never timed in training; "
      "share of their candidates never timed; the model's top-1")  # fmt: skip
for (dtype, layout), hg in held.groupby(["dtype", "layout"]):
    never_best, never_share, top1 = 0, [], []
    for _, g in hg.groupby("problem_key"):
        best = g.loc[g["time_us"].idxmin()]
        never_best += int(timed.get((dtype, layout, best["config_id"]), 0) == 0)
        never_share.append(np.mean([timed.get((dtype, layout, c), 0) == 0 for c in g["config_id"]]))
        top1.append(best["time_us"] / g.loc[g["pred"].idxmin(), "time_us"])
    n_train = trained.loc[(trained["dtype"] == dtype) & (trained["layout"] == layout), "problem_key"].nunique()
    print(f"  {dtype:<8} {layout}  {n_train:>4} training, {len(top1):>3} held out, best never timed {never_best:>2}, "
          f"candidates never timed {np.mean(never_share):.0%}, top-1 {geomean(top1):.3f}")  # fmt: skip
