"""Experiment (thirteenth session, not part of the product): does a *diverse* top 5 measure faster than the plain one?

The model's first five candidates are often near-copies of one tile (the same BLOCK_M × BLOCK_N × BLOCK_K with
other warps or stages), so when the model misjudges that tile all five miss together. A caller who measures
the top k (``rank``, the autotune pruner) wants five different bets. Rules tried, each a greedy walk down the
model's order that skips a candidate sharing its *kind* with one already taken (after the first, which is
always the model's best, so top-1 is unchanged), within a margin: a candidate predicted more than ``slack``
slower than the first is taken regardless of kind, so the list never reaches far down for diversity alone.

Out-of-fold predictions over the training problems (grouped 5-fold CV, fold seeds SEEDS; the held-out
problems unread): the top-5 of every rule over the same predictions. Predictions are cached in ``CACHE`` so
more rules can be tried without refitting.

    .venv/bin/python benchmarks/experiments/diverse_topk_cv.py [SEEDS] [CACHE]   (~3 min per seed, 2 cores)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import numpy as np
from training_rows import TrainingRows

from tilecost.config import TileConfig

SEEDS = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "0,1").split(",")]
CACHE = sys.argv[2] if len(sys.argv) > 2 else "/tmp/diverse_topk_oof.npz"
K = 5

data = TrainingRows.load()
configs = {key: TileConfig.from_key(key) for key in np.unique(data.rows["config_id"].to_numpy())}
config_of = [configs[k] for k in data.rows["config_id"].to_numpy()]

if os.path.exists(CACHE) and set(SEEDS) <= set(int(s) for s in np.load(CACHE)["seeds"]):
    cached = np.load(CACHE)
    oof = {s: cached[f"seed{s}"] for s in SEEDS}
else:
    oof = {}
    for seed in SEEDS:
        oof[seed] = data.out_of_fold(seed)
        print(f"fold seed {seed}: fitted", flush=True)
    np.savez(CACHE, seeds=np.array(SEEDS), **{f"seed{s}": p for s, p in oof.items()})

KINDS: dict[str, Callable[[TileConfig], object]] = {
    "tile": lambda c: (c.variant, c.block_m, c.block_n, c.block_k),
    "mn": lambda c: (c.block_m, c.block_n),
    "tile+split": lambda c: (c.variant, c.block_m, c.block_n, c.block_k, c.split_k),
    "mn+split": lambda c: (c.block_m, c.block_n, c.split_k),
}


def pick(order: np.ndarray, pred: np.ndarray, cfgs: list[TileConfig], kind: Callable[[TileConfig], object] | None,
         slack: float) -> list[int]:  # fmt: skip
    """The first K of ``order`` (positions into one problem's rows), skipping repeated kinds within ``slack``."""
    if kind is None:
        return list(order[:K])
    chosen, seen = [], set()
    limit = pred[order[0]] * (1 + slack)
    for i in order:
        k = kind(cfgs[i])
        if chosen and k in seen and pred[i] <= limit:
            continue
        chosen.append(i)
        seen.add(k)
        if len(chosen) == K:
            break
    return chosen


positions = {g: np.flatnonzero(data.groups == g) for g in np.unique(data.groups)}
rules = [("plain", None, 0.0)] + [(f"{n} within {s:.0%}", f, s) for n, f in KINDS.items() for s in (0.05, 0.15, 0.5)]
for seed, pred_all in oof.items():
    print(f"fold seed {seed}: top-{K} geometric mean (problems below 0.95) / worst over {len(positions)} problems")
    for name, kind, slack in rules:
        scores = []
        for pos in positions.values():
            pred, times = pred_all[pos], data.time_us[pos]
            order = np.argsort(pred, kind="stable")
            scores.append(times.min() / times[pick(order, pred, [config_of[i] for i in pos], kind, slack)].min())
        s = np.array(scores)
        print(f"  {name:<22} {np.exp(np.log(s).mean()):.4f} ({int((s < 0.95).sum())}) {s.min():.3f}", flush=True)
