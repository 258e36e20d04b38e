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
the two predictors' answers with a 90% bootstrap interval, and the verdict of the answer gate the nightly loop now
applies before it swaps an artifact in (``tilecost.train.answer_gate``; the rule is in its docstring).

    .venv/bin/python benchmarks/experiments/artifact_gate.py CHALLENGER_DIR [--champion tilecost/models/h200]
        [--predictor]
    (~2 min, 2 cores; ~5 min more with --predictor)

A champion of another feature schema cannot be scored by the rule (this tilecost computes other columns); with
``--predictor`` its answers are then the ones its export stored (``tilecost.train.answer_gate.stored_answers``, as the
nightly gate judges it since the forty-fifth session), and the rule's part is left out.
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
    from tilecost.errors import TilecostError
    from tilecost.train.dataset import load_measurements
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.pipeline import evaluate_model, split_by_role
    from tilecost.train.tracking import _verdict  # beats' rule on a gain computed once, as _decide uses it

    device = load_device("h200")
    _, heldout = split_by_role(load_measurements(args.dataset, "h200"))
    challenger = load_artifact_model(args.challenger)[0]
    try:
        champion = load_artifact_model(args.champion)[0]
    except (TilecostError, ValueError) as exc:  # ArtifactError; CostModel.from_booster's other columns
        if not args.predictor:
            why = f"the champion cannot be scored ({exc}); --predictor compares its stored answers"
            raise SystemExit(why) from None
        print(f"the promotion rule left out: the champion cannot be scored ({exc})")
        predictor_gate(args.challenger, args.champion, heldout)
        return 0
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
        predictor_gate(args.challenger, args.champion, heldout)
    return 0


def predictor_gate(challenger: str, champion: str, heldout: object) -> None:
    """The nightly loop's answer gate (:mod:`tilecost.train.answer_gate`) on the two artifacts, over every held-out
    problem and per held-out dtype."""
    from tilecost.predict import Predictor
    from tilecost.train.answer_gate import Answers, artifact_answers, champion_answers, judge_answers

    predictor = Predictor.load(challenger)
    ours = artifact_answers(predictor, heldout)
    theirs, note = champion_answers(champion, predictor, heldout)
    if theirs is None:
        raise SystemExit(note)
    if note:
        print(f"\n{note}")

    def only(answers: Answers, dtype: str | None) -> Answers:
        keys = [k for k in answers.fractions if dtype is None or k.rsplit("-", 2)[1] == dtype]
        flagged = {k: answers.flagged[k] for k in keys}
        return Answers({k: answers.fractions[k] for k in keys}, flagged, answers.flags_known)

    print("\nThe predictors' answers (default width, never from the tuning database), measured:")
    for dtype in (None, *sorted({k.rsplit("-", 2)[1] for k in ours.fractions})):
        print(f"{dtype or 'all held-out':<13} {judge_answers(only(ours, dtype), only(theirs, dtype)).describe()}")


if __name__ == "__main__":
    sys.exit(main())
