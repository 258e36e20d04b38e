"""Experiment (fifty-seventh session, not part of the product): do the OOD signals tried one by one catch the bad
answers when a classifier combines them?

Each signal tried so far (neighbour distance, the top-2 gap, the neighbours' out-of-fold error, a bag's
disagreement, the answer moving with the device spec; BENCHMARKS §5) tells bad answers from good ones with an AUC
of 0.6-0.77, far from the ~0.95 the bar (80% caught at <= 10% of the good flagged) needs. Trained together they
might do better. Grouped 5-fold CV (fold seed ``SEED``, the shipped settings) gives every training problem an
out-of-fold answer; a model fitted on all training problems (the shipped settings; the shipped model's answers)
answers the held-out problems. Per problem, signals a query has at no measuring cost:

* the shape: log2 M, N, K, log2 2MNK, M, N and K off multiples of 16, the dtype and layout;
* the answer: the predicted time of the top-1 (log), the gaps to the 2nd and 5th (log ratio);
* the neighbourhood (training problems of the same dtype and layout, log2 M, N, K, Euclidean; a training
  problem's own excluded): the 1st and 5th nearest distance and the 5 nearest's mean log out-of-fold top-1.

An XGBoost classifier for "top-1 < 0.90" is fitted on the training problems' signals and out-of-fold labels,
then judged on the held-out problems (each ranked over every candidate it timed; the training problems over
their 25% sample, a shift the experiment inherits). Reported: the AUC, and the catch at <= 10% of the good
flagged; on the training problems too, out of fold (the classifier's own grouped 5-fold CV).

    .venv/bin/python benchmarks/experiments/learned_flag_ood.py [SEED]     (~15 min, 2 cores)
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd
import xgboost as xgb
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from training_rows import TrainingRows, rows_by_problem

from tilecost.problem import Problem
from tilecost.train.dataset import load_measurements
from tilecost.train.pipeline import build_features, candidate_rows, split_by_role

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 1
GOOD = 0.90
GROUPS = [f"{d}-{lay}" for d in ("bf16", "fp16", "fp32", "fp8e4m3") for lay in ("nn", "nt")]


def answers(groups: np.ndarray, times: np.ndarray, predicted: np.ndarray) -> pd.DataFrame:
    """Per problem: its top-1 within the rows given, the predicted time of the pick, the gaps to the 2nd and 5th."""
    out = []
    for pos in rows_by_problem(groups):
        p = np.sort(predicted[pos])
        second, fifth = p[min(1, len(p) - 1)], p[min(4, len(p) - 1)]
        pick = pos[int(np.argmin(predicted[pos]))]
        out.append({
            "key": str(groups[pos[0]]), "top1": float(times[pos].min() / times[pick]),
            "pred_log": float(p[0]), "gap2": float(second - p[0]), "gap5": float(fifth - p[0]),
        })  # fmt: skip
    return pd.DataFrame(out).set_index("key")


def shape_signals(keys: list[str]) -> pd.DataFrame:
    rows = []
    for key in keys:
        p = Problem.from_key(key)
        group = f"{p.dtype.value}-{p.layout.value}"
        rows.append({
            "key": key, "lm": np.log2(p.m), "ln": np.log2(p.n), "lk": np.log2(p.k),
            "lflop": np.log2(2.0 * p.m * p.n * p.k), "m16": p.m % 16 != 0, "n16": p.n % 16 != 0, "k16": p.k % 16 != 0,
            **{f"g_{g}": group == g for g in GROUPS}, "group": group,
        })  # fmt: skip
    return pd.DataFrame(rows).set_index("key")


def neighbour_signals(query: pd.DataFrame, reference: pd.DataFrame, exclude_self: bool) -> pd.DataFrame:
    """Distances to the 1st and 5th nearest reference problem of the query's group; the 5 nearest's mean log top-1."""
    out = []
    for group, q in query.groupby("group"):
        ref = reference[reference["group"] == group]
        pts = ref[["lm", "ln", "lk"]].to_numpy()
        log_top1 = np.log(ref["top1"].to_numpy())
        for key, row in q.iterrows():
            d = np.sqrt(((pts - row[["lm", "ln", "lk"]].to_numpy(dtype=float)) ** 2).sum(axis=1))
            if exclude_self:
                d = np.where(ref.index == key, np.inf, d)
            near = np.argsort(d)[:5]
            out.append({"key": key, "d1": d[near[0]], "d5": d[near[-1]], "nb_log_top1": log_top1[near].mean()})
    return pd.DataFrame(out).set_index("key")


def judge(name: str, bad: np.ndarray, score: np.ndarray) -> str:
    """AUC of a high score for bad problems, and the catch when the flag is set on at most 10% of the good ones."""
    auc = roc_auc_score(bad, score)
    good = np.sort(score[~bad])[::-1]
    threshold = good[int(np.floor(0.10 * len(good)))]
    flagged = score > threshold
    return (
        f"{name:34s} AUC {auc:.3f}; bad caught {int((flagged & bad).sum())}/{int(bad.sum())} "
        f"({(flagged & bad).sum() / max(bad.sum(), 1):.1%}), good flagged {int((flagged & ~bad).sum())}/"
        f"{int((~bad).sum())} ({(flagged & ~bad).sum() / max((~bad).sum(), 1):.2%})"
    )


def main() -> None:
    start = time.time()
    data = TrainingRows.load()
    print(
        f"{len(np.unique(data.groups))} training problems, {len(data.groups)} rows; {time.time() - start:.0f} s",
        flush=True,
    )
    predicted = data.out_of_fold(SEED, progress=lambda p: print(f"fold done, {time.time() - start:.0f} s", flush=True))
    train = answers(data.groups, data.time_us, np.log(predicted))  # predicted times (µs): gaps as log ratios
    model = data.fit(np.arange(len(data.groups)))
    _, held = split_by_role(load_measurements("datasets/measurements", "h200"))
    held_rows = candidate_rows(held)
    held_pred = model.predict(build_features(held_rows, data.device))
    heldout = answers(held_rows["problem_key"].to_numpy(), held_rows["time_us"].to_numpy(), np.log(held_pred))
    print(f"fits done, {time.time() - start:.0f} s", flush=True)

    train = train.join(shape_signals(list(train.index)))
    heldout = heldout.join(shape_signals(list(heldout.index)))
    train = train.join(neighbour_signals(train, train, exclude_self=True))
    heldout = heldout.join(neighbour_signals(heldout, train, exclude_self=False))
    columns = [c for c in train.columns if c not in ("top1", "group")]
    bad_train, bad_held = (train["top1"] < GOOD).to_numpy(), (heldout["top1"] < GOOD).to_numpy()
    print(f"training problems: out-of-fold top-1 {np.exp(np.log(train['top1']).mean()):.3f}, {bad_train.sum()} of "
          f"{len(train)} below {GOOD}; held-out: top-1 {np.exp(np.log(heldout['top1']).mean()):.3f}, "
          f"{bad_held.sum()} of {len(heldout)} below")  # fmt: skip

    settings = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.05, "subsample": 0.8,
                "colsample_bytree": 0.8, "min_child_weight": 5, "nthread": 2, "seed": 0}  # fmt: skip
    rounds = 300
    X_train = train[columns].to_numpy(dtype=float)
    oof = np.zeros(len(train))
    for fit_i, test_i in StratifiedKFold(5, shuffle=True, random_state=SEED).split(X_train, bad_train):
        booster = xgb.train(settings, xgb.DMatrix(X_train[fit_i], label=bad_train[fit_i]), rounds)
        oof[test_i] = booster.predict(xgb.DMatrix(X_train[test_i]))
    booster = xgb.train(settings, xgb.DMatrix(X_train, label=bad_train), rounds)
    score = booster.predict(xgb.DMatrix(heldout[columns].to_numpy(dtype=float)))

    print("\ntraining problems, the classifier out of fold (5-fold):")
    print("  " + judge("classifier", bad_train, oof))
    for c in ("d1", "nb_log_top1", "gap2"):
        print("  " + judge(f"{c} alone", bad_train, (-1 if c in ("nb_log_top1", "gap2") else 1) * train[c].to_numpy()))
    print(f"held-out problems ({len(heldout)}), the classifier fitted on every training problem:")
    print("  " + judge("classifier", bad_held, score))
    for c in ("d1", "nb_log_top1", "gap2"):
        print("  " + judge(f"{c} alone", bad_held, (-1 if c in ("nb_log_top1", "gap2") else 1) * heldout[c].to_numpy()))
    gain = booster.get_score(importance_type="gain")
    top = sorted(gain.items(), key=lambda kv: -kv[1])[:8]
    print("gain: " + ", ".join(f"{columns[int(k[1:])]} {v:.1f}" for k, v in top))
    print(f"{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
