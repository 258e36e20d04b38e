"""How the shape-side flags carry to a held-out set they were not fitted on: leave one set out.

    .venv/bin/python benchmarks/experiments/leave_set_out_flags.py [--artifact tilecost/models/h200]
        [--neighbourhood pattern|dtype-layout]   (~1 min, 1 core)

The export fits the flags (:func:`tilecost.predict.ood.calibrate_ood`) on the artifact's answers to every held-out
problem and reports them in sample and leave one *problem* out. But each held-out set is drawn where the training data
was thin at the time, a new kind of shape, and the preregistered sets (BENCHMARKS §5, the forty-sixth session) showed
the flags doing worse on such a set than either figure says. This script asks the question the preregistrations ask,
on every answer the artifact stores: for each held-out set (:func:`benchmarks.heldout_sets.set_keys`, the first set
being the problems in none of the later ones), the flags are fitted on the other sets' answers with the artifact's
settings, then judged on that set's answers. Reads only the sidecar (``metadata.ood.heldout_top1``: the answers'
measured fractions, ``labels`` "answers"); the model-side rules are not refitted (the shipped artifact adopts none).
Prints, per set and pooled, the bad answers (below the good fraction) caught and the good ones flagged, beside the
in-sample figure of the same fit on every set.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--neighbourhood", default=None, help="fit with this neighbourhood instead of the artifact's")
    args = parser.parse_args(argv)

    from heldout_sets import set_keys

    from tilecost.predict.answer_calibration import ANSWER_LABELS, calibration_settings
    from tilecost.predict.artifact import load_artifact
    from tilecost.predict.ood import OODChecker, calibrate_ood
    from tilecost.problem import Problem

    metadata, _ = load_artifact(args.artifact)
    ood = metadata.ood
    if ood.get("labels") != ANSWER_LABELS or not ood.get("heldout_top1"):
        raise SystemExit(f"{args.artifact}: the sidecar stores no answers (metadata.ood.labels is not 'answers')")
    answers = {str(k): float(v) for k, v in ood["heldout_top1"].items()}
    training = [Problem.from_key(key) for key in metadata.domain["problems"]]
    settings = calibration_settings(ood)
    if args.neighbourhood:
        settings["neighbourhood"] = args.neighbourhood
    later = set_keys()
    named = {name: sorted(keys & answers.keys()) for name, keys in later.items()}
    placed = set().union(*named.values())
    sets = {"first set": sorted(answers.keys() - placed), **named}

    def fit(keys: list[str]) -> tuple[OODChecker, dict[str, Any]]:
        fitted = calibrate_ood([Problem.from_key(k) for k in keys], [answers[k] for k in keys], training, **settings)
        return OODChecker.from_metadata(metadata.domain, fitted), fitted

    def judged(checker: OODChecker, keys: list[str]) -> tuple[int, int, int, int]:
        """(bad, bad flagged, good, good flagged) of ``keys``."""
        counts = [0, 0, 0, 0]
        for key in keys:
            offset = 0 if answers[key] < settings["good_fraction"] else 2
            counts[offset] += 1
            counts[offset + 1] += bool(checker.verdict(Problem.from_key(key)))
        return counts[0], counts[1], counts[2], counts[3]

    everything = sorted(answers)
    checker, fitted = fit(everything)
    print(f"{args.artifact}: {len(answers)} stored answers, {len(training)} training problems; settings {settings}")
    print(f"fitted on every set: threshold {fitted['sparse_distance_log2']:.3f} octaves, margin "
          f"{fitted['range_margin_log2']}, adopted {fitted['calibration']['adopted']}")  # fmt: skip
    print(f"{'held-out set':<18} {'n':>4} | {'in sample: bad caught, good flagged':<36} | left out: threshold, caught")
    totals = {"in": [0, 0, 0, 0], "out": [0, 0, 0, 0]}
    for name, keys in sets.items():
        if not keys:
            continue
        inside = judged(checker, keys)
        left_out = set(keys)
        others = [k for k in everything if k not in left_out]
        left_checker, left = fit(others)
        outside = judged(left_checker, keys)
        for total, counts in ((totals["in"], inside), (totals["out"], outside)):
            for i, c in enumerate(counts):
                total[i] += c
        print(f"{name:<18} {len(keys):>4} | {_words(inside):<36} | {left['sparse_distance_log2']:.3f}, "
              f"{_words(outside)}")  # fmt: skip
    print(f"{'pooled':<18} {len(answers):>4} | {_words(totals['in']):<36} | {_words(totals['out'])}")
    return 0


def _words(counts: tuple[int, int, int, int] | list[int]) -> str:
    bad, caught, good, flagged = counts
    rate = f"{flagged / good:.1%}" if good else "-"
    return f"{caught} of {bad} bad, {flagged} of {good} good ({rate})"


if __name__ == "__main__":
    sys.exit(main())
