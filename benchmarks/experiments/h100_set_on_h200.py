"""Experiment (seventy-second session, not part of the product): what a training round would buy an H100 model,
judged on the H200, which has measured every problem of it already.

A model fitted on the H100's own training problems reaches 0.943 of the best on the H100's held-out problems, against
0.958 for the H200 model asked for the H100 (``joint_fit_heldout.py``). Whether the H100's second training round
(the queue's rh2t plans, mostly random extents) would close that gap cannot be measured before an H100 runs it, but
every one of those problems is an H200 training problem, and so is nearly every H100 training problem: fitting the
H200's rows of the same problem sets and judging on the H200's held-out problems is a proxy on a device where the
data exist. Each fit is a ``CostModel`` with the shipped settings (the training report's evaluation, every candidate
each held-out problem timed):

* ``h100 set``: the H200's rows of the problems the H100 has measured as training problems;
* ``+ plans``: the same and the problems of the given plans (default: the rh2t round);
* ``+ random R``: the same and as many other H200 training problems drawn at random (seed R), a round of the H200's
  own mix for comparison;
* ``all``: every H200 training problem (a refit of the shipped model).

The H200 timed some of these problems on more than a 25% sample (earlier runs, model-top rounds), so its rows are
a little richer than the H100's will be; the differences between the fits, not their levels, are the figure.

    .venv/bin/python benchmarks/experiments/h100_set_on_h200.py [PLAN_GLOB] [--draws 2]   (~2 min a fit, 2 cores)
"""

from __future__ import annotations

import argparse
import glob
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plans", nargs="?", default="datasets/plans/2026-12-07-s72-h100-train2-*.json")
    parser.add_argument("--draws", type=int, default=2, help="random rounds of the same size to compare with")
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    args = parser.parse_args()

    from tilecost.collect.plans import load_plan_file
    from tilecost.device import load_device
    from tilecost.train.dataset import load_measurements
    from tilecost.train.model import CostModel
    from tilecost.train.pipeline import evaluate_model, fit_rows, split_by_role

    started = time.perf_counter()
    paths = sorted(glob.glob(str(REPO / args.plans)))
    if not paths:
        parser.error(f"plans {args.plans!r}: no plan file matches")
    planned = {e.problem.key for p in paths for e in load_plan_file(p)}
    device = load_device("h200")
    train, heldout = split_by_role(load_measurements(args.dataset, "h200"))
    on_h200 = set(train["problem_key"].unique())
    h100 = load_measurements(args.dataset, "h100_sxm").frame
    h100_set = set(h100.loc[h100["role"] == "train", "problem_key"].unique()) & on_h200
    missing = planned - on_h200
    planned &= on_h200
    new = planned - h100_set
    print(
        f"{len(on_h200)} H200 training problems, {heldout['problem_key'].nunique()} held-out; the H100's training "
        f"problems on the H200: {len(h100_set)}; {len(paths)} plans, {len(planned)} of their problems on the H200"
        f" ({len(missing)} not), {len(new)} new to the set; {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    others = np.array(sorted(on_h200 - h100_set - planned))
    sets: list[tuple[str, set[str]]] = [("h100 set", h100_set), ("+ plans", h100_set | planned)]
    for seed in range(args.draws):
        drawn = np.random.default_rng(seed).choice(others, len(new), replace=False)
        sets.append((f"+ random {seed}", h100_set | set(drawn.tolist())))
    sets.append(("all", on_h200))
    for name, keys in sets:
        t0 = time.perf_counter()
        part = train[train["problem_key"].isin(keys)]
        evaluation = evaluate_model(fit_rows(CostModel(), part, device), heldout, device)
        summary = evaluation.summary()
        below = sum(r.top1 < 0.90 for r in evaluation.problems)
        print(
            f"{name:<12} {len(keys):>6} problems {len(part):>10,} rows  top-1 {summary['top1_geomean']:.3f}  "
            f"worst {summary['top1_worst']:.3f}  below 0.90: {below:>3}  top-5 {summary['top5_geomean']:.3f}  "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
