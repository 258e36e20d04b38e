"""Experiment (tenth session): two training datasets, one held-out set, compared problem by problem.

The model is fitted as ``tilecost train`` fits it (the shipped settings) once on each dataset's training
problems and evaluated on the held-out problems of the first (``--after``); per dtype, the geometric mean of
top-1 before and after, how many problems got better or worse by more than 1%, and a paired bootstrap
interval of the change (problems resampled, 2,000 draws). Used to tell what new training data bought from the
±0.01-0.02 any change of the training data moves the held-out figures by (BENCHMARKS §4, eighth session).

    .venv/bin/python benchmarks/experiments/paired_datasets_heldout.py --before /tmp/ds_old [--refits 5]
    (~1 min, and ~30 s more per refit; 2 cores)

``--before``: a copy of the dataset without the new training runs (the held-out files the same). With
``--refits N`` each side is also fitted N more times on 90% of its training problems (the same problems left
out on both sides: a seeded hash of the problem key), and a problem's score is its mean log top-1 over the
N + 1 models: the data's own spread averaged out of the comparison.
"""

from __future__ import annotations

import argparse
import hashlib

import numpy as np

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import evaluate_model, fit_rows, split_by_role

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--before", required=True)
parser.add_argument("--after", default="datasets/measurements")
parser.add_argument("--refits", type=int, default=0)
args = parser.parse_args()
device = load_device("h200")
train_after, heldout = split_by_role(load_measurements(args.after, "h200"))
train_before, _ = split_by_role(load_measurements(args.before, "h200"))


def kept(key: str, refit: int) -> bool:
    """Whether refit ``refit`` (1..N) keeps training problem ``key``: 90% of them, the same on both sides."""
    return hashlib.blake2b(f"{refit}:{key}".encode(), digest_size=8).digest()[0] % 10 != 0


scores: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
for name, train in (("before", train_before), ("after", train_after)):
    for refit in range(args.refits + 1):
        rows = train if refit == 0 else train[train.problem_key.map(lambda key, r=refit: kept(key, r))]
        ev = evaluate_model(fit_rows(CostModel(), rows, device), heldout, device)
        for r in ev.problems:
            scores[name].setdefault(r.problem.key, []).append(np.log(r.top1))
    print(f"{name}: {args.refits + 1} fits", flush=True)
keys = sorted(scores["after"])
before = np.array([np.mean(scores["before"][k]) for k in keys])
after = np.array([np.mean(scores["after"][k]) for k in keys])
dtypes = np.array([k.rsplit("-", 2)[1] for k in keys])
rng = np.random.default_rng(0)
print(f"{'dtype':<8} {'probs':>5} | before  after  change (90% paired interval) | better worse (by > 1%)")
for dt in ["all", *sorted(set(dtypes))]:
    sel = np.ones(len(keys), bool) if dt == "all" else dtypes == dt
    b, a = before[sel], after[sel]
    draws = rng.integers(0, len(b), size=(2000, len(b)))
    change = np.exp(a[draws].mean(1)) - np.exp(b[draws].mean(1))
    lo, hi = np.quantile(change, [0.05, 0.95])
    print(
        f"{dt:<8} {sel.sum():>5} | {np.exp(b.mean()):.3f}  {np.exp(a.mean()):.3f}"
        f"  {np.exp(a.mean()) - np.exp(b.mean()):+.3f} ({lo:+.3f} to {hi:+.3f})"
        f" | {int((a - b > 0.01).sum()):>6} {int((b - a > 0.01).sum()):>5}"
    )
