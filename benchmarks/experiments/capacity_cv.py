"""Experiment (twelfth session): does a larger model pay now that there are 2.6 times the training problems?

The seventh session found depth 10 generalising worse than the shipped depth 8 in CV on ~300 training problems
(0.883 against 0.901), and the eleventh that larger models fit the held-out problems in sample almost perfectly
(0.988-0.996): the limit was carrying the order to unseen shapes. With 1,045 training problems the balance may
have moved. Grouped 5-fold CV over the training problems, per fold seed, each arm a CostModel's settings fitted
on the same fit folds; every test problem judged on the configurations it timed. The held-out problems are not
used. The predictor's latency grows with the trees scored (BENCHMARKS §5), so a gain here is weighed against it.

    .venv/bin/python benchmarks/experiments/capacity_cv.py [SEEDS [FIRST [ARMS]]]    (~6 min per fold seed, 2 cores)

ARMS (comma separated, default shipped,600d8,600d10): also 300d10 (depth 10 at 300 trees and rate 0.1), 300d12
(depth 12), d10l10 and d10mcw10 (depth 10 with reg_lambda 10 or min_child_weight 10; thirteenth session), 150d12
(depth 12 at 150 trees and rate 0.2, about half depth 12's nodes; fourteenth session), d12l768 and d12l1024
(depth 12 grown loss-guided, best leaf first, up to 768 or 1,024 leaves a tree: about depth 10's size, where the
shipped depth-10 trees hold ~700-850 leaves; fifteenth session). The
logs of the twelfth session were printed by the first form of this script (its own CV loop, the same folds and
fits; arms named in words).
"""

from __future__ import annotations

import sys

import numpy as np
from training_rows import TrainingRows

seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
first = int(sys.argv[2]) if len(sys.argv) > 2 else 0
KNOWN = {  # CostModel settings; "shipped" was 300 trees of depth 8 at rate 0.1 when this ran
    "shipped": {"max_depth": 8},
    "600d8": {"n_estimators": 600, "max_depth": 8},
    "600d10": {"n_estimators": 600, "max_depth": 10, "learning_rate": 0.05},
    "300d10": {"max_depth": 10},
    "300d12": {"max_depth": 12},
    "d10l10": {"reg_lambda": 10.0},  # the default depth 10 with more L2 on the leaves
    "d10mcw10": {"min_child_weight": 10.0},  # ... or larger leaves
    "150d12": {"n_estimators": 150, "max_depth": 12, "learning_rate": 0.2},  # depth 12 at half the trees
    "d12l768": {"max_depth": 12, "max_leaves": 768},  # depth 12, grown best leaf first up to 768 leaves a tree
    "d12l1024": {"max_depth": 12, "max_leaves": 1024},
}
chosen = sys.argv[3].split(",") if len(sys.argv) > 3 else ["shipped", "600d8", "600d10"]
data = TrainingRows.load()
problems = np.unique(data.groups)
big_m = {str(g) for g in problems if int(str(g).split("x", 1)[0]) > 64}
print(f"{len(problems)} training problems ({len(big_m)} with M > 64); arms: {', '.join(chosen)}", flush=True)
every_row = np.ones(len(data.rows), bool)
data.cv_arms(lambda seed: dict.fromkeys(chosen, every_row), {"all": lambda g: True, "M > 64": lambda g: g in big_m},
             range(first, first + seeds), settings={name: KNOWN[name] for name in chosen})  # fmt: skip
