"""Experiment (thirty-sixth session): the nightly loop's promotion rule applied to two exported artifacts.

``tilecost train --no-mlflow --export-dir`` exports without the MLflow registry, so no champion is compared; this
applies the same rule (:func:`tilecost.train.tracking.beats`'s, through its ``_verdict`` so that the bootstrap runs
once: a better score, top-1 geometric mean then worst problem then top-5, and a paired bootstrap interval of the top-1
ratio above 1) to a challenger artifact against the shipped one, on every held-out problem of the dataset, and per
held-out dtype.

Thirty-seventh session: the rule judges the full model's choice over every candidate, while users get the
predictor's answer (a shortlist at the artifact's default width, and its out-of-distribution flags); the thirty-sixth
session's refit passed the rule and answered worse. ``--predictor`` adds, per artifact, the predictor's answers on the
same held-out problems (never from the tuning database): measured best over the answer's measured time (geometric
mean, worst, how many below 0.90), how many of those were flagged, the worst unflagged answer, and the paired ratio of
the two predictors' answers with a 90% bootstrap interval. The predictor gate passes when the challenger's answers are
no worse (ratio interval's upper end at or above 1) and it leaves no more answers below 0.90 unflagged.

    .venv/bin/python benchmarks/experiments/artifact_gate.py CHALLENGER_DIR [--champion tilecost/models/h200]
        [--predictor]
    (~2 min, 2 cores; ~5 min more with --predictor)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("challenger")
    parser.add_argument("--champion", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--predictor", action="store_true", help="also compare the two predictors' answers")
    args = parser.parse_args()

    from tilecost.device import load_device
    from tilecost.train.dataset import load_measurements
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.pipeline import evaluate_model, split_by_role
    from tilecost.train.tracking import _verdict  # beats' rule on a gain computed once, as _decide uses it

    device = load_device("h200")
    _, heldout = split_by_role(load_measurements(args.dataset, "h200"))
    challenger, champion = (load_artifact_model(path)[0] for path in (args.challenger, args.champion))
    groups = {"all held-out": heldout, **dict(tuple(heldout.groupby(heldout.dtype.astype(str))))}
    for name, frame in groups.items():
        ours = evaluate_model(challenger, frame, device)
        theirs = evaluate_model(champion, frame, device)
        o, t, gain = ours.score(), theirs.score(), ours.paired_top1_gain(theirs)
        promoted, words = _verdict(o, t, gain)
        problems = int(ours.summary()["problems"])
        print(
            f"{name:<13} {problems:>4} problems | challenger {o[0]:.4f} / {o[1]:.3f} / {o[2]:.4f}"
            f" | champion {t[0]:.4f} / {t[1]:.3f} / {t[2]:.4f}"
            f" | top-1 x{gain[0]:.4f} (90% x{gain[1]:.4f}-x{gain[2]:.4f})"
            f" | {'PROMOTE' if promoted else 'keep'}: {words}"
        )
    if args.predictor:
        predictor_gate(args.challenger, args.champion)
    return 0


def predictor_answers(artifact: str, data: object, problems: list) -> dict[str, tuple[float, bool]]:
    """Per held-out problem key: measured best over the measured time of the predictor's answer (a configuration never
    timed counts 0; a hopeless one at its lower bound), and whether the answer was flagged out of distribution."""
    import math

    from tilecost import Predictor

    predictor = Predictor.load(artifact)
    groups = set(predictor._group_specs)
    out = {}
    for problem in problems:
        if f"{problem.dtype.value}-{problem.layout.value}" not in groups:
            continue
        answer = predictor.predict_best(problem, measured=False)
        times = data.times(problem, ("ok", "hopeless"))
        best = min(data.times(problem).values())
        out[problem.key] = (best / times.get(answer.config.key, math.inf), bool(answer.ood))
    return out


def predictor_gate(challenger: str, champion: str) -> None:
    import numpy as np

    from tests.test_predict_fixture import load_dataset
    from tilecost.train.evaluate import _geomean_interval

    data = load_dataset(groups=None, until=None)
    heldout = data.problems("heldout")
    ours, theirs = (predictor_answers(path, data, heldout) for path in (challenger, champion))
    keys = sorted(set(ours) & set(theirs))
    sets = {"all held-out": keys}
    for dtype in sorted({k.rsplit("-", 2)[1] for k in keys}):
        sets[dtype] = [k for k in keys if k.rsplit("-", 2)[1] == dtype]

    def describe(answers: dict[str, tuple[float, bool]], chosen: list[str]) -> tuple[str, int]:
        f = np.array([answers[k][0] for k in chosen])
        flagged = np.array([answers[k][1] for k in chosen])
        bad = f < 0.90
        unflagged = f[~flagged]
        worst_unflagged = float(unflagged.min()) if len(unflagged) else 1.0
        words = (f"{np.exp(np.log(np.maximum(f, 1e-9)).mean()):.4f} / worst {f.min():.3f} / {int(bad.sum())} below 0.90"
                 f" ({int((bad & flagged).sum())} flagged) / {int(flagged.sum())} flagged / worst unflagged"
                 f" {worst_unflagged:.3f}")  # fmt: skip
        return words, int((bad & ~flagged).sum())

    print("\nThe predictors' answers (default width, never from the tuning database), measured:")
    for name, chosen in sets.items():
        if not chosen:
            continue
        mine, missed_mine = describe(ours, chosen)
        other, missed_other = describe(theirs, chosen)
        diff = np.log([max(ours[k][0], 1e-9) for k in chosen]) - np.log([max(theirs[k][0], 1e-9) for k in chosen])
        low, high = _geomean_interval(diff, 0.90, 2000, 0)
        passes = high >= 1.0 and missed_mine <= missed_other
        print(f"{name:<13} {len(chosen):>4} problems | challenger {mine} | champion {other}"
              f" | answers x{np.exp(diff.mean()):.4f} (90% x{low:.4f}-x{high:.4f})"
              f" | {'pass' if passes else 'FAIL'}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
