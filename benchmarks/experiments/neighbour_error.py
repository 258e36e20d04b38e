"""Experiment (sixteenth session): do the model's errors on nearby training problems foretell its error on a new one?

The OOD bar asks the flags to catch >= 80% of held-out problems whose top-1 is below 0.90, and none of the
answer's own signals (predicted time, top-2 gap, arithmetic intensity, distance to the training problems) tells
those apart (BENCHMARKS §5). A signal that knows the model's errors might: the out-of-fold top-1 of the nearest
training problems of the same dtype and layout (log2 M, N, K, Euclidean). Grouped 5-fold CV (one fold seed,
the shipped settings) gives every training problem an out-of-fold top-1; then

* on the training problems themselves, each problem's neighbours (itself excluded) are scored against its own
  out-of-fold top-1 (~3,200 problems, ~10% bad: the power of the idea), and
* on the held-out problems, the neighbours' out-of-fold top-1 against the shipped model's held-out top-1 (from the
  artifact's ``metadata.ood.heldout_top1``).

For each neighbour count k the signal is the neighbours' mean log top-1 (and the share below 0.90); reported:
the AUC (bad against good), and at the threshold flagging at most 10% of the good problems, how many bad ones it
catches.

    .venv/bin/python benchmarks/experiments/neighbour_error.py [SEED]     (~6 min, 2 cores)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score
from training_rows import TrainingRows

from tilecost.problem import Problem

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 1
GOOD = 0.90


def key_parts(key: str) -> tuple[np.ndarray, str]:
    problem = Problem.from_key(key)
    return np.log2([problem.m, problem.n, problem.k]), f"{problem.dtype.value}-{problem.layout.value}"


def signals(
    query: list[str], reference: dict[str, float], ks: tuple[int, ...], exclude_self: bool
) -> dict[int, dict[str, list[float]]]:
    """Per k: each query problem's neighbours' mean log top-1 and share below GOOD (reference problems of its group)."""
    members: dict[str, list[str]] = {}
    for key in reference:
        members.setdefault(key_parts(key)[1], []).append(key)
    by_group = {group: (keys, np.array([key_parts(k)[0] for k in keys])) for group, keys in members.items()}
    out: dict[int, dict[str, list[float]]] = {k: {"mean_log": [], "share_bad": []} for k in ks}
    for key in query:
        point, group = key_parts(key)
        keys, points = by_group[group]
        distance = np.sqrt(((points - point) ** 2).sum(axis=1))
        order = [i for i in np.argsort(distance) if not (exclude_self and keys[i] == key)]
        for k in ks:
            near = np.array([reference[keys[i]] for i in order[:k]])
            out[k]["mean_log"].append(float(np.log(near).mean()))
            out[k]["share_bad"].append(float((near < GOOD).mean()))
    return out


def judge(name: str, bad: np.ndarray, signal: np.ndarray) -> str:
    """AUC of a low signal for bad problems, and the catch at <= 10% of good problems flagged (flag: signal < t)."""
    auc = roc_auc_score(bad, -signal)
    good_values = np.sort(signal[~bad])
    threshold = good_values[int(np.floor(0.10 * len(good_values)))]  # flag strictly below: <= 10% of good
    flagged = signal < threshold
    return (
        f"{name:28s} AUC {auc:.3f}; flag below {threshold:+.4f}: bad caught {int((flagged & bad).sum())}/"
        f"{int(bad.sum())}, good flagged {int((flagged & ~bad).sum())}/{int((~bad).sum())}"
    )


def main() -> None:
    data = TrainingRows.load()
    predicted = data.out_of_fold(SEED, progress=lambda p: print("fold done", flush=True))
    oof = data.top1_by_problem(np.arange(len(predicted)), predicted)
    values = np.array(list(oof.values()))
    print(f"{len(oof)} training problems, out-of-fold top-1 {np.exp(np.log(values).mean()):.3f} "
          f"(geometric mean), {int((values < GOOD).sum())} below {GOOD}")  # fmt: skip
    ks = (1, 3, 5, 10)
    keys = list(oof)
    bad = np.array([oof[k] < GOOD for k in keys])
    found = signals(keys, oof, ks, exclude_self=True)
    print("training problems, each judged by its neighbours' out-of-fold top-1 (itself excluded):")
    for k in ks:
        print("  " + judge(f"k={k} mean log top-1", bad, np.array(found[k]["mean_log"])))
        print("  " + judge(f"k={k} share below 0.90", bad, -np.array(found[k]["share_bad"])))
    metadata = json.loads(Path("tilecost/models/h200/metadata.json").read_text())
    heldout = metadata["ood"]["heldout_top1"]
    held_keys = list(heldout)
    held_bad = np.array([heldout[k] < GOOD for k in held_keys])
    found = signals(held_keys, oof, ks, exclude_self=False)
    print(f"held-out problems ({len(held_keys)}, {int(held_bad.sum())} bad), judged by the training problems' "
          "out-of-fold top-1:")  # fmt: skip
    for k in ks:
        print("  " + judge(f"k={k} mean log top-1", held_bad, np.array(found[k]["mean_log"])))
        print("  " + judge(f"k={k} share below 0.90", held_bad, -np.array(found[k]["share_bad"])))


if __name__ == "__main__":
    main()
