"""Experiment (forty-eighth session, not part of the product): how far the run-time dispatch rules are from what a few
configurations could give on the held-out problems.

The shipped artifact holds, per dtype and layout, a depth-two rule on log2 extents over 2-4 pointer-kernel
configurations (``predict/dispatch.py``, issue 5 item 6), fitted to the model's times on the training problems. Per
group, on its held-out problems (every candidate measured), this prints the measured best over the time of:

* ``rule``: the configuration the shipped rule chooses (:func:`~tilecost.predict.dispatch.dispatch_speed`);
* ``oracle over the rule's configs``: the fastest of the rule's own configurations for each problem (what a perfect
  choice among the same set would keep);
* ``best n ptr, oracle``: the n pointer configurations chosen greedily on these very problems to maximise the geometric
  mean with each problem's fastest of them, n = 1-8 (in sample: an upper bound for any rule of n configurations
  fitted elsewhere, not a figure a rule could reach);
* ``ptr only``: the fastest pointer configuration of each problem (the ceiling of any pointer-only set).

Geometric means; a configuration a problem did not time counts as e^-5 (it is not one of its candidates), as
the dispatch fit charges it; the ``rule`` column leaves such problems out, as the benchmark does.

    .venv/bin/python benchmarks/experiments/dispatch_ceiling.py [--artifact DIR] [--dataset DIR]   (~1 min)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

NOT_TIMED = -5.0  # ln of the speed fraction charged where a configuration is not a problem's candidate
SET_SIZES = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    args = parser.parse_args()

    from tilecost import Predictor
    from tilecost.errors import ArtifactError
    from tilecost.predict.dispatch import dispatch_speed
    from tilecost.problem import Problem
    from tilecost.train.dataset import load_measurements
    from tilecost.train.pipeline import candidate_rows, split_by_role

    predictor = Predictor.load(args.artifact)
    _, heldout = split_by_role(load_measurements(args.dataset, "h200"))
    rows = candidate_rows(heldout)
    rows = rows[np.isfinite(rows["time_us"])]
    print(f"{'group':12s} {'problems':>8s} | rule  | oracle over the rule's configs | "
          "best n ptr, oracle: n = 1..8 | ptr only")  # fmt: skip
    for (dtype, layout), group in rows.groupby([rows["dtype"].astype(str), rows["layout"].astype(str)], sort=True):
        try:
            rule = predictor.dispatch_rule(dtype, layout)
        except ArtifactError:
            continue
        times = group.pivot_table(index="problem_key", columns="config_id", values="time_us", aggfunc="min")
        best = times.min(axis=1).to_numpy()
        ptr = [c for c in times.columns if c.startswith("ptr-")]
        speed = np.log(best[:, None] / times[ptr].to_numpy())
        speed = np.where(np.isnan(speed), NOT_TIMED, speed)
        measured = {
            Problem.from_key(key): {c: float(t) for c, t in row.dropna().items()} for key, row in times.iterrows()
        }
        chosen = dispatch_speed(rule, measured)
        own = [ptr.index(c.key) for c in rule.configs if c.key in ptr]
        oracle_own = np.exp(speed[:, own].max(axis=1).mean()) if own else float("nan")
        kept, sets = np.full(len(best), NOT_TIMED), []
        for _ in range(SET_SIZES):
            column = int(np.argmax(np.maximum(kept[:, None], speed).sum(axis=0)))
            kept = np.maximum(kept, speed[:, column])
            sets.append(f"{np.exp(kept.mean()):.3f}")
        print(f"{dtype + ' ' + layout:12s} {len(best):8d} | {chosen['geomean_speed_fraction']:.3f} | "
              f"{oracle_own:.3f} ({len(rule.configs)} configs){'':13s} | {' / '.join(sets)} | "
              f"{np.exp(speed.max(axis=1).mean()):.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
