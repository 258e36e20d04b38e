"""Experiment (twelfth session): the measured speed of the predictor's answer per shortlist width.

`benchmarks/predict_latency.py` reports each width's latency and its agreement with scoring every candidate;
what a caller gets is the measured time of the answer. For each artifact and width, the held-out problems'
best measured time over the measured time of the predictor's pick (measured=False, so that no answer comes
from the measured database; a pick never timed counts 0): mean, geometric mean, worst, count below 0.90.

    .venv/bin/python benchmarks/experiments/width_quality.py ARTIFACT [ARTIFACT ...] [--widths 8,12,16,22]
    (~40 s per artifact, 2 cores)

The twelfth session compared the depth-8 export with the depth-10 one (BENCHMARKS §5) to choose the default
width of 8 for the depth-10 model.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.test_predict_fixture import load_dataset  # noqa: E402  (the repo root on the path first)
from tilecost import Predictor  # noqa: E402
from tilecost.predict.predictor import EXTEND_FROM  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("artifacts", nargs="+", type=Path)
parser.add_argument("--widths", default="8,12,16,22")
args = parser.parse_args()
data = load_dataset(groups=None)
heldout = data.problems("heldout")
for artifact in args.artifacts:
    for width in (int(w) for w in args.widths.split(",")):
        predictor = Predictor.load(artifact, shortlist_width=width, extend_from=EXTEND_FROM)
        fractions = []
        for problem in heldout:
            best = min(data.times(problem).values())
            times = data.times(problem, ("ok", "hopeless"))  # a hopeless pick counts at its lower-bound time
            pick = predictor.predict_best(problem, measured=False).config.key
            fractions.append(best / times.get(pick, math.inf))
        f = np.array(fractions)
        print(f"{artifact} depth {predictor.ensemble.depth} width {width:2}: {len(f)} problems, top-1 mean "
              f"{f.mean():.4f}, geomean {np.exp(np.log(f).mean()):.4f}, worst {f.min():.3f}, below 0.90 "
              f"{int((f < 0.9).sum())}", flush=True)  # fmt: skip
