"""Experiment (forty-first session, not part of the product): would a promotion rule that also judges groups of
problems let targeted data ship, and would it keep the fit's own noise out?

The registry's rule (``train/tracking.judge``) promotes a challenger only when its paired top-1 gain over the champion,
over every held-out problem, has a 90% bootstrap interval above 1. Data aimed at a thin group lifts that group (the
twelfth held-out set, 20 bf16 nt problems with one of N, K off multiples of 16: 0.889 -> 0.933 in the fortieth
session's refit) and cannot move a 583-problem geometric mean, so such refits never ship. Here two artifacts are
scored over every candidate of the dataset's held-out problems (``evaluate_saved_model``), and the paired top-1 gain
is reported overall and per group (``Evaluation.paired_group_gains``: dtype, layout and whether N and K are multiples
of 16, the OOD check's pattern neighbourhoods), each group's interval at the Bonferroni level ``1 - (1 - LEVEL) /
groups`` so that the chance of any group's interval excluding 1 by chance stays below ``1 - LEVEL``.

    .venv/bin/python benchmarks/experiments/per_group_promotion.py CHAMPION_DIR CHALLENGER_DIR [--min-problems 8]

Either side may be ``models:/NAME/VERSION`` of an MLflow store (``--tracking-uri``). Refits on random subsets of the
same training problems (``drop_training_subset.py``) are what a promotion rule must not promote: their differences are
the data's own noise. (Two fits that differ only by ``--seed`` are the same model: the fit samples nothing.)

``--targeted RATIO`` (forty-second session; both sides artifact directories, whose ``metadata.domain`` lists the
training problems): the groups whose training problems grew at least RATIO-fold from champion to challenger are the
*targeted* ones, and only they are judged, at the Bonferroni level over their number: the rule the forty-first
session's notes proposed, under which a refit on a random subset of the same problems has no targeted group at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

LEVEL = 0.90


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("champion")
    parser.add_argument("challenger")
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--min-problems", type=int, default=8)
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--targeted", type=float, default=None, metavar="RATIO")
    args = parser.parse_args()

    from train.evaluate import alignment_group
    from train.loading import evaluate_saved_model

    def evaluate(where: str):  # an artifact directory or models:/NAME/VERSION (with --tracking-uri)
        if where.startswith("models:/"):
            return evaluate_saved_model(args.dataset, "h200", model_uri=where, tracking_uri=args.tracking_uri)
        return evaluate_saved_model(args.dataset, "h200", artifact=where)

    ours, what_ours = evaluate(args.challenger)
    theirs, what_theirs = evaluate(args.champion)
    print(f"challenger: {what_ours}\nchampion: {what_theirs}")
    ratio, low, high = ours.paired_top1_gain(theirs, LEVEL)
    print(f"all {len(ours.problems)} problems: x{ratio:.4f} ({LEVEL:.0%} x{low:.4f}-x{high:.4f})")
    gains = {g.group: g for g in ours.paired_group_gains(theirs, LEVEL, args.min_problems)}
    level = next(iter(gains.values())).level if gains else LEVEL
    print(f"{len(gains)} groups of >= {args.min_problems} problems, each at {level:.4f}")
    print(f"{'group':<22} {'n':>4} {'ours':>6} {'theirs':>6} {'gain':>7} {'low':>7} {'high':>7} verdict")
    other = {r.problem.key: r.top1 for r in theirs.problems}
    members: dict[str, list[tuple[float, float]]] = {}
    for r in ours.problems:
        members.setdefault(alignment_group(r.problem), []).append((r.top1, other[r.problem.key]))
    for group, pairs in sorted(members.items()):
        a, b = (float(np.exp(np.mean(np.log(side)))) for side in zip(*pairs, strict=True))
        if group not in gains:
            print(f"{group:<22} {len(pairs):>4} {a:>6.3f} {b:>6.3f}   (too few to judge)")
            continue
        g = gains[group]
        verdict = "-" if g.verdict == "level" else g.verdict
        print(f"{group:<22} {g.problems:>4} {a:>6.3f} {b:>6.3f} {g.ratio:>7.4f} {g.low:>7.4f} {g.high:>7.4f} {verdict}")
    if args.targeted is not None:
        targeted(args, ours, theirs, members)


def targeted(args: argparse.Namespace, ours, theirs, members) -> None:  # noqa: ANN001
    """The targeted groups (``--targeted``) and their Bonferroni intervals."""
    from tilecost.predict.artifact import load_artifact
    from tilecost.problem import Problem
    from train.evaluate import alignment_group

    def counts(directory: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for key in load_artifact(directory)[0].domain["problems"]:
            group = alignment_group(Problem.from_key(key))
            out[group] = out.get(group, 0) + 1
        return out

    before, after = counts(args.champion), counts(args.challenger)
    aimed = sorted(
        g
        for g in after
        if after[g] >= args.targeted * before.get(g, 0) and len(members.get(g, ())) >= args.min_problems
    )
    print(f"\ntraining problems per group, champion -> challenger; targeted: grew >= x{args.targeted:g} "
          f"with >= {args.min_problems} held-out problems")  # fmt: skip
    for group in sorted(set(before) | set(after)):
        mark = "targeted" if group in aimed else ""
        print(f"{group:<22} {before.get(group, 0):>5} -> {after.get(group, 0):>5} {mark}")
    if not aimed:
        print("no targeted group: the rule has nothing to judge")
        return
    gains = ours.paired_group_gains(theirs, LEVEL, args.min_problems, groups=aimed)
    print(f"{len(gains)} targeted group(s), each at {gains[0].level:.4f}")
    for g in gains:
        verdict = "-" if g.verdict == "level" else g.verdict
        print(f"{g.group:<22} {g.problems:>4} x{g.ratio:.4f} ({g.level:.2%} x{g.low:.4f}-x{g.high:.4f}) {verdict}")


if __name__ == "__main__":
    main()
