"""Experiment (thirty-ninth session, not part of the product): does a bag of refits' disagreement with the model's
choice tell its bad held-out answers (best / chosen time < 0.90) from its good ones?

Model A is fitted on every training problem (the main job's fit); members 1..B on 90% of the training problems each
(problem-level bags, seeds 1..B). For each held-out problem, A's choice is its argmin over every timed candidate, and
the signal is how much worse than their own best the members predict A's choice to be (the mean over members of
ln(pred_j[A's choice] / min pred_j)), and how many members choose otherwise. The figures are in sample on the
held-out problems (the threshold is chosen on them): an upper bound of what such a flag could do, not a calibration.
The bar (issue 5, item 4) is catching >= 80% of the bad answers while flagging <= 10% of the good ones.

    .venv/bin/python benchmarks/experiments/bag_disagreement_ood.py [B]      (~8 min for B = 3, 2 cores)
"""

import sys

import numpy as np

from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role


def auc(bad: np.ndarray, good: np.ndarray) -> float:
    """P(signal of a bad answer > signal of a good one), ties counted half."""
    bad, good = np.asarray(bad)[:, None], np.asarray(good)[None, :]
    return float(((bad > good).sum() + 0.5 * (bad == good).sum()) / (bad.size * good.size))


def catch_within(bad: np.ndarray, good: np.ndarray, budget: float = 0.10) -> tuple[int, int, float]:
    """Bad answers caught by the lowest threshold that flags at most ``budget`` of the good ones (flag: signal > t)."""
    threshold = float(np.quantile(good, 1 - budget, method="higher"))
    return int((bad > threshold).sum()), int((good > threshold).sum()), threshold


def main(members: int = 3) -> None:
    device = load_device("h200")
    train, heldout = split_by_role(load_measurements("datasets/measurements", "h200"))
    rows = candidate_rows(heldout).sort_values(["problem_key", "config_id"], kind="stable").reset_index(drop=True)
    X = build_features(rows, device)
    problems = np.array(sorted(train.problem_key.unique()))
    preds = []
    for seed in range(members + 1):
        part = train
        if seed:
            chosen = set(np.random.default_rng(seed).choice(problems, round(0.9 * len(problems)), replace=False))
            part = train[train.problem_key.isin(chosen)]
        preds.append(fit_rows(CostModel(), part, device).predict(X))
        print(f"model {seed} fitted on {part.problem_key.nunique()} problems", flush=True)
    measured = rows["time_us"].to_numpy()
    fraction, regret, differs, keys = [], [], [], []
    for key, index in rows.groupby("problem_key", sort=True).indices.items():
        a = preds[0][index]
        choice = int(np.argmin(a))
        fraction.append(measured[index].min() / measured[index][choice])
        r = [np.log(p[index][choice] / p[index].min()) for p in preds[1:]]
        regret.append(float(np.mean(r)))
        differs.append(sum(int(np.argmin(p[index])) != choice for p in preds[1:]))
        keys.append(key)
    fraction, regret, differs = np.array(fraction), np.array(regret), np.array(differs)
    bad = fraction < 0.90
    print(f"held-out problems {len(fraction)}; model A top-1 {np.exp(np.log(fraction).mean()):.4f}; "
          f"bad answers (< 0.90) {bad.sum()}")  # fmt: skip
    for name, signal in (("mean member regret of A's choice", regret), ("members choosing otherwise", differs)):
        caught, flagged, t = catch_within(signal[bad], signal[~bad])
        print(f"{name}: AUC {auc(signal[bad], signal[~bad]):.3f}; within 10% of good flagged (> {t:.4g}): "
              f"caught {caught} of {bad.sum()}, flagged {flagged} of {(~bad).sum()} good")  # fmt: skip
    for k in range(members + 1):
        print(f"  {k} of {members} members choose otherwise: {((differs == k) & bad).sum()} bad, "
              f"{((differs == k) & ~bad).sum()} good")  # fmt: skip
    for key, f, r, d in sorted(zip(keys, fraction, regret, differs, strict=True), key=lambda x: x[1])[: int(bad.sum())]:
        print(f"  bad {key}: {f:.3f}, member regret {r:.4f}, {d} of {members} differ")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
