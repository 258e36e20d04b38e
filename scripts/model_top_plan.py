"""Write a model-top plan: training problems re-timed on the untimed part of the model's own top.

Most training problems are timed on a 25% sample of their space, so the configurations a model ranks fastest on
them are often never timed there (nineteenth session, on the shipped artifact: the model's first choice is untimed
on 52% of the 4,096 training problems, 4.7 of its top 8 on average), and nothing in the data tells the trees that
they rank those too high. A plan entry here restricts a training problem (``only``) to the configurations among
its ``WITHIN`` fastest by the model's full scoring (every candidate, by BOOSTER below) that no run has timed on it
(:func:`tilecost.train.nightly_plan.model_top_entries`, the nightly's ``--model-top`` with a rank bound).

    .venv/bin/python scripts/model_top_plan.py NAME WITHIN PROBLEMS [SEED [CHUNKS [BOOSTER [DEVICE_CLASS]]]]
        (~2 min; up to PROBLEMS problems in an order seeded by SEED, default 0, ranked by BOOSTER, an XGBoost
         model file of a CostModel with the default target, ln(time / roofline): default (or ``-``) the shipped
         artifact's tilecost/models/h200/model.ubj, or the model.json that `tilecost train` logs to MLflow, under
         mlruns/<experiment>/models/<model id>/artifacts/; written to datasets/plans/NAME.json, or with
         CHUNKS > 1 cut in that order into CHUNKS plans NAME-a.json, NAME-b.json, ... of random problems each,
         so that a collection stopped at its time budget has covered every kind alike rather than the sweep's
         first patterns; DEVICE_CLASS, default h200, names whose training problems are read and whose spec the
         booster's features describe: h100_sxm ranks the H100's training problems as
         ``Predictor.load("h200", device="h100_sxm")`` does)

The sixty-seventh session's ``model_top_plan.py 2026-12-07-s67-h100-model-top8 8 5000 67 3 - h100_sxm`` (``-`` for the
default booster) tops up the H100's sampled training problems, whose measured best is the predictor's answer for
them: replaying the sampler on the held-out problems, the sample's best reaches 0.984 of the space's best and the
sample with the model's top 8 0.995 (``benchmarks/experiments/sample_best_gap.py``, docs/BENCHMARKS.md §5).

The nineteenth session's plans: ``model_top_plan.py 2026-12-01-s19-model-top8 8 5000 19 4`` (3,595 problems,
19,262 pairs, 4,498 distinct kernels; written by the version of commit 21311e5, which ranked with the shipped
predictor's ``predicted_times_us`` instead of a booster file), then ``... 2026-12-01-s19-model-top8-round2 8 5000 20
1 <round one's MLflow model.json>`` and ``... -round3 8 5000 21 1 <round two's>``.

Collect it with ``--sample-fraction 1.0`` (an entry holds at most WITHIN configurations, under the sweep's
``min_sample`` of 64, so every one is measured anyway). The eighth session's plans
(``datasets/plans/2026-11-30-model-top64-*.json``: the 64 fastest untimed of a model refitted in the script, no
rank bound) were written by this script's first version.
"""

from __future__ import annotations

import collections
import sys
import time

import xgboost as xgb

from tilecost.collect.compile import specialisation_key
from tilecost.collect.plans import PlanEntry
from tilecost.config import TileConfig
from tilecost.device import load_device
from tilecost.predict.scoring import GroupScorer
from tilecost.problem import Problem
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.nightly_plan import model_top_entries, plan_json
from tilecost.train.pipeline import split_by_role

if len(sys.argv) not in (4, 5, 6, 7, 8) or not 1 <= (int(sys.argv[5]) if len(sys.argv) > 5 else 1) <= 10:
    sys.exit(__doc__)
NAME, WITHIN, PROBLEMS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
SEED = int(sys.argv[4]) if len(sys.argv) > 4 else 0
CHUNKS = int(sys.argv[5]) if len(sys.argv) > 5 else 1
BOOSTER = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] != "-" else "tilecost/models/h200/model.ubj"
DEVICE_CLASS = sys.argv[7] if len(sys.argv) > 7 else "h200"

start = time.monotonic()
train, _ = split_by_role(load_measurements("datasets/measurements", DEVICE_CLASS))
timed: dict[str, set[str]] = collections.defaultdict(set)
for key, config_id in zip(train["problem_key"], train["config_id"], strict=True):
    timed[key].add(config_id)
booster = xgb.Booster()
booster.load_model(BOOSTER)
device = load_device(DEVICE_CLASS)
groups: dict[tuple[object, object], GroupScorer] = {}


def predicted_times(problem: Problem) -> dict[TileConfig, float]:
    """Every candidate's predicted µs by the whole booster (its level trees, if any, shift a problem's candidates
    alike, so they leave the order as the predictor's main trees give it)."""
    kind = (problem.dtype, problem.layout)
    if kind not in groups:
        groups[kind] = GroupScorer.build(device, *kind, CostModel().target, booster.inplace_predict)
    group = groups[kind]
    indices, times = group.times_us(problem, group.everything)
    return {group.space[i]: float(t) for i, t in zip(indices, times, strict=True)}


print(f"{len(timed)} training problems read, {BOOSTER} loaded ({time.monotonic() - start:.0f} s)", flush=True)
entries: list[PlanEntry] = model_top_entries(
    timed, predicted_times, problems=PROBLEMS, per_problem=WITHIN, seed=SEED, within=WITHIN
)
pairs = [(e.problem, TileConfig.from_key(k)) for e in entries for k in dict(e.only)["config_id"]]
kernels = {(*specialisation_key(p, c), c.key) for p, c in pairs}
by_kind = collections.Counter(f"{e.problem.dtype.value}-{e.problem.layout.value}" for e in entries)
size = -(-len(entries) // CHUNKS)
for i in range(CHUNKS):
    path = f"datasets/plans/{NAME}.json" if CHUNKS == 1 else f"datasets/plans/{NAME}-{'abcdefghij'[i]}.json"
    with open(path, "w") as out:
        out.write(plan_json(entries[i * size : (i + 1) * size]))
print(f"{NAME}: {len(entries)} problems in {CHUNKS} plan(s), {len(pairs)} pairs, {len(kernels)} distinct kernels "
      f"({time.monotonic() - start:.0f} s); by kind {dict(sorted(by_kind.items()))}")  # fmt: skip
