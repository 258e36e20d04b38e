"""Experiment (eleventh session): do the first run's hopeless bounds mislead the model?

The first run (r28ad8bf50e, 92 bf16 nt training problems, timed before the spin and the hopeless confirmation:
docs/PROTOCOL.md) stored many candidates as ``hopeless`` on one slow screening launch. Its held-out problems were
all measured again with the current timer; its training problems were not. The worst in-sample training pick
of the eleventh session's model is one of them (1764×1672×9: a configuration stored hopeless at 57.5 µs whose
GROUP_M = 8 sibling times 10.7 µs). Arm A fits the fit folds as they are; arm B drops the first run's
``hopeless`` rows from them (its ``ok`` rows stay). Both judge the same test problems on every row they have;
the figures are also given on the test problems that are not the first run's.

Grouped 5-fold CV over the training problems, COUNT (default 8) fold seeds from FIRST.

    .venv/bin/python benchmarks/experiments/first_run_bounds_cv.py [FIRST [COUNT]]      (~12 min, 2 cores)
"""

from __future__ import annotations

import sys

import numpy as np
from training_rows import TrainingRows

FIRST_RUN = "r28ad8bf50e"
first = int(sys.argv[1]) if len(sys.argv) > 1 else 0
count = int(sys.argv[2]) if len(sys.argv) > 2 else 8
data = TrainingRows.load()
rows, groups = data.rows, data.groups
bound = ((rows["run_id"] == FIRST_RUN) & (rows["status"] == "hopeless")).to_numpy()
first_run = set(rows.loc[rows["run_id"] == FIRST_RUN, "problem_key"])
problems = np.unique(groups)
print(f"{len(problems)} training problems, {len(first_run)} of them the first run's; {bound.sum():,} of "
      f"{len(rows):,} rows are its hopeless bounds", flush=True)  # fmt: skip
arms = {"A as measured": np.ones(len(rows), bool), "B without the first run's bounds": ~bound}
data.cv_arms(lambda seed: arms, {"all": lambda g: True, "not the first run's": lambda g: g not in first_run},
             range(first, first + count))  # fmt: skip
