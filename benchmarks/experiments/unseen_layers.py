"""Experiment (thirty-third session, not part of the product): the shipped model on the current models' layers it
never saw, over their timed samples.

Run r32lt (datasets/README, thirty-second and thirty-third sessions) holds training problems measured after the shipped
model was trained: each over a 25% sample of its candidates. The held-out sets judge a model against every candidate;
this judges the shipped artifact against what each of these problems timed (the evaluation ranks only the timed
candidates, so "best" is the best of the sample and top-1 is the model's pick among them): a check over many more
shapes of the kind the sixth held-out set holds 40 of. The shipped artifact was trained on dataset babc6599f406
(twenty-ninth session), before the run existed; an artifact trained on a dataset holding the run is judged in sample.

    .venv/bin/python benchmarks/experiments/unseen_layers.py [--artifact DIR] [--run r32lt] [--since ISO]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--run", default="r32lt")
    parser.add_argument("--since", help="only the problems whose rows were timed at or after this ISO instant")
    args = parser.parse_args()

    from tilecost.device import load_device
    from tilecost.train.dataset import load_measurements
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.pipeline import evaluate_model

    model, metadata = load_artifact_model(args.artifact)
    print(f"artifact trained on dataset {metadata.training['dataset_digest'][:12]}")
    data = load_measurements(args.dataset, "h200").frame
    frame = data[data.run_id.astype(str) == args.run]
    if args.since:
        first = frame.groupby("problem_key", observed=True).timestamp.transform("min")
        since = pd.Timestamp(args.since)
        frame = frame[first >= (since if since.tzinfo else since.tz_localize("UTC"))]
        print(f"problems first timed at or after {args.since}: {frame.problem_key.nunique()}")
    result = evaluate_model(model, frame, load_device("h200"))
    print(result.table(per_problem=False))
    top1 = np.array([r.top1 for r in result.problems])
    m = np.array([r.problem.m for r in result.problems])
    dtypes = np.array([r.problem.dtype.value for r in result.problems])
    print(f"\n{len(top1)} problems; below 0.90: {(top1 < 0.9).sum()}; below 0.80: {(top1 < 0.8).sum()}")
    for label, mask in [("M <= 16", m <= 16), ("M 32-512", (m >= 32) & (m <= 512)), ("M >= 1024", m >= 1024)]:
        for d in sorted(set(dtypes)):
            sel = mask & (dtypes == d)
            if sel.any():
                geo = float(np.exp(np.log(top1[sel]).mean()))
                print(f"{label:10s} {d:8s} {sel.sum():4d} problems: top-1 {geo:.3f}, worst {top1[sel].min():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
