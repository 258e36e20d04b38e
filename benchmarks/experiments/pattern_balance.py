"""Experiment (sixty-sixth session, not part of the product): would weighting the thin pointer patterns up mend the
held-out answers where they are weakest?

``region_coverage.py`` found the half-aligned patterns (one of N and K a multiple of 16, the other not) holding 970 of
the 9,689 H200 training problems and 39 of the 70 held-out answers below 0.90 of the best. ``CostModel.balance_kinds``
already weights a problem of a kind holding P training problems by (mean P over kinds / P) ** balance_kinds, with
the kinds the 8 (dtype, layout) pairs (tried in the fifth session: no gain). Here the kinds are the 32 (dtype, layout,
N-K pattern) groups of ``Evaluation.paired_group_gains`` instead (``_kind_of_rows`` replaced for the run), so a
half-aligned group of ~60 problems weighs ~2-4x an aligned one of ~1,000 at 0.5. Each arm is fitted on every training
problem with the shipped settings otherwise (``fit_rows(CostModel(...))``, as ``tilecost train``) and scored over every
candidate of the held-out problems (``evaluate_model``): top-1 over all, over the half-aligned problems and the rest,
answers below 0.90, and the paired gain over the arm with balance 0, overall and per pattern group (Bonferroni
intervals, ``paired_group_gains``).

    .venv/bin/python benchmarks/experiments/pattern_balance.py [--balances 0,0.25,0.5]   (~3 min an arm, 2 cores)

``BALANCE:TREES`` fits that arm with TREES main trees instead of the shipped 300 (``0,0.5:600,0:600``: whether a larger
model takes the thin patterns' gain without the others' loss).
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--balances", default="0,0.25,0.5", help="balance_kinds of each arm, or BALANCE:TREES; the first is the base"
    )
    parser.add_argument("--dataset", default="datasets/measurements")
    args = parser.parse_args()

    import numpy as np

    import tilecost.train.model as model_module
    from tilecost.device import load_device
    from tilecost.features.schema import FEATURE_NAMES
    from tilecost.problem import nk_pattern
    from tilecost.train.dataset import load_measurements
    from tilecost.train.evaluate import geomean
    from tilecost.train.model import CostModel
    from tilecost.train.pipeline import evaluate_model, fit_rows, split_by_role

    n16, k16 = FEATURE_NAMES.index("n_multiple_of_16"), FEATURE_NAMES.index("k_multiple_of_16")
    by_pair = model_module._kind_of_rows

    def kind_of_rows(X: np.ndarray) -> np.ndarray:  # (dtype, layout) 0..7, times 4 N-K patterns
        return by_pair(X) * 4 + (X[:, n16] > 0.5) * 2 + (X[:, k16] > 0.5)

    model_module._kind_of_rows = kind_of_rows
    device = load_device("h200")
    train, heldout = split_by_role(load_measurements(args.dataset, "h200"))
    evaluations = []
    for arm in args.balances.split(","):
        balance, _, trees = arm.partition(":")
        settings = {"balance_kinds": float(balance), **({"n_estimators": int(trees)} if trees else {})}
        ev = evaluate_model(fit_rows(CostModel(**settings), train, device), heldout, device)
        evaluations.append(ev)
        is_half = [nk_pattern(r.problem.n, r.problem.k) in ("16-x", "x-16") for r in ev.problems]
        half = [r.top1 for r, h in zip(ev.problems, is_half, strict=True) if h]
        rest = [r.top1 for r, h in zip(ev.problems, is_half, strict=True) if not h]
        low, high = ev.top1_interval()
        print(
            f"balance {arm}: top-1 {geomean([r.top1 for r in ev.problems]):.4f} (90% {low:.3f}-{high:.3f}),"
            f" below 0.90 {sum(r.top1 < 0.90 for r in ev.problems)}; half-aligned {len(half)} {geomean(half):.4f},"
            f" below 0.90 {sum(t < 0.90 for t in half)}; the rest {len(rest)} {geomean(rest):.4f},"
            f" below 0.90 {sum(t < 0.90 for t in rest)}",
            flush=True,
        )
        if len(evaluations) > 1:
            gain, low, high = ev.paired_top1_gain(evaluations[0])
            print(f"  paired over the first arm: x{gain:.4f} (90% x{low:.4f}-x{high:.4f})")
            for g in ev.paired_group_gains(evaluations[0]):
                print(f"  {g.group:<22} {g.problems:>4} x{g.ratio:.4f} (x{g.low:.4f}-x{g.high:.4f})")


if __name__ == "__main__":
    main()
