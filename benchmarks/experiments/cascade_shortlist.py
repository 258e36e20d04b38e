"""Experiment (seventh session, not part of the product): rank the whole shortlist with the model's first trees,
then only the best few with all of them.

Today a new shape scores the first 22 members of its cell's list (64 long) with the full model (300 trees). Here
every feasible member of the list is scored with the first T trees (a partial sum of the same booster: cheap),
the W best by that partial score are scored with all trees, and the fastest of those is the answer. Printed:
how often the answer equals scoring every candidate of the space with the full model, beside the width-22 and
width-64 prefixes, on the held-out problems (read from the predictor benchmark's JSON) and on random shapes of
every dtype and layout; and the tree-node work per query relative to the width-22 prefix.

    .venv/bin/python benchmarks/experiments/cascade_shortlist.py [--artifact tilecost/models/h200]   (~10 s)

Result (docs/BENCHMARKS.md §5, seventh session, on the sixth session's artifact): at the width-22 prefix's tree
work, 30 trees over the list then all trees on the best 16 agree on 63/78 held-out problems (prefix: 70) and
272/391 random shapes (prefix: 251); 50 trees then 22 (1.32x the work) 73/78 and 291/391. Not built: no
setting beats the prefix on both sets at equal work.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from tilecost.features import feature_matrix
from tilecost.predict import Predictor
from tilecost.predict.feasibility import feasible_mask
from tilecost.problem import DType, Layout, Problem

_LN2 = math.log(2.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--artifact", default="tilecost/models/h200")
    parser.add_argument("--latency-json", default="benchmarks/results/2026-11-29-s6/predict-latency.json")
    parser.add_argument("--random", type=int, default=400)
    args = parser.parse_args()

    predictor = Predictor.load(args.artifact, shortlist_width=64)
    trees = predictor.ensemble
    log2_roofline = predictor_feature_index("log2_roofline_time_us")
    per_problem = json.loads(Path(args.latency_json).read_text())["ood"]["per_problem"]
    held = [Problem.from_key(r["problem"]) for r in per_problem]
    rng = np.random.default_rng(7)
    groups = [(d, lay) for d in DType for lay in Layout]
    rand = []
    for i in range(args.random):
        d, lay = groups[i % len(groups)]
        m, n, k = (int(round(2 ** rng.uniform(lo, hi))) for lo, hi in ((0, 14), (4, 15), (4, 15)))
        rand.append(Problem(m, n, k, d, lay))

    Ts, Ws = (10, 20, 30, 50), (8, 12, 16, 22)
    for name, problems in (("held-out", held), ("random", rand)):
        tally: dict[tuple, int] = {}
        count = 0
        for p in problems:
            group = predictor._group(p.dtype, p.layout)
            scorer = group.scorer
            row = group.shortlist.lists[group.shortlist.list_id(p)]
            members = np.array([int(x) for x in row[row >= 0][:64]], dtype=np.intp)
            cand = scorer.subset(np.sort(members))
            mask = feasible_mask(p, cand.columns, scorer.device)
            if not mask.any():
                continue
            x = feature_matrix(p, cand.features, scorer.device)[mask]
            idx = cand.indices[mask]
            order = np.array([int(np.where(members == i)[0][0]) for i in idx])  # list position of each row
            base = x[:, log2_roofline] * _LN2
            full = trees.predict(x) + base
            exhaustive = scorer.best_two(p, scorer.everything)[0]
            count += 1
            for width in (22, 64):
                sel = order < width
                tally[("prefix", width)] = tally.get(("prefix", width), 0) + (
                    sel.any() and int(idx[sel][np.argmin(full[sel])]) == exhaustive
                )
            for t in Ts:
                partial = trees.first_trees(t).predict(x) + base
                ranked = np.argsort(partial, kind="stable")
                for w in Ws:
                    keep = ranked[:w]
                    tally[(t, w)] = tally.get((t, w), 0) + (int(idx[keep][np.argmin(full[keep])]) == exhaustive)
        n_trees = trees.num_trees
        print(f"{name}: {count} problems")
        print(f"  width-22 prefix: {tally[('prefix', 22)]}/{count}   width-64 prefix: {tally[('prefix', 64)]}/{count}")
        for t in Ts:
            cells = []
            for w in Ws:
                work = (64 * t + w * (n_trees - t)) / (22 * n_trees)
                cells.append(f"W={w}: {tally[(t, w)]}/{count} (work {work:.2f}x)")
            print(f"  first {t} trees over the list, then all trees on the best W: " + "; ".join(cells))


def predictor_feature_index(name: str) -> int:
    from tilecost.features import FEATURE_NAMES

    return FEATURE_NAMES.index(name)


if __name__ == "__main__":
    main()
